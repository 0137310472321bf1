"""The King James Bible, one document per chapter, shipped with the package as package data."""

import gzip
import importlib.resources

import numpy as np

from ._uci import load_uci_bow


#: Function words of the King James Bible's Early Modern English that scikit-learn's English
#: stop list (made for modern text) leaves in the bundled vocabulary, where they lead every
#: topic ('shall', 'unto', 'thou' are its three most frequent words). Closed classes only:
#: second-person pronouns and determiners (thou, thee, thy, ...); the -st and -th forms of the
#: auxiliaries and modals be, have, do, shall, will, can, may, should, would, might; archaic
#: prepositions, conjunctions and pronominal adverbs (unto, lest, thereof, wherewith, ...);
#: and the discourse particles yea, nay, lo, behold and verily. Also 'saith' and 'sayest', the
#: -th and -st forms of 'say', which the text uses almost only in the quotative formula "thus
#: saith the LORD". Content words stay, however frequent ('lord', 'god', 'said', 'came').
KJV_STOP_WORDS = frozenset("""
    thou thee thy thine thyself ye
    art wast wert hath hast hadst doth dost didst doest doeth
    shall shalt wilt wouldest wouldst shouldest shouldst canst couldest mayest mightest
    saith sayest
    unto ere lest nigh oft albeit howbeit hitherto hither thither
    thereof thereto therewith thereon thereunto
    wherefore whereof whereon wherewith whereunto
    whoso whosoever whatsoever whomsoever wheresoever
    yea nay lo behold verily
""".split())


def _kjv_resource(filename):
    return importlib.resources.files("sklearn_gpulda") / "data" / "kjv" / filename


def load_kjv_chapters(*, remove_archaic=False):
    """Load the King James Bible as a bag of words, one document per chapter.

    The text is in the public domain, so the corpus ships with the package: 1,189 chapters of the
    66 books in canonical order, over a 3,117-word vocabulary (alphabetic tokens of at least two
    letters, lower-cased, English stop words removed, words occurring more than 10 times in all).
    Its provenance (Debian's ``bible-kjv-text`` package) is recorded in
    ``sklearn_gpulda/data/kjv/PROVENANCE.md``, returned here as ``DESCR``.

    Parameters
    ----------
    remove_archaic : bool, default=False
        Whether to drop the columns of :data:`KJV_STOP_WORDS`, the archaic function words
        that the English stop list misses (53 of the vocabulary's 3,117 words, 16% of its
        tokens), so that topics lead with content words. The default keeps the corpus as it
        has always been loaded, which tests and published figures rely on.

    Returns
    -------
    bunch : sklearn.utils.Bunch
        With fields

        - ``data``: CSR matrix of int64 counts, shape ``(1189, 3117)`` (fewer columns with
          ``remove_archaic``);
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
    >>> "unto" in load_kjv_chapters(remove_archaic=True).feature_names
    False
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
    if remove_archaic:
        keep = np.flatnonzero([w not in KJV_STOP_WORDS for w in bunch.feature_names])
        bunch.update(data=bunch.data[:, keep].tocsr(), feature_names=bunch.feature_names[keep],
                     n_words=keep.size)
    return bunch
