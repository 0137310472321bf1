"""Checks shared by the sampler tests (the NumPy, sparse, dense and mini-batched backends)."""

import numpy as np
import pytest
import scipy.sparse as sp
from _stats import merged_chisquare

from sklearn_gpulda._input.corpus import tokens


def recount(index, topics, weight, n_rows, n_topics):
    """Counts of (row, topic) pairs, rows given per token by ``index``: A or B from scratch."""
    flat = index.astype(np.int64) * n_topics + topics
    return np.bincount(flat, weights=weight, minlength=n_rows * n_topics).reshape(n_rows, n_topics)


def initialised(sampler, corpus):
    """``sampler`` loaded with ``corpus``, topics drawn (stream 0)."""
    sampler.load(corpus)
    sampler.init_topics()
    return sampler


def check_counts_every_sweep(engine, corpus, n_topics, n_sweeps=5):
    """Sweep an initialised sampler ``n_sweeps`` times; after each, its A and B must equal the
    counts rebuilt from its topics, and hold every token once."""
    for it in range(1, n_sweeps + 1):
        engine.sweep(it)
        z = engine.topics()
        assert z.min() >= 0 and z.max() < n_topics
        a = engine.doc_topic_counts()
        b = engine.word_topic_counts()
        assert a.sum() == corpus.n_tokens and b.sum() == corpus.n_tokens
        np.testing.assert_array_equal(a, recount(corpus.doc, z, None, corpus.n_docs, n_topics))
        np.testing.assert_array_equal(b, recount(corpus.word, z, None, corpus.n_words, n_topics).T)


def check_same_seed_same_model(make_engine, corpus, n_sweeps=3):
    """Two samplers from ``make_engine()`` swept alike end in identical topics, counts and
    log-likelihood."""
    runs = []
    for _ in range(2):
        eng = initialised(make_engine(), corpus)
        for it in range(1, n_sweeps + 1):
            eng.sweep(it)
        runs.append((eng.topics(), eng.word_topic_counts(), eng.log_likelihood()))
        eng.release()
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert runs[0][2] == runs[1][2]


def check_chains_alike_every_sweep(chains, corpus, sweeps=(1, 2, 3)):
    """Load ``chains`` (samplers made alike but for how they run: threads, processes, ...) with
    ``corpus``, sweep them together, and require the same topics, A, B and log-likelihood, bit
    for bit, after every sweep. The chains are left loaded; the caller releases them."""
    for chain in chains:
        initialised(chain, corpus)
    first = chains[0]
    for it in sweeps:
        for chain in chains:
            chain.sweep(it)
        for other in chains[1:]:
            np.testing.assert_array_equal(first.topics(), other.topics())
            np.testing.assert_array_equal(first.doc_topic_counts(), other.doc_topic_counts())
            np.testing.assert_array_equal(first.word_topic_counts(), other.word_topic_counts())
            assert first.log_likelihood() == other.log_likelihood()


def check_weighted_counts(engine, corpus, n_topics, reference, atol_a, atol_b=1e-4):
    """After one sweep over weighted tokens: A and B equal the weighted recounts from the
    engine's topics (to float32 atomics' rounding), and the log-likelihood matches the NumPy
    ``reference`` sampler given the same topics."""
    assert corpus.weight is not None
    initialised(engine, corpus)
    engine.sweep(1)
    z = engine.topics()
    np.testing.assert_allclose(
        engine.doc_topic_counts(), recount(corpus.doc, z, corpus.weight, corpus.n_docs, n_topics),
        rtol=1e-6, atol=atol_a,
    )
    np.testing.assert_allclose(
        engine.word_topic_counts(),
        recount(corpus.word, z, corpus.weight, corpus.n_words, n_topics).T,
        rtol=1e-6, atol=atol_b,
    )
    reference.load(corpus)
    reference.set_topics(z)
    assert engine.log_likelihood() == pytest.approx(reference.log_likelihood(), rel=1e-5)


def check_two_word_conditional(make_engine, n_topics, alpha, beta, n_each=60_000):
    """One sweep of a one-batch chain on one document of two words, ``n_each`` tokens each:
    the tokens of a word that share a current topic draw from one p(k), the collapsed
    conditional of the sweep's start with the token's own count out of A, B and n, so their new
    topics must pass a chi-square test against it. ``make_engine(n_tokens)`` gives an unloaded
    sampler whose batch holds ``n_tokens`` tokens."""
    rng = np.random.default_rng(n_topics)
    corpus = tokens(sp.csr_matrix(np.array([[n_each, n_each]], dtype=np.int64)))
    weights = rng.gamma(0.5, size=n_topics)
    weights[rng.random(n_topics) < 0.3] = 0  # topics with no tokens at all
    weights /= weights.sum()
    z = rng.choice(n_topics, size=corpus.n_tokens, p=weights).astype(np.int32)
    eng = make_engine(corpus.n_tokens)
    eng.load(corpus)
    eng.set_topics(z)
    a = np.bincount(z, minlength=n_topics).astype(np.float64)
    b = recount(corpus.word, z, None, 2, n_topics)
    eng.sweep(1)
    new = eng.topics()
    eng.release()
    own = int(np.bincount(z).argmax())
    out = np.zeros(n_topics)
    out[own] = 1
    for v in range(2):
        group = (corpus.word == v) & (z == own)
        p = (a - out + alpha) * (b[v] - out + beta) / (b.sum(axis=0) - out + 2 * beta)
        result = merged_chisquare(np.bincount(new[group], minlength=n_topics),
                                  p / p.sum() * group.sum())
        assert result.pvalue > 1e-4, (v, result)


def check_online_step_over_the_batch_words(plan, sampler, X, batches, total_samples):
    """Online learning's steps over ``batches`` of ``X`` (each after the first runs its chain
    over the words the batch holds only) equal, bit for bit, the steps whose chains run over
    every column of the model. Each batch must leave some column unused, or the check would
    not see the cut."""
    from sklearn_gpulda._fitting import online as _fit_online
    from sklearn_gpulda._runtime.device import to_host

    components, alpha = None, plan.alpha.value
    for it, batch in enumerate(batches, start=1):
        part = X[batch]
        before = components
        components = _fit_online.online_steps(plan, part, [(0, part.shape[0])], components,
                                              alpha, it, total_samples, sampler)[0]
        if before is None:
            continue
        unused = np.flatnonzero(np.asarray(sp.csr_matrix(part).sum(axis=0)).ravel() == 0)
        assert unused.size > 0
        # The whole-vocabulary step, written out: the chain over every column, then the blend.
        sampler.load(tokens(part))
        stats, _ = _fit_online._batch_statistics(plan, sampler, before, it, False)
        rho = (plan.online.learning_offset + it) ** (-plan.online.learning_decay)
        target = plan.beta.value + (total_samples / part.shape[0]) * to_host(stats)
        want = (1.0 - rho) * to_host(before) + rho * target
        got = to_host(components)
        np.testing.assert_array_equal(got, want)
        # Unused words moved towards beta alone; used ones by their statistics.
        np.testing.assert_array_equal(got[:, unused],
                                      (1.0 - rho) * to_host(before)[:, unused]
                                      + rho * plan.beta.value)


def check_held_batches_are_the_batches_loaded_alone(plan, sampler, reference, X, ranges,
                                                    total_samples, passes=2):
    """Online learning's passes over ``ranges`` of ``X`` with ``sampler`` holding the batches
    (``Sampler.load_online_batches``, reused from pass to pass) give, bit for bit, the model and the
    last batch's log-likelihood of the steps written out with ``reference`` loading each batch
    alone, cut to its own words (what a step did before batches were held). The batches must
    not all hold the same words, or the check would not see a cut."""
    from sklearn_gpulda._fitting import online as _fit_online
    from sklearn_gpulda._runtime.device import to_host

    got, held, it = None, None, 1
    want = None
    for _ in range(passes):
        got, it_next, got_ll, held = _fit_online.online_steps(
            plan, X, ranges, got, plan.alpha.value, it, total_samples, sampler,
            want_loglik=True, held=held)
        for i, (d0, d1) in enumerate(ranges):
            corpus, used = tokens(X[d0:d1]), None
            if want is not None:
                corpus, used = corpus.over_used_words()
                want = to_host(want)
            reference.load(corpus)
            stats, want_ll = _fit_online._batch_statistics(plan, reference, want, it + i,
                                                           i == len(ranges) - 1, used)
            want = _fit_online._blend(plan, want, to_host(stats), used, d1 - d0, it + i,
                                      total_samples)
        assert it_next == it + len(ranges)
        it = it_next
        np.testing.assert_array_equal(to_host(got), to_host(want))
        # The same terms; a GPU chain that holds the batches together orders its words (and
        # so its partial sums) by their frequency in X rather than in the batch.
        assert got_ll == pytest.approx(want_ll, rel=1e-12)
    assert held is not None and held.sampler is sampler


def load_parts(make, X, splits):
    """Data-parallel parts of the rows of ``X`` cut at ``splits``, each made by ``make()`` and
    loaded with its tokens keyed by their places in the whole corpus."""
    bounds = [0, *splits, X.shape[0]]
    parts, offset = [], 0
    for d0, d1 in zip(bounds, bounds[1:]):
        corpus = tokens(X[d0:d1])
        part = make()
        part.token_offset = offset
        part.load(corpus)
        offset += corpus.n_tokens
        parts.append(part)
    return parts


def summed_cells(found):
    """The non-zero cells of the sum of the parts' B, ``found`` holding each part's ``(cells,
    counts)``, as a caller of data-parallel chains sums them (integer counts: exact in any
    order); checks each part reports uint32 cells and float32 counts."""
    assert all(c.dtype == np.uint32 and v.dtype == np.float32 for c, v in found)
    cells = np.concatenate([c for c, _ in found]).astype(np.int64)
    total = np.bincount(cells, weights=np.concatenate([v for _, v in found]))
    summed = np.flatnonzero(total)
    return summed, total[summed].astype(np.float32)


def step_parts(parts, iteration):
    """One step of data-parallel parts as their caller runs it: initial topics at iteration 0,
    else sweep ``iteration``; then every part takes the summed B (:func:`summed_cells`)."""
    for part in parts:
        if iteration == 0:
            part.init_topics()
        else:
            part.sweep(iteration)
    cells, counts = summed_cells([part.word_topic_cells(np.uint32) for part in parts])
    for part in parts:
        part.set_word_topic(cells, counts)
