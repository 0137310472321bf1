"""``metrics.gensim_coherence`` against gensim's ``CoherenceModel`` (skipped without gensim).

The reference corpus is drawn from a known topic model with word order that means something:
each document is a run of short "sentences", each sentence drawn from one of the document's
topics, so sliding windows see different co-occurrences than whole documents. Its word counts
train the topics that are scored.

Tolerance: both sides compute the same float64 formulas from the same integer counts; they differ
only in the order of the sums (a few ulps), so scores must agree to rtol 1e-10 (atol 1e-12 for
scores near 0), far inside the 1e-6 the issue asks for. Infinite and NaN scores must sit in the
same places.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import make_lda_corpus
from sklearn_gpulda.metrics import (GENSIM_WINDOW_SIZES, gensim_coherence, npmi_coherence,
                                    top_words)
from sklearn_gpulda.metrics import _cooccurrence, _gensim_coherence

RTOL, ATOL = 1e-10, 1e-12
N_TOPICS = 6
ABSENT = "zzabsent"  # a topic word that no text holds


@pytest.fixture(scope="module")
def corpus():
    """Ordered texts drawn from known topics, their counts, and a model fitted to them."""
    truth = make_lda_corpus(n_docs=1, n_words=400, n_topics=N_TOPICS, beta=0.05, random_state=3)
    names = np.asarray(truth.feature_names)
    rng = np.random.default_rng(0)
    theta = rng.dirichlet(np.full(N_TOPICS, 0.2), size=300)
    texts = []
    for d in range(theta.shape[0]):
        length = rng.poisson(60)
        sentences = rng.choice(N_TOPICS, size=length // 8 + 1, p=theta[d])
        tokens = np.concatenate([rng.choice(names.size, size=8, p=truth.topic_word[k])
                                 for k in sentences])[:length]
        texts.append(names[tokens].tolist())
    # Documents no longer than a window, and empty ones, are windows of their own in gensim.
    texts += [[], ["w0"], ["w1", "w0", "w1"], []]
    vocabulary = sorted({w for text in texts for w in text})
    column = {w: c for c, w in enumerate(vocabulary)}
    rows = np.repeat(np.arange(len(texts)), [len(t) for t in texts])
    cols = np.array([column[w] for text in texts for w in text])
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(len(texts), len(vocabulary)))
    lda = GPULatentDirichletAllocation(n_components=N_TOPICS, device="cpu", max_iter=30,
                                       random_state=0).fit(X)
    return texts, X, np.array(vocabulary), lda


@pytest.fixture(scope="module")
def gensim_score():
    """score(topics, texts, measure, window_size) -> (per_topic, mean) from gensim."""
    pytest.importorskip("gensim")
    from gensim.corpora import Dictionary
    from gensim.models import CoherenceModel

    def score(topics, texts, measure, window_size=None):
        dictionary = Dictionary(texts)
        # gensim drops topic words its dictionary does not know; ours knows every topic word.
        dictionary.add_documents([sorted({w for t in topics for w in t})])
        model = CoherenceModel(topics=topics, texts=texts, dictionary=dictionary,
                               coherence=measure, window_size=window_size,
                               topn=max(map(len, topics)), processes=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # log(0), x / 0 of absent words
            return np.array(model.get_coherence_per_topic()), model.get_coherence()

    return score


def _edge_topics(vocabulary):
    return [
        [str(vocabulary[0]), ABSENT, str(vocabulary[1]), str(vocabulary[2])],  # absent word
        ["w0", "w1", "w0", str(vocabulary[5]), "w1"],                          # repeated words
    ]


MEASURE_WINDOWS = [("u_mass", None), ("c_v", None), ("c_v", 20), ("c_v", 1),
                   ("c_uci", None), ("c_uci", 3), ("c_uci", 70), ("c_npmi", None),
                   ("c_npmi", 2), ("c_npmi", 30)]


@pytest.mark.parametrize("top_n", [5, 10])
@pytest.mark.parametrize("measure, window_size", MEASURE_WINDOWS)
def test_fitted_topics_match_gensim(corpus, gensim_score, measure, window_size, top_n):
    texts, _, vocabulary, lda = corpus
    topics = top_words(lda.components_, vocabulary, n_words=top_n)
    expected, expected_mean = gensim_score(topics, texts, measure, window_size)
    got = gensim_coherence(topics, texts, measure, window_size=window_size)
    assert got.per_topic.shape == (N_TOPICS,) and np.all(np.isfinite(got.per_topic))
    np.testing.assert_allclose(got.per_topic, expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got.mean, expected_mean, rtol=RTOL, atol=ATOL)
    # The same topics given as the model's matrix and vocabulary.
    from_matrix = gensim_coherence(lda.components_, texts, measure, window_size=window_size,
                                   top_n=top_n, feature_names=vocabulary)
    np.testing.assert_array_equal(from_matrix.per_topic, got.per_topic)


@pytest.mark.parametrize("measure, window_size", MEASURE_WINDOWS)
def test_absent_and_repeated_words_match_gensim(corpus, gensim_score, measure, window_size):
    texts, _, vocabulary, lda = corpus
    topics = top_words(lda.components_, vocabulary, n_words=8) + _edge_topics(vocabulary)
    expected, expected_mean = gensim_score(topics, texts, measure, window_size)
    got = gensim_coherence(topics, texts, measure, window_size=window_size)
    np.testing.assert_allclose(got.per_topic, expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got.mean, expected_mean, rtol=RTOL, atol=ATOL)
    # What gensim makes of a word no text holds: +inf for PMI and NPMI, NaN for c_v; u_mass
    # counts a pair conditioned on it as 0 and stays finite.
    absent = got.per_topic[N_TOPICS]
    assert {"u_mass": np.isfinite, "c_uci": np.isposinf, "c_npmi": np.isposinf,
            "c_v": np.isnan}[measure](absent)
    assert np.isfinite(got.per_topic[N_TOPICS + 1])


def test_umass_from_counts_matches_texts(corpus, gensim_score):
    texts, X, vocabulary, lda = corpus
    topics = top_words(lda.components_, vocabulary, n_words=10) + _edge_topics(vocabulary)[1:]
    expected, expected_mean = gensim_score(topics, texts, "u_mass")
    got = gensim_coherence(topics, X * 3, "u_mass", feature_names=vocabulary)
    np.testing.assert_allclose(got.per_topic, expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got.mean, expected_mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(
        gensim_coherence(lda.components_, X.toarray(), "u_mass", top_n=10,
                         feature_names=vocabulary).per_topic[:N_TOPICS],
        got.per_topic[:N_TOPICS], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("window_size", [1, 2, 7, 64, 200])
def test_window_counts_match_gensim_accumulator(corpus, window_size):
    pytest.importorskip("gensim")
    from gensim.corpora import Dictionary
    from gensim.topic_coherence.text_analysis import WordOccurrenceAccumulator

    texts = corpus[0] + [["a", "b", "a", "c", "a", "a", "b"] * 3]
    words = ["w0", "w1", "w2", "w3", "w5", "w8", "a", "b", "c"]
    relevant = {w: i for i, w in enumerate(words)}
    doc, pos, word, lengths = _gensim_coherence._encode_texts(texts, relevant)
    counts, n_windows = _cooccurrence.window_cooccurrence(doc, pos, word, lengths,
                                                          window_size, len(words))
    dictionary = Dictionary(texts)
    ids = [dictionary.token2id[w] for w in words]
    accumulator = WordOccurrenceAccumulator(set(ids), dictionary).accumulate(texts, window_size)
    assert n_windows == accumulator.num_docs
    expected = np.array([[accumulator[i, j] for j in ids] for i in ids])
    np.testing.assert_array_equal(counts, expected)


def test_windows_count_like_gensim_not_like_sets():
    # Windows of 3 over a b a c: {a, b} then {b, a, c}; gensim strikes "a" out as it leaves the
    # first window although it is still in the second, so it counts "a" in one window.
    relevant = {"a": 0, "b": 1, "c": 2}
    encoded = _gensim_coherence._encode_texts([["a", "b", "a", "c"]], relevant)
    counts, n_windows = _cooccurrence.window_cooccurrence(*encoded, 3, 3)
    assert n_windows == 2
    np.testing.assert_array_equal(np.diag(counts), [1, 2, 1])
    assert counts[0, 2] == 0 and counts[1, 2] == 1


def test_npmi_coherence_is_c_npmi_over_whole_documents(corpus):
    # With windows as long as the longest text, every text is one window: the windows are the
    # documents that npmi_coherence counts in the matrix of the same texts.
    texts, X, vocabulary, lda = corpus
    longest = max(map(len, texts))
    got = gensim_coherence(lda.components_, texts, "c_npmi", window_size=longest, top_n=10,
                           feature_names=vocabulary)
    np.testing.assert_allclose(got.per_topic, npmi_coherence(X, lda.components_, top_n=10),
                               rtol=RTOL, atol=ATOL)
    # Except for a pair in every document: 1 there, -1 in gensim (log(1 + eps) / -log(1 + eps)).
    texts = [["a", "b"], ["b", "c", "a"]]
    assert gensim_coherence([["a", "b"]], texts, "c_npmi", window_size=3).mean == -1.0
    np.testing.assert_array_equal(
        npmi_coherence(np.array([[1, 1, 0], [1, 1, 1]]), np.array([[2.0, 1.0, 0.0]]), top_n=2),
        [1.0])


def test_sparse_counting_gives_the_same_scores(corpus, monkeypatch):
    texts, _, vocabulary, lda = corpus
    topics = top_words(lda.components_, vocabulary, n_words=10) + _edge_topics(vocabulary)
    dense = {m: gensim_coherence(topics, texts, m).per_topic for m in GENSIM_WINDOW_SIZES}
    # Pair counts in a sparse matrix, expanded a few interval pairs at a time.
    monkeypatch.setattr(_cooccurrence, "DENSE_WORDS", 0)
    monkeypatch.setattr(_cooccurrence, "PAIR_CHUNK", 1000)
    for measure, expected in dense.items():
        got = gensim_coherence(topics, texts, measure).per_topic
        np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0, equal_nan=True)


def test_default_window_sizes_are_gensims():
    pytest.importorskip("gensim")
    from gensim.models.coherencemodel import SLIDING_WINDOW_SIZES

    for measure, size in GENSIM_WINDOW_SIZES.items():
        assert SLIDING_WINDOW_SIZES[measure] == size


def test_top_n_cuts_word_lists():
    texts = [["a", "b", "c", "d"], ["a", "b", "d"], ["c", "d"]]
    whole = gensim_coherence([["a", "b", "c"]], texts, "c_npmi").per_topic
    cut = gensim_coherence([["a", "b", "c", "d"]], texts, "c_npmi", top_n=3).per_topic
    np.testing.assert_array_equal(whole, cut)


# --------------------------------------------------------------------------------------------------
# input errors
# --------------------------------------------------------------------------------------------------

TEXTS = [["a", "b", "c"], ["b", "c", "d"]]
TOPICS = [["a", "b"], ["c", "d"]]


def test_unknown_measure():
    with pytest.raises(ValueError, match="measure must be one of"):
        gensim_coherence(TOPICS, TEXTS, "c_w2v")


@pytest.mark.parametrize("window_size", [0, -3, 2.5, True, "10"])
def test_bad_window_size(window_size):
    with pytest.raises(ValueError, match="window_size must be a positive integer"):
        gensim_coherence(TOPICS, TEXTS, "c_v", window_size=window_size)


def test_window_size_with_umass():
    with pytest.raises(ValueError, match="u_mass counts whole documents"):
        gensim_coherence(TOPICS, TEXTS, "u_mass", window_size=10)


def test_count_matrix_for_a_window_measure():
    with pytest.raises(ValueError, match="need word order"):
        gensim_coherence(TOPICS, sp.csr_matrix(np.ones((2, 4))), "c_npmi",
                         feature_names=list("abcd"))


def test_matrix_topics_need_their_vocabulary():
    components = np.array([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="feature_names is needed"):
        gensim_coherence(components, TEXTS)
    with pytest.raises(ValueError, match="feature_names has 3 entries but the topics matrix "
                                         "has 4 columns"):
        gensim_coherence(components, TEXTS, feature_names=list("abc"))
    with pytest.raises(ValueError, match=r"top_n must be an integer in 2\.\.4"):
        gensim_coherence(components, TEXTS, top_n=5, feature_names=list("abcd"))


def test_topic_words_outside_the_count_vocabulary():
    X = sp.csr_matrix(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"1 topic word\(s\) are not in feature_names"):
        gensim_coherence(TOPICS, X, "u_mass", feature_names=list("abc"))
    with pytest.raises(ValueError, match="feature_names is needed"):
        gensim_coherence(TOPICS, X, "u_mass")


@pytest.mark.parametrize("topics, match", [
    ([["a", "b"], ["c"]], "topic 1 has 1 word"),
    ([["a", "b"], "cd"], "topic 1 is a str"),
    ("ab", "list of lists of words"),
    ([], "topics is empty"),
])
def test_bad_topics(topics, match):
    with pytest.raises(ValueError, match=match):
        gensim_coherence(topics, TEXTS)


@pytest.mark.parametrize("top_n", [1, 0, 2.0])
def test_bad_top_n(top_n):
    with pytest.raises(ValueError, match="top_n must be an integer"):
        gensim_coherence(TOPICS, TEXTS, top_n=top_n)


def test_untokenised_texts():
    with pytest.raises(ValueError, match="must be tokenised"):
        gensim_coherence(TOPICS, ["a b c", "b c d"])
    with pytest.raises(ValueError, match="texts is empty"):
        gensim_coherence(TOPICS, [])


# --------------------------------------------------------------------------------------------------
# counting as a matrix product (metrics/_cooccurrence.py): the GPU's path, run here with NumPy
# --------------------------------------------------------------------------------------------------


def _numpy_as_gpu(monkeypatch):
    """Send gensim_coherence down its GPU path with NumPy standing in for CuPy."""
    monkeypatch.setattr(_gensim_coherence, "_counting_gpu", lambda device, n_tokens: 0)
    monkeypatch.setattr(_gensim_coherence, "on_gpu",
                        lambda index, count, *args: count(np, *args))


@pytest.mark.parametrize("window_size", [1, 2, 7, 64, 200])
@pytest.mark.parametrize("block_cells, exact_limit", [(1 << 24, 1 << 24), (40, 1 << 24),
                                                      (1 << 24, 5), (9, 1)])
def test_product_counts_equal_pair_counts(corpus, monkeypatch, window_size, block_cells,
                                          exact_limit):
    # Small blocks, and weight limits that force float64 blocks and single-segment blocks,
    # must all give the integer counts of the interval-pair expansion.

    monkeypatch.setattr(_cooccurrence, "_BLOCK_CELLS", block_cells)
    monkeypatch.setattr(_cooccurrence, "_EXACT_FLOAT32", exact_limit)
    texts = corpus[0] + [["a", "b", "a", "c", "a", "a", "b"] * 3]
    words = ["w0", "w1", "w2", "w3", "w5", "w8", "a", "b", "c"]
    relevant = {w: i for i, w in enumerate(words)}
    encoded = _gensim_coherence._encode_texts(texts, relevant)
    expected, n_windows = _cooccurrence.window_cooccurrence(*encoded, window_size,
                                                            len(words))
    got, n_product = _cooccurrence.window_counts(np, *encoded, window_size, len(words))
    assert n_product == n_windows
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)


def test_product_counts_of_documents(corpus):
    texts, X, vocabulary, _ = corpus
    words = [str(w) for w in vocabulary[:40]] + ["w0", "w1"]
    relevant = {w: i for i, w in enumerate(dict.fromkeys(words))}
    doc, _, word, _ = _gensim_coherence._encode_texts(texts, relevant)
    got = _cooccurrence.document_counts(np, doc, word, len(relevant))
    units = (sp.csr_matrix((np.ones(doc.size), (doc, word)),
                           shape=(len(texts), len(relevant))) > 0).astype(np.int64)
    np.testing.assert_array_equal(got, (units.T @ units).toarray())


def test_gpu_path_gives_the_cpu_scores(corpus, monkeypatch):
    texts, X, vocabulary, lda = corpus
    topics = top_words(lda.components_, vocabulary, n_words=10) + _edge_topics(vocabulary)
    windows = [(m, w) for m, w in MEASURE_WINDOWS]
    expected = [gensim_coherence(topics, texts, m, window_size=w, device="cpu").per_topic
                for m, w in windows]
    from_counts = gensim_coherence(topics[:-2] + topics[-1:], X, "u_mass",
                                   feature_names=vocabulary, device="cpu").per_topic
    _numpy_as_gpu(monkeypatch)
    for (measure, window_size), scores in zip(windows, expected):
        got = gensim_coherence(topics, texts, measure, window_size=window_size).per_topic
        np.testing.assert_array_equal(got, scores)
    np.testing.assert_array_equal(
        gensim_coherence(topics[:-2] + topics[-1:], X, "u_mass", feature_names=vocabulary,
                         device="cuda").per_topic, from_counts)


def test_device_choice(monkeypatch):
    texts = [["a", "b", "a"], ["b", "c"]]
    with pytest.raises(ValueError, match="device must be"):
        gensim_coherence([["a", "b"]], texts, device="gpu")
    # 'auto' keeps a small corpus on the CPU without asking for CuPy.
    monkeypatch.setattr(_gensim_coherence, "import_cupy",
                        lambda: pytest.fail("CuPy asked for a small corpus"))
    assert _gensim_coherence._counting_gpu("auto", _gensim_coherence.GPU_MIN_TOKENS - 1) is None
    assert _gensim_coherence._counting_gpu("cpu", 10**9) is None


@pytest.mark.gpu
@pytest.mark.parametrize("measure, window_size", MEASURE_WINDOWS)
def test_cupy_counts_equal_numpy_counts(corpus, measure, window_size):
    texts, X, vocabulary, lda = corpus
    topics = top_words(lda.components_, vocabulary, n_words=10) + _edge_topics(vocabulary)
    on_gpu = gensim_coherence(topics, texts, measure, window_size=window_size, device="cuda")
    on_cpu = gensim_coherence(topics, texts, measure, window_size=window_size, device="cpu")
    np.testing.assert_array_equal(on_gpu.per_topic, on_cpu.per_topic)


@pytest.mark.gpu
@pytest.mark.parametrize("exact_limit", [1 << 24, 3])
def test_cupy_interval_counts_equal_numpy(corpus, monkeypatch, exact_limit):
    # Float32 products, and float64 ones where a block's weight passes the exact limit.
    import cupy

    from sklearn_gpulda.metrics import _cooccurrence

    monkeypatch.setattr(_cooccurrence, "_EXACT_FLOAT32", exact_limit)
    texts, _, vocabulary, _ = corpus
    relevant = {str(w): i for i, w in enumerate(vocabulary[:300])}
    doc, pos, word, lengths = _gensim_coherence._encode_texts(texts, relevant)
    expected = _cooccurrence.window_counts(np, doc, pos, word, lengths, 10, len(relevant))
    moved = [cupy.asarray(a) for a in (doc, pos, word, lengths)]
    got = _cooccurrence.window_counts(cupy, *moved, 10, len(relevant))
    assert isinstance(got[0], np.ndarray) and got[1] == expected[1]
    np.testing.assert_array_equal(got[0], expected[0])
    doc_counts = _cooccurrence.document_counts(cupy, moved[0], moved[2], len(relevant))
    np.testing.assert_array_equal(
        doc_counts, _cooccurrence.document_counts(np, doc, word, len(relevant)))
