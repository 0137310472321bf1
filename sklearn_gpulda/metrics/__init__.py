"""Evaluation of topic models that works the same for every system.

Every function takes plain arrays: a document-term count matrix and a non-negative
``(n_topics, n_words)`` topic-word matrix (``components_`` of this package or of scikit-learn,
gensim's ``get_topics()``, ...), so two systems are scored by the same code.

- :func:`log_likelihood` and :func:`perplexity`: fit of given document-topic and topic-word
  distributions to a corpus;
- :func:`document_completion`: held-out likelihood by document completion (Wallach et al. 2009),
  the protocol SaberLDA reports; :func:`compare_models` applies it to several fitted models (of
  this package, scikit-learn or any other) on one split, the fair way to compare them;
- :func:`umass_coherence` and :func:`npmi_coherence`: topic coherence from document co-occurrence;
- :func:`gensim_coherence`: c_v, c_npmi, c_uci and u_mass as gensim's ``CoherenceModel`` computes
  them, from tokenised texts (sliding windows) or documents;
- :func:`top_words` and :func:`topic_word_distribution`: helpers.
"""

# One module per job: _checks (input validation shared by the others), _likelihood (fit of given
# distributions, and the chunked per-token probability the other scores reuse), _completion
# (held-out document completion and compare_models), _coherence (UMass, NPMI, top words),
# _gensim_coherence (gensim's four measures, with sliding windows), _cooccurrence (their counts
# as a matrix product, for NumPy or CuPy: the GPU path for large reference corpora).
from ._coherence import NPMI_EPSILON, npmi_coherence, top_words, umass_coherence  # noqa: F401
from ._gensim_coherence import (GENSIM_WINDOW_SIZES, GPU_MIN_TOKENS,  # noqa: F401
                                CoherenceScores, gensim_coherence)
from ._completion import compare_models, document_completion
from ._likelihood import log_likelihood, perplexity, topic_word_distribution

__all__ = [
    "topic_word_distribution",
    "log_likelihood",
    "perplexity",
    "document_completion",
    "compare_models",
    "umass_coherence",
    "npmi_coherence",
    "gensim_coherence",
    "CoherenceScores",
    "top_words",
]
