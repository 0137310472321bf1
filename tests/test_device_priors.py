"""The learned priors' fixed points on the GPU (``cuda/priors.cu``) against the host's
(``backends/prior_learning.py``), and the digamma both use (``backends/digamma.py``).

A fit learns the same priors wherever its fixed points run (one GPU, several, Dask workers, a
Dask driver's CPU), so the device must give the host's values bit for bit, not nearly. The CPU
tests check that the digamma made of basic operations is digamma (against SciPy's) and that the
fixed points still converge where SciPy's digamma would take them."""

import numpy as np
import pytest
from scipy.special import digamma as scipy_digamma

from sklearn_gpulda.backends import prior_learning as _learning
from sklearn_gpulda.backends.digamma import digamma, log
from sklearn_gpulda.datasets import load_kjv_chapters


def _arguments(seed=0, n=50_000):
    """Positive arguments across every branch: tiny priors, the recurrence's range and its
    integers, its end at 10, and large counts and lengths."""
    rng = np.random.default_rng(seed)
    spans = [np.exp(rng.uniform(np.log(lo), np.log(hi), n))
             for lo, hi in ((1e-5, 1.0), (1.0, 10.0), (10.0, 1e3), (1e3, 1e9))]
    exact = np.concatenate([np.arange(1.0, 200.0), [1e-5, 0.5, 9.999999999999998, 10.0,
                                                    10.000000000000002, 1.4616321449683622]])
    return np.concatenate(spans + [exact])


# -- the host's digamma ------------------------------------------------------------------------
def test_digamma_is_scipys_to_a_few_units_in_the_last_place():
    x = _arguments()
    got, want = digamma(x), scipy_digamma(x)
    ulp = np.abs(got - want) / np.spacing(np.abs(want))
    assert ulp[x >= 10].max() <= 1  # the asymptotic branch: SciPy's to one unit
    # Below 10 the recurrence's roundings add up to a few units of the terms it adds, which
    # near psi's root (1.4616) is many units of the value itself.
    np.testing.assert_allclose(got, want, rtol=32 * np.finfo(float).eps, atol=2e-15)


def test_log_is_within_two_units_of_numpys():
    x = np.exp(np.random.default_rng(1).uniform(-700, 700, 100_000))
    ulp = np.abs(log(x) - np.log(x)) / np.spacing(np.abs(np.log(x)))
    assert ulp.max() <= 2


def test_ordered_sum_is_a_warps_lanes_folded_in_halves():
    rng = np.random.default_rng(2)
    for n in (0, 1, 5, 32, 33, 700, 4099):
        values = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, n)
        lanes = []
        for j in range(32):  # lane j adds elements j, j + 32, ... one at a time
            acc = values[j] if j < n else 0.0
            for i in range(j + 32, -(-n // 32) * 32, 32):
                acc = acc + (values[i] if i < n else 0.0)
            lanes.append(acc)
        while len(lanes) > 1:
            half = len(lanes) // 2
            lanes = [lanes[i] + lanes[i + half] for i in range(half)]
        assert _learning.ordered_sum(values) == (lanes[0] if n else 0.0)
    assert _learning.ordered_sum(np.ones(1000)) == 1000.0


def _scipy_update_alpha(alpha, counts, lengths):
    """Minka's fixed point on the raw counts with SciPy's digamma, to convergence."""
    for _ in range(_learning.MAX_ITERATIONS):
        total = alpha.sum()
        den = np.sum(scipy_digamma(lengths + total) - scipy_digamma(total))
        num = np.sum(scipy_digamma(counts + alpha) - scipy_digamma(alpha), axis=0)
        new = np.maximum(alpha * num / den, _learning.FLOOR)
        if (np.abs(new - alpha) / alpha).max() < _learning.TOLERANCE:
            return new
        alpha = new
    return alpha


def _doc_topic_inputs(n_topics, seed, weighted=False, n_docs=2500):
    """A document-topic count matrix with counts of 64 and more and hundreds of distinct
    document lengths, and its fixed point's inputs (start, table, rest, lengths)."""
    rng = np.random.default_rng(seed)
    scale = rng.lognormal(0.0, 1.5, (n_docs, 1)) * 600.0 / n_topics
    counts = rng.poisson(rng.gamma(0.3, scale, (n_docs, n_topics))).astype(np.float64)
    counts[:, 0] += 1.0
    if weighted:
        counts *= rng.choice([0.5, 1.0, 1.7], counts.shape)
    doc, topic = np.nonzero(counts)
    keys, n = np.unique(np.stack([topic, counts[doc, topic]]), axis=1, return_counts=True)
    table, rest = _learning.alpha_table(keys[0].astype(np.int64), keys[1], n, n_topics)
    lengths = _learning.length_histogram(counts.sum(axis=1))
    start = rng.gamma(0.5, 0.2, n_topics) + _learning.FLOOR
    return counts, start, table, rest, lengths


@pytest.mark.parametrize("like_gpu", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_alpha_converges_where_scipys_digamma_takes_it(weighted, like_gpu):
    counts, start, table, rest, lengths = _doc_topic_inputs(12, seed=4, weighted=weighted)
    got = _learning.update_alpha(start, table, rest, *lengths, like_gpu=like_gpu)
    want = _scipy_update_alpha(start, counts, counts.sum(axis=1))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not np.allclose(got, start, rtol=1e-2)


@pytest.mark.parametrize("like_gpu", [False, True])
def test_beta_converges_where_scipys_digamma_takes_it(like_gpu):
    rng = np.random.default_rng(5)
    b = rng.poisson(0.4, (300, 15)).astype(np.float64)
    count, n_cells = np.unique(b[b > 0], return_counts=True)
    got = _learning.update_beta(0.5, count, n_cells, b.sum(axis=0), 300, like_gpu=like_gpu)
    beta = 0.5
    for _ in range(_learning.MAX_ITERATIONS):
        num = np.sum(scipy_digamma(b + beta) - scipy_digamma(beta))
        den = 300 * np.sum(scipy_digamma(b.sum(axis=0) + 300 * beta) - scipy_digamma(300 * beta))
        beta, old = beta * num / den, beta
        if abs(beta - old) / old < _learning.TOLERANCE:
            break
    assert got == pytest.approx(beta, rel=1e-6)


def test_the_host_learns_like_a_gpu_only_for_gpu_chains():
    # The NumPy engine takes SciPy's digamma; a chain on GPUs whose fixed point runs on the
    # host (a Dask driver's, or seeded cells) takes the GPU's arithmetic.
    from sklearn_gpulda._runtime.device import Device
    from sklearn_gpulda.backends.numpy.sampler import NumpySampler

    _, start, table, rest, lengths = _doc_topic_inputs(6, seed=8)
    scipy_alpha = _learning.update_alpha(start, table, rest, *lengths)
    gpu_alpha = _learning.update_alpha(start, table, rest, *lengths, like_gpu=True)
    assert not np.array_equal(scipy_alpha, gpu_alpha)  # so the choice below is visible
    cpu = NumpySampler(6, 0.1, 0.01, 0)
    assert np.array_equal(cpu.learn_alpha(start, table, rest, *lengths), scipy_alpha)
    on_gpus = NumpySampler(6, 0.1, 0.01, 0)
    on_gpus.device = Device("cuda", (0,))  # what a Dask driver of GPU workers holds
    assert np.array_equal(on_gpus.learn_alpha(start, table, rest, *lengths), gpu_alpha)


# -- on the GPU ---------------------------------------------------------------------------------
def _cupy():
    cp = pytest.importorskip("cupy")
    from sklearn_gpulda._runtime.device import gpu_count

    if not gpu_count():
        pytest.skip("no GPU")
    return cp


@pytest.mark.gpu
def test_device_digamma_is_the_hosts_bit_for_bit():
    cp = _cupy()
    from sklearn_gpulda.backends.cuda import prior_kernels

    x = np.concatenate([_arguments(seed=2, n=250_000),
                        np.random.default_rng(3).integers(1, 10 ** 6, 100_000) + 0.37])
    got = prior_kernels.digamma(cp, x)
    want = digamma(x)
    mismatch = np.flatnonzero(got.view(np.int64) != want.view(np.int64))
    assert mismatch.size == 0, (x[mismatch[:5]], got[mismatch[:5]], want[mismatch[:5]])


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [1, 20, 1000, 1500])  # 1500: three topics a thread
@pytest.mark.parametrize("weighted", [False, True])
def test_device_alpha_is_the_hosts_bit_for_bit(n_topics, weighted):
    cp = _cupy()
    from sklearn_gpulda.backends.cuda import prior_kernels

    _, start, table, rest, lengths = _doc_topic_inputs(n_topics, seed=n_topics,
                                                       weighted=weighted)
    assert rest[0].size and lengths[0].size > 512  # pairs and lengths past one block's threads
    want = _learning.update_alpha(start, table, rest, *lengths, like_gpu=True)
    got = prior_kernels.alpha_fixed_point(cp, start, table, rest, *lengths)
    assert got.view(np.int64).tolist() == want.view(np.int64).tolist()
    # Pairs in another order: the device sums each topic's in the order the host meets them.
    order = np.random.default_rng(0).permutation(rest[0].size)
    shuffled = tuple(np.asarray(a)[order] for a in rest)
    got = prior_kernels.alpha_fixed_point(cp, start, table, shuffled, *lengths)
    assert np.array_equal(got, _learning.update_alpha(start, table, shuffled, *lengths,
                                                      like_gpu=True))


@pytest.mark.gpu
def test_device_alpha_without_table_or_documents():
    cp = _cupy()
    from sklearn_gpulda.backends.cuda import prior_kernels

    _, start, table, rest, lengths = _doc_topic_inputs(7, seed=9, weighted=True)
    empty = np.zeros((7, 0))
    want = _learning.update_alpha(start, empty, rest, *lengths, like_gpu=True)
    assert np.array_equal(prior_kernels.alpha_fixed_point(cp, start, empty, rest, *lengths),
                          want)
    no_docs = prior_kernels.alpha_fixed_point(cp, start, table, rest, np.zeros(0), np.zeros(0))
    assert np.array_equal(no_docs, start)


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [3, 100, 2000])
@pytest.mark.parametrize("weighted", [False, True])
def test_device_beta_is_the_hosts_bit_for_bit(n_topics, weighted):
    cp = _cupy()
    from sklearn_gpulda.backends.cuda import prior_kernels

    rng = np.random.default_rng(n_topics)
    b = rng.poisson(rng.gamma(0.2, 3.0, (3000, n_topics))).astype(np.float64)
    if weighted:
        b *= rng.choice([0.25, 1.0, 1.3], b.shape)
    count, n_cells = np.unique(b[b > 0], return_counts=True)
    totals = b.sum(axis=0)
    for start in (0.01, 0.7):
        want = _learning.update_beta(start, count, n_cells, totals, 3000, like_gpu=True)
        got = prior_kernels.beta_fixed_point(cp, start, count, n_cells, totals, 3000)
        assert got == want and got != start


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["sparse", "dense"])
def test_a_gpu_fit_learns_the_priors_of_its_histograms_on_the_host(algorithm):
    # Every prior update of a GPU fit, replayed by the host's fixed points: the same bits.
    _cupy()
    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda.backends.cuda.chain import CudaChain

    X = load_kjv_chapters().data[:300]
    seen = []
    learn_alpha, learn_beta = CudaChain.learn_alpha, CudaChain.learn_beta

    def alpha_spy(self, *args):
        got = learn_alpha(self, *args)
        seen.append((got, _learning.update_alpha(*args, like_gpu=True)))
        return got

    def beta_spy(self, *args):
        got = learn_beta(self, *args)
        seen.append((np.array([got]), np.array([_learning.update_beta(*args, like_gpu=True)])))
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CudaChain, "learn_alpha", alpha_spy)
        mp.setattr(CudaChain, "learn_beta", beta_spy)
        mp.setattr(CudaChain, "resident_priors", False)  # the two-step path
        GPULatentDirichletAllocation(n_components=24, max_iter=45, algorithm=algorithm,
                                     random_state=0).fit(X)
    assert len(seen) >= 6
    for got, want in seen:
        assert got.view(np.int64).tolist() == want.view(np.int64).tolist()


def _long_documents(n_docs=1500, n_words=500, seed=11):
    """Long documents over a small vocabulary with a few very frequent words: at K = 4 most
    documents hold a topic 64 times or more (A's overflow keys, thousands of them) and the
    frequent words' cells hold 4,096 tokens and more (B's overflow values)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_words + 1) ** 1.1
    lengths = rng.integers(200, 600, n_docs)
    rows = [rng.multinomial(n, p / p.sum()) for n in lengths]
    return sp.csr_matrix(np.array(rows, dtype=np.int64))


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["sparse", "dense"])
@pytest.mark.parametrize("corpus", ["kjv", "long"])
def test_resident_prior_updates_learn_the_two_step_priors(algorithm, corpus):
    # Every resident update (histograms sorted and counted on the device), against the
    # two-step path on the same state: the host's copies of the histograms, its fixed points.
    _cupy()
    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda.backends.cuda.chain import CudaChain

    X, k = (load_kjv_chapters().data, 20) if corpus == "kjv" else (_long_documents(), 4)
    seen = []
    resident = CudaChain.learn_priors

    def spy(self, alpha, beta, lengths, n_words, cells=None):
        got = resident(self, alpha, beta, lengths, n_words, cells)
        assert got is not None
        table, rest = self.doc_topic_table()
        count, n_cells, totals = self.word_topic_histogram()
        want = (_learning.update_alpha(alpha, table, rest, *lengths, like_gpu=True),
                _learning.update_beta(beta, count, n_cells, totals, n_words, like_gpu=True))
        seen.append((got, want, rest[2].sum(), count.max()))
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CudaChain, "learn_priors", spy)
        GPULatentDirichletAllocation(n_components=k, max_iter=42, algorithm=algorithm,
                                     random_state=0).fit(X)
    assert len(seen) >= 3
    for (alpha, beta), (want_alpha, want_beta), _, _ in seen:
        assert alpha.view(np.int64).tolist() == want_alpha.view(np.int64).tolist()
        assert np.float64(beta).view(np.int64) == np.float64(want_beta).view(np.int64)
    if corpus == "long":  # the sorts ran over several tiles of the block, on both sides
        assert max(keys for _, _, keys, _ in seen) > 2000
        assert max(top for _, _, _, top in seen) >= 4096


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["sparse", "dense"])
def test_a_fit_is_the_same_with_resident_prior_updates(algorithm):
    # Resident updates against the two-step path through a whole default fit: the same model.
    _cupy()
    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda.backends.cuda.chain import CudaChain

    X = load_kjv_chapters().data[:400]

    def fit():
        return GPULatentDirichletAllocation(n_components=16, max_iter=60, algorithm=algorithm,
                                            random_state=3).fit(X)

    resident = fit()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CudaChain, "resident_priors", False)
        two_step = fit()
    assert np.array_equal(resident.components_, two_step.components_)
    assert np.array_equal(resident.doc_topic_prior_, two_step.doc_topic_prior_)
    assert resident.topic_word_prior_ == two_step.topic_word_prior_


def test_prior_updates_take_the_resident_priors_where_a_sampler_has_them():
    # The fit loop's update asks the sampler first; only a sampler that cannot learn from
    # histograms it keeps (the NumPy engine, a Dask rank) is asked for the histograms.
    from sklearn_gpulda._fitting.batch import PriorUpdates
    from sklearn_gpulda._input.corpus import tokens as token_corpus
    from sklearn_gpulda.backends.numpy.sampler import NumpySampler
    from sklearn_gpulda.backends.priors import Prior

    tokens = token_corpus(load_kjv_chapters().data[:30])
    updates = PriorUpdates(Prior(0.1, True), Prior(0.01, True), 0, 10, tokens)

    class Resident(NumpySampler):
        asked = None

        def learn_priors(self, alpha=None, beta=None, lengths=None, n_words=None, cells=None):
            self.asked = (alpha, beta, n_words)
            return np.full(self.n_topics, 0.25), 0.5

        def doc_topic_table(self):
            raise AssertionError("a resident update reads no histogram")

    sampler = Resident(5, 0.1, 0.01, 0)
    sampler.load(tokens)
    sampler.init_topics()
    updates.update(sampler)
    assert sampler.asked[1] == 0.01 and sampler.asked[2] == tokens.n_words
    assert np.array_equal(sampler.alpha, np.full(5, 0.25)) and sampler.beta == 0.5
    plain = NumpySampler(5, 0.1, 0.01, 0)
    plain.load(tokens)
    plain.init_topics()
    assert plain.learn_priors(plain.alpha, plain.beta, updates.lengths, tokens.n_words) is None
    updates.update(plain)  # the two-step path
    assert not np.array_equal(plain.alpha, np.full(5, 0.1))
