"""The mini-batched CUDA backend against its NumPy oracle (``doc/algorithm.md``, mini-batched
sweeps): the same draws token for token, the exact conditional, the counts after every batch,
the segmented-CSR layout, reproducibility and the estimator."""

import numpy as np
import pytest
import scipy.sparse as sp
from _engine_checks import (check_same_seed_same_model, check_two_word_conditional,
                            initialised, recount)

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._input.layouts import batch_bounds, frequency_relabel, segmented_csr
from sklearn_gpulda._runtime.device import CPU, Device
from sklearn_gpulda.backends.numpy.minibatch import NumpyMinibatchSampler
from sklearn_gpulda.datasets import load_kjv_chapters

pytestmark = pytest.mark.gpu

ALPHA, BETA, SEED = 0.1, 0.01, 97531
GPU = Device("cuda", (0,))


def _gpu(n_topics, batch_tokens, alpha=ALPHA):
    from sklearn_gpulda.backends.cuda.minibatch.sampler import CudaMinibatchSampler

    return CudaMinibatchSampler(n_topics, alpha, BETA, SEED, GPU, batch_tokens=batch_tokens)


def _cpu(n_topics, batch_tokens, alpha=ALPHA):
    return NumpyMinibatchSampler(n_topics, alpha, BETA, SEED, CPU, batch_tokens=batch_tokens)


def _kjv(n, weighted=False):
    X = sp.csr_matrix(load_kjv_chapters().data[:n], dtype=np.float64)
    if weighted:
        X.data *= np.random.default_rng(0).uniform(0.3, 1.0, X.data.size)
    return tokens(X)


@pytest.mark.parametrize("n_topics, batch_tokens", [(7, 3000), (40, 20000), (100, 10**9),
                                                    (333, 8000)])
def test_sweeps_agree_with_numpy_engine(n_topics, batch_tokens):
    corpus = _kjv(200)
    gpu, cpu = _gpu(n_topics, batch_tokens), _cpu(n_topics, batch_tokens)
    for eng in (gpu, cpu):
        initialised(eng, corpus)
    for it in (1, 2, 3):
        gpu.sweep(it)
        cpu.sweep(it)
        same = np.mean(gpu.topics() == cpu.topics())
        assert same >= 0.999, (it, same)
        if same == 1.0:
            np.testing.assert_array_equal(gpu.word_topic_counts(), cpu.word_topic_counts())
        # Re-align, so one rounding difference does not compound across sweeps.
        gpu.set_topics(cpu.topics())
    assert abs(gpu.log_likelihood() - cpu.log_likelihood()) < 1e-6 * abs(cpu.log_likelihood())


def test_weighted_tokens_agree_with_numpy_engine():
    corpus = _kjv(120, weighted=True)
    gpu, cpu = _gpu(16, 5000), _cpu(16, 5000)
    for eng in (gpu, cpu):
        initialised(eng, corpus)
        eng.sweep(1)
    # Float32 atomics add fractional weights in any order: allow the rare draw it moves.
    assert np.mean(gpu.topics() == cpu.topics()) >= 0.999
    z = gpu.topics()
    want = recount(corpus.word, z, corpus.weight, corpus.n_words, 16)
    np.testing.assert_allclose(gpu.word_topic_counts(), want.T, atol=1e-3)


def test_counts_and_topics_after_every_batch():
    corpus = _kjv(150)
    k = 24
    gpu, cpu = _gpu(k, 4000), _cpu(k, 4000)
    for eng in (gpu, cpu):
        initialised(eng, corpus)
    cpu_states = []
    cpu.batch_hook = lambda i, z, b, totals: cpu_states.append(z.copy())
    cpu.sweep(1)
    new_of_old = gpu.new_of_old
    checked = []

    def hook(i):
        z = gpu.layout.z_can.get().astype(np.int64)
        b = gpu.words.B.get()[new_of_old]
        totals = gpu.words.totals.get()
        want = recount(corpus.word, z, None, corpus.n_words, k)
        np.testing.assert_array_equal(b, want)
        np.testing.assert_array_equal(totals, want.sum(axis=0))
        assert np.mean(z == cpu_states[i]) >= 0.999
        checked.append(i)

    gpu.batch_hook = hook
    gpu.sweep(1)
    assert checked == list(range(len(cpu_states))) and len(checked) > 5


@pytest.mark.parametrize("n_topics", [5, 64, 100])
def test_one_batch_draws_from_the_collapsed_conditional(n_topics):
    # With one batch, p(k) is the conditional of the sweep's start, every count with the
    # token's own weight taken out.
    check_two_word_conditional(lambda n: _gpu(n_topics, n), n_topics, ALPHA, BETA)


def test_layout_is_the_host_segmented_csr():
    from sklearn_gpulda.backends.cuda.minibatch.sampler import panel_width

    corpus = _kjv(90)
    eng = _gpu(50, 6000)
    eng.load(corpus)
    new_of_old, _ = frequency_relabel(corpus.word_frequencies())
    bounds = batch_bounds(corpus.doc_ptr, 6000)
    host = segmented_csr(corpus, new_of_old, bounds, panel_width(50))
    np.testing.assert_array_equal(eng.layout.tok.get(), host.token)
    np.testing.assert_array_equal(eng.layout.word.get(), new_of_old[corpus.word[host.token]])
    np.testing.assert_array_equal(eng.layout.positions, corpus.doc_ptr[bounds])


def test_same_seed_same_model():
    check_same_seed_same_model(lambda: _gpu(30, 5000), _kjv(200), n_sweeps=4)


def test_estimator_on_gpu_matches_cpu_model():
    X = load_kjv_chapters().data[:400]
    kw = dict(n_components=12, algorithm="minibatch", max_iter=15, random_state=3,
              n_averaged_sweeps=0)
    gpu = GPULatentDirichletAllocation(device="cuda", **kw).fit(X)
    cpu = GPULatentDirichletAllocation(device="cpu", **kw).fit(X)
    assert gpu.algorithm_ == "minibatch"
    # Bit-for-bit draws make the chains one; a rare rounding difference may move a few tokens.
    diff = np.abs(gpu.components_ - cpu.components_).sum() / cpu.components_.sum()
    assert diff < 1e-3, diff


def test_corpus_that_does_not_fit_is_refused():
    # Refused by the minibatch sampler, which never streams, before anything is allocated.
    import gc

    import cupy

    eng = _gpu(20, 5000)
    eng.max_device_memory = 1 << 16
    pool = cupy.get_default_memory_pool()
    eng.release()
    corpus = _kjv(300)
    # Earlier tests' device arrays that only a collection frees must not be counted.
    gc.collect()
    held = pool.used_bytes()
    with pytest.raises(MemoryError, match="algorithm='minibatch'"):
        eng.load(corpus)
    assert pool.used_bytes() == held and eng.chunks == []
