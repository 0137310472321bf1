"""The GPU Metropolis-Hastings chain (``backends/cuda/mh``, ``cuda/sample_mh.cu``): from the same
topics and key it draws the NumPy reference's topics (``NumpySampler(rule='mh')``) token for
token, its counts are those topics' counts, and it refuses what it cannot run."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import CPU
from sklearn_gpulda.backends.cuda.mh import MhChain
from sklearn_gpulda.backends.cuda.mh.checks import check_corpus, check_iteration, topic_dtype
from sklearn_gpulda.backends.cuda.mh.layout import TokenLayout
from sklearn_gpulda.backends.numpy import NumpySampler
from sklearn_gpulda.backends.numpy.mh_rule import FrozenState, draw_topics_mh
from sklearn_gpulda.datasets import load_kjv_chapters

SEED = 7
BETA = 0.05


@pytest.fixture(scope="module")
def chapters():
    return load_kjv_chapters().data[:200]


def _short_documents(seed=5):
    """Documents of 1 to 4 tokens over 30 words; word 0 occurs once, in a one-token document:
    the alpha and uniform proposals carry much of the mass, and both 'other token' draws have
    no other token to take."""
    rng = np.random.default_rng(seed)
    rows = [np.bincount(rng.integers(1, 30, size=1 + d % 4), minlength=31) for d in range(300)]
    X = np.array(rows)
    X[0, :] = 0
    X[0, 0] = 1
    return sp.csr_matrix(X)


def _alpha(n_topics, kind):
    if kind == "symmetric":
        return 0.1
    # Uneven, so that the alpha draw's search over running sums matters.
    return np.linspace(0.01, 0.5, n_topics)


def _reference(X, n_topics, alpha):
    sampler = NumpySampler(n_topics, alpha, BETA, SEED, CPU, rule="mh", n_jobs=1)
    sampler.load(tokens(X))
    sampler.init_topics()
    return sampler


def _chain(X, n_topics, alpha, **kwargs):
    chain = MhChain(n_topics, alpha, BETA, SEED, **kwargs)
    chain.load(tokens(X))
    return chain


# -- GPU: exact draws -------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [20, 1000])
def test_initial_topics_are_every_engines(chapters, n_topics):
    reference = _reference(chapters, n_topics, 0.1)
    chain = _chain(chapters, n_topics, 0.1)
    chain.init_topics()
    np.testing.assert_array_equal(chain.topics(), reference.topics())


@pytest.mark.gpu
@pytest.mark.parametrize("alpha", ["symmetric", "asymmetric"])
@pytest.mark.parametrize("corpus, n_topics", [("kjv", 20), ("kjv", 1000), ("short", 20)])
def test_sweeps_draw_the_references_topics(chapters, corpus, n_topics, alpha):
    # Same start, same key: every token's topic after 1, 2 and 5 sweeps is the reference's.
    X = chapters if corpus == "kjv" else _short_documents()
    alpha = _alpha(n_topics, alpha)
    reference = _reference(X, n_topics, alpha)
    chain = _chain(X, n_topics, alpha)
    chain.set_topics(reference.topics())
    for iteration in range(1, 6):
        reference.sweep(iteration)
        chain.sweep(iteration)
        if iteration in (1, 2, 5):
            expected = reference.topics()
            got = chain.topics()
            moved = np.flatnonzero(got != expected)
            assert moved.size == 0, (iteration, moved[:10], got[moved[:10]], expected[moved[:10]])
    np.testing.assert_array_equal(chain.doc_topic_counts(), reference.doc_topic_counts())
    np.testing.assert_array_equal(chain.word_topic_counts(), reference._b)


@pytest.mark.gpu
def test_sweeps_move_the_topics(chapters):
    chain = _chain(chapters, 20, 0.1)
    chain.init_topics()
    start = chain.topics()
    chain.sweep(1)
    assert np.mean(chain.topics() != start) > 0.5


@pytest.mark.gpu
@pytest.mark.parametrize("n_cycles", [1, 3])
def test_other_cycle_counts_draw_the_references_topics(chapters, n_cycles):
    reference = _reference(chapters, 20, 0.1)
    chain = _chain(chapters, 20, 0.1, n_cycles=n_cycles)
    chain.set_topics(reference.topics())
    corpus = reference.corpus
    state = FrozenState(reference._z, corpus.doc_ptr, reference._by_word, reference._word_ptr,
                        reference._a, reference._tables, reference.alpha)
    expected = draw_topics_mh(state, corpus.doc, corpus.word, SEED, 3, n_cycles=n_cycles)
    chain.sweep(3)
    np.testing.assert_array_equal(chain.topics(), expected)


@pytest.mark.gpu
def test_integer_doc_counts_draw_the_same_topics(chapters):
    a = _chain(chapters, 50, 0.1)
    b = _chain(chapters, 50, 0.1, count_dtype=np.int32)
    for chain in (a, b):
        chain.init_topics()
        chain.sweep(1)
        chain.sweep(2)
    np.testing.assert_array_equal(a.topics(), b.topics())
    np.testing.assert_array_equal(a.doc_topic_counts(), b.doc_topic_counts())


@pytest.mark.gpu
def test_int32_topics_past_65536_draw_the_references_topics():
    # K = 70,000 takes int32 topics; a tiny corpus keeps the dense tables small.
    X = _short_documents()
    n_topics = 70_000
    assert topic_dtype(n_topics) == np.int32
    reference = _reference(X, n_topics, 0.1)
    chain = _chain(X, n_topics, 0.1)
    chain.set_topics(reference.topics())
    for iteration in (1, 2):
        reference.sweep(iteration)
        chain.sweep(iteration)
    np.testing.assert_array_equal(chain.topics(), reference.topics())


@pytest.mark.gpu
def test_same_seed_same_topics_other_seed_others(chapters):
    runs = []
    for seed in (SEED, SEED, SEED + 1):
        chain = MhChain(20, 0.1, BETA, seed)
        chain.load(tokens(chapters))
        chain.init_topics()
        chain.sweep(1)
        runs.append(chain.topics())
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


# -- GPU: counts --------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [20, 1000, 9000])
def test_counts_are_the_topics_counts(chapters, n_topics):
    # 9,000 topics: past kMhSharedTotals, the totals are counted by global atomics.
    X = chapters[:60]
    chain = _chain(X, n_topics, 0.1)
    chain.init_topics()
    chain.sweep(1)
    z = chain.topics()
    corpus = tokens(X)
    a, b, totals = chain.doc_topic_counts(), chain.word_topic_counts(), chain.topic_totals()
    np.testing.assert_array_equal(a.sum(axis=1), np.diff(corpus.doc_ptr))
    np.testing.assert_array_equal(b.sum(axis=0), totals)
    np.testing.assert_array_equal(b.sum(axis=1), np.asarray(X.sum(axis=0)).ravel())
    assert totals.sum() == corpus.n_tokens
    np.testing.assert_array_equal(totals, np.bincount(z, minlength=n_topics))
    expected_a = np.zeros_like(a)
    np.add.at(expected_a, (corpus.doc, z), 1)
    np.testing.assert_array_equal(a, expected_a)


@pytest.mark.gpu
def test_log_likelihood_is_the_references(chapters):
    reference = _reference(chapters, 20, 0.1)
    chain = _chain(chapters, 20, 0.1)
    chain.set_topics(reference.topics())
    for iteration in (1, 2):
        reference.sweep(iteration)
        chain.sweep(iteration)
    # The reference forms its per-token masses in float32, this in float64.
    assert chain.log_likelihood() == pytest.approx(reference.log_likelihood(), rel=1e-6)


# -- CPU: what the chain refuses, and its layout --------------------------------------------------

def test_weighted_counts_are_refused(chapters):
    chain = MhChain(4, 0.1, BETA, 0)
    with pytest.raises(ValueError, match="integer counts"):
        chain.load(tokens(chapters.astype(np.float64) * 0.5))


def test_an_empty_corpus_is_refused():
    with pytest.raises(ValueError, match="no tokens"):
        check_corpus(tokens(sp.csr_matrix((3, 5), dtype=np.int64)), 4)


def test_a_non_corpus_is_refused(chapters):
    with pytest.raises(ValueError, match="TokenCorpus"):
        MhChain(4, 0.1, BETA, 0).load(chapters)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_topics=0), "n_topics"),
    (dict(alpha=-1.0), "alpha"),
    (dict(alpha=np.ones(3)), "alpha"),
    (dict(beta=0.0), "beta"),
    (dict(beta=float("nan")), "beta"),
    (dict(seed=1.5), "seed"),
    (dict(n_cycles=0), "n_cycles"),
    (dict(count_dtype=np.float64), "count_dtype"),
])
def test_bad_settings_are_refused(kwargs, match):
    settings = dict(n_topics=4, alpha=0.1, beta=BETA, seed=0)
    settings.update(kwargs)
    with pytest.raises(ValueError, match=match):
        MhChain(**settings)


@pytest.mark.parametrize("iteration", [-1, 2**32, 1.0])
def test_bad_iterations_are_refused(iteration):
    with pytest.raises(ValueError, match="iteration"):
        check_iteration(iteration)


def test_sweeping_before_loading_is_refused():
    with pytest.raises(RuntimeError, match="load a corpus"):
        MhChain(4, 0.1, BETA, 0).sweep(1)


def test_the_layout_is_the_references(chapters):
    # The word proposal picks "another token of the word" by its place in by_word: the chain
    # must order the tokens as the NumPy reference does.
    X = chapters[:50]
    reference = _reference(X, 4, 0.1)
    layout = TokenLayout(tokens(X))
    np.testing.assert_array_equal(layout.by_word, reference._by_word)
    np.testing.assert_array_equal(layout.word_ptr, reference._word_ptr)
    np.testing.assert_array_equal(layout.word_rank, reference._word_rank)
    np.testing.assert_array_equal(layout.doc, reference.corpus.doc)
    counts = sp.csr_matrix((layout.nz_count, (layout.nz_doc, layout.nz_word)), shape=X.shape)
    np.testing.assert_array_equal(counts.toarray(), X.toarray())
