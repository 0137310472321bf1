"""A matrix topic-word prior (seeded topics) on the sparse CUDA engine, one GPU and several, and
on the dense CUDA engine, against the NumPy oracle (``doc/algorithm.md``, "A matrix topic-word
prior")."""

import numpy as np
import pytest
from scipy import sparse

from sklearn_gpulda import GPULatentDirichletAllocation, seeded_topic_prior
from sklearn_gpulda._fitting import loop as _fit
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import CPU, Device
from sklearn_gpulda.backends.numpy import NumpySampler
from sklearn_gpulda.backends.prior_learning import update_beta
from sklearn_gpulda.backends.priors import CellPrior

from _engine_checks import initialised
from test_seeded_topics import K, _corpus, _seeds, _top_words, check_seeds_on_top

pytestmark = pytest.mark.gpu

ALPHA, BETA, SEED = 0.1, 0.01, 1234
GPU = Device("cuda", (0,))


def _cells(n_topics, n_words, extra, seed=0, n_cells=60):
    """Seeded cells at random (topic, word) pairs, every one ``extra`` (a number) or drawn
    from [0.05, 3) (``extra=None``: values that are not whole numbers)."""
    rng = np.random.default_rng(seed)
    flat = rng.choice(n_topics * n_words, size=n_cells, replace=False)
    value = np.full(n_cells, extra) if extra is not None else rng.uniform(0.05, 3.0, n_cells)
    return CellPrior(sparse.coo_matrix((value, (flat // n_words, flat % n_words)),
                                       shape=(n_topics, n_words)))


def _sparse_engine(n_topics, cells, **kw):
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    eng = CudaSparseSampler(n_topics, ALPHA, BETA, SEED, GPU, **kw)
    eng.set_beta_cells(cells)
    return eng


def _dense_engine(n_topics, cells, **kw):
    from sklearn_gpulda.backends.cuda.dense.sampler import CudaDenseSampler

    eng = CudaDenseSampler(n_topics, ALPHA, BETA, SEED, GPU, **kw)
    eng.set_beta_cells(cells)
    return eng


def _reference(n_topics, cells, rule="sparse"):
    ref = NumpySampler(n_topics, ALPHA, BETA, SEED, CPU, rule=rule)
    ref.set_beta_cells(cells)
    return ref


def _streamed(monkeypatch, n_topics, cells, max_chunk_tokens):
    from sklearn_gpulda.backends.cuda.sparse import memory_plan

    monkeypatch.setattr(memory_plan, "MIN_STREAM_CHUNK", 1)
    monkeypatch.setattr(memory_plan, "resident_bytes", lambda *args: (1 << 60, 1 << 60))
    return _sparse_engine(n_topics, cells, max_chunk_tokens=max_chunk_tokens)


def _engine(rule, n_topics, cells):
    return (_sparse_engine if rule == "sparse" else _dense_engine)(n_topics, cells)


def _from_oracle_state(rule, n_topics, cells, corpus, sweeps=2):
    """The NumPy oracle of ``rule`` after ``sweeps`` sweeps, and the GPU engine of ``rule``
    loaded with the oracle's topics."""
    ref = initialised(_reference(n_topics, cells, rule=rule), corpus)
    for it in range(1, sweeps + 1):
        ref.sweep(it)
    eng = _engine(rule, n_topics, cells)
    eng.load(corpus)
    eng.set_topics(ref.topics())
    return ref, eng


def _next_sweep_agrees(eng, ref, corpus, n_topics, label):
    """One more sweep on both: at least 99.9% of the topics agree, and B holds the recount of
    the engine's new topics (the pseudo-counts never stay in it)."""
    ref.sweep(3)
    eng.sweep(3)
    agree = np.mean(eng.topics() == ref.topics())
    print(f"{label}: GPU-oracle {agree:.5f}")
    assert agree >= 0.999, agree
    np.testing.assert_array_equal(
        eng.word_topic_counts(),
        np.bincount(corpus.word.astype(np.int64) * n_topics + eng.topics(),
                    minlength=corpus.n_words * n_topics).reshape(corpus.n_words, n_topics).T)


@pytest.mark.parametrize("n_topics, extra", [(16, 5.0), (16, None), (300, 50.0), (300, None)])
def test_sweep_with_a_matrix_prior_agrees_with_numpy_engine(kjv, n_topics, extra):
    # From the oracle's state: the same counts (B without the pseudo-counts), seeded counts,
    # components and likelihood; then one sweep draws the oracle's topics except where a draw
    # lies within float32 rounding of an interval end (doc/algorithm.md).
    corpus = tokens(kjv)
    cells = _cells(n_topics, corpus.n_words, extra)
    ref, eng = _from_oracle_state("sparse", n_topics, cells, corpus)
    np.testing.assert_array_equal(eng.word_topic_counts(), ref.word_topic_counts())
    np.testing.assert_array_equal(eng.seeded_counts(), ref.seeded_counts())
    np.testing.assert_array_equal(eng.topic_word_components(), ref.topic_word_components())
    assert eng.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-6)
    _next_sweep_agrees(eng, ref, corpus, n_topics, f"K={n_topics}, extra={extra}")
    eng.release()


@pytest.mark.parametrize("rule", ["sparse", "dense"])
def test_the_seeds_change_the_draws(kjv, rule):
    # The agreement tests can fail: with strong seeds the GPU chain moves away from the scalar
    # one.
    corpus = tokens(kjv)
    k = 16
    seeded = initialised(_engine(rule, k, _cells(k, corpus.n_words, 500.0, n_cells=400)), corpus)
    plain = initialised(_engine(rule, k, None), corpus)
    for eng in (seeded, plain):
        eng.sweep(1)
    assert np.mean(seeded.topics() == plain.topics()) < 0.99
    seeded.release()
    plain.release()


def test_streamed_chain_with_a_matrix_prior_is_the_resident_chain(kjv, monkeypatch):
    corpus = tokens(kjv[:400])
    k = 24
    cells = _cells(k, corpus.n_words, None)
    ref = initialised(_sparse_engine(k, cells), corpus)
    eng = initialised(_streamed(monkeypatch, k, cells, 4000), corpus)
    assert eng.streamed and not ref.streamed
    for it in range(1, 4):
        for sampler in (eng, ref):
            sampler.sweep(it)
        np.testing.assert_array_equal(eng.topics(), ref.topics())
        np.testing.assert_array_equal(eng.word_topic_counts(), ref.word_topic_counts())
        np.testing.assert_array_equal(eng.seeded_counts(), ref.seeded_counts())
        assert eng.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-12)
    eng.release()
    ref.release()


@pytest.mark.parametrize("rule", ["sparse", "dense"])
def test_learned_base_reads_the_seeded_counts(kjv, rule):
    # The fixed point of the GPU's histogram and seeded counts is the NumPy engine's on the
    # same state, and a new beta reaches the denominators with the cells' sums.
    corpus = tokens(kjv)
    k = 20
    cells = _cells(k, corpus.n_words, None)
    ref, eng = _from_oracle_state(rule, k, cells, corpus, sweeps=1)
    found = [update_beta(s.beta, *s.word_topic_histogram(), corpus.n_words, cells,
                         s.seeded_counts()) for s in (eng, ref)]
    assert found[0] == found[1]
    for s in (eng, ref):
        s.set_priors(beta=found[0])
    if rule == "dense":  # the dense engine's Bhat is the oracle's table, bit for bit
        np.testing.assert_array_equal(eng._st.bhat.get(), ref._tables.bhat)
    np.testing.assert_array_equal(eng.topic_word_components(), ref.topic_word_components())
    assert eng.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-6)
    eng.release()


@pytest.mark.parametrize("algorithm", ["sparse", "dense"])
def test_seeded_topics_keep_their_seed_words_on_the_gpu(algorithm):
    # The CPU test's corpus and seeds (tests/test_seeded_topics.py), fitted on the GPU.
    prior = seeded_topic_prior(_corpus().feature_names, _seeds(), K, strength=50.0)
    params = dict(n_components=K, max_iter=300, random_state=0, device="cuda",
                  algorithm=algorithm)
    seeded = GPULatentDirichletAllocation(topic_word_prior=prior, **params).fit(_corpus().data)
    plain = GPULatentDirichletAllocation(topic_word_prior="auto", **params).fit(_corpus().data)
    check_seeds_on_top(seeded, plain)


@pytest.mark.parametrize("algorithm", ["sparse", "dense"])
def test_a_matrix_of_beta_is_the_scalar_prior_bit_for_bit_on_the_gpu(algorithm):
    X = _corpus().data
    v = X.shape[1]
    params = dict(n_components=K, max_iter=30, random_state=0, device="cuda",
                  prior_update_every=5, n_averaged_sweeps=5, algorithm=algorithm)

    def fit(prior):
        return GPULatentDirichletAllocation(topic_word_prior=prior, **params).fit(X)

    scalar = fit(0.05)
    zeros = sparse.coo_matrix((np.zeros(4), ([0, 1, 4, 4], [0, 7, 3, v - 1])), shape=(K, v))
    for model in (fit(np.full((K, v), 0.05)), fit((0.05, zeros))):
        np.testing.assert_array_equal(model.components_, scalar.components_)
        assert model.bound_ == scalar.bound_
    learned, learned_cells = fit("auto"), fit(("auto", zeros))
    np.testing.assert_array_equal(learned_cells.components_, learned.components_)
    assert learned_cells.topic_word_prior_ == learned.topic_word_prior_


# -- the dense engine ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_topics, extra", [(16, 5.0), (16, None), (100, 50.0), (100, None)])
def test_dense_sweep_with_a_matrix_prior_agrees_with_numpy_engine(kjv, n_topics, extra):
    # From the dense oracle's state: the same counts, and Bhat and its denominators bit for bit
    # (the dense engine forms ((B + beta) + extra) / ((n + V beta) + E) as the oracle does);
    # one sweep then draws the oracle's topics except where the own-topic term's one moved
    # rounding (float32(B + extra) while the kernels draw) or float32 rounding moves a draw.
    corpus = tokens(kjv)
    cells = _cells(n_topics, corpus.n_words, extra)
    ref, eng = _from_oracle_state("dense", n_topics, cells, corpus)
    assert eng.fused_mstep
    np.testing.assert_array_equal(eng.word_topic_counts(), ref.word_topic_counts())
    np.testing.assert_array_equal(eng.seeded_counts(), ref.seeded_counts())
    np.testing.assert_array_equal(eng._st.bhat.get(), ref._tables.bhat)
    np.testing.assert_array_equal(eng._st.denom.get(), ref._tables.word_side[1])
    np.testing.assert_array_equal(eng.topic_word_components(), ref.topic_word_components())
    assert eng.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-6)
    _next_sweep_agrees(eng, ref, corpus, n_topics, f"dense K={n_topics}, extra={extra}")
    eng.release()


def test_dense_cells_seeded_with_zero_are_the_scalar_chain(kjv):
    # Cells whose extra is 0.0 leave B, Bhat and the denominators as the scalar prior's, in the
    # sampling kernels too: the same topics sweep after sweep.
    corpus = tokens(kjv[:500])
    k = 24
    zero = initialised(_dense_engine(k, _cells(k, corpus.n_words, 0.0, n_cells=300)), corpus)
    plain = initialised(_dense_engine(k, None), corpus)
    for it in range(1, 4):
        for eng in (zero, plain):
            eng.sweep(it)
        np.testing.assert_array_equal(zero.topics(), plain.topics())
        np.testing.assert_array_equal(zero._st.bhat.get(), plain._st.bhat.get())
    assert zero.log_likelihood() == plain.log_likelihood()
    zero.release()
    plain.release()


def test_dense_fit_with_a_seeded_prior_runs_the_dense_engine():
    # Through the estimator: the plan takes the dense engine, and the fitted model keeps the
    # cells; the seeded cells' components hold their extras.
    prior = seeded_topic_prior(_corpus().feature_names, _seeds(), K, strength=20.0)
    lda = GPULatentDirichletAllocation(n_components=K, max_iter=20, random_state=0,
                                       device="cuda", algorithm="dense",
                                       topic_word_prior=prior)
    plan = lda._plan(GPU, "dense", 1234)
    assert type(plan.sampler()).__name__ == "CudaDenseSampler"
    lda.fit(_corpus().data)
    cells = lda.topic_word_prior_cells_
    assert cells.nnz == 3 * K
    assert np.all(lda.components_[cells.nonzero()] >= 20.0)


# -- online learning and partial_fit on the GPU ---------------------------------------------------
def test_online_seeded_topics_keep_their_seed_words_on_the_gpu():
    # The CPU test's (tests/test_seeded_topics.py): the first mini-batch's chain samples with
    # the seeded cells on the GPU, and every blend targets eta + (D / n) S there.
    seeds = _seeds()
    prior = seeded_topic_prior(_corpus().feature_names, seeds, K, strength=50.0)
    params = dict(n_components=K, learning_method="online", max_iter=20, batch_size=50,
                  random_state=0, device="cuda", algorithm="sparse")
    seeded = GPULatentDirichletAllocation(topic_word_prior=prior, **params).fit(_corpus().data)
    plain = GPULatentDirichletAllocation(topic_word_prior="auto", **params).fit(_corpus().data)
    top_seeded, top_plain = _top_words(seeded), _top_words(plain)
    for k in range(K):
        assert set(seeds[k]) <= top_seeded[k], (k, seeds[k])
    assert sum(set(seeds[k]) <= top_plain[k] for k in range(K)) < K
    assert seeded.topic_word_prior_cells_.nnz == 3 * K


def test_online_and_partial_fit_matrix_of_beta_is_the_scalar_model_on_the_gpu():
    X = _corpus().data
    v = X.shape[1]
    absent = np.flatnonzero(np.asarray(X[:50].sum(axis=0)).ravel() == 0)
    zeros = sparse.coo_matrix((np.zeros(4), ([0, 1, 4, 2], [0, 7, v - 1, absent[0]])),
                              shape=(K, v))
    params = dict(n_components=K, batch_size=50, random_state=0, device="cuda",
                  algorithm="sparse")

    def online(prior):
        return GPULatentDirichletAllocation(topic_word_prior=prior, learning_method="online",
                                            max_iter=3, evaluate_every=1, **params).fit(X)

    def partial(prior):
        lda = GPULatentDirichletAllocation(topic_word_prior=prior, total_samples=X.shape[0],
                                           **params)
        for start in range(0, X.shape[0], 150):
            lda.partial_fit(X[start:start + 150])
        return lda

    for fit in (online, partial):
        scalar = fit(0.05)
        for prior in (np.full((K, v), 0.05), (0.05, zeros)):
            model = fit(prior)
            np.testing.assert_array_equal(model.components_, scalar.components_)
            assert model.bound_ == scalar.bound_


# -- several GPUs (shards on one GPU) --------------------------------------------------------------
def _multi(k, cells, gpus=(0, 0, 0)):
    from sklearn_gpulda.backends.cuda.multi_gpu.sampler import MultiGpuSampler

    multi = MultiGpuSampler(k, ALPHA, BETA, SEED, Device("cuda", tuple(gpus)))
    multi.set_beta_cells(cells)
    return multi


def test_shards_with_a_matrix_prior_give_the_one_gpu_chain(kjv):
    corpus = tokens(kjv)
    k = 40
    cells = _cells(k, corpus.n_words, None, n_cells=200)
    multi = initialised(_multi(k, cells), corpus)
    single = initialised(_sparse_engine(k, cells), corpus)
    assert len(multi._active) == 3
    for it in range(1, 5):
        for sampler in (multi, single):
            sampler.sweep(it)
        np.testing.assert_array_equal(multi.topics(), single.topics())
        np.testing.assert_array_equal(multi.word_topic_counts(), single.word_topic_counts())
        np.testing.assert_array_equal(multi.seeded_counts(), single.seeded_counts())
        assert multi.log_likelihood() == pytest.approx(single.log_likelihood(), rel=1e-12)
        if it == 2:
            for sampler in (multi, single):
                sampler.set_priors(beta=0.02)
    np.testing.assert_array_equal(multi.topic_word_components(np.float32),
                                  single.topic_word_components(np.float32))
    multi.release()
    single.release()


def test_fit_loop_on_shards_with_a_seeded_prior_is_the_one_gpu_fit(kjv):
    corpus = tokens(kjv)
    k = 30
    rng = np.random.default_rng(1)
    words = rng.choice(kjv.shape[1], size=(k, 3), replace=False)
    additions = sparse.csr_matrix((np.full(3 * k, 20.0), (np.repeat(np.arange(k), 3),
                                                          words.ravel())),
                                  shape=(k, kjv.shape[1]))

    def plan(device):
        lda = GPULatentDirichletAllocation(
            n_components=k, random_state=0, max_iter=20, doc_topic_prior="auto",
            topic_word_prior=("auto", additions), prior_burn_in=5, prior_update_every=5,
            n_averaged_sweeps=5)
        return lda._plan(device, "sparse", 1234)

    single = _fit.fit_corpus(plan(GPU), corpus)
    shards = plan(Device("cuda", (0, 0)))
    sampler = shards.sampler()
    assert type(sampler).__name__ == "MultiGpuSampler"
    multi = _fit.fit_corpus(shards, corpus, sampler=sampler)
    np.testing.assert_array_equal(multi.components, single.components)
    assert multi.topic_word_prior == single.topic_word_prior
    np.testing.assert_array_equal(multi.topic_word_prior_cells.toarray(),
                                  single.topic_word_prior_cells.toarray())


# -- what the engine refuses -----------------------------------------------------------------------
def test_hybrid_storage_refuses_a_matrix_prior():
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    eng = CudaSparseSampler(16, ALPHA, BETA, SEED, GPU, word_topic_storage="hybrid")
    with pytest.raises(NotImplementedError, match="stored dense"):
        eng.set_beta_cells(_cells(16, 100, 1.0))


# -- the mini-batched engine -------------------------------------------------------------------
def _minibatch(n_topics, cells, batch_tokens):
    from sklearn_gpulda.backends.cuda.minibatch.sampler import CudaMinibatchSampler

    eng = CudaMinibatchSampler(n_topics, ALPHA, BETA, SEED, GPU, batch_tokens=batch_tokens)
    eng.set_beta_cells(cells)
    return eng


def _minibatch_reference(n_topics, cells, batch_tokens):
    from sklearn_gpulda.backends.numpy.minibatch import NumpyMinibatchSampler

    ref = NumpyMinibatchSampler(n_topics, ALPHA, BETA, SEED, CPU, batch_tokens=batch_tokens)
    ref.set_beta_cells(cells)
    return ref


@pytest.mark.parametrize("n_topics, extra, batch_tokens", [(16, 5.0, 3000), (16, None, 3000),
                                                           (40, 50.0, 20000)])
def test_minibatched_sweeps_with_a_matrix_prior_agree_with_numpy_engine(
        kjv, n_topics, extra, batch_tokens):
    # The GPU holds the seeded cells as pseudo-counts of B and the totals for a sweep's
    # batches: the oracle's conditional with roundings moved (doc/algorithm.md), so the draws
    # agree except within rounding of an interval end; the counts after a sweep are the recount.
    corpus = tokens(kjv[:300])
    cells = _cells(n_topics, corpus.n_words, extra, n_cells=200)
    eng = initialised(_minibatch(n_topics, cells, batch_tokens), corpus)
    ref = initialised(_minibatch_reference(n_topics, cells, batch_tokens), corpus)
    for it in (1, 2, 3):
        eng.sweep(it)
        ref.sweep(it)
        agree = np.mean(eng.topics() == ref.topics())
        print(f"K={n_topics}, extra={extra}, sweep {it}: GPU-oracle {agree:.5f}")
        assert agree >= 0.999, (it, agree)
        np.testing.assert_array_equal(
            eng.word_topic_counts(),
            np.bincount(corpus.word.astype(np.int64) * n_topics + eng.topics(),
                        minlength=corpus.n_words * n_topics).reshape(corpus.n_words,
                                                                     n_topics).T)
        eng.set_topics(ref.topics())  # re-aligned: one rounding does not compound
        np.testing.assert_array_equal(eng.seeded_counts(), ref.seeded_counts())
    np.testing.assert_array_equal(eng.topic_word_components(), ref.topic_word_components())
    assert eng.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-6)
    # The seeds moved the chain: the test above can fail.
    plain = initialised(_minibatch(n_topics, None, batch_tokens), corpus)
    plain.set_topics(ref.topics())
    eng.set_topics(ref.topics())
    for s in (eng, plain):
        s.sweep(4)
    assert np.mean(eng.topics() == plain.topics()) < 0.999
    for s in (eng, ref, plain):
        s.release()


def test_minibatched_matrix_of_beta_is_the_scalar_prior_bit_for_bit():
    X = _corpus().data
    v = X.shape[1]
    params = dict(n_components=K, max_iter=20, random_state=0, device="cuda",
                  algorithm="minibatch", minibatch_tokens=3000, prior_update_every=5)

    def fit(prior):
        return GPULatentDirichletAllocation(topic_word_prior=prior, **params).fit(X)

    scalar = fit(0.05)
    zeros = sparse.coo_matrix((np.zeros(4), ([0, 1, 4, 4], [0, 7, 3, v - 1])), shape=(K, v))
    for model in (fit(np.full((K, v), 0.05)), fit((0.05, zeros))):
        np.testing.assert_array_equal(model.components_, scalar.components_)
        assert model.bound_ == scalar.bound_
    learned, learned_cells = fit("auto"), fit(("auto", zeros))
    np.testing.assert_array_equal(learned_cells.components_, learned.components_)
    assert learned_cells.topic_word_prior_ == learned.topic_word_prior_


def test_minibatched_seeded_topics_keep_their_seed_words():
    prior = seeded_topic_prior(_corpus().feature_names, _seeds(), K, strength=50.0)
    params = dict(n_components=K, max_iter=300, random_state=0, device="cuda",
                  algorithm="minibatch", minibatch_tokens=3000)
    seeded = GPULatentDirichletAllocation(topic_word_prior=prior, **params).fit(_corpus().data)
    seeds, top = _seeds(), _top_words(seeded)
    for k in range(K):
        assert set(seeds[k]) <= top[k], (k, seeds[k])
