"""The mini-batched sampler on the CPU (``doc/algorithm.md``, mini-batched sweeps): its draw rule
against the exact conditional, the counts after every batch, and its use through the estimator."""

import numpy as np
import pytest
import scipy.sparse as sp
from _engine_checks import (check_chains_alike_every_sweep, check_same_seed_same_model,
                            check_two_word_conditional, initialised, recount)
from _stats import merged_chisquare

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._input.layouts import batch_bounds, frequency_relabel, segmented_csr
from sklearn_gpulda._runtime.device import CPU
from sklearn_gpulda.backends import choose_backend
from sklearn_gpulda.backends.numpy.minibatch import NumpyMinibatchSampler
from sklearn_gpulda.backends.numpy.minibatch_rule import LANES, _search, batch_doc_side, draw_batch
from sklearn_gpulda.datasets import load_kjv_chapters
from sklearn_gpulda.metrics import document_completion

ALPHA, BETA, SEED = 0.1, 0.01, 2468


def _kjv(n=None):
    X = load_kjv_chapters().data
    return X if n is None else X[:n]


def _sampler(n_topics, batch_tokens, alpha=ALPHA, **kw):
    return NumpyMinibatchSampler(n_topics, alpha, BETA, SEED, CPU, batch_tokens=batch_tokens,
                                 **kw)


def _exact_probabilities(doc, word, topic, weight, a, b, totals, alpha, beta):
    """The conditional of each token in float64 (rows sum to 1), computed without the float32
    terms or the lane order of the rule under test."""
    n_words = b.shape[0]
    w = np.ones(doc.shape[0]) if weight is None else weight.astype(np.float64)
    own = np.zeros((doc.shape[0], a.shape[1]))
    own[np.arange(doc.shape[0]), topic] = w
    doc_side = a[doc].astype(np.float64) - own + alpha
    word_side = (b[word].astype(np.float64) - own + beta) / (totals + n_words * beta - own)
    p = doc_side * word_side
    return p / p.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("n_topics", [5, 40, 100])
def test_one_batch_draws_from_the_collapsed_conditional(n_topics):
    # With one batch, p(k) is the conditional of the sweep's start, every count with the
    # token's own weight taken out.
    check_two_word_conditional(lambda n: _sampler(n_topics, batch_tokens=n), n_topics, ALPHA, BETA)


def test_rule_follows_the_lane_order():
    # Terms laid out so lane order and topic order differ: the draw inverts the running sum in
    # lane order (topics 0, 32, 64, then 1, 33, ...), which the exact CDF in that order checks.
    rng = np.random.default_rng(1)
    k, n = 70, 4000
    m = -(-k // LANES)
    p = np.zeros((n, m * LANES), dtype=np.float32)
    p[:, :k] = rng.random((n, k)).astype(np.float32) * (rng.random(k) < 0.6)
    u = rng.random(n).astype(np.float32)
    got = _search(p.reshape(n, m, LANES), u, k)
    order = np.arange(m * LANES).reshape(m, LANES).T.ravel()  # topics in lane order
    cdf = np.cumsum(p[:, order].astype(np.float64), axis=1)
    x = u.astype(np.float64) * cdf[:, -1]
    want = order[np.argmax(cdf > x[:, None], axis=1)]
    # Float32 running sums may move a draw that lies within rounding of an interval end.
    assert np.mean(got == want) > 0.999
    assert np.all(got < k) and np.all(p[np.arange(n), got] > 0)


def test_draw_batch_probabilities_against_exact():
    # A real state (KJV chapters after one sweep) and many uniforms per token: each token's draws
    # follow its exact float64 conditional.
    corpus = tokens(_kjv(30))
    k = 12
    eng = initialised(_sampler(k, batch_tokens=10**9), corpus)
    eng.sweep(1)
    z = eng.topics()
    a = eng.doc_topic_counts().astype(np.float32)
    b = eng.word_topic_counts().T.astype(np.float32)
    totals = b.sum(axis=0, dtype=np.float64)
    alpha = np.full(k, ALPHA)
    picks = np.random.default_rng(0).choice(corpus.n_tokens, size=6, replace=False)
    reps = 20_000
    doc = np.repeat(corpus.doc[picks], reps)
    word = np.repeat(corpus.word[picks], reps)
    topic = np.repeat(z[picks], reps)
    u = np.random.default_rng(1).random(doc.size).astype(np.float32)
    dnt, denom = batch_doc_side(a, totals, corpus.n_words, alpha, BETA)
    got = draw_batch(doc, word, topic, None, u, a, b, denom, dnt, alpha, BETA)
    p = _exact_probabilities(corpus.doc[picks], corpus.word[picks], z[picks], None, a, b, totals,
                             alpha, BETA)
    for i in range(picks.size):
        counts = np.bincount(got[i * reps:(i + 1) * reps], minlength=k)
        assert merged_chisquare(counts, p[i] * reps).pvalue > 1e-4, i


@pytest.mark.parametrize("weighted", [False, True])
def test_counts_after_every_batch(weighted):
    X = sp.csr_matrix(_kjv(120), dtype=np.float64)
    if weighted:
        X.data *= np.random.default_rng(0).uniform(0.3, 1.0, X.data.size)
    corpus = tokens(X)
    k = 16
    eng = initialised(_sampler(k, batch_tokens=4000), corpus)
    bounds = eng.batches()
    assert bounds.size > 5
    seen, before = [], eng.topics()

    def hook(i, z, b, totals):
        t0, t1 = corpus.doc_ptr[bounds[i]], corpus.doc_ptr[bounds[i + 1]]
        # Only the batch's own tokens move; B and n hold every token's current topic.
        outside = np.r_[0:t0, t1:corpus.n_tokens]
        np.testing.assert_array_equal(z[outside], hook.z[outside])
        hook.z = z.copy()
        want = recount(corpus.word, z, corpus.weight, corpus.n_words, k)
        if weighted:
            np.testing.assert_allclose(b, want, atol=1e-4)
            np.testing.assert_allclose(totals, want.sum(axis=0), rtol=1e-6)
        else:
            np.testing.assert_array_equal(b, want)
            np.testing.assert_array_equal(totals, want.sum(axis=0))
        seen.append(i)

    hook.z = before.copy()
    eng.batch_hook = hook
    eng.sweep(1)
    assert seen == list(range(bounds.size - 1))
    z = eng.topics()
    assert not np.array_equal(z, before)
    a = recount(corpus.doc, z, corpus.weight, corpus.n_docs, k)
    np.testing.assert_allclose(eng.doc_topic_counts(), a, atol=1e-4)


def test_later_batches_see_earlier_batches_topics():
    # Two batches: the second must draw from B after the first's update, not the sweep's start.
    corpus = tokens(_kjv(40))
    k = 10
    half = int(corpus.doc_ptr[20])
    eng = initialised(_sampler(k, batch_tokens=max(half, corpus.n_tokens - half)), corpus)
    bounds = eng.batches()
    assert bounds.size == 3
    states = {}
    eng.batch_hook = lambda i, z, b, totals: states.setdefault(i, (z.copy(), b.copy()))
    z0 = eng.topics()
    a0 = eng.doc_topic_counts().astype(np.float32)
    eng.sweep(1)
    z_first, b_first = states[0]
    d1 = int(bounds[1])
    t1 = int(corpus.doc_ptr[d1])
    sl = slice(t1, corpus.n_tokens)
    u = eng._uniforms(1, 1, 0)[sl]
    alpha = np.full(k, ALPHA)
    a = a0[d1:]
    dnt, denom = batch_doc_side(a, b_first.sum(axis=0, dtype=np.float64), corpus.n_words,
                                alpha, BETA)
    want = draw_batch(corpus.doc[sl] - d1, corpus.word[sl], z0[sl], None, u, a, b_first,
                      denom, dnt, alpha, BETA)
    np.testing.assert_array_equal(eng.topics()[sl], want)


def test_same_seed_same_model_and_any_n_jobs():
    corpus = tokens(_kjv(150))
    check_same_seed_same_model(lambda: _sampler(20, 5000), corpus)
    chains = [_sampler(20, 5000, n_jobs=n) for n in (1, 3)]
    try:
        check_chains_alike_every_sweep(chains, corpus, sweeps=(1, 2))
    finally:
        for chain in chains:
            chain.release()


def test_fixed_topic_word_sweeps_as_esca():
    # With the topic-word side fixed, batches do not interact: the sweep is ESCA's E-step.
    from sklearn_gpulda.backends.numpy import NumpySampler

    corpus = tokens(_kjv(60))
    comp = np.random.default_rng(0).gamma(1.0, size=(8, corpus.n_words))
    runs = []
    for eng in (_sampler(8, 3000), NumpySampler(8, ALPHA, BETA, SEED, CPU)):
        eng.load(corpus)
        eng.fix_topic_word(comp)
        eng.init_topics()
        eng.sweep(1)
        runs.append(eng.topics())
    np.testing.assert_array_equal(*runs)


def test_batch_bounds_and_bad_sizes():
    doc_ptr = np.array([0, 5, 10, 40, 41, 50])
    np.testing.assert_array_equal(batch_bounds(doc_ptr, 10), [0, 2, 3, 5])
    with pytest.raises(ValueError, match="batch_tokens must be a positive integer"):
        _sampler(5, 0)


def test_segmented_csr_takes_the_batches_bounds():
    corpus = tokens(_kjv(50))
    new_of_old, _ = frequency_relabel(corpus.word_frequencies())
    bounds = batch_bounds(corpus.doc_ptr, 3000)
    tiles = segmented_csr(corpus, new_of_old, bounds, 64)
    np.testing.assert_array_equal(tiles.batch_bounds, bounds)
    positions = tiles.tile_ptr[::tiles.n_panels]
    # Batch b's tiles hold exactly its documents' tokens.
    np.testing.assert_array_equal(positions, corpus.doc_ptr[bounds])
    with pytest.raises(ValueError, match="rise from 0"):
        segmented_csr(corpus, new_of_old, bounds[1:], 64)


def test_estimator_fits_with_minibatch_and_auto_does_not_pick_it():
    X = _kjv()
    order = np.random.default_rng(0).permutation(X.shape[0])
    train, test = X[np.sort(order[:900])], X[np.sort(order[900:])]
    models = {}
    for algorithm in ("minibatch", "sparse"):
        models[algorithm] = GPULatentDirichletAllocation(
            n_components=10, algorithm=algorithm, max_iter=40, random_state=0,
            device="cpu").fit(train)
    assert models["minibatch"].algorithm_ == "minibatch"
    score = {a: document_completion(test, m.components_, m.doc_topic_prior_,
                                    random_state=0).per_token for a, m in models.items()}
    # As good a model as ESCA's from the same number of sweeps.
    assert score["minibatch"] > score["sparse"] - 0.03, score
    assert choose_backend("auto", 10, CPU).algorithm == "sparse"
    with pytest.raises(ValueError, match="at most 4096 topics"):
        choose_backend("minibatch", 5000, CPU)


def test_minibatch_tokens_sets_the_batches():
    est = GPULatentDirichletAllocation(n_components=4, algorithm="minibatch",
                                       minibatch_tokens=2000, device="cpu")
    assert est._plan(CPU, "minibatch", 1).sampler().batch_tokens == 2000
    default = GPULatentDirichletAllocation(n_components=4, algorithm="minibatch", device="cpu")
    assert default._plan(CPU, "minibatch", 1).sampler().batch_tokens == 1 << 17
    # The other algorithms ignore it.
    sparse = GPULatentDirichletAllocation(n_components=4, minibatch_tokens=2000, device="cpu")
    assert not hasattr(sparse._plan(CPU, "sparse", 1).sampler(), "batch_tokens")
    X = _kjv(60)
    fits = [GPULatentDirichletAllocation(n_components=4, algorithm="minibatch", max_iter=3,
                                         minibatch_tokens=m, random_state=0,
                                         device="cpu").fit(X).components_ for m in (500, None)]
    assert not np.allclose(*fits)


def test_worker_processes_draw_the_same_chain(monkeypatch):
    # A corpus large enough for worker processes (PROCESS_MIN_TOKENS): the batch's draws run
    # by token ranges in the workers, B moves in shared memory, and the chain is the one job's.
    # The machine is made to look large and idle, so that two jobs get their two workers.
    from sklearn_gpulda.backends.numpy import processes
    from sklearn_gpulda.backends.numpy.processes import ProcessTeam
    from sklearn_gpulda.backends.numpy.sampler import PROCESS_MIN_TOKENS

    monkeypatch.setattr(processes, "usable_cores", lambda: 8)
    monkeypatch.setattr(processes, "busy_elsewhere", lambda cores=None: 0.0)

    corpus = tokens(_kjv())
    assert corpus.n_tokens >= PROCESS_MIN_TOKENS
    chains = [_sampler(20, 60_000, n_jobs=n) for n in (1, 2)]
    try:
        check_chains_alike_every_sweep(chains, corpus, sweeps=(1, 2))
        assert [isinstance(c.team, ProcessTeam) for c in chains] == [False, True]
    finally:
        for chain in chains:
            chain.release()
