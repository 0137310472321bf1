"""Seeded topics: a matrix ``topic_word_prior`` (gensim's eta) on the CPU engine, which
engines take it, and :func:`sklearn_gpulda.seeded_topic_prior` (the GPU's tests:
tests/test_cuda_seeded.py)."""

import dataclasses
import functools
import pickle

import numpy as np
import pytest
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer

from sklearn_gpulda import GPULatentDirichletAllocation, seeded_topic_prior
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import CPU
from sklearn_gpulda.backends.numpy import processes, sampler as sampler_module
from sklearn_gpulda.backends.numpy.dense_rule import draw_topics_dense
from sklearn_gpulda.backends.numpy.minibatch_rule import batch_doc_side, draw_batch
from sklearn_gpulda.backends.numpy.sampler import NumpySampler
from sklearn_gpulda.backends.numpy.sparse_rule import draw_topics
from sklearn_gpulda.backends.priors import (
    CellPrior,
    resolve_topic_word_prior,
    update_beta,
)
from sklearn_gpulda.datasets import make_lda_corpus

K = 5
PERM = [3, 4, 0, 1, 2]  # model topic k is seeded with true topic PERM[k]'s words


@functools.lru_cache(maxsize=1)
def _corpus():
    return make_lda_corpus(n_docs=300, n_words=500, n_topics=K, doc_length=60, random_state=0)


def _seeds():
    """Three distinctive, frequent words of each true topic, seeded into another topic."""
    b = _corpus()
    phi = b.topic_word
    seeds = {}
    for k in range(K):
        j = PERM[k]
        score = phi[j] / phi.sum(axis=0) * (phi[j] > 0.02)
        seeds[k] = [b.feature_names[i] for i in np.argsort(-score)[:3]]
    return seeds


def _top_words(model, n=10):
    names = np.asarray(_corpus().feature_names)
    return [set(names[row]) for row in np.argsort(-model.components_, axis=1)[:, :n]]


# -- the helper ------------------------------------------------------------------------------------
def test_helper_builds_base_and_seeded_cells():
    base, additions = seeded_topic_prior(["a", "b", "c", "d"], {0: ["b", "d", "b"], 2: ["a"]},
                                         n_components=3, strength=4.0, base=0.1)
    assert base == 0.1 and sparse.issparse(additions) and additions.shape == (3, 4)
    assert additions.nnz == 3
    np.testing.assert_array_equal(additions.toarray(),
                                  [[0, 4, 0, 4], [0, 0, 0, 0], [4, 0, 0, 0]])
    # A list of lists numbers the topics; a fitted vectorizer gives its vocabulary.
    vec = CountVectorizer().fit(["apple banana", "cherry apple"])
    base, additions = seeded_topic_prior(vec, [["cherry"], [], ["apple", "banana"]], 3,
                                         strength=2.0)
    assert base == "auto"
    np.testing.assert_array_equal(additions.toarray(), [[0, 0, 2], [0, 0, 0], [2, 2, 0]])


def test_hybrid_storage_refuses_a_matrix_prior_through_the_estimator():
    # Every engine samples with a matrix prior; hash rows of B (integer counts) cannot hold the
    # seeded cells' pseudo-counts, so 'hybrid' storage is refused before anything is fitted.
    prior = seeded_topic_prior(_corpus().feature_names, {0: [_corpus().feature_names[0]]}, K,
                               strength=5.0)
    lda = GPULatentDirichletAllocation(n_components=K, topic_word_prior=prior, max_iter=2,
                                       random_state=0, device="cuda",
                                       word_topic_storage="hybrid")
    try:
        with pytest.raises(ValueError, match="stored dense"):
            lda.fit(_corpus().data)
    except Exception as exc:  # no GPU here: the device itself is refused first
        if "matrix" in str(exc) or "stored dense" in str(exc):
            raise
        pytest.skip(f"no CUDA device: {exc}")
    assert not hasattr(lda, "components_")


def test_fit_checks_the_matrix_shape_against_the_data():
    lda = GPULatentDirichletAllocation(n_components=K, topic_word_prior=np.ones((K, 7)),
                                       device="cpu", max_iter=2)
    with pytest.raises(ValueError, match=r"\(5, 500\), got shape \(5, 7\)"):
        lda.fit(_corpus().data)


def test_engines_that_take_a_matrix_prior_are_named_in_the_refusal():
    from sklearn_gpulda._fitting.plan import check_matrix_prior, matrix_prior_engines
    from sklearn_gpulda.backends import BACKENDS

    by_name = {b.name: b for b in BACKENDS}
    # Every engine takes it now; an engine registered without it would be refused by name.
    assert set(matrix_prior_engines()) == {b.name for b in BACKENDS}
    cells = CellPrior(sparse.coo_matrix(([1.0], ([0], [0])), shape=(2, 3)))
    without = dataclasses.replace(by_name["cuda-sparse"], name="cuda-new", matrix_prior=False)
    with pytest.raises(ValueError, match=r"'cuda-sparse', .*this fit would run 'cuda-new'"):
        check_matrix_prior(without, "batch", cells)
    check_matrix_prior(without, "batch", None)
    for name in matrix_prior_engines():
        for method in ("batch", "online", "partial"):
            check_matrix_prior(by_name[name], method, cells)
    # Hash rows of B hold integer counts: no room for the seeded cells' pseudo-counts.
    with pytest.raises(ValueError, match="stored dense"):
        check_matrix_prior(by_name["cuda-sparse"], "batch", cells, "hybrid")
    check_matrix_prior(by_name["cuda-sparse"], "batch", cells, "dense")


@pytest.mark.parametrize("device", [(0,), (0, 0)])
def test_a_gpu_plan_takes_a_matrix_prior(device):
    # Planned without a GPU: the sparse engine, one GPU or several, the dense and the
    # mini-batched engines carry the cells.
    from sklearn_gpulda._runtime.device import Device

    prior = seeded_topic_prior(["a", "b", "c"], {1: ["c"]}, 2, strength=3.0)
    lda = GPULatentDirichletAllocation(n_components=2, topic_word_prior=prior)
    plan = lda._plan(Device("cuda", device), "auto", 0)
    assert plan.backend.name == "cuda-sparse"
    np.testing.assert_array_equal(plan.beta_cells.as_matrix().toarray(), [[0, 0, 0], [0, 0, 3]])
    dense = lda._plan(Device("cuda", (0,)), "dense", 0)
    assert dense.backend.name == "cuda-dense"
    np.testing.assert_array_equal(dense.beta_cells.as_matrix().toarray(), [[0, 0, 0], [0, 0, 3]])
    batches = lda._plan(Device("cuda", (0,)), "minibatch", 0)
    assert batches.backend.name == "cuda-minibatch"
    np.testing.assert_array_equal(batches.beta_cells.as_matrix().toarray(),
                                  [[0, 0, 0], [0, 0, 3]])


# -- online learning and partial_fit ---------------------------------------------------------------
def _online(topic_word_prior, max_iter=20, algorithm="sparse", **kw):
    return GPULatentDirichletAllocation(
        n_components=K, topic_word_prior=topic_word_prior, learning_method="online",
        max_iter=max_iter, batch_size=50, random_state=0, device="cpu", algorithm=algorithm,
        **kw).fit(_corpus().data)


def test_online_seeded_topics_keep_their_seed_words():
    # The mini-batch chains blend towards eta + (D / n) S: after 20 passes every seeded topic
    # still has its seed words on top; unseeded, none does.
    seeds = _seeds()
    prior = seeded_topic_prior(_corpus().feature_names, seeds, K, strength=50.0)
    seeded, plain = _online(prior), _online("auto")
    top_seeded, top_plain = _top_words(seeded), _top_words(plain)
    for k in range(K):
        assert set(seeds[k]) <= top_seeded[k], (k, seeds[k])
    assert sum(set(seeds[k]) <= top_plain[k] for k in range(K)) < K
    # Online learning learns no prior: the base stays where 'auto' starts it.
    assert seeded.topic_word_prior_ == 1 / K
    cells = seeded.topic_word_prior_cells_
    assert sparse.isspmatrix_csr(cells) and cells.nnz == 3 * K
    assert not hasattr(plain, "topic_word_prior_cells_")


def test_partial_fit_with_seeded_topics_keeps_their_seed_words():
    seeds = _seeds()
    prior = seeded_topic_prior(_corpus().feature_names, seeds, K, strength=50.0)
    X = _corpus().data
    lda = GPULatentDirichletAllocation(n_components=K, topic_word_prior=prior, batch_size=50,
                                       total_samples=X.shape[0], random_state=0, device="cpu")
    for _ in range(10):
        for start in range(0, X.shape[0], 100):
            lda.partial_fit(X[start:start + 100])
    top = _top_words(lda)
    for k in range(K):
        assert set(seeds[k]) <= top[k], (k, seeds[k])
    assert lda.topic_word_prior_cells_.nnz == 3 * K


def _zero_cells(v):
    """Cells seeded with 0.0, some at words a mini-batch of 50 documents does not hold."""
    X = _corpus().data
    absent = np.flatnonzero(np.asarray(X[:50].sum(axis=0)).ravel() == 0)
    assert absent.size  # a later batch's blend of a cell outside its columns is tested too
    return sparse.coo_matrix((np.zeros(4), ([0, 1, 4, 2], [0, 7, v - 1, absent[0]])),
                             shape=(K, v))


@pytest.mark.parametrize("algorithm", ["sparse", "minibatch"])
def test_online_matrix_of_beta_is_the_scalar_model_bit_for_bit(algorithm):
    v = _corpus().data.shape[1]
    scalar = _online(0.05, max_iter=3, algorithm=algorithm, evaluate_every=1)
    for prior in (np.full((K, v), 0.05), (0.05, _zero_cells(v))):
        model = _online(prior, max_iter=3, algorithm=algorithm, evaluate_every=1)
        np.testing.assert_array_equal(model.components_, scalar.components_)
        assert model.bound_ == scalar.bound_


def test_partial_fit_matrix_of_beta_is_the_scalar_model_bit_for_bit():
    X = _corpus().data
    v = X.shape[1]

    def run(prior, max_iter=None):
        lda = GPULatentDirichletAllocation(n_components=K, topic_word_prior=prior,
                                           batch_size=50, total_samples=X.shape[0],
                                           random_state=0, device="cpu")
        for start in range(0, X.shape[0], 150):
            lda.partial_fit(X[start:start + 150])
        return lda

    scalar = run(0.05)
    model = run((0.05, _zero_cells(v)))
    np.testing.assert_array_equal(model.components_, scalar.components_)
    assert model.bound_ == scalar.bound_


def test_online_target_adds_the_seeded_cells_to_the_base():
    # No pass at all: the model is the prior, eta itself.
    v = _corpus().data.shape[1]
    eta = np.full((K, v), 0.05)
    eta[2, 10] = 3.0
    model = _online(eta, max_iter=0)
    np.testing.assert_array_equal(model.components_, eta)
