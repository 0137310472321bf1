"""``max_iter=None`` in a batch fit: sweep until the model has stopped improving.

The rule (``doc/algorithm.md``, "When a fit stops"): the chain's training log-likelihood per
token is evaluated at **check points** on a geometric grid, two per doubling of the sweeps
(``floor / 2``, ``floor / 2 * sqrt 2``, ``floor``, ``floor * sqrt 2``, ``2 floor``, ...,
rounded to whole sweeps). From ``floor`` on, the fit stops at the first check point ``n`` where
the likelihood gained less than ``tol`` since the check point one doubling earlier (about
``n / 2``), and at ``ceiling`` whatever it gained. Comparing across a doubling, not between
neighbouring sweeps, measures progress on the scale a sampler's progress has (roughly linear
in log sweeps) and is far above the sweep-to-sweep noise.

Evaluating on a geometric grid costs ``O(log n)`` evaluations: at most 3 by the floor, 13 by
``64 floor``. An evaluation costs about a third of a sweep on the CPU engine (KJV chapters,
K = 20 and 100) and at most about a sweep on a GPU, where a small corpus's sweep and
evaluation are both a few launches; so with ``floor = 100`` the rule's evaluations cost at
most 3% of a fit (1% on the CPU engine), and less the longer the fit runs.

Averaging with an end not known in advance: the anchors ``floor / 2 * 2**i`` of the grid open
an **averaging window**: the running sum of the word-topic counts holds the sweeps after the
last anchor. A fit that stops at an anchor ``2a`` averages sweeps ``a + 1 .. 2a``, the last
half of the run; one that stops at the check point between, ``round(a * sqrt 2)``, averages
the last ``1 - 1 / sqrt 2``, about 29%. Every sweep averaged lies within the doubling the rule
has just judged converged. One running sum does it (no engine keeps two): at an anchor where
the fit goes on, the sum is dropped and a new window opens.

The numbers (:data:`TOLERANCE`, :data:`FLOOR`, :data:`CEILING`) are provisional: measured on
the CPU engine (bundled KJV, small K), to be confirmed by ``benchmarks/bench_stopping.py`` on a
GPU (``doc/performance.md``).
"""

import math
from contextlib import contextmanager
from dataclasses import dataclass

#: Nats per token the training log-likelihood must gain per doubling of the sweeps for the fit
#: to go on. Provisional (see the module's docstring).
TOLERANCE = 0.005
#: Fewest sweeps of a fit that stops by the rule: its first stop can come here. Even, so that
#: the grid's first point ``FLOOR / 2`` is a whole sweep.
FLOOR = 100
#: Most sweeps: ``FLOOR`` times a power of two, so that the ceiling is an anchor and a fit that
#: reaches it averages its last half.
CEILING = 6400

#: Why a fit stopped, as ``history_['stopped_by']`` says it.
STOPPED_BY = ("max_iter", "perp_tol", "tolerance", "ceiling")


@dataclass(frozen=True)
class StoppingRule:
    """When a fit with ``max_iter=None`` stops.

    Parameters
    ----------
    tol : float, default=TOLERANCE
        Least gain of the training log-likelihood per token per doubling of the sweeps that
        keeps the fit going. 0 lets only a falling likelihood stop it before the ceiling;
        ``-inf`` never does (benchmarks record the whole grid that way); ``inf`` stops at the
        floor.
    floor : int, default=FLOOR
        First check point at which the fit may stop; an even number of at least 2.
    ceiling : int, default=CEILING
        Most sweeps; ``floor`` times a power of two.

    Examples
    --------
    >>> rule = StoppingRule(tol=0.01, floor=4, ceiling=32)
    >>> rule.check_points()
    [2, 3, 4, 6, 8, 11, 16, 23, 32]
    >>> rule.replay({2: -9.0, 3: -8.5, 4: -8.2, 6: -8.1, 8: -8.195})
    (8, 'tolerance')
    """

    tol: float = TOLERANCE
    floor: int = FLOOR
    ceiling: int = CEILING

    def __post_init__(self):
        if not (isinstance(self.floor, int) and self.floor >= 2 and self.floor % 2 == 0):
            raise ValueError(f"floor must be an even integer of at least 2, got {self.floor!r}")
        ratio = self.ceiling / self.floor if isinstance(self.ceiling, int) else 0.5
        if ratio < 1 or ratio != 2 ** round(math.log2(ratio)):
            raise ValueError(f"ceiling must be floor={self.floor} times a power of two, got "
                             f"{self.ceiling!r}")
        if math.isnan(self.tol):
            raise ValueError(f"tol must be a number, got {self.tol!r}")

    def anchors(self):
        """The grid's doubling points ``floor / 2 * 2**i`` up to the ceiling: where averaging
        windows open."""
        out, n = [], self.floor // 2
        while n <= self.ceiling:
            out.append(n)
            n *= 2
        return out

    def check_points(self):
        """Every check point up to the ceiling, increasing: the anchors and, between each two,
        ``round(anchor * sqrt 2)``."""
        points = []
        for a in self.anchors():
            points.append(a)
            if a < self.ceiling:
                points.append(round(a * math.sqrt(2)))
        return sorted(set(points))

    def previous_doubling(self):
        """``{n: m}``: for each check point ``n``, the check point ``m`` one doubling earlier
        (two grid steps back), against which the gain at ``n`` is measured."""
        points = self.check_points()
        return {n: points[i - 2] for i, n in enumerate(points) if i >= 2}

    def verdict(self, n, loglik, earlier):
        """Why a fit stops at check point ``n`` where its likelihood per token is ``loglik``
        and was ``earlier`` one doubling before (None when unknown): 'tolerance', 'ceiling', or
        None to go on."""
        if n >= self.floor and earlier is not None and loglik - earlier < self.tol:
            return "tolerance"
        if n >= self.ceiling:
            return "ceiling"
        return None

    def replay(self, loglik_at):
        """Where a fit whose likelihoods per token at the check points were ``loglik_at``
        (``{sweep: loglik}``; other sweeps are ignored) would stop, and why: ``(n, reason)``,
        or ``(None, None)`` where the points given end before it would. For benchmarks that
        choose the rule's numbers from one long fit."""
        back = self.previous_doubling()
        for n in self.check_points():
            if n not in loglik_at:
                return None, None
            reason = self.verdict(n, loglik_at[n], loglik_at.get(back.get(n)))
            if reason is not None:
                return n, reason
        return None, None


_default = StoppingRule()


def default_rule():
    """The rule ``max_iter=None`` fits use (:func:`using` replaces it)."""
    return _default


@contextmanager
def using(rule):
    """Within the block, ``max_iter=None`` fits stop by ``rule``: for tests, which need a
    small floor and ceiling, and for benchmarks, which run the grid to the ceiling
    (``tol=-inf``) to replay other rules on it."""
    global _default
    saved, _default = _default, rule
    try:
        yield rule
    finally:
        _default = saved


class Stopping:
    """A fit's progress under a :class:`StoppingRule`: the likelihoods of its check points so
    far, and the gain and verdict of the last.

    Parameters
    ----------
    rule : StoppingRule
    unit : str
        'sweeps', for the sentences.
    """

    def __init__(self, rule, unit="sweeps"):
        self.rule, self.unit = rule, unit
        self.points = set(rule.check_points())
        self.back = rule.previous_doubling()
        self.anchors = set(rule.anchors())
        self.loglik = {}
        self.gain = None

    def due(self, n_iter):
        """Whether sweep ``n_iter`` is a check point: the likelihood is evaluated after it."""
        return n_iter in self.points

    def judge(self, n_iter, loglik_per_token):
        """Record the check point's likelihood; the reason to stop here ('tolerance' or
        'ceiling'), or None."""
        self.loglik[n_iter] = loglik_per_token
        earlier = self.loglik.get(self.back.get(n_iter))
        self.gain = None if earlier is None else loglik_per_token - earlier
        return self.rule.verdict(n_iter, loglik_per_token, earlier)

    def opens_window(self, n_iter):
        """Whether an averaging window opens after sweep ``n_iter`` (an anchor), for a fit that
        goes on past it."""
        return n_iter in self.anchors

    def first_averaged(self):
        """The first sweep any window holds: the one after the first anchor."""
        return self.rule.floor // 2 + 1

    def sentence(self, reason, n_iter):
        """``history_['stop_reason']`` for a stop by this rule."""
        earlier = self.back.get(n_iter)
        gained = ("" if self.gain is None else
                  f"log-likelihood/token gained {self.gain:.4g} from {self.unit[:-1]} {earlier} "
                  f"to {n_iter}")
        if reason == "tolerance":
            return f"converged: {gained} < tol={self.rule.tol:g} per doubling"
        return (f"ceiling of {self.rule.ceiling} {self.unit} reached"
                + (f" ({gained}, tol={self.rule.tol:g} per doubling)" if gained else ""))
