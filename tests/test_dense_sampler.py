"""The dense draw rule (backends/numpy/dense_rule.py) and the three dense kernels
(cuda/sample_dense.cu).

CPU tests pin the NumPy oracle to the exact distribution; GPU tests (marked ``gpu``) pin every
kernel variant to the exact distribution, to the oracle on the King James Bible corpus, and to
each other.
"""

import functools

import numpy as np
import pytest

from sklearn_gpulda.backends import random as _random
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda.backends.cuda.dense.sample_dense import VARIANTS, document_order
from sklearn_gpulda.backends.numpy import tables, threads
from sklearn_gpulda.backends.numpy.dense_rule import draw_topics_dense
from sklearn_gpulda.backends.numpy.row_tasks import count_pairs

from _stats import merged_chisquare

# K values of issue 4: below, at and above one warp, remnants of 1, 4, 16, 8 and 0 topics.
TOPICS = [16, 32, 33, 48, 100, 240, 256, 1000, 1024]
SEED, ITERATION = 2024, 3


def _fixed_distribution(n_topics, seed):
    """One A row (counts, about half zero), the own topic of the tokens drawn from it (counted in
    the row), one Bhat row (positive, normalised) and alpha."""
    rng = np.random.default_rng(seed)
    a_row = rng.integers(0, 30, size=n_topics).astype(np.float32)
    a_row[rng.random(n_topics) < 0.5] = 0
    own = int(rng.integers(n_topics))
    a_row[own] = max(a_row[own], 1)
    bhat = (rng.gamma(0.3, size=n_topics) + 1e-6).astype(np.float32)
    bhat /= bhat.sum(dtype=np.float32)
    return a_row, own, bhat, 0.5


def _terms(a_row, own, bhat, alpha):
    """The collapsed conditional's unnormalised p in float64."""
    p = (a_row.astype(np.float64) + alpha) * bhat.astype(np.float64)
    p[own] -= bhat[own]
    return p


def _exact_p(a_row, own, bhat, alpha):
    p = _terms(a_row, own, bhat, alpha)
    return p / p.sum()


def _exact_draws(a_row, own, bhat, alpha, u):
    """The dense rule in float64: index of the first running sum above u * total."""
    run = np.cumsum(_terms(a_row, own, bhat, alpha))
    x = u.astype(np.float64) * run[-1]
    return np.minimum(np.searchsorted(run, x, side="right"), run.size - 1)


def _oracle_one_row(a_row, own, bhat, alpha, u):
    zeros = np.zeros(u.size, dtype=np.int64)
    return draw_topics_dense(zeros, zeros, np.full(u.size, own), None, u, a_row[None, :],
                             bhat[None, :], alpha)


# -- the oracle, on the CPU ----------------------------------------------------------------------
@pytest.mark.parametrize("n_topics", TOPICS)
def test_dense_rule_matches_exact_distribution(n_topics):
    a_row, own, bhat, alpha = _fixed_distribution(n_topics, seed=n_topics)
    n = 200_000
    u = _random.token_uniform(SEED, ITERATION, _random.STREAM_SAMPLE, np.arange(n))
    got = _oracle_one_row(a_row, own, bhat, alpha, u)
    result = merged_chisquare(
        np.bincount(got, minlength=n_topics), _exact_p(a_row, own, bhat, alpha) * n
    )
    assert result.pvalue > 1e-4, result


@pytest.mark.parametrize("n_topics", [16, 33, 1000])
def test_dense_rule_agrees_with_float64_rule(n_topics):
    a_row, own, bhat, alpha = _fixed_distribution(n_topics, seed=7 * n_topics)
    n = 50_000
    u = _random.token_uniform(SEED, ITERATION, _random.STREAM_SAMPLE, np.arange(n))
    got = _oracle_one_row(a_row, own, bhat, alpha, u)
    assert np.mean(got == _exact_draws(a_row, own, bhat, alpha, u)) >= 0.999


def test_dense_rule_takes_the_word_side_out_too():
    # Word 3 has 2 tokens, both in the own topic: its word side there is (2 - 1 + beta) /
    # (n_z - 1 + V beta), not (2 + beta) / (n_z + V beta).
    n_topics, n_words, beta, n = 40, 12, 0.02, 100_000
    rng = np.random.default_rng(8)
    counts = rng.poisson(1.0, size=(n_words, n_topics)).astype(np.float64)
    counts[3] = 0
    counts[3, 11] = 2
    denom = counts.sum(axis=0) + n_words * beta
    bhat = ((counts + beta) / denom).astype(np.float32)
    a_row = rng.integers(0, 5, n_topics).astype(np.float32)
    a_row[11] = max(a_row[11], 1)
    u = _random.token_uniform(SEED, ITERATION, _random.STREAM_SAMPLE, np.arange(n))
    zeros = np.zeros(n, dtype=np.int64)
    got = draw_topics_dense(zeros, np.full(n, 3), np.full(n, 11), None, u, a_row[None, :], bhat,
                            0.1, (counts, denom, beta))
    p = (a_row.astype(np.float64) + 0.1) * (counts[3] + beta) / denom
    p[11] = (a_row[11] - 1 + 0.1) * (counts[3, 11] - 1 + beta) / (denom[11] - 1)
    result = merged_chisquare(np.bincount(got, minlength=n_topics), p / p.sum() * n)
    assert result.pvalue > 1e-4, result


def test_dense_rule_takes_a_lone_tokens_topic_out():
    # A document of one token: its own topic's count goes to zero, so the draw follows alpha
    # and Bhat alone; with the count kept it would return to its topic almost surely.
    n_topics, n = 24, 100_000
    rng = np.random.default_rng(11)
    bhat = rng.dirichlet(np.ones(n_topics)).astype(np.float32)
    a_row = np.zeros(n_topics, np.float32)
    a_row[9] = 1
    u = _random.token_uniform(SEED, ITERATION, _random.STREAM_SAMPLE, np.arange(n))
    got = _oracle_one_row(a_row, 9, bhat, 0.001, u)
    result = merged_chisquare(np.bincount(got, minlength=n_topics), bhat / bhat.sum() * n)
    assert result.pvalue > 1e-4, result


def test_dense_rule_never_draws_a_zero_probability_topic():
    n_topics, n = 48, 100_000
    a_row, own, bhat, alpha = _fixed_distribution(n_topics, seed=5)
    dead = np.array([0, 1, 17, 31, 32, 47])
    bhat[dead] = 0
    u = _random.token_uniform(SEED, ITERATION, _random.STREAM_SAMPLE, np.arange(n))
    got = _oracle_one_row(a_row, own, bhat, alpha, u)
    assert not np.isin(got, dead).any()


def test_dense_rule_all_zero_row_gives_last_topic():
    n_topics = 40
    u = np.array([0.0, 0.5, 1 - 2**-24], dtype=np.float32)
    zeros = np.zeros(3, dtype=np.int64)
    got = draw_topics_dense(
        zeros,
        zeros,
        zeros,
        None,
        u,
        np.zeros((1, n_topics), np.float32),
        np.zeros((1, n_topics), np.float32),
        0.1,
    )
    np.testing.assert_array_equal(got, n_topics - 1)


def test_dense_rule_does_not_depend_on_chunking(monkeypatch):
    rng = np.random.default_rng(3)
    n_docs, n_words, n_topics, n = 30, 50, 33, 5000
    A = rng.integers(0, 9, size=(n_docs, n_topics)).astype(np.float32)
    bhat = rng.random((n_words, n_topics)).astype(np.float32)
    doc, word = rng.integers(n_docs, size=n), rng.integers(n_words, size=n)
    z = rng.integers(n_topics, size=n)
    u = _random.token_uniform(SEED, ITERATION, _random.STREAM_SAMPLE, np.arange(n))
    whole = draw_topics_dense(doc, word, z, None, u, A, bhat, 0.2)
    # Chunks of 7 tokens (the defaults make this input one chunk).
    monkeypatch.setattr(threads, "CHUNK_ELEMENTS", 7 * n_topics)
    monkeypatch.setattr(threads, "MIN_CHUNK_TOKENS", 1)
    assert len(threads.chunks(0, n, n_topics)) == -(-n // 7)
    np.testing.assert_array_equal(draw_topics_dense(doc, word, z, None, u, A, bhat, 0.2), whole)


def test_dense_rule_rejects_mismatched_topics():
    with pytest.raises(ValueError, match="same number of topics"):
        draw_topics_dense(
            np.zeros(1, int),
            np.zeros(1, int),
            np.zeros(1, int),
            None,
            np.zeros(1, np.float32),
            np.zeros((1, 4), np.float32),
            np.zeros((1, 5), np.float32),
            0.1,
        )


def test_document_order_is_by_decreasing_length_without_empty_documents():
    doc_ptr = np.cumsum([0, 3, 0, 5, 3, 1, 0, 5]).astype(np.int64)
    np.testing.assert_array_equal(document_order(doc_ptr), [2, 6, 0, 3, 4])
    assert document_order(doc_ptr).dtype == np.int32


# -- the kernels, on the GPU ---------------------------------------------------------------------
def _device_corpus(doc_ptr, word):
    import cupy as cp

    return cp.asarray(np.asarray(doc_ptr, dtype=np.int64)), cp.asarray(
        np.asarray(word, dtype=np.int32)
    )


def _gpu_draw(variant, doc_ptr, word, z, A, bhat, alpha, order=None, word_side=None):
    """Run one kernel over a corpus given as host arrays, from current topics ``z``; returns the
    host topics (unlisted documents keep what ``z`` held). ``word_side`` = (counts, denom, beta)
    as for the oracle."""
    import cupy as cp

    from sklearn_gpulda.backends.cuda.dense.sample_dense import sample_dense

    doc_ptr_d, word_d = _device_corpus(doc_ptr, word)
    order_d = (
        document_order(doc_ptr_d)
        if order is None
        else cp.asarray(np.asarray(order, dtype=np.int32))
    )
    z_d = cp.asarray(np.asarray(z, dtype=np.int32))
    n_topics = A.shape[1]
    alpha_d = cp.asarray(np.broadcast_to(np.float32(alpha), (n_topics,)).astype(np.float32))
    sample_dense(
        variant,
        order_d,
        doc_ptr_d,
        word_d,
        None,
        cp.asarray(A, dtype=cp.float32),
        cp.asarray(bhat, dtype=cp.float32),
        alpha_d,
        SEED,
        ITERATION,
        z_d,
        word_counts=None if word_side is None else (
            cp.asarray(word_side[0], dtype=cp.float32), cp.asarray(word_side[1]), word_side[2]),
    )
    return z_d.get()


def _ragged_lengths(n_docs, seed, mean=100):
    """Document lengths 0..2 mean, a few empty, so warps see unequal lengths and idle lanes."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 2 * mean, size=n_docs)
    lengths[rng.random(n_docs) < 0.03] = 0
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", TOPICS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_kernel_matches_exact_distribution(variant, n_topics):
    # Every token draws from one distribution (all documents share the A row, one word), over a
    # ragged corpus of 4,001 documents (not a multiple of 32), so the chi-square is exact.
    a_row, own, bhat, alpha = _fixed_distribution(n_topics, seed=n_topics + 1)
    doc_ptr = _ragged_lengths(4001, seed=n_topics)
    n = int(doc_ptr[-1])
    A = np.tile(a_row, (doc_ptr.size - 1, 1))
    got = _gpu_draw(variant, doc_ptr, np.zeros(n, np.int32), np.full(n, own), A, bhat[None, :],
                    alpha)
    assert got.min() >= 0 and got.max() < n_topics
    result = merged_chisquare(
        np.bincount(got, minlength=n_topics), _exact_p(a_row, own, bhat, alpha) * n
    )
    assert result.pvalue > 1e-4, result


@functools.lru_cache(maxsize=1)
def _kjv_corpus():
    from sklearn_gpulda.datasets import load_kjv_chapters

    return tokens(load_kjv_chapters().data)


def _kjv_state(n_topics, seed=0):
    """KJV tokens with a random topic each, and A and Bhat counted from them (as an E-step sees)."""
    corpus = _kjv_corpus()
    rng = np.random.default_rng(seed)
    z = rng.integers(0, n_topics, size=corpus.n_tokens).astype(np.int32)
    A = count_pairs(corpus.doc, z, None, corpus.n_docs, n_topics).astype(np.float32)
    B = count_pairs(corpus.word, z, None, corpus.n_words, n_topics)
    word_tables = tables.WordTables.from_counts(B, B.sum(axis=0), 0.01, 0.1)
    return corpus, z, A, word_tables.bhat, word_tables.word_side


def _kjv_oracle(corpus, z, A, bhat, alpha, word_side=None):
    t = np.arange(corpus.n_tokens, dtype=np.int64)
    u = _random.token_uniform(SEED, ITERATION, _random.STREAM_SAMPLE, t)
    return draw_topics_dense(corpus.doc, corpus.word, z, None, u, A, bhat, alpha, word_side)


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", TOPICS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_kernel_agrees_with_oracle_on_kjv(variant, n_topics):
    alpha = 50.0 / n_topics
    corpus, z, A, bhat, word_side = _kjv_state(n_topics)
    ref = _kjv_oracle(corpus, z, A, bhat, alpha, word_side)
    got = _gpu_draw(variant, corpus.doc_ptr, corpus.word, z, A, bhat, alpha, word_side=word_side)
    agree = np.mean(got == ref)
    assert agree >= 0.999, (variant, n_topics, agree)


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [33, 256, 1000])
@pytest.mark.parametrize("variant", ["plain", "transpose"])
def test_sequential_variants_equal_oracle_bit_for_bit(variant, n_topics):
    # Both form the running sums in topic order with _rn intrinsics, exactly as the oracle.
    alpha = 50.0 / n_topics
    corpus, z, A, bhat, word_side = _kjv_state(n_topics, seed=1)
    for side in (word_side, None):  # training, and the topic-word side fixed
        np.testing.assert_array_equal(
            _gpu_draw(variant, corpus.doc_ptr, corpus.word, z, A, bhat, alpha, word_side=side),
            _kjv_oracle(corpus, z, A, bhat, alpha, side),
        )


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [16, 100, 1024])
def test_variants_agree_with_each_other(n_topics):
    alpha = 50.0 / n_topics
    corpus, z, A, bhat, _ = _kjv_state(n_topics, seed=2)
    got = {v: _gpu_draw(v, corpus.doc_ptr, corpus.word, z, A, bhat, alpha) for v in VARIANTS}
    np.testing.assert_array_equal(got["transpose"], got["plain"])
    assert np.mean(got["butterfly"] == got["plain"]) >= 0.999


@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_result_does_not_depend_on_document_order(variant):
    # A token's draw depends on its own rows only, whichever documents share its warp.
    n_topics = 48
    corpus, z, A, bhat, _ = _kjv_state(n_topics, seed=3)
    sorted_ = _gpu_draw(variant, corpus.doc_ptr, corpus.word, z, A, bhat, 0.3)
    perm = np.random.default_rng(0).permutation(corpus.n_docs)  # every document, shuffled
    np.testing.assert_array_equal(
        _gpu_draw(variant, corpus.doc_ptr, corpus.word, z, A, bhat, 0.3, order=perm), sorted_
    )


@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_only_listed_documents_are_written(variant):
    n_topics = 37
    corpus, z, A, bhat, _ = _kjv_state(n_topics, seed=4)
    listed = np.arange(0, corpus.n_docs, 3)
    mine = np.isin(corpus.doc, listed)
    marked = np.where(mine, z, -1)  # the kernel reads only the listed documents' topics
    got = _gpu_draw(variant, corpus.doc_ptr, corpus.word, marked, A, bhat, 0.3,
                    order=listed[::-1])
    assert (got[~mine] == -1).all()
    ref = _kjv_oracle(corpus, z, A, bhat, 0.3)
    assert np.mean(got[mine] == ref[mine]) >= 0.999


@pytest.mark.gpu
def test_launcher_rejects_bad_arguments():
    import cupy as cp

    from sklearn_gpulda.backends.cuda.dense.sample_dense import sample_dense

    doc_ptr = cp.asarray(np.array([0, 2], dtype=np.int64))
    word = cp.zeros(2, dtype=cp.int32)
    order = cp.zeros(1, dtype=cp.int32)
    z = cp.zeros(2, dtype=cp.int32)
    A, bhat = cp.ones((1, 8), cp.float32), cp.ones((1, 8), cp.float32)
    alpha = cp.full(8, 0.1, cp.float32)
    with pytest.raises(ValueError, match="variant"):
        sample_dense("fast", order, doc_ptr, word, None, A, bhat, alpha, 0, 1, z)
    with pytest.raises(ValueError, match="1 to 1024 topics"):
        sample_dense("plain", order, doc_ptr, word, None, cp.ones((1, 1025), cp.float32),
                     cp.ones((1, 1025), cp.float32), cp.full(1025, 0.1, cp.float32), 0, 1, z)
    with pytest.raises(ValueError, match="alpha must have shape"):
        sample_dense("plain", order, doc_ptr, word, None, A, bhat, alpha[:7], 0, 1, z)
    with pytest.raises(TypeError, match="dtype int32"):
        sample_dense("plain", order, doc_ptr, word.astype(cp.int64), None, A, bhat, alpha, 0, 1, z)
    with pytest.raises(TypeError, match="cupy.ndarray"):
        sample_dense("plain", order, doc_ptr, word, None, A.get(), bhat, alpha, 0, 1, z)
