"""The fit loop: one loop for batch learning, online learning and ``partial_fit``.

:func:`run` drives a sampler through a fit: its iterations, the prior updates and averaging
between them, evaluation, progress (``verbose``), the callback, stopping and the history. What
one iteration does, how it is scored and what model it gives is a learning method's
(:class:`~sklearn_gpulda._fitting.batch.BatchLearning`,
:class:`~sklearn_gpulda._fitting.passes.OnlineLearning`,
:class:`~sklearn_gpulda._fitting.passes.PartialFit`); :func:`fit_corpus`, :func:`fit_online`
and :func:`partial_fit` pair each with its sampler.

Nothing here touches the estimator: each takes a :class:`~sklearn_gpulda._fitting.plan.Plan`
(the estimator's parameters, resolved) and returns a
:class:`~sklearn_gpulda._fitting.fitted.FittedState` that the estimator assigns only once the
fit has succeeded, so a fit that raises leaves a fitted model as it was (``doc/algorithm.md``
defines every step).
"""

import time

import numpy as np

from .._runtime.stages import stage
from .._runtime.warnings import warn_caller
from .batch import BatchLearning
from .cadence import Cadence
from .passes import OnlineLearning, PartialFit
from .runs import run_end
from .stopping import Stopping


def fit_corpus(plan, corpus, sampler=None, release_counts=False):
    """Batch learning: every token of ``corpus`` is sampled in each of up to ``max_iter``
    sweeps (or until the plan's stopping rule says the chain has converged), on ``sampler``
    (the plan's backend's when None; a sampler spread over several processes brings its own).

    Parameters
    ----------
    plan : Plan
    corpus : TokenCorpus, or an object with its ``n_tokens``, ``n_words``, ``total_weight``
        and ``doc_lengths()`` whose tokens ``sampler`` already holds.
    sampler : Sampler, optional
        Released at the end, whether the fit succeeds or not.
    release_counts : bool, default=False
        The corpus is the fit's own: once the sampler has laid its tokens out, drop the
        corpus's arrays (:meth:`~sklearn_gpulda._input.corpus.TokenCorpus.release_counts`), so that
        their memory is free for the sampling.

    Returns
    -------
    FittedState
    """
    sampler = plan.sampler() if sampler is None else sampler
    return run(plan, BatchLearning(plan, corpus, sampler, release_counts))


def fit_online(plan, X):
    """Online learning: ``max_iter`` passes over the counts ``X`` in mini-batches of
    ``batch_size`` documents.

    Returns
    -------
    FittedState
    """
    return run(plan, OnlineLearning(plan, X, plan.sampler()))


def partial_fit(plan, X, previous=None):
    """One pass of online learning over ``X`` (a plan made for 'partial'), continuing
    ``previous`` (a :class:`~sklearn_gpulda._fitting.fitted.Continuation`; None for the first
    call).

    Returns
    -------
    FittedState
        Its model stays on the GPU that learned it, if any.
    """
    return run(plan, PartialFit(plan, X, plan.sampler(), previous))


def run(plan, learning):
    """Drive ``learning.sampler`` through the fit ``learning`` describes, and release it at the
    end, whether the fit succeeds or not.

    Parameters
    ----------
    plan : Plan
    learning : BatchLearning, OnlineLearning or PartialFit
        The learning method, holding the chain it samples on as ``sampler``: ``start()`` before
        the first iteration, ``step(n_iter)`` for one iteration (a batch fit's
        ``steps(first, last, accumulate_from)`` for a run of them, :mod:`.runs`), ``evaluate()``
        for its
        :class:`~sklearn_gpulda._fitting.score.Score`, ``finish(last)`` while the chain is still
        held (it returns the score the closing line reports, or None) and ``state(n_iter,
        fit_time, history)`` for the :class:`~sklearn_gpulda._fitting.fitted.FittedState`;
        beside them ``unit`` ('sweeps' or 'passes'), ``n_tokens`` (the callback's),
        ``tokens_per_step`` (for verbose's throughput, or None), ``prior_updates`` (a
        :class:`~sklearn_gpulda._fitting.batch.PriorUpdates` once started, or None) and
        ``snapshot`` (offered to the callback, or None).

    Returns
    -------
    FittedState
    """
    sampler = learning.sampler
    history = _History(plan.iterations, learning.unit)
    try:
        start = time.perf_counter()
        learning.start()
        with stage("sweeps"):
            n_iter, last = _iterate(plan, learning, history, start)
        sampler.synchronize()
        fit_time = time.perf_counter() - start
        closing = learning.finish(last)
        if plan.iterations.verbose:
            print(f"stopped: {history.stop_reason}"
                  + ("" if closing is None else f"; {closing.text()}"))
    finally:
        sampler.release()
    return learning.state(n_iter, fit_time, history.as_dict())


def _iterate(plan, learning, history, start):
    """The iterations of a fit, with the prior updates, averaging, evaluations, progress and
    stopping between them; returns the iterations done and the last one's
    :class:`~sklearn_gpulda._fitting.score.Score` (None when it was not evaluated)."""
    iterations, sampler = plan.iterations, learning.sampler
    stopping = (None if iterations.stopping is None
                else Stopping(iterations.stopping, learning.unit))
    averaging = _Averaging(plan, stopping)
    updates = learning.prior_updates
    cadence = Cadence()
    # Where the loop needs the chain after a sweep: a run of sweeps ends there (runs.py). A
    # chain that makes the prior updates inside its runs takes them over (Dask's GPU shards).
    if updates is not None and sampler.run_prior_updates(updates):
        updates = None
    stops = [iterations.evaluates, averaging.starts_at]
    if updates is not None:
        stops.append(updates.due)
    if stopping is not None:
        stops.append(stopping.due)
    per_sweep = (iterations.verbose or iterations.callback is not None
                 or not hasattr(learning, "steps"))
    n_iter, score = 0, None
    while n_iter < iterations.max_iter:
        first = n_iter + 1
        n_iter = run_end(first, iterations.max_iter, stops, per_sweep)
        accumulated = _run(learning, averaging, first, n_iter)
        if updates is not None and updates.due(n_iter):
            with stage("sweeps: prior updates"):
                updates.update(sampler)
        if not accumulated:
            averaging.after(n_iter, sampler)
        evaluate = iterations.evaluates(n_iter)
        check = stopping is not None and stopping.due(n_iter)
        score = verdict = None
        if evaluate or check or (iterations.verbose and cadence.due(n_iter)):
            # Queued work finishes first, so that the evaluation's time is its own. The
            # stopping rule's evaluations count towards verbose's share too.
            sampler.synchronize()
            with stage("sweeps: evaluation"), cadence.timing():
                score = learning.evaluate()
            history.add(iteration=n_iter, seconds=time.perf_counter() - start,
                        **score.figures())
        if check:
            verdict = stopping.judge(n_iter, score.loglik_per_token)
        if iterations.verbose:
            print(_progress_line(iterations, learning, n_iter, cadence, score,
                                 stopping.spread if check else None))
        if iterations.callback is not None:
            info = dict(max_iter=iterations.max_iter, n_tokens=learning.n_tokens,
                        seconds=time.perf_counter() - start,
                        log_likelihood=None if score is None else score.loglik_per_token)
            if learning.snapshot is not None:
                info["snapshot"] = learning.snapshot
            iterations.callback(n_iter, info)
        if verdict is not None:
            history.stopped(verdict, stopping.sentence(verdict, n_iter))
            break
        if evaluate and history.settled(score.perplexity, n_iter):
            break
        if check and stopping.opens_window(n_iter):
            averaging.restart(sampler, n_iter)
    return n_iter, score


def _run(learning, averaging, first, last):
    """Iterations ``first`` to ``last`` of ``learning``: a method with ``steps`` takes them as
    one run (:meth:`~sklearn_gpulda.backends.base.Sampler.sweeps`), which also accumulates the
    averaged sweeps once the running sum exists; any other takes its single iteration
    (``step``). Returns whether the run accumulated its sweeps' counts.

    Where the default averaging's accumulation runs out of memory inside a run, the fit goes on
    without it, as :meth:`_Averaging.after` does: the rest of the run is sampled unaveraged."""
    steps = getattr(learning, "steps", None)
    if steps is None:
        with stage("sweeps: sampling"):
            learning.step(first)
        return False
    accumulate_from = averaging.hand_over(first)
    try:
        steps(first, last, accumulate_from)
    except MemoryError as exc:
        stopped = getattr(exc, "sweep", None)
        if accumulate_from is None or stopped is None or not averaging.optional:
            raise
        averaging.give_way(learning.sampler, exc)
        if stopped < last:
            steps(stopped + 1, last, None)
    return accumulate_from is not None


def _progress_line(iterations, learning, n_iter, cadence, score, spread=None):
    """verbose's line for one iteration: the mean sampling rate so far where the method says
    what an iteration samples, and the score when this iteration was evaluated
    (:class:`~sklearn_gpulda._fitting.cadence.Cadence` says how often), with the spread of
    the likelihood over the last doubling at the stopping rule's check points."""
    if iterations.stopping is None:
        line = f"iteration: {n_iter} of max_iter: {iterations.max_iter}"
    else:
        line = f"iteration: {n_iter} of at most {iterations.max_iter}"
    if learning.tokens_per_step is not None:
        sampling = max(cadence.working(), 1e-12)
        line += f", {learning.tokens_per_step * n_iter / sampling / 1e6:.2f} Mtoken/s"
    if score is not None:
        line += f", {score.text()}"
    if spread is not None:
        line += f", spread over the last doubling: {spread:.4f}"
    return line


class _Averaging:
    """The running sum of the averaged sweeps' word-topic counts: the last
    ``n_averaged_sweeps`` of a fit of ``max_iter`` sweeps, or with a stopping rule those since
    its last anchor (:meth:`restart` opens a new window). ``first`` is the first sweep of the
    window being summed."""

    def __init__(self, plan, stopping=None):
        max_iter = plan.iterations.max_iter
        averaged = plan.schedule.n_averaged_sweeps
        if stopping is None:
            self.first = max_iter - min(averaged, max_iter) + 1
        else:
            self.first = stopping.first_averaged()
        self.active = averaged > 0
        self.optional = plan.schedule.averaging_is_default

    def starts_at(self, n_iter):
        """Whether sweep ``n_iter`` is the first averaged one: its accumulation makes the
        running sum, and is the loop's own (a run of sweeps ends there)."""
        return self.active and n_iter == self.first

    def hand_over(self, first):
        """What a run of sweeps from ``first`` is asked to accumulate
        (:meth:`~sklearn_gpulda.backends.base.Sampler.sweeps`'s ``accumulate_from``): every
        sweep of it once the running sum exists, else none (None)."""
        return self.first if self.active and first > self.first else None

    def after(self, n_iter, sampler):
        """Add sweep ``n_iter``'s counts where it is one of the averaged sweeps. The default
        averaging gives way where its sum does not fit: the fit goes on with the last sample."""
        if not self.active or n_iter < self.first:
            return
        try:
            with stage("sweeps: averaging"):
                sampler.accumulate_word_topic()
        except MemoryError as exc:
            if not self.optional:
                raise
            self.give_way(sampler, exc)

    def give_way(self, sampler, exc):
        """Stop averaging after ``exc`` (a MemoryError of the default averaging): the sum is
        dropped and the fit goes on with the last sample."""
        self.active = False
        sampler.discard_accumulated()
        warn_caller(f"the fit goes on without averaging the last sweeps: {exc}",
                    RuntimeWarning)

    def restart(self, sampler, n_iter):
        """Drop the sum so far after sweep ``n_iter``: a new window opens with the next sweep,
        whose accumulation makes the new sum (so a run of sweeps ends there, as at the first
        window's start)."""
        if not self.active:
            return
        if sampler.n_accumulated:
            with stage("sweeps: averaging"):
                sampler.discard_accumulated()
        self.first = n_iter + 1


class _History:
    """The figures of every evaluation, as arrays at the end (``history_``), and why the fit
    stopped: ``stop_reason``, a sentence, and ``stopped_by``, one of
    :data:`~sklearn_gpulda._fitting.stopping.STOPPED_BY`."""

    def __init__(self, iterations, unit):
        self.rows = []
        self.perp_tol = iterations.perp_tol
        self.unit = unit
        self.stop_reason = f"max_iter={iterations.max_iter} {unit} done"
        self.stopped_by = "max_iter"
        self._last_bound = None

    def stopped(self, stopped_by, sentence):
        """The fit stops by the stopping rule: ``stopped_by`` 'tolerance' or 'ceiling'."""
        self.stopped_by, self.stop_reason = stopped_by, sentence

    def settled(self, bound, n_iter):
        """``evaluate_every``'s stopping rule: True, with ``stop_reason`` set, when the
        perplexity moved by less than ``perp_tol`` since the previous call."""
        last, self._last_bound = self._last_bound, bound
        if last is None or abs(last - bound) >= self.perp_tol:
            return False
        self.stopped_by = "perp_tol"
        self.stop_reason = (f"perplexity changed by {abs(last - bound):.4g} < perp_tol="
                            f"{self.perp_tol:g} after {n_iter} {self.unit}")
        return True

    def add(self, **row):
        self.rows.append(row)

    def as_dict(self):
        keys = list(self.rows[0]) if self.rows else ["iteration", "seconds"]
        out = {k: np.array([r[k] for r in self.rows]) for k in keys}
        out["stop_reason"] = self.stop_reason
        out["stopped_by"] = self.stopped_by
        return out
