"""Online learning (``learning_method='online'`` and ``partial_fit``): mini-batches whose word-topic
statistics, from short chains with the topics held fixed, are blended into the model
(``doc/algorithm.md``, mini-batch learning). What a pass is to the fit loop is
:mod:`sklearn_gpulda._fitting.passes`'s.
"""

import numpy as np
from sklearn.utils import gen_batches

from .._input.corpus import tokens
from .._runtime.device import array_module
from ..backends import fold_in
from ..backends.random import STREAM_BATCH_INIT, STREAM_BATCH_SAMPLE
from .score import perplexity


def _batch_statistics(plan, sampler, components, iteration, want_loglik, columns=None):
    """Word-topic statistics of the mini-batch ``sampler`` has loaded (``doc/algorithm.md``,
    mini-batch learning), and the training log-likelihood of the batch's last state when asked
    (else NaN).

    ``components`` is float64, or None for the very first batch; where ``columns`` (an index
    array where ``components`` lies) is given, the loaded batch holds only those columns of it
    (the statistics too)."""
    first = components is None
    if not first:
        # Bhat of the batch's words from the whole model's row sums: the numbers the whole
        # model's Bhat holds for them.
        cols = slice(None) if columns is None else columns
        sampler.fix_topic_word(components[:, cols], row_sums=components.sum(axis=1))
    sampler.init_topics(iteration, STREAM_BATCH_INIT)
    n_sweeps = plan.online.n_batch_sweeps
    keep_from = n_sweeps - (n_sweeps + 1) // 2
    for s in range(n_sweeps):
        sampler.sweep(iteration, STREAM_BATCH_SAMPLE, s)
        if not first and s >= keep_from:
            sampler.accumulate_word_topic()
    # Where the chain lives: a GPU chain's statistics, and so the model, stay on its device.
    stats = sampler.word_topic_statistics()
    loglik = sampler.log_likelihood() if want_loglik else float("nan")
    return stats, loglik


def _blend(plan, components, stats, columns, n_docs, n_batch_iter, total_samples):
    """The model after a mini-batch of ``n_docs`` documents whose statistics over ``columns``
    of it (all where None) are ``stats``; the target itself after the very first batch.

    The target is ``eta + total_samples / n_docs * stats``: with a matrix prior, a seeded
    cell's is ``(beta + scale * S) + extra`` (:func:`_blend_cells`), so a cell seeded with 0.0
    is the scalar prior's bit for bit."""
    beta = plan.beta.value
    cells = plan.beta_cells
    rho = (plan.online.learning_offset + n_batch_iter) ** (-plan.online.learning_decay)
    scale = total_samples / max(n_docs, 1)
    target = beta + scale * stats
    xp = array_module(stats)
    if components is None:
        if cells is not None:
            topic, word, extra = _cells_on(xp, cells)
            target[topic, word] += extra
        return target
    components = xp.asarray(components)
    # A word the batch does not hold has no statistics: its target is beta alone. Each cell is
    # the same IEEE expression as blending the whole (K, V) target.
    new = (1.0 - rho) * components + rho * beta
    columns = None if columns is None else xp.asarray(columns)
    every = slice(None) if columns is None else columns
    new[:, every] = (1.0 - rho) * components[:, every] + rho * target
    if cells is not None:
        _blend_cells(xp, new, components, stats, columns, cells, beta, scale, rho)
    return new


def _cells_on(xp, cells):
    """A matrix prior's seeded cells as ``(topic, word, extra)`` arrays of ``xp``."""
    return xp.asarray(cells.topic), xp.asarray(cells.word), xp.asarray(cells.value)


def _blend_cells(xp, new, components, stats, columns, cells, beta, scale, rho):
    """Blend the seeded cells of ``new`` again, towards their own target ``(beta + scale *
    S) + extra`` (``S`` 0.0 where the batch does not hold the word, whose target is then
    ``eta`` alone): O(seeded cells), besides a map of the vocabulary to the batch's columns."""
    topic, word, extra = _cells_on(xp, cells)
    if columns is None:
        s = stats[topic, word]
    else:
        position = xp.full(components.shape[1], -1, dtype=xp.int64)
        position[columns] = xp.arange(columns.shape[0], dtype=xp.int64)
        at = position[word]
        s = xp.where(at >= 0, stats[topic, xp.maximum(at, 0)], 0.0)
    new[topic, word] = (1.0 - rho) * components[topic, word] + rho * ((beta + scale * s)
                                                                      + extra)


def _chain_cells(sampler, cells):
    """Give ``sampler``'s chain the seeded ``cells`` (or None), where it holds others.

    Only a chain that learns B (the very first mini-batch's) samples with a matrix prior; a
    later batch's holds Bhat fixed from the model, which carries the prior already, and runs
    over the batch's own words, in which the cells' word ids mean nothing."""
    if sampler.beta_cells is not cells:
        sampler.set_beta_cells(cells)


class OnlineBatches:
    """The mini-batches of one count matrix, held by a sampler (:meth:`~sklearn_gpulda.
    backends.base.Sampler.load_online_batches`) over the words the matrix holds."""

    def __init__(self, sampler, X, ranges):
        corpus, self.used = tokens(X).over_used_words()
        sampler.load_online_batches(corpus, ranges)
        self.sampler = sampler
        self._used_on = {}

    def select(self, i, xp):
        """Load batch ``i`` into the sampler; the model's columns it holds, on ``xp``."""
        columns = self.sampler.select_online_batch(i)
        used = self._used_on.get(xp)
        if used is None:
            used = self._used_on[xp] = xp.asarray(self.used)
        return used[xp.asarray(columns)]


def online_steps(plan, X, ranges, components, alpha, n_batch_iter, total_samples, sampler,
                 want_loglik=False, held=None):
    """Online learning's steps over the mini-batches ``ranges`` (document ranges) of ``X``.

    Parameters
    ----------
    plan : Plan
    X : validated counts
    ranges : list of (int, int)
    components : array of shape (n_topics, n_words) or None
        The model so far (on the host, or on the sampler's GPU); None before the very first
        batch.
    alpha : float or ndarray
        The document-topic prior (held as it is: online learning learns no prior).
    n_batch_iter : int
        Number of the first batch (keys its random numbers, sets its learning rate).
    total_samples : float
        Documents the corpus is assumed to hold.
    sampler : Sampler
    want_loglik : bool, default=False
        Also compute the training log-likelihood of the last batch's last state.
    held : OnlineBatches, optional
        ``X``'s batches ``ranges``, already held by ``sampler`` (an earlier pass's).

    Returns
    -------
    components : array of float64
        On the sampler's device: a GPU chain's model stays there between batches.
    n_batch_iter : int
        The number the next batch takes.
    loglik : float
        NaN unless ``want_loglik``.
    held : OnlineBatches or None
        What the sampler holds, for a next pass over the same batches.
    """
    loglik = float("nan")
    sampler.set_priors(alpha=alpha)
    for i, (d0, d1) in enumerate(ranges):
        want = want_loglik and i == len(ranges) - 1
        columns = None
        _chain_cells(sampler, plan.beta_cells if components is None else None)
        if components is None:
            # The first batch learns B, whose denominators count the whole vocabulary: its
            # chain runs over every column.
            sampler.load(tokens(X[d0:d1]))
        else:
            # With the topic-word side fixed, a batch's chain reads only its own words' columns
            # of the model. The sampler holds every batch at once, over the words X holds
            # (laid out together where its engine can), and selects one at a time.
            xp = array_module(components)
            components = xp.asarray(components, dtype=np.float64)
            if held is None:
                held = OnlineBatches(sampler, X, ranges)
            columns = held.select(i, xp)
        stats, loglik = _batch_statistics(plan, sampler, components, n_batch_iter, want,
                                          columns)
        components = _blend(plan, components, stats, columns, d1 - d0, n_batch_iter,
                            total_samples)
        n_batch_iter += 1
    return components, n_batch_iter, loglik, held


def online_batch_ranges(n_docs, batch_size):
    """Document ranges of the mini-batches of a pass."""
    return [(b.start, b.stop) for b in gen_batches(n_docs, batch_size)]


def online_pass(plan, X, components, alpha, n_batch_iter, total_samples, sampler,
                want_loglik=False, held=None):
    """One pass of :func:`online_steps` over ``X`` in mini-batches of ``plan.online.batch_size``
    documents.

    Returns
    -------
    components, alpha
        As the steps leave them after the last batch.
    n_batch_iter : int
        The number the next batch takes.
    loglik, n_tokens : float
        The last batch's training log-likelihood and its tokens, where ``want_loglik`` (only
        that batch's is computed); NaN and 0 otherwise, and for an empty ``X``.
    held : OnlineBatches or None
        Pass it to the next pass over the same ``X`` with the same sampler.
    """
    ranges = online_batch_ranges(X.shape[0], plan.online.batch_size)
    if not ranges:
        return components, alpha, n_batch_iter, float("nan"), 0.0, held
    components, n_batch_iter, loglik, held = online_steps(
        plan, X, ranges, components, alpha, n_batch_iter, total_samples, sampler, want_loglik,
        held)
    d0, d1 = ranges[-1]
    n_tokens = float(X[d0:d1].sum()) if want_loglik else 0.0
    return components, alpha, n_batch_iter, loglik, n_tokens, held


def held_out_perplexity(plan, X, components, alpha):
    """Perplexity of ``X`` by the deterministic fold-in (online learning's evaluation)."""
    settings = plan.fold_in
    _, loglik = fold_in(plan.device, X, components, alpha, settings.max_iter, settings.tol,
                        return_loglik=True, n_jobs=settings.n_jobs)
    return perplexity(loglik.sum(), float(X.sum()))
