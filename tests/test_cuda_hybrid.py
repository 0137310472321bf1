"""Hybrid word-topic storage on the GPU: the chain, the readers and the fitted model are the dense
storage's, bit for bit; the rare rows hold the counts the host's probe finds."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.backends.cuda.sparse import hybrid_table as _hybrid_table
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import Device
from sklearn_gpulda.datasets import load_kjv_chapters

from _engine_checks import initialised

pytestmark = pytest.mark.gpu

ALPHA, BETA, SEED = 0.1, 0.01, 1234
GPU = Device("cuda", (0,))


@pytest.fixture(scope="module")
def kjv_corpus():
    return tokens(sp.csr_matrix(load_kjv_chapters().data))


def _engine(n_topics, storage, **kw):
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    return CudaSparseSampler(n_topics, ALPHA, BETA, SEED, GPU, word_topic_storage=storage, **kw)


def _same_state(eng, ref):
    np.testing.assert_array_equal(eng.topics(), ref.topics())
    np.testing.assert_array_equal(eng.word_topic_counts(), ref.word_topic_counts())
    np.testing.assert_array_equal(eng.doc_topic_counts(), ref.doc_topic_counts())
    for got, want in zip(eng.word_topic_histogram(), ref.word_topic_histogram()):
        np.testing.assert_array_equal(got, want)
    assert eng.log_likelihood() == ref.log_likelihood()


def _pair(corpus, k):
    ref = initialised(_engine(k, "dense"), corpus)
    eng = initialised(_engine(k, "hybrid"), corpus)
    assert eng.hybrid and not ref.hybrid
    assert 0 < eng.words.n_dense < corpus.n_words
    return eng, ref


@pytest.mark.parametrize("averaging_sum", ["whole", "keys"])
@pytest.mark.parametrize("n_topics", [200, 3000])
def test_hybrid_chain_is_the_dense_chain(kjv_corpus, n_topics, averaging_sum, monkeypatch):
    # KJV chapters: a vocabulary of mostly rare words. Every sweep draws the same topics, and
    # every reader (counts, histograms, likelihood, averaging, the model) sees the same numbers,
    # with the priors moved in between; averaging's sum a whole table (where it has room) or
    # sorted keys of the rare rows (where it has not).
    from sklearn_gpulda.backends.cuda.sparse import hybrid

    if averaging_sum == "keys":
        monkeypatch.setattr(hybrid, "WHOLE_SUM_ROOM_FACTOR", 10**9)
    eng, ref = _pair(kjv_corpus, n_topics)
    _same_state(eng, ref)
    for it in range(1, 5):
        for sampler in (eng, ref):
            sampler.sweep(it)
            if it >= 2:
                sampler.accumulate_word_topic()
        _same_state(eng, ref)
        if it == 2:
            alpha = np.linspace(0.05, 0.3, n_topics)
            for sampler in (eng, ref):
                sampler.set_priors(alpha=alpha, beta=0.02)
    np.testing.assert_array_equal(eng.topic_word_components(), ref.topic_word_components())
    np.testing.assert_array_equal(eng.mean_word_topic(), ref.mean_word_topic())
    np.testing.assert_array_equal(eng.word_topic_statistics().get(),
                                  ref.word_topic_statistics().get())
    assert (eng._sum.whole is not None) == (averaging_sum == "whole")
    eng.release()
    ref.release()


def test_rare_rows_hold_the_counts_the_host_probe_finds(kjv_corpus):
    k = 500
    eng, ref = _pair(kjv_corpus, k)
    eng.sweep(1)
    ref.sweep(1)
    w = eng.words
    slots, offsets = w.rare.slots.get(), w.rare.offsets_host
    dense = ref.words.B.get()  # relabelled words, as the rows
    n_dense = w.n_dense
    np.testing.assert_array_equal(w.B.get(), dense[:n_dense])
    occupied = 0
    for v in range(n_dense, dense.shape[0]):
        row = slots[offsets[v - n_dense] : offsets[v - n_dense + 1]]
        assert np.count_nonzero(row) * 3 <= row.size * 2  # at most two thirds full
        occupied += np.count_nonzero(row)
        for t in np.flatnonzero(dense[v]):
            assert _hybrid_table.lookup(slots, offsets, n_dense, v, t) == dense[v, t]
    assert occupied == np.count_nonzero(dense[n_dense:])
    np.testing.assert_array_equal(w.totals.get(), ref.words.totals.get())
    eng.release()
    ref.release()


def test_large_k_kernels_read_the_rare_rows(monkeypatch, kjv_corpus):
    from sklearn_gpulda.backends.cuda.sparse import sample_sparse

    ref = initialised(_engine(3000, "dense"), kjv_corpus)
    monkeypatch.setattr(sample_sparse, "SHARED_MAX_TOPICS", 0)
    eng = initialised(_engine(3000, "hybrid"), kjv_corpus)
    assert eng.large_k and eng.hybrid and not ref.large_k
    for it in (1, 2):
        eng.sweep(it)
        ref.sweep(it)
        _same_state(eng, ref)
    eng.release()
    ref.release()


def test_streamed_hybrid_chain_is_the_resident_dense_chain(monkeypatch, kjv_corpus):
    import cupy

    from sklearn_gpulda.backends.cuda.sparse import memory_plan

    pool = cupy.get_default_memory_pool()

    k = 300
    ref = initialised(_engine(k, "dense"), kjv_corpus)
    monkeypatch.setattr(memory_plan, "MIN_STREAM_CHUNK", 1)
    monkeypatch.setattr(memory_plan, "resident_bytes", lambda *args: (1 << 60, 1 << 60))
    eng = initialised(_engine(k, "hybrid", max_chunk_tokens=60_000), kjv_corpus)
    assert eng.streamed and eng.hybrid and len(eng.chunks) > 4
    for it in (1, 2, 3):
        eng.sweep(it)
        ref.sweep(it)
        np.testing.assert_array_equal(eng.topics(), ref.topics())
        # Within a budget, so that the room is counted from the pool's exact bookkeeping (the
        # budget is the process's: what it holds outside the pool is measured once per load).
        eng.max_device_memory = eng._fixed_bytes() + pool.used_bytes() + (64 << 20)
        room = eng._room()
        np.testing.assert_array_equal(eng.word_topic_counts(), ref.word_topic_counts())
        # Reading B gave the sweeps' second B and device slots back; the next sweep makes them
        # again, and the chain goes on the same. Averaging's room does not count them as free.
        assert eng._b_next is None and eng._stream.slots == []
        # (Up to the pool's rounding of each freed array to 512 bytes.)
        assert eng._shed_bytes() > 1 << 20 and abs(eng._room() - room) < 64 << 10
        eng.max_device_memory = None
        assert eng.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-12)
    eng.release()
    ref.release()


@pytest.mark.parametrize("storage", ["dense", "hybrid"])
def test_averaging_takes_no_more_than_the_budget_leaves(kjv_corpus, storage):
    # The room is the budget less what the chain holds: with 1 MiB left, averaging's sum is
    # refused before anything is allocated; with the GPU's free memory it is taken, and then
    # the averaged model is the dense chain's.
    import cupy

    k = 3000
    eng = initialised(_engine(k, storage), kjv_corpus)
    ref = initialised(_engine(k, "dense"), kjv_corpus)
    pool = cupy.get_default_memory_pool()
    for sampler in (eng, ref):
        sampler.sweep(1)
    eng.max_device_memory = eng._fixed_bytes() + pool.used_bytes() + (1 << 20)
    held = pool.used_bytes()
    with pytest.raises(MemoryError, match="averaging .* GiB more"):
        eng.accumulate_word_topic()
    assert pool.used_bytes() == held and eng.n_accumulated == 0
    eng.max_device_memory = None
    for it in (2, 3):
        for sampler in (eng, ref):
            sampler.sweep(it)
            sampler.accumulate_word_topic()
    np.testing.assert_array_equal(eng.mean_word_topic(), ref.mean_word_topic())
    eng.release()
    ref.release()


def test_hybrid_storage_takes_less_memory(kjv_corpus):
    dense = _engine(4096, "dense").estimate_bytes(kjv_corpus)[0]
    hybrid = _engine(4096, "hybrid").estimate_bytes(kjv_corpus)[0]
    assert hybrid < dense / 2


def test_estimator_models_are_equal_and_auto_picks_hybrid_at_large_k(monkeypatch):
    from sklearn_gpulda.backends.cuda.sparse import sampler as sparse

    X = load_kjv_chapters().data[:400]
    params = dict(n_components=4096, max_iter=8, random_state=0, device="cuda",
                  algorithm="sparse")
    chosen = []
    real = sparse.CudaSparseSampler.load

    def spy(self, corpus):
        real(self, corpus)
        chosen.append(self.hybrid)

    monkeypatch.setattr(sparse.CudaSparseSampler, "load", spy)
    auto = GPULatentDirichletAllocation(**params).fit(X)
    dense = GPULatentDirichletAllocation(word_topic_storage="dense", **params).fit(X)
    assert chosen == [True, False]
    np.testing.assert_array_equal(auto.components_, dense.components_)
    np.testing.assert_array_equal(auto.doc_topic_prior_, dense.doc_topic_prior_)
    assert auto.topic_word_prior_ == dense.topic_word_prior_
    assert auto.bound_ == dense.bound_
    np.testing.assert_array_equal(auto.transform(X[:50]), dense.transform(X[:50]))


def test_hybrid_is_refused_where_it_does_not_apply():
    X = load_kjv_chapters().data[:100]
    with pytest.raises(ValueError, match="integer counts"):
        GPULatentDirichletAllocation(n_components=8, max_iter=2, device="cuda",
                                     word_topic_storage="hybrid").fit(X * 0.5)
    with pytest.raises(ValueError, match="one GPU"):
        GPULatentDirichletAllocation(n_components=8, max_iter=2, device="cuda",
                                     algorithm="minibatch", word_topic_storage="hybrid").fit(X)


def _warp_scans(values):
    """Inclusive scans of rows of 32 float32 values in the order of ``cuda/warp.cuh``'s
    warp_inclusive_scan (Hillis-Steele: offsets 1, 2, 4, 8, 16, each add rounded on its own)."""
    v = values.astype(np.float32).copy()
    off = 1
    while off < 32:
        shifted = np.zeros_like(v)
        shifted[:, off:] = v[:, :-off]
        v = np.where(np.arange(32) >= off, v + shifted, v).astype(np.float32)
        off *= 2
    return v


@pytest.mark.parametrize("n_topics", [1000, 40_000])
def test_prior_tables_are_the_trees_first_levels(n_topics):
    # The levels the sampler patches each rare word's tree from (counts.cu prior_levels) must
    # be build_tree's over the prior row, float for float: tile totals, their running sums
    # within each group of 32 tiles, group totals.
    import cupy as cp

    from sklearn_gpulda.backends.cuda.sparse import hybrid

    rng = np.random.default_rng(0)
    k = n_topics
    denom = cp.asarray(rng.uniform(50.0, 5e4, k))
    alpha = rng.uniform(0.01, 0.5, k).astype(np.float32)
    out = cp.full(hybrid.prior_floats(k), np.nan, dtype=cp.float32)
    hybrid.prior_tables(denom, 0.01, cp.asarray(alpha), out)
    got = out.get()
    row = (0.01 / denom.get()).astype(np.float32)
    np.testing.assert_array_equal(got[:k], row)
    tiles = -(-k // 32)
    groups = -(-tiles // 32)
    terms = np.zeros(tiles * 32, dtype=np.float32)
    terms[:k] = alpha * row  # one rounding, as prior_term's __fmul_rn
    tile_totals = _warp_scans(terms.reshape(tiles, 32))[:, -1]
    padded = np.zeros(groups * 32, dtype=np.float32)
    padded[:tiles] = tile_totals
    local = _warp_scans(padded.reshape(groups, 32))
    np.testing.assert_array_equal(got[k:k + tiles], tile_totals)
    np.testing.assert_array_equal(got[k + tiles:k + 2 * tiles], local.ravel()[:tiles])
    np.testing.assert_array_equal(got[k + 2 * tiles:], local[:, -1])
