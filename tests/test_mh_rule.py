"""The Metropolis-Hastings draw (``backends/numpy/mh_rule.py``): its chains' stationary
distribution is the collapsed conditional the exact rules draw from, a draw is a pure function of
the seed, the iteration and the token, and a chain of such sweeps trains a model as good as the
exact rule's."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import CPU
from sklearn_gpulda.backends.numpy import NumpySampler
from sklearn_gpulda.backends.numpy.mh_rule import (FrozenState, TokenContext, conditional,
                                                   run_chains, word_ranks)
from sklearn_gpulda.datasets import load_kjv_chapters, make_lda_corpus

from _stats import merged_chisquare


def _trained(X, n_topics, alpha, rule="sparse", sweeps=3, seed=7):
    sampler = NumpySampler(n_topics, alpha, 0.05, seed, CPU, rule=rule)
    sampler.load(tokens(X))
    sampler.init_topics()
    for iteration in range(1, sweeps + 1):
        sampler.sweep(iteration)
    return sampler


def _state(sampler):
    doc_ptr = sampler._tokens[3]
    return FrozenState(sampler._z, doc_ptr, sampler._by_word, sampler._word_ptr, sampler._a,
                       sampler._tables, sampler.alpha)


def _replicas(sampler, t, n, first_counter=10**9):
    """``n`` chains of token ``t``, each with counters of its own."""
    doc, word, _, doc_ptr = sampler._tokens
    rank = word_ranks(sampler._by_word, sampler._word_ptr, word)
    d, v = int(doc[t]), int(word[t])
    ones = np.ones(n, dtype=np.int64)
    return TokenContext(first_counter + np.arange(n), d * ones, v * ones,
                        int(sampler._z[t]) * ones, (t - doc_ptr[d]) * ones, rank[t] * ones)


@pytest.fixture(scope="module")
def chapters():
    return load_kjv_chapters().data[:40]


def _short_documents(seed=5):
    """Documents of 1 to 4 tokens over 30 words, one word used once: the alpha and uniform
    branches of the proposals carry much of their mass here."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(300):
        length = 1 + d % 4
        rows.append(np.bincount(rng.integers(1, 30, size=length), minlength=31))
    X = np.array(rows)
    X[0, :] = 0
    X[0, 0] = 1  # word 0 occurs once, in a one-token document
    return sp.csr_matrix(X)


def _check_settles(sampler, t, n_topics, seed=11):
    state = _state(sampler)
    ctx = _replicas(sampler, t, 20_000)
    pi = conditional(state, ctx)[0]
    # From the token's own topic and, with other random numbers, from its least likely one.
    other = _replicas(sampler, t, 20_000, first_counter=2 * 10**9)
    for chains, start in ((ctx, ctx.topic), (other, np.full(other.token.size, np.argmin(pi)))):
        final = run_chains(state, chains, start, seed=seed, iteration=5, n_cycles=20)
        observed = np.bincount(final, minlength=n_topics)
        assert merged_chisquare(observed, pi).pvalue > 1e-4, (t, observed, pi)


@pytest.mark.parametrize("alpha", [0.1, "asymmetric"])
def test_chains_settle_on_the_collapsed_conditional(chapters, alpha):
    # Fixed counts: chains of one token land on the conditional pi that the exact rules draw
    # from, for a frequent and a rare word of a long document and for the first token.
    n_topics = 12
    if alpha == "asymmetric":
        alpha = np.linspace(0.02, 0.6, n_topics)
    sampler = _trained(chapters, n_topics, alpha)
    doc, word, _, _ = sampler._tokens
    counts = np.bincount(word)
    for t in (int(np.argmax(counts[word])), int(np.argmin(counts[word])), 0):
        _check_settles(sampler, t, n_topics)


@pytest.mark.parametrize("alpha", [0.3, "asymmetric"])
def test_chains_of_short_documents_settle_too(alpha):
    # One- and two-token documents and a word used once: the proposals come mostly from alpha
    # or the uniform branch, whose probabilities the acceptance must get right.
    n_topics = 8
    if alpha == "asymmetric":
        alpha = np.array([0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 0.05, 0.3])
    X = _short_documents()
    sampler = _trained(X, n_topics, alpha)
    doc, _, _, doc_ptr = sampler._tokens
    lengths = np.diff(doc_ptr)
    two = int(doc_ptr[np.flatnonzero(lengths == 2)[0]])
    for t in (0, two, int(doc_ptr[np.flatnonzero(lengths == 4)[0]])):
        _check_settles(sampler, t, n_topics)


def test_the_conditional_is_the_exact_rules_one(chapters):
    # pi as the MH module computes it is the two-branch rule's target (doc/algorithm.md).
    sampler = _trained(chapters, 6, 0.3)
    state = _state(sampler)
    doc, word, _, _ = sampler._tokens
    t = 17
    ctx = _replicas(sampler, t, 1)
    d, v, z = int(doc[t]), int(word[t]), int(sampler._z[t])
    b, denom, beta = sampler._tables.word_side
    expected = []
    for k in range(6):
        a = sampler._a[d, k] - (k == z) + 0.3
        bhat = ((b[v, k] - 1.0) + beta) / (denom[k] - 1.0) if k == z else sampler._tables.bhat[v, k]
        expected.append(a * np.float32(bhat))
    np.testing.assert_allclose(conditional(state, ctx)[0], np.array(expected) / sum(expected),
                               rtol=1e-6)


def test_a_short_chain_is_not_yet_the_conditional(chapters):
    # The tests above can fail: one cycle from the least likely topic is still far from pi.
    sampler = _trained(chapters, 12, 0.1)
    state = _state(sampler)
    ctx = _replicas(sampler, 0, 20_000)
    pi = conditional(state, ctx)[0]
    start = np.full(ctx.token.size, int(np.argmin(pi)))
    final = run_chains(state, ctx, start, seed=11, iteration=5, n_cycles=1)
    observed = np.bincount(final, minlength=12)
    assert merged_chisquare(observed, pi).pvalue < 1e-6


def test_draws_are_a_function_of_seed_iteration_and_token(chapters):
    a = _trained(chapters, 8, 0.1, rule="mh")
    b = _trained(chapters, 8, 0.1, rule="mh")
    np.testing.assert_array_equal(a._z, b._z)
    c = _trained(chapters, 8, 0.1, rule="mh", seed=8)
    assert not np.array_equal(a._z, c._z)
    # The MH chain is another chain than the exact rule's, from the same start.
    d = _trained(chapters, 8, 0.1, rule="sparse")
    assert not np.array_equal(a._z, d._z)


def test_mh_sweeps_train_as_well_as_exact_ones():
    corpus = make_lda_corpus(n_docs=300, n_words=400, n_topics=6, doc_length=60, alpha=0.1,
                             random_state=2)
    scores = {}
    for rule in ("sparse", "mh"):
        sampler = _trained(corpus.data, 6, 0.1, rule=rule, sweeps=80)
        scores[rule] = sampler.log_likelihood() / corpus.data.sum()
    # Two cycles a sweep draw only close to the conditional, but after 80 sweeps on 18 k
    # tokens the chains are level (0.0023 apart when written; 0.047 after 20 sweeps).
    assert scores["mh"] == pytest.approx(scores["sparse"], abs=0.01), scores


def test_mh_refuses_what_it_cannot_draw(chapters):
    with pytest.raises(ValueError, match="data-parallel"):
        NumpySampler(4, 0.1, 0.05, 0, CPU, rule="mh", data_parallel=True)
    weighted = chapters.astype(np.float64) * 0.5
    sampler = NumpySampler(4, 0.1, 0.05, 0, CPU, rule="mh")
    with pytest.raises(ValueError, match="integer counts"):
        sampler.load(tokens(weighted))
