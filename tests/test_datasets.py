"""Loaders and the synthetic LDA corpus generator of ``sklearn_gpulda.datasets``."""

import gzip
import importlib.resources
import io
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda.datasets import CORPUS_SHAPES, load_kjv_chapters, load_uci_bow, make_lda_corpus

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
KJV_DIR = importlib.resources.files("sklearn_gpulda") / "data" / "kjv"


def _shared(*parts):
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


def _header(docword_path):
    """D, W, NNZ from the first three lines of a (gzipped) UCI docword file."""
    opener = gzip.open if str(docword_path).endswith(".gz") else open
    with opener(docword_path, "rt") as fh:
        return [int(fh.readline()) for _ in range(3)]


def _reference_uci(docword_path):
    """The straightforward reader of shared/data/DERIVATION.md, used as the oracle."""
    d, w, nnz = _header(docword_path)
    opener = gzip.open if str(docword_path).endswith(".gz") else open
    with opener(docword_path, "rt") as fh:
        for _ in range(3):
            fh.readline()
        a = np.loadtxt(fh, dtype=np.int64).reshape(-1, 3)
    assert len(a) == nnz
    return sp.csr_matrix((a[:, 2], (a[:, 0] - 1, a[:, 1] - 1)), shape=(d, w))


def _provenance_figure(text, label):
    """A number such as ``D = 1,189`` or ``total tokens = 307,970`` from a PROVENANCE.md."""
    match = re.search(rf"{label}\s*=\s*([\d,]+)", text)
    assert match, f"{label} not found in PROVENANCE.md"
    return int(match.group(1).replace(",", ""))


# --------------------------------------------------------------------------------------------------
# bundled King James Bible (always runs)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters()


def test_kjv_matches_its_header_and_provenance(kjv):
    with importlib.resources.as_file(KJV_DIR / "docword.kjv_chapters.txt.gz") as path:
        n_docs, n_words, nnz = _header(path)
    provenance = (KJV_DIR / "PROVENANCE.md").read_text(encoding="utf-8")
    assert kjv.DESCR == provenance
    assert (n_docs, n_words, nnz) == (
        _provenance_figure(provenance, "D"),
        _provenance_figure(provenance, "W"),
        _provenance_figure(provenance, "NNZ"),
    )
    assert kjv.data.shape == (n_docs, n_words) == (kjv.n_docs, kjv.n_words)
    assert kjv.data.nnz == nnz
    assert kjv.data.sum() == _provenance_figure(provenance, "total tokens")
    assert kjv.data.dtype == np.int64 and kjv.data.has_canonical_format
    assert np.all(kjv.data.data > 0)
    assert np.all(kjv.data.sum(axis=1).A1 > 0)  # "No document is empty."


def test_kjv_labels(kjv):
    assert kjv.feature_names.shape == (kjv.n_words,)
    assert list(kjv.feature_names) == sorted(kjv.feature_names)  # alphabetical vocabulary
    for word in ("shall", "unto", "lord", "thou"):  # the top words PROVENANCE.md names
        assert word in kjv.feature_names
    top = kjv.feature_names[np.argsort(-kjv.data.sum(axis=0).A1)[:4]]
    assert set(top) == {"shall", "unto", "lord", "thou"}
    assert kjv.doc_names.shape == kjv.book.shape == kjv.chapter.shape == (kjv.n_docs,)
    assert kjv.doc_names[0] == "Ge 1" and kjv.book[0] == "Ge" and kjv.chapter[0] == 1
    assert len(set(kjv.doc_names)) == kjv.n_docs
    assert len(set(kjv.book)) == 66
    # Chapters restart at 1 exactly when the book changes.
    new_book = np.r_[True, kjv.book[1:] != kjv.book[:-1]]
    np.testing.assert_array_equal(kjv.chapter == 1, new_book)


def test_bundled_kjv_is_the_shared_copy():
    folder = _shared("kjv_bible")
    shared = load_uci_bow(folder / "docword.kjv_chapters.txt.gz",
                          folder / "vocab.kjv_chapters.txt")
    bundled = load_kjv_chapters()
    assert (shared.data != bundled.data).nnz == 0
    np.testing.assert_array_equal(shared.feature_names, bundled.feature_names)


def test_uci_reader_matches_reference_on_kjv(kjv):
    with importlib.resources.as_file(KJV_DIR / "docword.kjv_chapters.txt.gz") as path:
        reference = _reference_uci(path)
    assert (kjv.data != reference).nnz == 0


# --------------------------------------------------------------------------------------------------
# load_uci_bow on shared data and on files written here
# --------------------------------------------------------------------------------------------------


def test_load_kos():
    folder = _shared("uci_kos")
    docword = folder / "docword.kos.txt.gz"
    bunch = load_uci_bow(docword, folder / "vocab.kos.txt")
    n_docs, n_words, nnz = _header(docword)
    assert bunch.data.shape == (n_docs, n_words) == (bunch.n_docs, bunch.n_words)
    assert bunch.data.nnz == nnz
    assert bunch.feature_names.shape == (n_words,)
    assert (bunch.data != _reference_uci(docword)).nnz == 0
    provenance = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
    assert bunch.data.sum() == _provenance_figure(provenance, "total tokens")


def test_pandas_and_numpy_parsers_agree(kjv):
    pytest.importorskip("pandas")
    with importlib.resources.as_file(KJV_DIR / "docword.kjv_chapters.txt.gz") as path:
        a = load_uci_bow(path, engine="pandas")
        b = load_uci_bow(path, engine="numpy")
    assert (a.data != b.data).nnz == 0


def test_numpy_parser_across_block_boundaries(kjv, monkeypatch):
    from sklearn_gpulda import datasets

    # Tiny blocks force lines to straddle block ends.
    monkeypatch.setattr(datasets._uci, "_PARSE_BLOCK_BYTES", 97)
    with importlib.resources.as_file(KJV_DIR / "docword.kjv_chapters.txt.gz") as path:
        small_blocks = load_uci_bow(path, engine="numpy")
    assert (small_blocks.data != kjv.data).nnz == 0


def _write(tmp_path, name, text, compress=False):
    path = tmp_path / name
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("engine", ["numpy", "pandas"])
def test_plain_gzip_and_file_objects_agree(tmp_path, engine):
    if engine == "pandas":
        pytest.importorskip("pandas")
    text = "4\n5\n4\n1 2 3\n1 5 1\n3 1 2\n3 4 6\r\n"
    plain = load_uci_bow(_write(tmp_path, "plain.txt", text), engine=engine)
    # A gzip file is recognised by its content, not its name.
    packed = load_uci_bow(_write(tmp_path, "packed.bin", text, compress=True), engine=engine)
    stream = load_uci_bow(io.BytesIO(text.encode()), engine=engine)
    expected = np.zeros((4, 5), dtype=np.int64)
    expected[0, 1], expected[0, 4], expected[2, 0], expected[2, 3] = 3, 1, 2, 6
    for bunch in (plain, packed, stream):
        np.testing.assert_array_equal(bunch.data.toarray(), expected)
        assert bunch.n_docs == 4 and bunch.n_words == 5 and bunch.feature_names is None
    # Document 4 has no lines: it is an empty row, and rows stay aligned with doc ids.
    assert plain.data[3].nnz == 0


def test_repeated_pairs_are_summed_and_zeros_dropped(tmp_path):
    path = _write(tmp_path, "dup.txt", "2\n3\n4\n1 1 2\n1 1 5\n2 3 0\n2 2 1\n")
    bunch = load_uci_bow(path)
    np.testing.assert_array_equal(bunch.data.toarray(), [[7, 0, 0], [0, 1, 0]])
    assert bunch.data.has_canonical_format and bunch.data.nnz == 2


def test_vocab_with_trailing_blank_lines(tmp_path):
    doc = _write(tmp_path, "d.txt", "1\n3\n1\n1 3 2\n")
    vocab = _write(tmp_path, "v.txt.gz", "alpha\nbeta\ngamma\n\n", compress=True)
    assert load_uci_bow(doc, vocab).feature_names.tolist() == ["alpha", "beta", "gamma"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("two\n3\n1\n1 1 1\n", "header line 1"),
        ("2\n3\n", "header line 3"),
        ("2\n3\n3\n1 1 1\n2 2 2\n", r"NNZ = 3 but the body has 2 lines"),
        ("2\n3\n1\n1 1 1\n2 2 2\n", r"NNZ = 1 but the body has 2 lines"),
        ("2\n3\n2\n1 1 1\n3 2 2\n", r"docID 3 is outside 1\.\.2"),
        ("2\n3\n2\n1 0 1\n2 2 2\n", r"wordID 0 is outside 1\.\.3"),
        ("2\n3\n2\n1 4 1\n2 2 2\n", r"wordID 4 is outside 1\.\.3"),
        ("2\n3\n2\n1 1\n2 2 2\n", "integers"),
        ("2\n3\n2\n1 1 1 1\n2 2 2\n", "integers"),
        ("2\n3\n2\n1 1 1\n2 2 2 2 2 2\n", "integers"),
        ("2\n3\n2\n1 1 1.5\n2 2 2\n", "integers"),
        ("2\n3\n2\n1 1 x\n2 2 2\n", "integers"),
        ("2\n3\n2\n1 1 -4\n2 2 2\n", "non-negative"),
    ],
)
@pytest.mark.parametrize("engine", ["numpy", "pandas"])
def test_malformed_docword(tmp_path, text, message, engine):
    if engine == "pandas":
        pytest.importorskip("pandas")
    path = _write(tmp_path, "bad.txt", text)
    with pytest.raises(ValueError, match=message):
        load_uci_bow(path, engine=engine)


def test_vocab_size_mismatch(tmp_path):
    doc = _write(tmp_path, "d.txt", "1\n3\n1\n1 3 2\n")
    vocab = _write(tmp_path, "v.txt", "alpha\nbeta\n")
    with pytest.raises(ValueError, match="2 words but the docword header says W = 3"):
        load_uci_bow(doc, vocab)


def test_bad_engine(tmp_path):
    with pytest.raises(ValueError, match="engine"):
        load_uci_bow(_write(tmp_path, "d.txt", "1\n1\n0\n"), engine="awk")


# --------------------------------------------------------------------------------------------------
# make_lda_corpus
# --------------------------------------------------------------------------------------------------


def test_make_lda_corpus_shapes_and_distributions():
    corpus = make_lda_corpus(n_docs=400, n_words=900, n_topics=7, doc_length=50, random_state=0)
    X = corpus.data
    assert sp.issparse(X) and X.format == "csr" and X.dtype == np.int64
    assert X.shape == (400, 900) and X.has_canonical_format and np.all(X.data > 0)
    assert corpus.topic_word.shape == (7, 900) and corpus.doc_topic.shape == (400, 7)
    np.testing.assert_allclose(corpus.topic_word.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(corpus.doc_topic.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(corpus.topic_word >= 0) and np.all(corpus.doc_topic >= 0)
    np.testing.assert_array_equal(X.sum(axis=1).A1, corpus.doc_lengths)
    assert corpus.doc_lengths.min() >= 1
    assert corpus.feature_names[0] == "w0" and corpus.feature_names[-1] == "w899"


def test_make_lda_corpus_is_reproducible():
    kwargs = dict(n_docs=200, n_words=300, n_topics=5, doc_length=40)
    a = make_lda_corpus(random_state=42, **kwargs)
    b = make_lda_corpus(random_state=42, **kwargs)
    c = make_lda_corpus(random_state=43, **kwargs)
    assert (a.data != b.data).nnz == 0
    np.testing.assert_array_equal(a.topic_word, b.topic_word)
    np.testing.assert_array_equal(a.doc_topic, b.doc_topic)
    assert (a.data != c.data).nnz > 0
    d = make_lda_corpus(random_state=np.random.default_rng(42), **kwargs)
    assert (a.data != d.data).nnz == 0


def test_make_lda_corpus_reproducible_across_blocks(monkeypatch):
    from sklearn_gpulda import datasets

    # Several generation blocks must still give one consistent corpus.
    monkeypatch.setattr(datasets._synthetic, "_BLOCK_TOKENS_MIN", 1000)
    monkeypatch.setattr(datasets._synthetic, "_BLOCK_TOKENS_MAX", 1000)
    monkeypatch.setattr(datasets._synthetic, "_DIRICHLET_ENTRIES", 500)
    corpus = make_lda_corpus(n_docs=300, n_words=200, n_topics=4, doc_length=30, random_state=1)
    again = make_lda_corpus(n_docs=300, n_words=200, n_topics=4, doc_length=30, random_state=1)
    assert (corpus.data != again.data).nnz == 0
    np.testing.assert_array_equal(corpus.data.sum(axis=1).A1, corpus.doc_lengths)
    assert corpus.data.has_canonical_format


def test_make_lda_corpus_doc_lengths():
    n_docs, mean = 3000, 80.0
    corpus = make_lda_corpus(n_docs=n_docs, n_words=500, n_topics=5, doc_length=mean,
                             random_state=5)
    # Poisson(80) lengths: the sample mean is within a few standard errors of 80.
    assert abs(corpus.doc_lengths.mean() - mean) < 5 * np.sqrt(mean / n_docs)
    assert abs(corpus.doc_lengths.var() / mean - 1) < 0.15


def test_make_lda_corpus_topics_follow_theta():
    corpus = make_lda_corpus(n_docs=500, n_words=400, n_topics=4, doc_length=300, alpha=0.05,
                             random_state=11)
    # Expected word frequencies sum_d len_d * (theta_d phi); the draw must track them closely.
    expected = (corpus.doc_lengths[:, None] * corpus.doc_topic).sum(axis=0) @ corpus.topic_word
    observed = corpus.data.sum(axis=0).A1
    head = expected > 100
    np.testing.assert_allclose(observed[head], expected[head], rtol=0.2)


def _rank_slope(X, ranks):
    """Least-squares slope of log frequency against log rank over the given 1-based ranks."""
    freq = np.sort(X.sum(axis=0).A1)[::-1][ranks - 1]
    return np.polyfit(np.log(ranks), np.log(freq), 1)[0]


@pytest.mark.parametrize("exponent", [0.8, 1.0, 1.3])
def test_make_lda_corpus_is_zipfian(exponent):
    # A moderate beta makes every topic cover the vocabulary, so the realised frequencies follow
    # the Zipf profile closely over the first 600 ranks.
    corpus = make_lda_corpus(n_docs=1000, n_words=3000, n_topics=10, doc_length=300, beta=0.5,
                             zipf_exponent=exponent, random_state=2)
    slope = _rank_slope(corpus.data, np.arange(5, 600))
    assert abs(slope + exponent) < 0.15, slope


def test_make_lda_corpus_default_beta_head_is_zipfian():
    # With beta = 0.01 topics are sparse: only the head of the vocabulary is reliably Zipfian.
    corpus = make_lda_corpus(n_docs=1000, n_words=3000, n_topics=50, doc_length=300,
                             random_state=2)
    slope = _rank_slope(corpus.data, np.arange(5, 300))
    assert abs(slope + 1.0) < 0.25, slope


def test_make_lda_corpus_named_shape_and_dtype():
    corpus = make_lda_corpus(shape="nytimes", scale=0.001, n_topics=5, random_state=0,
                             dtype=np.float32)
    spec = CORPUS_SHAPES["nytimes"]
    assert corpus.data.shape == (300, spec["n_words"]) == (300, 102_660)
    assert corpus.data.dtype == np.float32
    assert abs(corpus.doc_lengths.mean() - spec["doc_length"]) < 5 * np.sqrt(332 / 300)
    pubmed = make_lda_corpus(shape="pubmed", scale=1e-4, n_topics=3, random_state=0)
    assert pubmed.data.shape == (820, 141_043)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(shape="wikipedia"), "shape"),
        (dict(n_topics=0), "n_topics"),
        (dict(n_docs=2.5), "n_docs"),
        (dict(alpha=-1.0), "alpha"),
        (dict(alpha=[0.1, 0.2]), "alpha"),
        (dict(beta=0.0), "beta"),
        (dict(zipf_exponent=-1.0), "zipf_exponent"),
        (dict(scale=0), "scale"),
        (dict(random_state="seed"), "random_state"),
    ],
)
def test_make_lda_corpus_rejects_bad_arguments(kwargs, message):
    arguments = dict(n_docs=10, n_words=20, n_topics=3)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        make_lda_corpus(**arguments)


# -- the bundled corpus's archaic stop list ------------------------------------------------------
def test_kjv_stop_words_are_function_words_the_english_list_misses():
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from sklearn_gpulda.datasets import KJV_STOP_WORDS

    assert {"unto", "shall", "thou", "thee", "thy", "ye", "hath", "saith"} <= KJV_STOP_WORDS
    assert not KJV_STOP_WORDS & ENGLISH_STOP_WORDS
    assert not KJV_STOP_WORDS & {"lord", "god", "israel", "king", "said", "came", "man"}


def test_kjv_without_archaic_words_drops_only_their_columns():
    from sklearn_gpulda.datasets import KJV_STOP_WORDS

    full = load_kjv_chapters()
    assert full.data.shape == (1189, 3117)  # the default is the corpus as always loaded
    plain = load_kjv_chapters(remove_archaic=True)
    assert not set(plain.feature_names) & KJV_STOP_WORDS
    keep = [i for i, w in enumerate(full.feature_names) if w not in KJV_STOP_WORDS]
    assert plain.data.shape == (1189, len(keep)) == (plain.n_docs, plain.n_words)
    assert (plain.data != full.data[:, keep]).nnz == 0
    np.testing.assert_array_equal(plain.feature_names, full.feature_names[keep])


def test_demo_topics_lead_with_no_archaic_function_word(capsys):
    # What the demo prints: its corpus lacks the list's words, and so do its topics' top words
    # (before, 'shall', 'unto' and 'thou' led them).
    from sklearn_gpulda import GPULatentDirichletAllocation, __main__ as cli
    from sklearn_gpulda.datasets import KJV_STOP_WORDS

    assert cli.main(["demo", "--max-iter", "3", "--device", "cpu", "--n-components", "5"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^corpus: .* 3064 words", out, flags=re.MULTILINE)
    topics = re.findall(r"^\s+topic\s+\d+: (.*)$", out, flags=re.MULTILINE)
    assert len(topics) == 5
    assert not {w for line in topics for w in line.split()} & KJV_STOP_WORDS
    # A longer fit, as a user reading the topics would run it.
    kjv = load_kjv_chapters(remove_archaic=True)
    model = GPULatentDirichletAllocation(10, max_iter=30, random_state=0, device="cpu")
    model.fit(kjv.data)
    top = kjv.feature_names[np.argsort(-model.components_, axis=1)[:, :10]]
    assert not set(top.ravel()) & KJV_STOP_WORDS
