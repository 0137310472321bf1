"""The NumPy backend against exact distributions and its own invariants."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda.backends import random as _random
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import CPU
from sklearn_gpulda.backends.numpy import NumpySampler, fold_in
from sklearn_gpulda.backends.numpy import sparse_rule
from sklearn_gpulda.backends.numpy.sparse_rule import draw_topics
from sklearn_gpulda.backends.numpy.tables import WordTables
from sklearn_gpulda.datasets import load_kjv_chapters, make_lda_corpus

from _engine_checks import (
    check_counts_every_sweep, check_held_batches_are_the_batches_loaded_alone,
    check_online_step_over_the_batch_words, load_parts, step_parts)
from _stats import merged_chisquare


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data


def _sampler(n_topics, alpha, beta, seed, **kw):
    return NumpySampler(n_topics, alpha, beta, seed, CPU, **kw)


def _loaded(corpus, n_topics, alpha=0.1, beta=0.01, seed=3, **kw):
    sampler = _sampler(n_topics, alpha, beta, seed, **kw)
    sampler.load(corpus)
    sampler.init_topics()
    return sampler


def fixed_row_case(n_topics, seed, alpha):
    """One A row (about half zero, own topic included), three Bhat rows, an own topic and weight,
    and the exact collapsed conditional p(k) of a token of word 1."""
    rng = np.random.default_rng(seed)
    row = rng.poisson(3.0, n_topics).astype(np.float32)
    row[rng.random(n_topics) < 0.5] = 0
    own = int(rng.integers(n_topics))
    row[own] = max(row[own], 1)
    bhat = rng.dirichlet(np.ones(n_topics), size=3).astype(np.float32)
    alpha = np.broadcast_to(np.asarray(alpha, np.float64), (n_topics,))
    p = (row.astype(np.float64) + alpha) * bhat[1]
    p[own] -= bhat[1, own]
    return row, bhat, own, alpha, p / p.sum()


@pytest.mark.parametrize(
    "n_topics, alpha",
    [(k, a) for k in (2, 7, 100, 1000) for a in (0.01, 5.0, "asymmetric")]
    # The largest K of the CUDA sampler, once per branch: the NumPy rule costs O(K) per draw.
    + [(32768, 5.0), (32768, "asymmetric")],
)
def test_draw_matches_the_collapsed_conditional(n_topics, alpha):
    # One fixed (A[d], Bhat[v], own topic) drawn many times: small alpha mostly takes the document
    # branch, large alpha mostly the word's tree, so both branches are checked against the exact
    # p(k) ∝ (A[d,k] - [k = z] + alpha_k) Bhat[v,k]; an asymmetric alpha weights the tree.
    if alpha == "asymmetric":
        alpha = np.random.default_rng(1).gamma(0.3, 1.0, n_topics) + 1e-3
    row, bhat, own, alpha, p = fixed_row_case(n_topics, n_topics, alpha)
    n = 200_000 if n_topics <= 1000 else 40_000
    token = np.arange(n, dtype=np.int64)
    u = _random.token_uniform(12345, 1, _random.STREAM_SAMPLE, token)
    k = draw_topics(np.zeros(n, np.int32), np.full(n, 1, np.int32), np.full(n, own, np.int32),
                    None, u, row[None, :], WordTables(bhat, alpha))
    observed = np.bincount(k, minlength=n_topics)
    assert observed[p == 0].sum() == 0
    assert merged_chisquare(observed[np.argsort(p)], np.sort(p) * n).pvalue > 1e-4


def test_own_count_is_taken_out_before_the_draw():
    # A token alone in its document: with its own count kept it would stay in its topic almost
    # surely (A = 1 against alpha = 0.001); taken out, the draw follows the prior branch alone.
    n_topics = 20
    bhat = np.random.default_rng(3).dirichlet(np.ones(n_topics), size=1).astype(np.float32)
    row = np.zeros(n_topics, np.float32)
    row[5] = 1
    n = 100_000
    u = _random.token_uniform(9, 1, _random.STREAM_SAMPLE, np.arange(n))
    k = draw_topics(np.zeros(n, np.int32), np.zeros(n, np.int32), np.full(n, 5, np.int32), None,
                    u, row[None], WordTables(bhat, 0.001))
    expected = bhat[0] / bhat[0].sum()
    assert abs(np.mean(k == 5) - expected[5]) < 5 * np.sqrt(expected[5] / n) + 1e-3
    assert merged_chisquare(np.bincount(k, minlength=n_topics), expected * n).pvalue > 1e-4


@pytest.mark.parametrize("n_topics, alpha", [(5, 0.05), (60, 0.5), (400, "asymmetric")])
def test_word_side_of_the_own_count_is_taken_out(n_topics, alpha):
    # A rare word: its tokens' own topic is supported by its own count in B. Taken out, the word
    # side of that topic is (B[v,z] - 1 + beta) / (n_z - 1 + V beta); the draw must follow it.
    rng = np.random.default_rng(n_topics)
    if alpha == "asymmetric":
        alpha = rng.gamma(0.5, 0.2, n_topics) + 1e-3
    alpha = np.broadcast_to(np.asarray(alpha, np.float64), (n_topics,))
    n_words, beta = 50, 0.01
    counts = rng.poisson(0.3, size=(n_words, n_topics)).astype(np.float64)
    own = int(rng.integers(n_topics))
    counts[7, :] = 0
    counts[7, own] = 2  # word 7: two tokens, both in the own topic
    tables = WordTables.from_counts(counts, counts.sum(axis=0), beta, alpha)
    row = rng.poisson(2.0, n_topics).astype(np.float32)
    row[own] = max(row[own], 1)
    n = 200_000
    u = _random.token_uniform(31, 1, _random.STREAM_SAMPLE, np.arange(n))
    k = draw_topics(np.zeros(n, np.int32), np.full(n, 7, np.int32), np.full(n, own, np.int32),
                    None, u, row[None], tables)
    denom = counts.sum(axis=0) + n_words * beta
    word = (counts[7] + beta) / denom
    word[own] = (counts[7, own] - 1 + beta) / (denom[own] - 1)
    p = (row.astype(np.float64) + alpha) * word
    p[own] = (row[own] - 1 + alpha[own]) * word[own]
    p /= p.sum()
    assert merged_chisquare(np.bincount(k, minlength=n_topics)[np.argsort(p)],
                            np.sort(p) * n).pvalue > 1e-4


def test_weighted_own_count_is_taken_out():
    # A weighted token removes its weight, not 1, from its topic's count.
    n_topics = 6
    bhat = np.full((1, n_topics), 1.0 / n_topics, np.float32)
    row = np.array([0.75, 2.0, 0, 0, 0, 0], np.float32)
    n = 100_000
    u = _random.token_uniform(4, 1, _random.STREAM_SAMPLE, np.arange(n))
    k = draw_topics(np.zeros(n, np.int32), np.zeros(n, np.int32), np.zeros(n, np.int32),
                    np.full(n, 0.75, np.float32), u, row[None], WordTables(bhat, 0.01))
    p = np.array([0.0, 2.0, 0, 0, 0, 0]) + 0.01
    p /= p.sum()
    assert merged_chisquare(np.bincount(k, minlength=n_topics), p * n).pvalue > 1e-4


def test_draw_branch_frequency_matches_sparse_mass():
    rng = np.random.default_rng(0)
    n_topics = 50
    row = np.zeros(n_topics, np.float32)
    row[[3, 17, 40]] = [5, 2, 9]
    bhat = rng.dirichlet(np.ones(n_topics), size=1).astype(np.float32)
    alpha = 0.3
    n = 100_000
    u = _random.token_uniform(7, 1, _random.STREAM_SAMPLE, np.arange(n))
    k = draw_topics(np.zeros(n, np.int32), np.zeros(n, np.int32), np.full(n, 17, np.int32), None,
                    u, row[None], WordTables(bhat, alpha))
    s = float((row * bhat[0]).sum() - bhat[0, 17])
    q = alpha * float(bhat[0].sum())
    # Tokens landing outside A's support can only come from the tree branch.
    outside = ~np.isin(k, [3, 17, 40])
    expected_outside = q / (s + q) * (1 - bhat[0, [3, 17, 40]].sum())
    assert abs(outside.mean() - expected_outside) < 5 * np.sqrt(expected_outside / n)


def test_counts_are_consistent_after_every_iteration(kjv):
    corpus = tokens(kjv[:300])
    engine = _loaded(corpus, 15)
    check_counts_every_sweep(engine, corpus, 15)
    a = engine.doc_topic_counts()
    np.testing.assert_array_equal(a.sum(axis=1), np.asarray(kjv[:300].sum(axis=1)).ravel())


def test_same_seed_same_state_other_seed_other_state(kjv):
    corpus = tokens(kjv[:200])
    runs = []
    for seed in (1, 1, 2):
        engine = _loaded(corpus, 10, seed=seed)
        for it in range(1, 4):
            engine.sweep(it)
        runs.append(engine.topics())
    np.testing.assert_array_equal(runs[0], runs[1])
    assert (runs[0] != runs[2]).mean() > 0.5


def test_training_log_likelihood_improves(kjv):
    corpus = tokens(kjv)
    engine = _loaded(corpus, 20, alpha=0.05, beta=0.05, seed=0)
    start = engine.log_likelihood()
    for it in range(1, 21):
        engine.sweep(it)
    assert engine.log_likelihood() > start + 0.2 * corpus.n_tokens


def test_weighted_tokens_keep_count_totals():
    rng = np.random.default_rng(0)
    X = sp.random(40, 30, density=0.3, random_state=0, format="csr") * 3.7
    corpus = tokens(X)
    assert corpus.weight is not None
    engine = _loaded(corpus, 4, alpha=0.5, beta=0.1, seed=int(rng.integers(1 << 31)))
    engine.sweep(1)
    np.testing.assert_allclose(engine.doc_topic_counts().sum(axis=1),
                               np.asarray(X.sum(axis=1)).ravel(), rtol=1e-5)
    np.testing.assert_allclose(engine.word_topic_counts().sum(), X.sum(), rtol=1e-5)


def _fold_in_one_document(counts, words, phi, alpha, max_iter, tol):
    """Straightforward per-document fold-in, written independently of the engine's vectorisation."""
    n_topics = phi.shape[0]
    theta = np.full(n_topics, 1.0 / n_topics)
    for _ in range(max_iter):
        gamma = np.full(n_topics, alpha)
        for c, v in zip(counts, words):
            r = theta * phi[:, v]
            gamma += c * r / r.sum()
        new = gamma / gamma.sum()
        change = np.abs(new - theta).mean()
        theta = new
        if change < tol:
            break
    return theta


def test_fold_in_matches_per_document_reference():
    data = make_lda_corpus(n_docs=30, n_words=80, n_topics=6, doc_length=40, random_state=1)
    X = sp.csr_matrix(data.data, dtype=np.float64)
    comp = data.topic_word * 100 + 0.1
    phi = comp / comp.sum(axis=1, keepdims=True)
    theta = fold_in(X, comp, 0.2, 50, 1e-4)
    for d in range(X.shape[0]):
        row = X[d]
        expected = _fold_in_one_document(row.data, row.indices, phi, 0.2, 50, 1e-4)
        np.testing.assert_allclose(theta[d], expected, rtol=1e-10, atol=1e-12)


def test_fold_in_is_per_document(kjv):
    comp = np.random.default_rng(0).gamma(1.0, 1.0, size=(8, kjv.shape[1]))
    X = kjv[:60].astype(np.float64)
    full = fold_in(X, comp, 0.1, 100, 1e-3)
    order = np.random.default_rng(1).permutation(60)
    shuffled = fold_in(X[order], comp, 0.1, 100, 1e-3)
    np.testing.assert_array_equal(shuffled, full[order])
    np.testing.assert_array_equal(fold_in(X[7:8], comp, 0.1, 100, 1e-3)[0], full[7])


def test_fold_in_empty_document_is_uniform(kjv):
    X = sp.vstack([kjv[:2], sp.csr_matrix((1, kjv.shape[1]))]).tocsr().astype(np.float64)
    theta, loglik = fold_in(X, np.ones((5, kjv.shape[1])), 0.1, 10, 1e-3, return_loglik=True)
    np.testing.assert_array_equal(theta[2], np.full(5, 0.2))
    assert loglik[2] == 0
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)


def test_fixed_topic_word_sweeps_keep_the_counts_consistent(kjv):
    # With the topic-word side fixed (mini-batch learning) A follows the topics after every sweep
    # and the word-topic counts are still those of the current topics.
    corpus = tokens(kjv[:50])
    comp = np.random.default_rng(0).gamma(2.0, 1.0, (6, kjv.shape[1]))
    engine = _sampler(6, 0.1, 0.01, 5)
    engine.load(corpus)
    engine.fix_topic_word(comp)
    engine.init_topics(1, _random.STREAM_BATCH_INIT)
    check_counts_every_sweep(engine, corpus, 6, n_sweeps=3)
    engine.accumulate_word_topic()
    mean = engine.mean_word_topic()
    np.testing.assert_allclose(mean.sum(), corpus.n_tokens)
    np.testing.assert_allclose(mean.sum(axis=0), corpus.word_frequencies())


def test_set_priors_changes_the_next_draws_only(kjv):
    corpus = tokens(kjv[:80])
    a, b = _loaded(corpus, 7, seed=2), _loaded(corpus, 7, seed=2)
    b.set_priors(alpha=np.linspace(0.05, 2.0, 7), beta=0.3)
    np.testing.assert_array_equal(a.topics(), b.topics())
    a.sweep(1)
    b.sweep(1)
    assert (a.topics() != b.topics()).mean() > 0.01
    assert b.beta == 0.3 and b.alpha[-1] == 2.0


def test_histograms_count_the_state(kjv):
    corpus = tokens(kjv[:60])
    engine = _loaded(corpus, 9)
    engine.sweep(1)
    a, b = engine.doc_topic_counts(), engine.word_topic_counts()
    topic, count, n_docs = engine.doc_topic_histogram()
    for k, c, n in zip(topic, count, n_docs):
        assert n == np.count_nonzero(a[:, k] == c)
    assert n_docs.sum() == np.count_nonzero(a)
    count, n_cells, totals = engine.word_topic_histogram()
    assert n_cells.sum() == np.count_nonzero(b)
    assert np.dot(count, n_cells) == b.sum()
    np.testing.assert_array_equal(totals, b.sum(axis=1))


def test_memory_check_refuses_before_allocating(kjv):
    corpus = tokens(kjv[:10])
    engine = _sampler(10**8, 0.1, 0.01, 0)
    with pytest.raises(MemoryError, match="n_components=100000000"):
        engine.load(corpus)


def test_set_topics_rejects_wrong_shape_and_range_and_keeps_state(kjv):
    corpus = tokens(kjv[:40])
    engine = _loaded(corpus, 6, seed=0)
    before = engine.topics().copy()
    with pytest.raises(ValueError, match=r"topics must have shape"):
        engine.set_topics(np.zeros(corpus.n_tokens - 1, dtype=np.int32))
    with pytest.raises(ValueError, match=r"topics must lie in \[0, 6\)"):
        engine.set_topics(np.full(corpus.n_tokens, 6, dtype=np.int32))
    with pytest.raises(ValueError, match=r"topics must lie in"):
        engine.set_topics(np.full(corpus.n_tokens, -1, dtype=np.int32))
    np.testing.assert_array_equal(engine.topics(), before)
    z = np.arange(corpus.n_tokens, dtype=np.int32) % 6
    engine.set_topics(z)
    np.testing.assert_array_equal(engine.topics(), z)


@pytest.mark.parametrize("n_topics", [1, 2, 20, 100])
def test_running_sums_by_topic_are_cumsum_bit_for_bit(n_topics):
    rng = np.random.default_rng(n_topics)
    terms = (rng.random((3000, n_topics)) ** 3).astype(np.float32)
    terms[rng.random(terms.shape) < 0.5] = 0.0
    by_topic = sparse_rule.running_sums_by_topic(terms)
    assert by_topic.shape == (n_topics, 3000)
    np.testing.assert_array_equal(by_topic.T, np.cumsum(terms, axis=1, dtype=np.float32))


@pytest.mark.parametrize("weighted", [False, True])
def test_small_k_chain_is_the_same_with_row_cumsums(kjv, monkeypatch, weighted):
    # The topic-by-topic running sums (K <= LOOP_MAX_TOPICS) against np.cumsum along rows.
    X = kjv[:150].astype(np.float64) * (0.6 if weighted else 1.0)
    corpus = tokens(X.tocsr())
    states = []
    for loop_max in (sparse_rule.LOOP_MAX_TOPICS, 0):
        monkeypatch.setattr(sparse_rule, "LOOP_MAX_TOPICS", loop_max)
        chain = _loaded(corpus, 20)
        for it in range(1, 4):
            chain.sweep(it)
        states.append((chain.topics(), chain.log_likelihood()))
        chain.release()
    np.testing.assert_array_equal(states[0][0], states[1][0])
    assert states[0][1] == states[1][1]


def test_online_step_over_the_batch_words_is_the_whole_vocabulary_step(kjv):
    # A mini-batch's chain runs over the words the batch holds; the model it gives is the one
    # from a chain over the whole vocabulary, bit for bit.
    from sklearn_gpulda._fitting.plan import Online, Plan
    from sklearn_gpulda.backends.priors import Prior

    plan = Plan(backend=None, device=None, n_topics=8, seed=5, alpha=Prior(0.1, False),
                beta=Prior(0.01, False), online=Online(n_batch_sweeps=4))
    batches = [slice(0, 30), slice(30, 45), slice(200, 230), slice(30, 45)]
    check_online_step_over_the_batch_words(plan, _sampler(8, 0.1, 0.01, 5), kjv, batches,
                                           float(kjv.shape[0]))


def test_held_batches_are_the_batches_loaded_alone(kjv):
    # Online learning's sampler holds a pass's mini-batches (here each is cut and laid out when
    # selected, the base class's way); two passes give the model of loading each batch alone.
    from sklearn_gpulda._fitting.plan import Online, Plan
    from sklearn_gpulda.backends.priors import Prior

    plan = Plan(backend=None, device=None, n_topics=8, seed=5, alpha=Prior(0.1, False),
                beta=Prior(0.01, False), online=Online(n_batch_sweeps=4))
    ranges = [(0, 30), (30, 45), (45, 100), (100, 101)]
    check_held_batches_are_the_batches_loaded_alone(
        plan, _sampler(8, 0.1, 0.01, 5), _sampler(8, 0.1, 0.01, 5), kjv, ranges,
        float(kjv.shape[0]))


def test_select_batch_needs_held_batches():
    with pytest.raises(RuntimeError, match="load_online_batches"):
        _sampler(4, 0.1, 0.01, 5).select_online_batch(0)


def test_set_priors_rebuilds_only_on_a_new_value(kjv, monkeypatch):
    # Online learning sets its held prior before every mini-batch: an equal value (a number or
    # the same K numbers) leaves the tables alone; a new value, or a new beta, rebuilds them,
    # and a bad one is still refused.
    engine = _loaded(tokens(kjv[:40]), 5, alpha=0.2, beta=0.01)
    rebuilt = []
    real = engine._priors_changed
    monkeypatch.setattr(engine, "_priors_changed", lambda: (rebuilt.append(1), real()))
    engine.set_priors(alpha=0.2)
    engine.set_priors(alpha=np.full(5, 0.2), beta=0.01)
    assert rebuilt == []
    engine.set_priors(alpha=0.3)
    engine.set_priors(beta=0.02)
    engine.set_priors(alpha=np.linspace(0.1, 0.5, 5))
    assert len(rebuilt) == 3
    np.testing.assert_array_equal(engine.alpha, np.linspace(0.1, 0.5, 5))
    assert engine.beta == 0.02
    with pytest.raises(ValueError):
        engine.set_priors(alpha=np.full(4, 0.2))
    with pytest.raises(ValueError):
        engine.set_priors(alpha=-1.0)


def test_data_parallel_parts_are_the_single_chain(kjv):
    # Two parts keyed by their tokens' places in the whole corpus, their B summed by the caller
    # after every M-step: the topics, A and the model of the single chain, bit for bit.
    X = kjv[:300]
    whole = _loaded(tokens(X), 12, alpha=0.1, beta=0.01, seed=3)
    parts = load_parts(
        lambda: _sampler(12, 0.1, 0.01, 3, worker_processes=False, data_parallel=True), X, [130])
    for it in range(4):
        step_parts(parts, it)
        if it:
            whole.sweep(it)
        np.testing.assert_array_equal(np.concatenate([p.topics() for p in parts]),
                                      whole.topics())
        np.testing.assert_array_equal(np.vstack([p.doc_topic_counts() for p in parts]),
                                      whole.doc_topic_counts())
        np.testing.assert_array_equal(parts[1].word_topic_counts(), whole.word_topic_counts())
    assert sum(p.log_likelihood() for p in parts) == pytest.approx(whole.log_likelihood(),
                                                                   rel=1e-12)


def test_data_parallel_calls_need_a_data_parallel_chain(kjv):
    engine = _loaded(tokens(kjv[:20]), 4)
    with pytest.raises(RuntimeError, match="data_parallel=True"):
        engine.word_topic_cells()
    with pytest.raises(RuntimeError, match="data_parallel=True"):
        engine.set_word_topic(np.zeros(0, np.int64), np.zeros(0, np.float32))
    part = _sampler(4, 0.1, 0.01, 5, data_parallel=True)
    part.load(tokens(kjv[:20]))
    with pytest.raises(RuntimeError, match="after init_topics"):
        part.word_topic_cells()
    with pytest.raises(NotImplementedError, match="summed counts"):
        part.fix_topic_word(np.ones((4, kjv.shape[1])))
