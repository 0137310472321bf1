"""The dense engine's fused M-step (cuda/dense_mstep.cu, counts in cuda/sample_dense.cu) and its
warp-per-document kernel (``sample_dense_long``).

The fused M-step must give the model of the bincount path bit for bit (integer counts are exact
in float32 whatever order the atomics land in), and the long-document kernel the transpose
kernel's draws token for token. Every check compares exact arrays, so a wrong count, a Bhat
rounded differently or a draw moved by the change of thread fails it.
"""

import functools

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda.backends import random as _random
from sklearn_gpulda.backends.numpy.dense_rule import draw_topics_dense
from sklearn_gpulda.backends.numpy.row_tasks import count_pairs

SEED, ITERATION = 2024, 3
SWEEPS = 6


@functools.lru_cache(maxsize=1)
def _kjv_matrix():
    from sklearn_gpulda.datasets import load_kjv_chapters

    return sp.csr_matrix(load_kjv_chapters().data)


def _long_documents(target=2400):
    """Consecutive KJV chapters joined into documents of about ``target`` tokens: a document takes
    the chapters that start within its window of ``target`` tokens, so with chapters of at most
    1,176 tokens each has more than ``target - 1,176`` (the remainder joins the last); by
    default 128 documents of 1,820-3,047 tokens."""
    X = _kjv_matrix()
    lengths = np.asarray(X.sum(axis=1)).ravel()
    start = np.cumsum(lengths) - lengths
    group = (start // target).astype(np.int64)
    group = np.minimum(group, max(group.max() - 1, 0))
    join = sp.csr_matrix((np.ones(X.shape[0]), (group, np.arange(X.shape[0]))))
    return sp.csr_matrix(join @ X)


def _corpora():
    """name -> CSR counts: chapters (short and long mixed), long documents, and both at once."""
    X = _kjv_matrix()
    return {"chapters": X, "long": _long_documents(),
            "mixed": sp.vstack([X[:300], _long_documents()[:20]]).tocsr()}


def test_long_documents_are_long():
    lengths = np.asarray(_long_documents().sum(axis=1)).ravel()
    assert lengths.min() > 1000 and lengths.size >= 90


# -- the samplers --------------------------------------------------------------------------------
def _sampler(n_topics, **options):
    from sklearn_gpulda._runtime.device import resolve_device
    from sklearn_gpulda.backends.cuda.dense.sampler import CudaDenseSampler

    return CudaDenseSampler(n_topics, 50.0 / n_topics, 0.01, SEED, resolve_device("cuda:0"),
                            **options)


def _state(sampler):
    st = sampler._st
    return {"z": st.z.get(), "A": st.A.get(), "B": st.B.get(), "bhat": st.bhat.get(),
            "denom": st.denom.get()}


def _assert_same(got, ref, where):
    for name in ref:
        np.testing.assert_array_equal(got[name], ref[name], err_msg=f"{name} {where}")


def _run_pair(corpus, n_topics, fused_options, sweeps=SWEEPS, change_priors=True):
    """Run a fused and a bincount chain side by side, checking their state after every sweep."""
    fused = _sampler(n_topics, **fused_options)
    plain = _sampler(n_topics, mstep="bincount", long_document=None)
    for s in (fused, plain):
        s.load(corpus)
        s.init_topics()
    _assert_same(_state(fused), _state(plain), "after init")
    for it in range(1, sweeps + 1):
        if change_priors and it == sweeps // 2:  # a prior update rebuilds Bhat from B
            for s in (fused, plain):
                s.set_priors(alpha=0.3, beta=0.02)
        for s in (fused, plain):
            s.sweep(it)
        _assert_same(_state(fused), _state(plain), f"after sweep {it}")
    np.testing.assert_array_equal(fused.topic_word_components(), plain.topic_word_components())
    np.testing.assert_array_equal(fused.doc_topic_counts(), plain.doc_topic_counts())
    return fused, plain


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["chapters", "long", "mixed"])
@pytest.mark.parametrize("n_topics", [16, 33, 100])
def test_fused_mstep_gives_the_bincount_model(name, n_topics):
    corpus = tokens(_corpora()[name])
    fused, plain = _run_pair(corpus, n_topics, {"mstep": "fused", "long_document": 256})
    try:
        assert fused.fused_mstep and not plain.fused_mstep
        st = fused._st
        if name != "chapters":
            assert st.n_long > 0  # the warp-per-document kernel ran
        if name == "long":
            assert st.n_long == st.order.size and st.groups.max() > 1
        # The counts are those of the topics (the invariant a lost atomic would break).
        z = st.z.get()
        np.testing.assert_array_equal(
            st.A.get(), count_pairs(corpus.doc, z, None, corpus.n_docs, n_topics))
        np.testing.assert_array_equal(
            st.B.get(), count_pairs(corpus.word, z, None, corpus.n_words, n_topics))
    finally:
        fused.release()
        plain.release()


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["butterfly", "plain"])
def test_fused_mstep_with_the_other_kernels(variant):
    corpus = tokens(_kjv_matrix())
    fused = _sampler(24, variant=variant)
    plain = _sampler(24, variant=variant, mstep="bincount")
    try:
        for s in (fused, plain):
            s.load(corpus)
            s.init_topics()
        for it in range(1, 4):
            for s in (fused, plain):
                s.sweep(it)
            _assert_same(_state(fused), _state(plain), f"{variant} sweep {it}")
        assert fused._st.n_long == 0  # the warp path is the transpose kernel's
    finally:
        fused.release()
        plain.release()


@pytest.mark.gpu
def test_fused_mstep_with_the_topic_word_side_fixed():
    corpus = tokens(_long_documents())
    rng = np.random.default_rng(0)
    components = rng.gamma(0.5, size=(20, corpus.n_words)) + 1e-3
    fused, plain = _sampler(20), _sampler(20, mstep="bincount", long_document=None)
    try:
        for s in (fused, plain):
            s.load(corpus)
            s.init_topics()
            s.fix_topic_word(components)
        for it in range(1, 4):
            for s in (fused, plain):
                s.sweep(it)
            np.testing.assert_array_equal(fused.topics(), plain.topics())
            np.testing.assert_array_equal(fused.doc_topic_counts(), plain.doc_topic_counts())
        np.testing.assert_array_equal(fused.word_topic_counts(), plain.word_topic_counts())
    finally:
        fused.release()
        plain.release()


@pytest.mark.gpu
def test_weighted_corpus_falls_back_to_bincounts():
    X = _kjv_matrix()[:400].astype(np.float64)
    X.data *= 0.75  # non-integer counts: tokens carry weights
    corpus = tokens(X)
    assert corpus.weighted
    fused, plain = _run_pair(corpus, 16, {"mstep": "fused"}, sweeps=3, change_priors=False)
    try:
        assert fused.fused_mstep is False
        assert not hasattr(fused._st, "A_next")
    finally:
        fused.release()
        plain.release()


# -- the long-document kernel --------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [16, 33, 100, 1024])
@pytest.mark.parametrize("group", [1, 3, 8, "each"])
def test_long_kernel_draws_and_counts_as_the_oracle(n_topics, group):
    """With one group for every document, and ('each') a group of 1 to 32 warps per document
    drawn at random (the binary search of a warp's document over ``warp_ptr``)."""
    import cupy as cp

    from sklearn_gpulda.backends.cuda.dense.sample_dense import (
        document_order, sample_dense_long, warp_offsets)
    from sklearn_gpulda.backends.numpy import tables

    corpus = tokens(_long_documents(1300))  # 236 documents of 632-2,357 tokens
    rng = np.random.default_rng(n_topics)
    z = rng.integers(0, n_topics, size=corpus.n_tokens).astype(np.int32)
    A = count_pairs(corpus.doc, z, None, corpus.n_docs, n_topics).astype(np.float32)
    B = count_pairs(corpus.word, z, None, corpus.n_words, n_topics)
    wt = tables.WordTables.from_counts(B, B.sum(axis=0), 0.01, 0.1)
    alpha = 50.0 / n_topics
    u = _random.token_uniform(SEED, ITERATION, _random.STREAM_SAMPLE,
                              np.arange(corpus.n_tokens, dtype=np.int64))
    ref = draw_topics_dense(corpus.doc, corpus.word, z, None, u, A, wt.bhat, alpha, wt.word_side)

    doc_ptr = cp.asarray(corpus.doc_ptr, dtype=cp.int64)
    order = document_order(doc_ptr)
    warps = None
    if group == "each":
        warp_ptr, n_warps = warp_offsets(rng.integers(1, 33, size=order.size))
        warps, group = (cp.asarray(warp_ptr), n_warps), 1
    z_d = cp.asarray(z)
    A_next = cp.zeros(A.shape, cp.float32)
    B_next = cp.zeros(wt.bhat.shape, cp.float32)
    counts, denom, beta = wt.word_side
    sample_dense_long(order, doc_ptr, cp.asarray(corpus.word, dtype=cp.int32),
                      None, cp.asarray(A), cp.asarray(wt.bhat, dtype=cp.float32),
                      cp.full(n_topics, alpha, cp.float32), SEED, ITERATION, z_d,
                      word_counts=(cp.asarray(counts, dtype=cp.float32), cp.asarray(denom),
                                   beta),
                      counts_next=(A_next, B_next), group=group, warps=warps)
    got = z_d.get()
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(
        A_next.get(), count_pairs(corpus.doc, got, None, corpus.n_docs, n_topics))
    np.testing.assert_array_equal(
        B_next.get(), count_pairs(corpus.word, got, None, corpus.n_words, n_topics))


def test_document_groups_follow_each_document():
    from sklearn_gpulda.backends.cuda.dense.sample_dense import document_groups, warp_offsets

    # NIPS on an H100: 1,500 documents of about 1,300 tokens (41 chunks), 61,500 chunks in all,
    # 15 a warp: three warps each.
    assert set(document_groups(np.full(1500, 1300), 132)) == {3}
    # Many documents fill the GPU already: a warp each.
    assert set(document_groups(np.full(100_000, 2000), 132)) == {1}
    # Short documents stay whole (at least four chunks a warp).
    assert set(document_groups(np.full(10, 200), 132)) == {1}
    assert set(document_groups([300] * 10, 132)) == {2}  # 10 chunks
    assert list(document_groups([10**6], 132)) == [32]
    # A skewed corpus: the long documents of 20 Newsgroups' shape get groups of their own,
    # the short ones a warp each, and no warp holds much more than the mean.
    lengths = np.concatenate([[30_000, 8_000, 3_000], np.full(18_000, 76)])
    groups = document_groups(lengths, 132)
    assert list(groups[:3]) == [32, 20, 8] and set(groups[3:]) == {1}
    chunks = -(-lengths // 32)
    assert (chunks / groups).max() <= 30
    warp_ptr, n_warps = warp_offsets(groups)
    assert warp_ptr.dtype == np.int32 and warp_ptr[0] == 0 and n_warps == groups.sum()
    np.testing.assert_array_equal(np.diff(warp_ptr), groups)


def test_estimate_counts_the_fused_tables():
    from sklearn_gpulda.backends.cuda.dense.sampler import CudaDenseSampler

    corpus = tokens(_kjv_matrix())
    d, v, k = corpus.n_docs, corpus.n_words, 16

    def steady(mstep):
        s = CudaDenseSampler.__new__(CudaDenseSampler)
        s.n_topics, s.mstep = k, mstep
        return CudaDenseSampler.estimate_bytes(s, corpus)[0]

    assert steady("fused") - steady("bincount") == 4 * d * k + 4 * v * k + 8 * k


# -- a matrix prior, A's histogram and the log-likelihood, with no kernel compiled -----------------
@pytest.mark.gpu
def test_fused_mstep_gives_the_bincount_model_with_a_matrix_prior():
    from sklearn_gpulda.backends.priors import CellPrior

    corpus = tokens(_kjv_matrix())
    k = 24
    rng = np.random.default_rng(3)
    flat = rng.choice(k * corpus.n_words, size=200, replace=False)
    cells = CellPrior(sp.coo_matrix((rng.uniform(0.05, 30.0, flat.size),
                                     (flat // corpus.n_words, flat % corpus.n_words)),
                                    shape=(k, corpus.n_words)))
    fused, plain = _sampler(k), _sampler(k, mstep="bincount", long_document=None)
    try:
        for s in (fused, plain):
            s.set_beta_cells(cells)
            s.load(corpus)
            s.init_topics()
        _assert_same(_state(fused), _state(plain), "after init")
        for it in range(1, 5):
            if it == 3:
                for s in (fused, plain):
                    s.set_priors(beta=0.02)
            for s in (fused, plain):
                s.sweep(it)
            _assert_same(_state(fused), _state(plain), f"after sweep {it}")
        # The denominators hold the cells' topic sums.
        st = fused._st
        np.testing.assert_array_equal(
            st.denom.get(), (st.B.get().astype(np.float64).sum(axis=0) + corpus.n_words * 0.02)
            + cells.topic_sums)
        np.testing.assert_array_equal(fused.seeded_counts(), plain.seeded_counts())
    finally:
        fused.release()
        plain.release()


def _expected_histogram(A):
    """(topic, count, n_docs) of the non-zero cells of a host A, (topic, count) increasing."""
    doc, topic = np.nonzero(A)
    pairs = np.stack([topic.astype(np.float64), A[doc, topic]], axis=1)
    unique, n = np.unique(pairs, axis=0, return_counts=True)
    return unique[:, 0].astype(np.int64), unique[:, 1], n.astype(np.int64)


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [16, 200])
def test_alpha_histogram_and_table_are_the_counts(n_topics):
    from sklearn_gpulda.backends import prior_learning

    corpus = tokens(_corpora()["mixed"])  # long documents: counts of 64 and more overflow
    eng = _sampler(n_topics)
    try:
        eng.load(corpus)
        eng.init_topics()
        for it in (1, 2):
            eng.sweep(it)
        # At K = 200 two sweeps spread every document thin: the longest document's tokens all
        # go to one topic, so that a count of 64 or more takes the overflow's path.
        z = eng.topics()
        longest = int(np.argmax(np.diff(corpus.doc_ptr)))
        z[corpus.doc_ptr[longest]:corpus.doc_ptr[longest + 1]] = 3
        eng.set_topics(z)
        A = eng.doc_topic_counts()
        want = _expected_histogram(A)
        got = eng.doc_topic_histogram()
        assert (want[1] >= prior_learning.TABLE_COUNTS).any()
        for g, w, name in zip(got, want, ("topic", "count", "n_docs")):
            assert g.dtype == w.dtype, name
            np.testing.assert_array_equal(g, w, err_msg=name)
        table, rest = eng.doc_topic_table()
        ref_table, ref_rest = prior_learning.alpha_table(*want, n_topics)
        np.testing.assert_array_equal(table, ref_table)
        for g, w in zip(rest, ref_rest):
            np.testing.assert_array_equal(g, w)
        # The fixed point on the device learns the host's alpha, bit for bit.
        lengths = prior_learning.length_histogram(corpus.doc_lengths())
        alpha = eng.alpha
        np.testing.assert_array_equal(
            eng.learn_alpha(alpha, table, rest, *lengths),
            prior_learning.update_alpha(alpha, ref_table, ref_rest, *lengths, like_gpu=True))
    finally:
        eng.release()


@pytest.mark.gpu
@pytest.mark.parametrize("weighted", [False, True])
def test_log_likelihood_is_the_formula_in_float64(weighted):
    X = _kjv_matrix()[:600].astype(np.float64)
    if weighted:
        X.data *= 0.75
    corpus = tokens(X)
    eng = _sampler(33)
    try:
        eng.load(corpus)
        eng.init_topics()
        eng.sweep(1)
        st = eng._st
        A, bhat = st.A.get().astype(np.float64), st.bhat.get().astype(np.float64)
        alpha32 = st.alpha.get()
        q = (st.bhat.get() * alpha32).astype(np.float64).sum(axis=1)
        d, v = corpus.doc, corpus.word
        s = np.einsum("tk,tk->t", A[d], bhat[v])
        terms = np.log(s + q[v]) - np.log(corpus.doc_lengths()[d] + eng.alpha.sum())
        if weighted:
            terms *= corpus.weight
        got = eng.log_likelihood()
        assert got == pytest.approx(terms.sum(), rel=1e-12)
        assert eng.log_likelihood() == got  # the same order every time
    finally:
        eng.release()
