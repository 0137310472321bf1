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
from sklearn_gpulda.backends.prior_learning import update_beta
from sklearn_gpulda.backends.priors import CellPrior, resolve_topic_word_prior
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


@pytest.mark.parametrize("kwargs, match", [
    (dict(seeds={0: ["a", "zebra", "yak"]}), r"not in the vocabulary: 'zebra', 'yak'"),
    (dict(seeds={3: ["a"]}), "seed topic 3 is out of range"),
    (dict(seeds={-1: ["a"]}), "seed topic -1 is out of range"),
    (dict(strength=0.0), "strength must be a finite positive number"),
    (dict(strength=float("nan")), "strength must be a finite positive number"),
    (dict(strength="5"), "strength must be a finite positive number"),
    (dict(base=-1.0), "base must be a finite positive number or 'auto'"),
    (dict(base="learn"), "base must be a finite positive number or 'auto'"),
])
def test_helper_errors(kwargs, match):
    args = dict(seeds={0: ["a"]}, strength=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        seeded_topic_prior(["a", "b"], n_components=3, **args)


def test_helper_rejects_a_string_of_seeds_and_an_unfitted_vectorizer():
    with pytest.raises(TypeError, match="must be a list of words"):
        seeded_topic_prior(["a", "b"], {0: "a"}, 2, strength=1.0)
    with pytest.raises(ValueError, match="is it fitted"):
        seeded_topic_prior(CountVectorizer(), {0: ["a"]}, 2, strength=1.0)


# -- resolving the parameter ---------------------------------------------------------------------
def test_a_dense_matrix_keeps_only_the_cells_above_its_least_value():
    eta = np.full((3, 6), 0.05)
    eta[1, 4] = 2.0
    eta[2, 0] = 0.5
    prior, cells = resolve_topic_word_prior(eta, 1 / 3, 3, 6)
    assert prior.value == 0.05 and not prior.learn
    assert cells.n_cells == 2
    np.testing.assert_allclose(cells.as_matrix().toarray() + 0.05, eta)
    np.testing.assert_allclose(cells.topic_sums, [0, 1.95, 0.45])
    np.testing.assert_array_equal(cells.at([4, 0, 3], [1, 2, 1]), [1.95, 0.45, 0.0])
    np.testing.assert_allclose(cells.rows([0, 4]), (eta - 0.05)[:, [0, 4]].T)


def test_a_large_prior_with_few_seeds_costs_its_cells():
    additions = sparse.random(1000, 100_000, density=5e-7, format="csr", random_state=0)
    additions.data[:] = 3.0
    prior, cells = resolve_topic_word_prior(("auto", additions), 1e-3, 1000, 100_000)
    assert prior.learn and cells.n_cells == additions.nnz == 50
    held = sum(a.nbytes for a in (cells.cell, cells.word, cells.topic, cells.value))
    assert held < 10_000 and cells.topic_sums.size == 1000


@pytest.mark.parametrize("param, match", [
    (np.ones((4, 6)), r"shape \(n_components, n_features\) = \(3, 6\), got shape \(4, 6\)"),
    (np.ones((3, 5)), r"got shape \(3, 5\)"),
    (np.zeros((3, 6)), "finite and positive"),
    (np.ones(3), "must have shape"),
    (sparse.csr_matrix((3, 6)), "ambiguous"),
    ((0.0, sparse.csr_matrix((3, 6))), "base of a matrix topic_word_prior"),
    ((0.1, sparse.csr_matrix(-np.ones((3, 6)))), "non-negative"),
])
def test_matrix_prior_errors(param, match):
    with pytest.raises(ValueError, match=match):
        resolve_topic_word_prior(param, 1 / 3, 3, 6)


# -- the draws: the conditional with a matrix prior ------------------------------------------------
def _exact_conditional(a_row, b, totals, eta, alpha, v, z):
    """p(k) ∝ (A[d,k] - [k=z] + alpha_k)(B[v,k] - [k=z] + eta[k,v]) / (n_k - [k=z] + sum_v eta)."""
    own = np.arange(b.shape[1]) == z
    p = ((a_row - own + alpha) * (b[v] - own + eta[:, v])
         / (totals - own + eta.sum(axis=1)))
    return p / p.sum()


def _grid_frequencies(draw, n_topics, n=200_001):
    """Fractions of a fine grid of uniforms that draw each topic: the draw's probabilities."""
    u = ((np.arange(n) + 0.5) / n).astype(np.float32)
    return np.bincount(draw(u), minlength=n_topics) / n


@pytest.mark.parametrize("rule", ["sparse", "dense", "minibatch"])
def test_draw_probabilities_follow_the_matrix_prior(rule):
    corpus = tokens(_corpus().data[:40])
    k, v_count = K, corpus.n_words
    rng = np.random.default_rng(3)
    additions = sparse.coo_matrix((rng.uniform(0.5, 4.0, 12),
                                   (rng.integers(0, k, 12), rng.integers(0, v_count, 12))),
                                  shape=(k, v_count))
    beta = 0.05
    cells = CellPrior(additions)
    eta = beta + cells.as_matrix().toarray()
    s = NumpySampler(k, 0.2, beta, 11, CPU, rule="sparse")
    s.set_beta_cells(cells)
    s.load(corpus)
    s.init_topics()
    a = s._a.copy()
    b = s._b.astype(np.float64)
    totals = b.sum(axis=0)
    alpha = np.full(k, 0.2)
    # Tokens of seeded words, including one whose current topic is a seeded cell.
    seeded_words = set(cells.word.tolist())
    picks = [t for t in range(corpus.n_tokens) if corpus.word[t] in seeded_words][:4]
    assert picks
    for t in picks:
        d, v, z = int(corpus.doc[t]), int(corpus.word[t]), int(s._z[t])
        one = lambda arr, n: np.full(n, arr, dtype=np.int64)  # noqa: E731
        if rule == "sparse":
            draw = lambda u: draw_topics(one(d, u.size), one(v, u.size), one(z, u.size),  # noqa
                                         None, u, a, s._tables)
        elif rule == "dense":
            draw = lambda u: draw_topics_dense(one(d, u.size), one(v, u.size),  # noqa: E731
                                               one(z, u.size), None, u, a, s._tables.bhat,
                                               alpha, s._tables.word_side, cells=cells)
        else:
            dnt, denom = batch_doc_side(a[d:d + 1], totals, v_count, alpha, beta, cells)
            draw = lambda u: draw_batch(one(0, u.size), one(v, u.size), one(z, u.size),  # noqa
                                        None, u, a[d:d + 1], s._b, denom, dnt, alpha, beta,
                                        cells=cells)
        want = _exact_conditional(a[d].astype(np.float64), b, totals, eta, alpha, v, z)
        np.testing.assert_allclose(_grid_frequencies(draw, k), want, atol=2e-5)


def test_tables_hold_the_matrix_prior():
    corpus = tokens(_corpus().data[:40])
    additions = sparse.coo_matrix(([2.0, 7.0], ([1, 3], [5, 9])), shape=(K, corpus.n_words))
    cells = CellPrior(additions)
    s = NumpySampler(K, 0.2, 0.05, 11, CPU)
    s.set_beta_cells(cells)
    s.load(corpus)
    s.init_topics()
    b = s._b.astype(np.float64)
    eta = 0.05 + cells.as_matrix().toarray()
    want = (b + eta.T) / (b.sum(axis=0) + eta.sum(axis=1))
    np.testing.assert_allclose(s._tables.bhat, want, rtol=1e-6)
    np.testing.assert_allclose(s.topic_word_components(), b.T + eta, rtol=1e-12)
    np.testing.assert_array_equal(s.seeded_counts(), b[[5, 9], [1, 3]])


# -- learning the base ---------------------------------------------------------------------------
def test_learned_base_with_zero_cells_is_update_beta():
    rng = np.random.default_rng(0)
    b = rng.poisson(0.7, size=(60, 4)).astype(np.float64)
    values, n_cells = np.unique(b[b > 0], return_counts=True)
    totals = b.sum(axis=0)
    zero = CellPrior(sparse.coo_matrix(([0.0, 0.0], ([0, 2], [3, 7])), shape=(4, 60)))
    assert (update_beta(0.1, values, n_cells, totals, 60, zero, b[[3, 7], [0, 2]])
            == update_beta(0.1, values, n_cells, totals, 60))


def test_learned_base_maximises_the_likelihood_with_fixed_cells():
    from scipy.special import gammaln

    rng = np.random.default_rng(1)
    b = rng.poisson(0.5, size=(80, 3)).astype(np.float64)
    b[[2, 9], [0, 1]] += 20
    extra = np.zeros((3, 80))
    extra[0, 2], extra[1, 9] = 5.0, 3.0
    cells = CellPrior(sparse.coo_matrix(extra))
    values, n_cells = np.unique(b[b > 0], return_counts=True)
    got = update_beta(0.3, values, n_cells, b.sum(axis=0), 80, cells,
                      b[cells.word, cells.topic])

    def loglik(beta):
        eta = beta + extra.T
        return (gammaln(eta.sum(axis=0)) - gammaln(b.sum(axis=0) + eta.sum(axis=0))).sum() + \
            (gammaln(b + eta) - gammaln(eta)).sum()

    grid = np.linspace(got * 0.8, got * 1.2, 41)
    assert abs(grid[np.argmax([loglik(x) for x in grid])] - got) <= (grid[1] - grid[0])


# -- the estimator ---------------------------------------------------------------------------------
def _fit(topic_word_prior, algorithm="sparse", max_iter=300, **kw):
    return GPULatentDirichletAllocation(n_components=K, topic_word_prior=topic_word_prior,
                                        max_iter=max_iter, random_state=0, device="cpu",
                                        algorithm=algorithm, **kw).fit(_corpus().data)


def check_seeds_on_top(seeded, plain):
    """The seeded fit (strength 50) has every topic's seeds among its top words and the plain
    fit does not; the seeded cells are the model's prior on top of a learned base. Shared by the
    GPU tests (tests/test_cuda_seeded.py)."""
    seeds = _seeds()
    top_seeded, top_plain = _top_words(seeded), _top_words(plain)
    for k in range(K):
        assert set(seeds[k]) <= top_seeded[k], (k, seeds[k])
    # Unseeded, the chain puts those words in other topics: the test can fail.
    assert sum(set(seeds[k]) <= top_plain[k] for k in range(K)) < K
    assert seeded.topic_word_prior_ != 1 / K
    cells = seeded.topic_word_prior_cells_
    assert sparse.isspmatrix_csr(cells) and cells.nnz == 3 * K
    assert np.all(seeded.components_[cells.nonzero()] >= 50.0)
    assert not hasattr(plain, "topic_word_prior_cells_")


def test_seeded_topics_keep_their_seed_words_at_convergence():
    prior = seeded_topic_prior(_corpus().feature_names, _seeds(), K, strength=50.0)
    check_seeds_on_top(_fit(prior), _fit("auto"))


@pytest.mark.parametrize("algorithm", ["sparse", "dense", "minibatch"])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_matrix_of_beta_is_the_scalar_prior_bit_for_bit(algorithm, n_jobs, monkeypatch):
    if n_jobs > 1:
        # Small corpora stay on one thread: send this one to worker processes.
        monkeypatch.setattr(sampler_module, "PROCESS_MIN_TOKENS", 0)
        monkeypatch.setattr(processes, "usable_cores", lambda: 8)
        monkeypatch.setattr(processes, "busy_elsewhere", lambda cores=None: 0.0)
        monkeypatch.setattr(processes, "MIN_WORK_PER_WORKER", 1)
    teams = []
    choose = sampler_module.choose_team
    monkeypatch.setattr(sampler_module, "choose_team",
                        lambda *a, **k: teams.append(choose(*a, **k)) or teams[-1])
    X = _corpus().data
    v = X.shape[1]
    kw = dict(algorithm=algorithm, max_iter=15, n_jobs=n_jobs, prior_update_every=5)
    scalar = _fit(0.05, **kw)
    # Every cell beta: nothing is seeded.
    dense = _fit(np.full((K, v), 0.05), **kw)
    # Cells seeded with 0.0 go through the matrix prior's arithmetic.
    zeros = sparse.coo_matrix((np.zeros(4), ([0, 1, 4, 4], [0, 7, 3, 499])), shape=(K, v))
    cells = _fit((0.05, zeros), **kw)
    for model in (dense, cells):
        np.testing.assert_array_equal(model.components_, scalar.components_)
        assert model.bound_ == scalar.bound_
    # And a learned base.
    learned = _fit("auto", **kw)
    learned_cells = _fit(("auto", zeros), **kw)
    np.testing.assert_array_equal(learned_cells.components_, learned.components_)
    assert learned_cells.topic_word_prior_ == learned.topic_word_prior_
    kinds = {type(team) for team in teams}
    assert kinds == ({processes.ProcessTeam} if n_jobs > 1 else {processes.ThreadTeam})


def test_a_seeded_model_pickles_as_plain_data_and_transforms():
    prior = seeded_topic_prior(_corpus().feature_names, _seeds(), K, strength=50.0)
    model = _fit(prior, max_iter=20)
    again = pickle.loads(pickle.dumps(model))
    X = _corpus().data[:20]
    np.testing.assert_array_equal(again.transform(X), model.transform(X))
    assert isinstance(again.topic_word_prior_, float)
    assert type(again.topic_word_prior_cells_).__module__.startswith("scipy.sparse")
    # The parameter is plain data too: it clones, and the clone fits the same model.
    from sklearn.base import clone

    twin = clone(model).fit(_corpus().data)
    np.testing.assert_array_equal(twin.components_, model.components_)


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
        check_matrix_prior(without, cells)
    check_matrix_prior(without, None)
    for name in matrix_prior_engines():
        check_matrix_prior(by_name[name], cells)
    # Hash rows of B hold integer counts: no room for the seeded cells' pseudo-counts.
    with pytest.raises(ValueError, match="stored dense"):
        check_matrix_prior(by_name["cuda-sparse"], cells, "hybrid")
    check_matrix_prior(by_name["cuda-sparse"], cells, "dense")


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
