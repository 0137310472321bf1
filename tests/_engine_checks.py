"""Checks shared by the sampler tests (NumPy, sparse CUDA and dense CUDA backends)."""

import numpy as np
import pytest


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
