"""Corpora of the peer benchmark (``benchmarks/peers.py``), all reduced to one shape.

Every corpus becomes a train matrix, a test matrix and a vocabulary over the same columns, so
every system is trained on identical counts and scored by one evaluator. Real corpora are looked
up, in order, in ``$SKLEARN_GPULDA_DATA``, in ``<repo>/.carry/data`` (what a device run carries)
and in ``<repo>/../shared/data``; a corpus that is in none of them is skipped with a message.
"""

import os
import tarfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from sklearn_gpulda.datasets import load_uci_bow, make_lda_corpus

REPO = Path(__file__).resolve().parents[1]

#: Files each real corpus needs, relative to a data folder.
CORPUS_FILES = {
    "20news": ["20newsgroups_bydate/20news-bydate.tar.gz"],
    "nips": ["nips_tmt/docword.nips_tmt.txt.gz", "nips_tmt/vocab.nips_tmt.txt"],
    "kos": ["uci_kos/docword.kos.txt.gz", "uci_kos/vocab.kos.txt"],
}
CORPORA = ["20news", "nips", "kos", "nytimes"]


class CorpusUnavailable(Exception):
    """The files of a corpus are not on this machine."""


def data_folders():
    """Folders searched for real corpora, in the order they are tried."""
    folders = []
    if os.environ.get("SKLEARN_GPULDA_DATA"):
        folders.append(Path(os.environ["SKLEARN_GPULDA_DATA"]))
    folders += [REPO / ".carry" / "data", REPO.parent / "shared" / "data"]
    return folders


def _find(name):
    for folder in data_folders():
        paths = [folder / rel for rel in CORPUS_FILES[name]]
        if all(p.is_file() for p in paths):
            return paths
    raise CorpusUnavailable(
        f"{name}: {CORPUS_FILES[name][0]} not found under any of "
        + ", ".join(str(f) for f in data_folders())
    )


def _read_20news(archive):
    """Raw posts (headers dropped) and their split, in the archive's order."""
    texts, is_test = [], []
    with tarfile.open(archive) as tar:
        for member in tar:
            if not member.isfile():
                continue
            raw = tar.extractfile(member).read().decode("latin-1")
            # Headers end at the first blank line; sender and subject lines would otherwise
            # dominate the vocabulary.
            texts.append(raw.partition("\n\n")[2])
            is_test.append(member.name.startswith("20news-bydate-test/"))
    return texts, np.array(is_test)


def _vectorize_20news(archive):
    from sklearn.feature_extraction.text import CountVectorizer

    texts, is_test = _read_20news(archive)
    # The recipe of shared/data/DERIVATION.md (alphabetic tokens of two letters or more, English
    # stop words), but learnt from the training posts only so that the test split stays unseen.
    vectorizer = CountVectorizer(strip_accents="unicode", token_pattern=r"(?u)\b[^\W\d_]{2,}\b",
                                 stop_words="english", min_df=5, max_df=0.5, dtype=np.int64)
    train_texts = [t for t, test in zip(texts, is_test) if not test]
    test_texts = [t for t, test in zip(texts, is_test) if test]
    X_train = vectorizer.fit_transform(train_texts).tocsr()
    X_test = vectorizer.transform(test_texts).tocsr()
    vocab = vectorizer.get_feature_names_out().astype(str)
    return X_train, X_test, vocab


def _random_split(X, test_fraction, rng):
    order = rng.permutation(X.shape[0])
    n_test = max(1, int(round(test_fraction * X.shape[0])))
    return X[np.sort(order[n_test:])], X[np.sort(order[:n_test])]


def load_corpus(name, *, test_fraction=0.1, max_docs=None, max_test_docs=None,
                nytimes_scale=0.1, seed=0):
    """Train and test counts of one benchmark corpus over a shared vocabulary.

    Parameters
    ----------
    name : {"20news", "nips", "kos", "nytimes"}
        "20news" is vectorised from the raw posts and keeps the by-date train/test split;
        the others are split at random. "nytimes" is drawn by
        :func:`sklearn_gpulda.datasets.make_lda_corpus` with ``shape="nytimes"``.
    test_fraction : float, default=0.1
        Share of documents held out, for corpora without their own split.
    max_docs : int or None, default=None
        Keep at most this many training documents (a seeded sample), for quick runs.
    max_test_docs : int or None, default=None
        Keep at most this many test documents; document completion costs grow with them.
    nytimes_scale : float, default=0.1
        ``scale`` of the synthetic corpus (1.0 is 300,000 documents, about 100 M tokens).
    seed : int, default=0
        Seeds the split, the samples and the synthetic corpus.

    Returns
    -------
    X_train, X_test : scipy.sparse.csr_matrix of int64
        Counts over the same columns. Columns with no training count are dropped (a system
        cannot learn anything about a word it never saw, and some, like tomotopy, then leave it out
        of their topic-word matrix), so are test documents left with fewer than two tokens
        (document completion needs one observed and one held-out token).
    vocab : ndarray of str

    Raises
    ------
    CorpusUnavailable
        When the files of a real corpus are not found.
    """
    rng = np.random.default_rng(seed)
    if name == "20news":
        X_train, X_test, vocab = _vectorize_20news(*_find("20news"))
    elif name in ("nips", "kos"):
        docword, vocab_file = _find(name)
        bunch = load_uci_bow(docword, vocab_file)
        X = bunch.data[np.flatnonzero(bunch.data.getnnz(axis=1))]
        X_train, X_test = _random_split(X, test_fraction, rng)
        vocab = bunch.feature_names
    elif name == "nytimes":
        bunch = make_lda_corpus(shape="nytimes", scale=nytimes_scale, n_topics=100,
                                random_state=seed)
        X_train, X_test = _random_split(bunch.data, test_fraction, rng)
        vocab = bunch.feature_names
    else:
        raise ValueError(f"unknown corpus {name!r}; choose from {CORPORA}")

    if max_docs is not None and X_train.shape[0] > max_docs:
        X_train = X_train[np.sort(rng.choice(X_train.shape[0], max_docs, replace=False))]
    if max_test_docs is not None and X_test.shape[0] > max_test_docs:
        X_test = X_test[np.sort(rng.choice(X_test.shape[0], max_test_docs, replace=False))]
    seen = np.flatnonzero(np.asarray(X_train.sum(axis=0)).ravel() > 0)
    X_train = sp.csr_matrix(X_train[:, seen], dtype=np.int64)
    X_test = sp.csr_matrix(X_test[:, seen], dtype=np.int64)
    X_train = X_train[np.flatnonzero(np.asarray(X_train.sum(axis=1)).ravel() > 0)]
    X_test = X_test[np.flatnonzero(np.asarray(X_test.sum(axis=1)).ravel() >= 2)]
    for X in (X_train, X_test):
        X.sort_indices()
    return X_train, X_test, np.asarray(vocab)[seen].astype(str)


def save_corpus(path, X_train, X_test, vocab):
    """Write a prepared corpus to one ``.npz`` file that worker processes read back."""
    np.savez(path, train_data=X_train.data, train_indices=X_train.indices,
             train_indptr=X_train.indptr, test_data=X_test.data, test_indices=X_test.indices,
             test_indptr=X_test.indptr, vocab=vocab)


def read_corpus(path):
    """Inverse of :func:`save_corpus`."""
    with np.load(path) as f:
        n_words = f["vocab"].shape[0]
        X_train = sp.csr_matrix((f["train_data"], f["train_indices"], f["train_indptr"]),
                                shape=(f["train_indptr"].shape[0] - 1, n_words))
        X_test = sp.csr_matrix((f["test_data"], f["test_indices"], f["test_indptr"]),
                               shape=(f["test_indptr"].shape[0] - 1, n_words))
        return X_train, X_test, f["vocab"]
