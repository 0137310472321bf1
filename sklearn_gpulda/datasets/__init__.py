"""Corpora for examples, tests and benchmarks.

Three sources of document-term count matrices:

- :func:`load_uci_bow` reads any file in the UCI "Bag of Words" format (KOS, NIPS, Enron, NYTimes,
  PubMed, and the derived files under ``shared/data``);
- :func:`load_kjv_chapters` loads the King James Bible, one document per chapter, shipped inside
  the package because its text is in the public domain, with :data:`KJV_STOP_WORDS`, the archaic
  function words its ``remove_archaic`` option drops;
- :func:`make_lda_corpus` draws a synthetic corpus from the LDA generative model, with Zipfian word
  frequencies, at any size up to the NYTimes and PubMed shapes used in the GPU LDA literature.
"""

# One module per source: _uci (the bag-of-words reader), _kjv (the bundled corpus, read with it),
# _synthetic (the generator and CORPUS_SHAPES).
from . import _synthetic
from ._kjv import KJV_STOP_WORDS, load_kjv_chapters
from ._synthetic import make_lda_corpus
from ._uci import load_uci_bow

# Bound here rather than imported, so that the comment below documents it in the API reference
# (autodoc reads such comments only in the module it documents).
#: Document count, vocabulary size and mean document length of the UCI corpora commonly used to
#: benchmark LDA (UCI Bag of Words: D, W and total tokens N / D).
CORPUS_SHAPES = _synthetic.CORPUS_SHAPES

__all__ = [
    "load_uci_bow", "load_kjv_chapters", "make_lda_corpus", "CORPUS_SHAPES", "KJV_STOP_WORDS",
]
