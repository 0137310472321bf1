"""How often ``verbose`` output can afford a likelihood.

A fit with ``verbose=1`` used to score its model after every sweep. On the CPU engine scoring
costs about as much as a sweep, so the fit ran 40-60% slower for a printout. :class:`Cadence`
keeps that overhead to a fixed share of the fit's time instead: it times every evaluation and
says one is due only when the time spent evaluating, plus what the next is expected to cost,
stays within ``share`` (3%) of the time spent on everything else. Evaluations the user asked for
with
``evaluate_every`` run regardless (they decide when the fit stops) and count towards the share.
"""

import time
from contextlib import contextmanager

#: Share of a fit's time that verbose evaluations may take. Below the 5% asked of verbose as a
#: whole, which also prints a line per iteration: at 0.05 a CPU fit of 100 sweeps measured
#: 5-6% slower with verbose=1.
VERBOSE_SHARE = 0.03


class Cadence:
    """Decide when an optional evaluation fits in the time budget.

    Parameters
    ----------
    share : float, default=VERBOSE_SHARE
        Largest ratio of evaluation time to the rest of the fit's time.
    clock : callable, default=time.perf_counter

    Examples
    --------
    >>> ticks = iter([0.0, 10.0, 10.0, 11.0, 12.0, 50.0])
    >>> cadence = Cadence(share=0.05, clock=lambda: next(ticks))
    >>> cadence.due(n_steps=20)    # 10 s of 20 sweeps; the first evaluation is guessed at 0.5 s
    True
    >>> with cadence.timing():    # an evaluation that takes 1 s
    ...     pass
    >>> cadence.due(n_steps=21)    # 11 s of sweeps: 1 s spent + 1 s more > 0.05 * 11 s
    False
    >>> cadence.due(n_steps=60)    # 49 s of sweeps: 2 s <= 0.05 * 49 s
    True
    """

    def __init__(self, share=VERBOSE_SHARE, clock=time.perf_counter):
        self.share = float(share)
        self.clock = clock
        self.start = clock()
        self.spent = 0.0
        self.last_cost = None

    def working(self):
        """Seconds since this cadence began that were not spent evaluating."""
        return self.clock() - self.start - self.spent

    def due(self, n_steps):
        """Whether an evaluation now keeps evaluations within the share, after ``n_steps``
        sweeps or passes. Before anything was timed, an evaluation is guessed to cost one
        step: on the CPU engine it costs about that, on a GPU far less."""
        working = self.working()
        guess = self.last_cost if self.last_cost is not None else working / max(n_steps, 1)
        return self.spent + guess <= self.share * working

    @contextmanager
    def timing(self):
        """Count the time the block takes as an evaluation's."""
        tic = self.clock()
        yield
        self.last_cost = self.clock() - tic
        self.spent += self.last_cost
