"""``max_iter=None`` in a batch fit: sweep until the model has stopped improving.

The rule (``doc/algorithm.md``, "When a fit stops"): the chain's training log-likelihood per
token is evaluated at **check points** on a geometric grid, two per doubling of the sweeps
(``floor / 2``, ``floor / 2 * sqrt 2``, ``floor``, ``floor * sqrt 2``, ``2 floor``, ...,
rounded to whole sweeps). From ``floor`` on, the fit stops at the first check point ``n`` where
the likelihoods of the last doubling (the check points from the one a doubling earlier, about
``n / 2``, to ``n``: three of them) lie within ``tol`` of each other, and at ``ceiling``
whatever they do. For a likelihood that rises steadily this is its gain over the doubling; the
spread also sees movement that a comparison of the two ends misses: with learned priors the
training likelihood can rise and then fall for hundreds of sweeps while the held-out likelihood
still rises (a growing learned beta smooths the topics), and ends that happen to match would
stop a model that is still improving. Comparing across a doubling, not between
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

The numbers (:data:`TOLERANCE`, :data:`FLOOR`, :data:`CEILING`) come from
``benchmarks/bench_stopping.py`` on the CPU engine (bundled KJV) and on an H200 (KOS, NIPS and
20 Newsgroups at K = 20 and 100; ``doc/performance.md``, "The stopping rule of max_iter=None").
K = 1,000 and the NYTimes shape are not measured yet.
"""

import math
from contextlib import contextmanager
from dataclasses import dataclass

#: Nats per token over which the training log-likelihoods of the last doubling of the sweeps
#: must spread for the fit to go on. Each measured fit stopped within 0.01 of a fit four times
#: as long at 0.005 (with the floor below); 0.002 ran 2-8 times longer for at most 0.006 more.
TOLERANCE = 0.005
#: Fewest sweeps of a fit that stops by the rule: its first stop can come here. Even, so that
#: the grid's first point ``FLOOR / 2`` is a whole sweep. At 100, NIPS at K = 20 stopped at 283
#: sweeps 0.0102 behind its fit of four times as long (its training likelihood flattens while
#: the held-out one still rises); from 400 it is 0.0086 behind, and no other measured fit
#: stopped before 400.
FLOOR = 400
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
        Least spread (``max - min``) of the training log-likelihoods per token over the last
        doubling of the sweeps that keeps the fit going. 0 (or less) never stops it before the
        ceiling (benchmarks record the whole grid with ``-inf``); ``inf`` stops at the floor.
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
    (None, None)
    >>> rule.replay({2: -9.0, 3: -8.5, 4: -8.2, 6: -8.195, 8: -8.199})
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
        (two grid steps back), where the doubling judged at ``n`` starts."""
        points = self.check_points()
        return {n: points[i - 2] for i, n in enumerate(points) if i >= 2}

    def doubling(self, n):
        """The check points of the doubling that ends at check point ``n``, from the one a
        doubling earlier to ``n`` (empty before there is one)."""
        points = self.check_points()
        i = points.index(n)
        return points[i - 2:i + 1] if i >= 2 else []

    def spread(self, n, loglik_at):
        """``max - min`` of the likelihoods per token ``loglik_at`` (``{sweep: loglik}``) over
        the doubling that ends at ``n``; None where one of them is missing."""
        values = [loglik_at.get(m) for m in self.doubling(n)]
        if not values or any(v is None for v in values):
            return None
        return max(values) - min(values)

    def verdict(self, n, spread):
        """Why a fit stops at check point ``n`` where the likelihoods of the last doubling
        spread over ``spread`` (None when unknown): 'tolerance', 'ceiling', or None to go
        on."""
        if n >= self.floor and spread is not None and spread < self.tol:
            return "tolerance"
        if n >= self.ceiling:
            return "ceiling"
        return None

    def replay(self, loglik_at):
        """Where a fit whose likelihoods per token at the check points were ``loglik_at``
        (``{sweep: loglik}``; other sweeps are ignored) would stop, and why: ``(n, reason)``,
        or ``(None, None)`` where the points given end before it would. For benchmarks that
        choose the rule's numbers from one long fit."""
        for n in self.check_points():
            if n not in loglik_at:
                return None, None
            reason = self.verdict(n, self.spread(n, loglik_at))
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
        #: The last check point's spread (:meth:`StoppingRule.spread`) and gain over its
        #: doubling (last minus first), for verbose and the stop sentence.
        self.spread = self.gain = None

    def due(self, n_iter):
        """Whether sweep ``n_iter`` is a check point: the likelihood is evaluated after it."""
        return n_iter in self.points

    def judge(self, n_iter, loglik_per_token):
        """Record the check point's likelihood; the reason to stop here ('tolerance' or
        'ceiling'), or None."""
        self.loglik[n_iter] = loglik_per_token
        earlier = self.loglik.get(self.back.get(n_iter))
        self.gain = None if earlier is None else loglik_per_token - earlier
        self.spread = self.rule.spread(n_iter, self.loglik)
        return self.rule.verdict(n_iter, self.spread)

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
        gained = ("" if self.spread is None else
                  f"log-likelihood/token within {self.spread:.4g} from {self.unit[:-1]} "
                  f"{earlier} to {n_iter} (gain {self.gain:+.4g})")
        if reason == "tolerance":
            return f"converged: {gained}, less than tol={self.rule.tol:g} per doubling"
        return (f"ceiling of {self.rule.ceiling} {self.unit} reached"
                + (f" ({gained}, tol={self.rule.tol:g} per doubling)" if gained else ""))
