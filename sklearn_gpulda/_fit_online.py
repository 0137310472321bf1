"""Online learning (``learning_method='online'`` and ``partial_fit``): mini-batches whose word-topic
statistics, from short chains with the topics held fixed, are blended into the model
(``doc/algorithm.md``, mini-batch learning). The shared pieces (Plan, FittedState, the history
and the stopping rule) are :mod:`sklearn_gpulda._fit`'s.
"""

import time

import numpy as np
from sklearn.utils import gen_batches

from ._cadence import Cadence
from ._corpus import tokens
from ._device import array_module, to_host
from ._fit import FittedState, _History, perplexity, public_prior
from ._random import STREAM_BATCH_INIT, STREAM_BATCH_SAMPLE
from .backends import fold_in


def _batch_statistics(plan, sampler, corpus, components, iteration, want_loglik, used=None):
    """Word-topic statistics of one mini-batch (``doc/algorithm.md``, mini-batch learning), and
    the training log-likelihood of the batch's last state when asked (else NaN).
    ``components`` is float64; where ``used`` (an array where ``components`` lies) is given,
    ``corpus`` holds only those columns of it (the statistics too)."""
    first = components is None
    sampler.load(corpus)
    if not first:
        # Bhat of the batch's words from the whole model's row sums: the numbers the whole
        # model's Bhat holds for them.
        columns = slice(None) if used is None else used
        sampler.fix_topic_word(components[:, columns], row_sums=components.sum(axis=1))
    sampler.init_topics(iteration, STREAM_BATCH_INIT)
    keep_from = plan.n_batch_sweeps - (plan.n_batch_sweeps + 1) // 2
    for s in range(plan.n_batch_sweeps):
        sampler.sweep(iteration, STREAM_BATCH_SAMPLE, s)
        if not first and s >= keep_from:
            sampler.accumulate_word_topic()
    # Where the chain lives: a GPU chain's statistics, and so the model, stay on its device.
    stats = sampler.word_topic_statistics()
    loglik = sampler.log_likelihood() if want_loglik else float("nan")
    return stats, loglik


def online_step(plan, X, components, alpha, n_batch_iter, total_samples, sampler=None,
                want_loglik=False):
    """One mini-batch of online learning.

    Parameters
    ----------
    plan : Plan
    X : validated counts of the batch
    components : array of shape (n_topics, n_words) or None
        The model so far (on the host, or on the sampler's GPU); None for the very first
        batch.
    alpha : float or ndarray
        The document-topic prior (held as it is: online learning learns no prior).
    n_batch_iter : int
        Number of this batch (keys its random numbers, sets its learning rate).
    total_samples : float
        Documents the corpus is assumed to hold.
    sampler : Sampler, optional
        Reused across batches (each batch is loaded anew); made and released here if None.
    want_loglik : bool, default=False
        Also compute the training log-likelihood of the batch's last state.

    Returns
    -------
    components : array of float64
        On the sampler's device: a GPU chain's model stays there between batches.
    alpha : float or ndarray
    loglik : float
        NaN unless ``want_loglik``.
    """
    corpus, used = tokens(X), None
    if components is not None:
        # With the topic-word side fixed, the batch's chain reads only its own words' columns
        # of the model, so it runs over those alone (a few thousand of a vocabulary of 100,000
        # for a batch of 128 documents): no per-batch work of the vocabulary's size but the
        # blend. The first batch learns B, whose denominators count the whole vocabulary.
        corpus, used = corpus.over_used_words()
        # float64 before the row sums are taken, as the samplers take them from a whole model;
        # the columns go where the model is, once for the chain and the blend.
        xp = array_module(components)
        components = xp.asarray(components, dtype=np.float64)
        used = xp.asarray(used)
    own = sampler is None
    sampler = plan.sampler(alpha=alpha) if own else sampler
    try:
        sampler.set_priors(alpha=alpha)
        stats, loglik = _batch_statistics(plan, sampler, corpus, components, n_batch_iter,
                                          want_loglik, used)
    finally:
        if own:
            sampler.release()
    beta = plan.beta.value
    rho = (plan.learning_offset + n_batch_iter) ** (-plan.learning_decay)
    target = beta + (total_samples / max(X.shape[0], 1)) * stats
    if components is None:
        return target, alpha, loglik
    xp = array_module(stats)
    components = xp.asarray(components)
    # A word the batch does not hold has no statistics: its target is beta alone. Each cell is
    # the same IEEE expression as blending the whole (K, V) target.
    new = (1.0 - rho) * components + rho * beta
    columns = xp.asarray(used)  # where the statistics are: the model's device, or the host
    new[:, columns] = (1.0 - rho) * components[:, columns] + rho * target
    return new, alpha, loglik


def online_pass(plan, X, components, alpha, n_batch_iter, total_samples, sampler,
                want_loglik=False):
    """One pass of :func:`online_step` over ``X`` in mini-batches of ``plan.batch_size``
    documents.

    Returns
    -------
    components, alpha
        As :func:`online_step` leaves them after the last batch.
    n_batch_iter : int
        The number the next batch takes.
    loglik, n_tokens : float
        The last batch's training log-likelihood (NaN unless ``want_loglik``; only that batch's
        is computed) and its tokens; NaN and 0 for an empty ``X``.
    """
    batches = list(gen_batches(X.shape[0], plan.batch_size))
    loglik, n_tokens = float("nan"), 0.0
    for i, batch in enumerate(batches):
        last = i == len(batches) - 1
        components, alpha, loglik = online_step(plan, X[batch], components, alpha, n_batch_iter,
                                                total_samples, sampler=sampler,
                                                want_loglik=want_loglik and last)
        if last:
            n_tokens = float(X[batch].sum())
        n_batch_iter += 1
    return components, alpha, n_batch_iter, loglik, n_tokens


def held_out_perplexity(plan, X, components, alpha):
    """Perplexity of ``X`` by the deterministic fold-in (online learning's evaluation)."""
    _, loglik = fold_in(plan.device, X, components, alpha, plan.max_doc_update_iter,
                        plan.mean_change_tol, return_loglik=True, n_jobs=plan.n_jobs)
    return perplexity(loglik.sum(), float(X.sum()))


def fit_online(plan, X):
    """Online learning: ``max_iter`` passes of mini-batches of ``batch_size`` documents.

    Returns
    -------
    FittedState
    """
    n_samples = X.shape[0]
    start = time.perf_counter()
    n_tokens = float(X.sum())
    history = _History()
    history.stop_reason = f"max_iter={plan.max_iter} passes done"
    components, alpha, n_batch_iter = None, plan.alpha.value, 1
    n_iter, bound = 0, None
    sampler = plan.sampler()
    cadence = Cadence()
    try:
        for i in range(plan.max_iter):
            components, alpha, n_batch_iter, _, _ = online_pass(
                plan, X, components, alpha, n_batch_iter, n_samples, sampler)
            n_iter = i + 1
            evaluate = plan.evaluate_every > 0 and n_iter % plan.evaluate_every == 0
            bound = None
            if evaluate or (plan.verbose and cadence.due(n_iter)):
                sampler.synchronize()
                bound = cadence.timed(lambda: held_out_perplexity(plan, X, components, alpha))
                history.add(iteration=n_iter, seconds=time.perf_counter() - start,
                            train_perplexity=bound)
            if plan.verbose:
                line = f"iteration: {n_iter} of max_iter: {plan.max_iter}"
                print(line if bound is None else f"{line}, perplexity: {bound:.4f}")
            if plan.callback is not None:
                plan.callback(n_iter, dict(max_iter=plan.max_iter, n_tokens=n_tokens,
                                           seconds=time.perf_counter() - start,
                                           log_likelihood=None))
            if evaluate and history.settled(bound, plan, n_iter, "passes"):
                break
        if plan.verbose:
            print(f"stopped: {history.stop_reason}")
        sampler.synchronize()
    finally:
        sampler.release()
    fit_time = time.perf_counter() - start
    if components is None:
        # max_iter=0: no batch was seen; topics stay at the prior.
        components = np.full((plan.n_topics, X.shape[1]), plan.beta.value)
    return FittedState(
        components=to_host(components), doc_topic_prior=public_prior(alpha, plan.alpha),
        topic_word_prior=float(plan.beta.value), n_iter=n_iter, n_batch_iter=n_batch_iter,
        # The last pass's evaluation, when it had one, is the model's: not computed twice.
        bound=held_out_perplexity(plan, X, components, alpha) if bound is None else bound,
        n_tokens=n_tokens,
        fit_time=fit_time, history=history.as_dict(),
    )
