"""The King James Bible, one document per chapter, shipped with the package as package data."""

import gzip
import importlib.resources

import numpy as np

from ._uci import load_uci_bow


def _kjv_resource(filename):
    return importlib.resources.files("sklearn_gpulda") / "data" / "kjv" / filename


def load_kjv_chapters():
    """Load the King James Bible as a bag of words, one document per chapter.

    The text is in the public domain, so the corpus ships with the package: 1,189 chapters of the
    66 books in canonical order, over a 3,117-word vocabulary (alphabetic tokens of at least two
    letters, lower-cased, English stop words removed, words occurring more than 10 times in all).
    Its provenance (Debian's ``bible-kjv-text`` package) is recorded in
    ``sklearn_gpulda/data/kjv/PROVENANCE.md``, returned here as ``DESCR``.

    Returns
    -------
    bunch : sklearn.utils.Bunch
        With fields

        - ``data``: CSR matrix of int64 counts, shape ``(1189, 3117)``;
        - ``feature_names``: ndarray of str, the vocabulary in alphabetical order;
        - ``doc_names``: ndarray of str such as ``"Ge 1"`` (book abbreviation and chapter);
        - ``book``: ndarray of str, the book abbreviation of each chapter (66 distinct values);
        - ``chapter``: ndarray of int64, the chapter number inside its book;
        - ``n_docs``, ``n_words``: the matrix shape;
        - ``DESCR``: the provenance notes.

    Examples
    --------
    >>> from sklearn_gpulda.datasets import load_kjv_chapters
    >>> kjv = load_kjv_chapters()
    >>> kjv.data.shape
    (1189, 3117)
    >>> print(kjv.doc_names[0], "...", kjv.doc_names[-1])
    Ge 1 ... Rev 22
    >>> len(set(kjv.book))
    66
    """
    with importlib.resources.as_file(_kjv_resource("docword.kjv_chapters.txt.gz")) as docword, \
            importlib.resources.as_file(_kjv_resource("vocab.kjv_chapters.txt")) as vocab:
        bunch = load_uci_bow(docword, vocab, engine="numpy")

    with _kjv_resource("docs.kjv_chapters.tsv.gz").open("rb") as raw, \
            gzip.open(raw, "rt", encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        rows = [line.rstrip("\n").split("\t") for line in fh if line.strip()]
    column = {key: i for i, key in enumerate(header)}
    doc_id = np.array([int(r[column["doc_id"]]) for r in rows], dtype=np.int64)
    if not np.array_equal(doc_id, np.arange(1, bunch.n_docs + 1)):
        raise ValueError("the bundled KJV document table is not aligned with the docword file")
    book = np.array([r[column["book"]] for r in rows], dtype=str)
    chapter = np.array([int(r[column["chapter"]]) for r in rows], dtype=np.int64)
    doc_names = np.array([f"{b} {c}" for b, c in zip(book, chapter)], dtype=str)
    descr = _kjv_resource("PROVENANCE.md").read_text(encoding="utf-8")
    bunch.update(doc_names=doc_names, book=book, chapter=chapter, DESCR=descr)
    return bunch
