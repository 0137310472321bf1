"""One chain over several GPUs (``backends/cuda/multi_gpu/sampler.py``) against the one-GPU chain.

Several shards on one GPU (their parts of B summed by peer copies) run the whole multi-GPU code
path on a machine with one GPU; NCCL is tested on one rank there. The tests that need two GPUs
(NCCL between them, ``device='cuda:0,1'`` through the estimator) skip on fewer.
"""

import numpy as np
import pytest

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._fitting import loop as _fit
from sklearn_gpulda._input.row_blocks import BlockCorpus
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import Device, gpu_count
from sklearn_gpulda.backends import prior_learning as _learning
from sklearn_gpulda.datasets import load_kjv_chapters

from _engine_checks import check_counts_every_sweep, initialised, load_parts, step_parts

pytestmark = pytest.mark.gpu

ALPHA, BETA, SEED = 0.1, 0.01, 1234
ONE = Device("cuda", (0,))
two_gpus = pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data.tocsr()


def _single(k, **kw):
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    return CudaSparseSampler(k, ALPHA, BETA, SEED, ONE, **kw)


def _multi(k, gpus=(0, 0, 0), **kw):
    from sklearn_gpulda.backends.cuda.multi_gpu.sampler import MultiGpuSampler

    return MultiGpuSampler(k, ALPHA, BETA, SEED, Device("cuda", tuple(gpus)), **kw)


def _same_state(multi, single, loglik=True):
    np.testing.assert_array_equal(multi.topics(), single.topics())
    np.testing.assert_array_equal(multi.word_topic_counts(), single.word_topic_counts())
    np.testing.assert_array_equal(multi.doc_topic_counts(), single.doc_topic_counts())
    for got, want in zip(multi.word_topic_histogram(), single.word_topic_histogram()):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(multi.doc_topic_histogram(), single.doc_topic_histogram()):
        np.testing.assert_array_equal(got, want)
    (table, rest), (want_table, want_rest) = multi.doc_topic_table(), single.doc_topic_table()
    np.testing.assert_array_equal(table, want_table)
    for got, want in zip(rest, want_rest):
        np.testing.assert_array_equal(got, want)
    # The fixed points on the lead GPU learn the one GPU's priors.
    alpha = np.linspace(0.05, 0.4, multi.n_topics)
    lengths = _learning.length_histogram(single.doc_topic_counts().sum(axis=1))
    np.testing.assert_array_equal(multi.learn_alpha(alpha, table, rest, *lengths),
                                  single.learn_alpha(alpha, want_table, want_rest, *lengths))
    histogram = single.word_topic_histogram()
    assert multi.learn_beta(0.02, *histogram, 50) == single.learn_beta(0.02, *histogram, 50)
    if loglik:
        # Summed shard by shard: equal up to the order of the additions.
        assert multi.log_likelihood() == pytest.approx(single.log_likelihood(), rel=1e-12)


def _swept_alike(multi, single, sweeps):
    """Sweep both chains through ``sweeps`` (iteration numbers), checking after each that they
    hold the same state; then release them."""
    for it in sweeps:
        for sampler in (multi, single):
            sampler.sweep(it)
        _same_state(multi, single)
    multi.release()
    single.release()


def test_shards_give_the_one_gpu_chain_sweep_by_sweep(kjv):
    # Three parts of the Bible (one holds Psalm 119, the longest chapter) keyed by their place in
    # the whole: the topics, both count matrices, every histogram prior learning reads and the
    # likelihood are the one-GPU chain's after every sweep, with the priors moved in between.
    corpus = tokens(kjv)
    k = 40
    multi, single = initialised(_multi(k), corpus), initialised(_single(k), corpus)
    assert len(multi._active) == 3 and multi._reducer.name == "peer-copy"
    sizes = np.diff(corpus.doc_ptr[multi.bounds])
    assert sizes.min() > 0.9 * corpus.n_tokens / 3
    _same_state(multi, single)
    for it in range(1, 6):
        for sampler in (multi, single):
            sampler.sweep(it)
        _same_state(multi, single, loglik=it % 2 == 0)
        if it == 3:
            for sampler in (multi, single):
                sampler.set_priors(alpha=np.linspace(0.02, 0.3, k), beta=0.02)
    for sampler in (multi, single):
        sampler.accumulate_word_topic()
        sampler.sweep(6)
        sampler.accumulate_word_topic()
    np.testing.assert_array_equal(multi.mean_word_topic(), single.mean_word_topic())
    np.testing.assert_array_equal(multi.topic_word_components(np.float32),
                                  single.topic_word_components(np.float32))
    topics = single.topics()[::-1] % k
    for sampler in (multi, single):
        sampler.set_topics(topics)
    _same_state(multi, single)
    multi.release()
    single.release()


def test_device_shards_summed_as_cells_are_the_one_gpu_chain(kjv):
    # Two device shards, each with its own word order, whose parts of B a caller sums as cells
    # in its word ids and gives back (what a Dask client does): the one-GPU chain, sweep by
    # sweep.
    from sklearn_gpulda.backends.cuda.multi_gpu.shard import DeviceShard

    X = kjv[:400]
    single = initialised(_single(12), tokens(X))
    shards = load_parts(lambda: DeviceShard(12, ALPHA, BETA, SEED, ONE), X, [150])
    for it in range(4):
        step_parts(shards, it)
        if it:
            single.sweep(it)
        np.testing.assert_array_equal(np.concatenate([s.topics() for s in shards]),
                                      single.topics())
        for shard in shards:
            np.testing.assert_array_equal(shard.word_topic_counts(), single.word_topic_counts())
    for sampler in shards + [single]:
        sampler.release()


def test_counts_hold_every_token_after_every_sweep(kjv):
    corpus = tokens(kjv[:300])
    multi = initialised(_multi(16, gpus=(0, 0)), corpus)
    check_counts_every_sweep(multi, corpus, 16, n_sweeps=3)
    multi.release()


def test_more_gpus_than_documents_uses_one_per_document(kjv):
    corpus = tokens(kjv[:2])
    multi, single = (initialised(_multi(8, gpus=(0, 0, 0, 0)), corpus),
                     initialised(_single(8), corpus))
    assert len(multi._active) == 2
    _swept_alike(multi, single, [1])


def test_weighted_tokens_agree_up_to_the_order_of_float_additions(kjv):
    X = kjv[:400].astype(np.float64)
    X.data *= np.random.default_rng(0).uniform(0.3, 1.0, X.data.size)
    corpus = tokens(X)
    multi, single = initialised(_multi(12), corpus), initialised(_single(12), corpus)
    np.testing.assert_array_equal(multi.topics(), single.topics())
    np.testing.assert_allclose(multi.word_topic_counts(), single.word_topic_counts(), atol=1e-3)
    for sampler in (multi, single):
        sampler.sweep(1)
    assert np.mean(multi.topics() == single.topics()) > 0.99
    multi.release()
    single.release()


def test_streamed_shards_and_row_blocks(kjv, monkeypatch):
    # Each shard streams its part (a budget too small for it) and the corpus comes as row
    # blocks: still the one-GPU chain.
    from sklearn_gpulda.backends.cuda.sparse import memory_plan

    X = kjv[:600]
    blocks = BlockCorpus([X[:250], X[250:251], X[251:]])
    with monkeypatch.context() as streamed:
        streamed.setattr(memory_plan, "MIN_STREAM_CHUNK", 1)
        streamed.setattr(memory_plan, "resident_bytes", lambda *args: (1 << 60, 1 << 60))
        multi = initialised(_multi(16, gpus=(0, 0), max_chunk_tokens=20_000), blocks)
    single = initialised(_single(16), tokens(X))
    assert all(s.streamed and len(s.chunks) > 1 for s in multi._active)
    _swept_alike(multi, single, range(1, 4))


def _plan(k, device, **params):
    lda = GPULatentDirichletAllocation(n_components=k, random_state=0, **params)
    return lda._plan(device, "sparse", 1234)


def test_fit_loop_on_shards_is_the_one_gpu_fit(kjv):
    # Learned priors (alpha's device table merged over shards), averaging and the model out:
    # the components and priors of the one-GPU fit, bit for bit.
    corpus = tokens(kjv)
    params = dict(max_iter=24, doc_topic_prior="auto", topic_word_prior="auto",
                  prior_burn_in=5, prior_update_every=5, n_averaged_sweeps=6)
    single = _fit.fit_corpus(_plan(30, ONE, **params), corpus)
    # The registry makes the multi-GPU sampler for a device naming several GPUs.
    plan = _plan(30, Device("cuda", (0, 0)), **params)
    sampler = plan.sampler()
    assert type(sampler).__name__ == "MultiGpuSampler"
    multi = _fit.fit_corpus(plan, corpus, sampler=sampler)
    np.testing.assert_array_equal(multi.components, single.components)
    np.testing.assert_array_equal(multi.doc_topic_prior, single.doc_topic_prior)
    assert multi.topic_word_prior == single.topic_word_prior
    assert multi.bound == pytest.approx(single.bound, rel=1e-12)


def test_stopping_rule_windows_on_shards_are_the_one_gpu_fit(kjv):
    # max_iter=None under a rule that reaches its ceiling 16: the averaging sum (on the first
    # GPU) restarts at the anchors 4 and 8, so the model is the one of max_iter=16 averaging
    # its last 8 sweeps, bit for bit, on one GPU and on shards.
    import math

    from sklearn_gpulda._fitting import stopping

    corpus = tokens(kjv)
    fixed = _fit.fit_corpus(_plan(30, ONE, max_iter=16), corpus)
    with stopping.using(stopping.StoppingRule(tol=-math.inf, floor=4, ceiling=16)):
        plan = _plan(30, Device("cuda", (0, 0)), max_iter=None)
    multi = _fit.fit_corpus(plan, corpus, sampler=plan.sampler())
    assert multi.n_iter == 16 and multi.history["stopped_by"] == "ceiling"
    np.testing.assert_array_equal(multi.components, fixed.components)
    np.testing.assert_array_equal(multi.doc_topic_prior, fixed.doc_topic_prior)


def test_nccl_on_one_rank(kjv):
    from sklearn_gpulda.backends.cuda.multi_gpu.all_reduce import nccl_module

    if nccl_module() is None:
        pytest.skip("this CuPy has no NCCL")
    corpus = tokens(kjv[:500])
    multi = initialised(_multi(10, gpus=(0,), all_reduce="nccl"), corpus)
    single = initialised(_single(10), corpus)
    assert multi._reducer.name == "nccl"
    _swept_alike(multi, single, range(1, 3))
    with pytest.raises(ValueError, match="NCCL needs distinct GPUs"):
        initialised(_multi(10, gpus=(0, 0), all_reduce="nccl"), corpus)


@two_gpus
@pytest.mark.parametrize("on_device", [False, True])
def test_estimator_on_two_gpus_is_the_one_gpu_model(kjv, on_device):
    import cupyx.scipy.sparse as csp

    X = csp.csr_matrix(kjv.astype(np.float64)) if on_device else kjv
    # 'sparse' named: several GPUs run it, while 'auto' on one GPU may take the dense engine.
    params = dict(n_components=30, max_iter=30, random_state=0, algorithm="sparse")
    one = GPULatentDirichletAllocation(device="cuda:0", **params).fit(X)
    two = GPULatentDirichletAllocation(device="cuda:0,1", **params).fit(X)
    listed = GPULatentDirichletAllocation(device=[0, 1], **params).fit(X)
    np.testing.assert_array_equal(two.components_, one.components_)
    np.testing.assert_array_equal(listed.components_, one.components_)
    np.testing.assert_array_equal(two.doc_topic_prior_, one.doc_topic_prior_)
    assert two.device_ == "cuda:0,1"
    np.testing.assert_array_equal(two.transform(kjv[:50]), one.transform(kjv[:50]))


@two_gpus
def test_online_learning_on_two_gpus_runs_on_the_first(kjv):
    lda = GPULatentDirichletAllocation(n_components=10, learning_method="online", max_iter=2,
                                       device="cuda:1,0", random_state=0).fit(kjv[:300])
    assert lda.device_ == "cuda:1"
    lda.partial_fit(kjv[300:400])
    assert lda.device_ == "cuda:1"


def test_counts_already_on_the_gpu(kjv):
    # A CuPy input's counts are split where they lie and each part used there (or copied to
    # its shard's GPU when that is another one).
    import cupyx.scipy.sparse as csp

    X = kjv[:500]
    multi = initialised(_multi(12, gpus=(0, 0)), tokens(csp.csr_matrix(X.astype(np.float64))))
    single = initialised(_single(12), tokens(X))
    _swept_alike(multi, single, [1])
