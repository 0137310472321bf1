"""Topic coherence as gensim's ``CoherenceModel`` defines it: c_v, c_npmi, c_uci and u_mass.

Every measure is a pipeline of four steps (Röder et al., 2015): a segmentation of each topic's
words into pairs, probabilities estimated from a reference corpus, a confirmation measure per
pair, and the mean over the pairs. Here the probabilities of all topics come from one sparse
co-occurrence count over "units": documents for u_mass, sliding windows for the other three.

Sliding windows are counted the way gensim 4.x counts them, not as plain sets of the words in
each window. gensim slides its window one token at a time and updates a word set: the token that
leaves is struck out and the token that enters is added. When the leaving token still occurs
later inside the window it is struck out all the same, and stays out until it enters again at
the window's end. So a word occurring twice less than a window apart is seen in fewer windows
than it is really in. The presence of a word in the windows of a document is a union of
intervals of window indices; ``_cooccurrence.window_cooccurrence`` computes them from the
positions of the word and reproduces gensim's counts exactly (the tests compare them with
gensim's accumulator).

Counting avoids a loop over windows: with windows numbered across documents, two words share
the windows where their intervals overlap, so the pair counts are sums of overlap lengths over
the pairs of intervals that overlap, found with one sort and expanded with NumPy. The work grows
with the occurrences of topic words times the number of topic-word occurrences within a window
of each, not with the number of windows times the window size.
"""

import numbers
from itertools import chain, repeat
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._runtime.device import import_cupy, parse_device, resolve_device
from ._checks import as_counts, as_float_matrix
from ._coherence import _top_indices
from ._cooccurrence import (document_cooccurrence, document_counts, on_gpu,
                            window_cooccurrence, window_counts)

#: The measures of :func:`gensim_coherence`, with gensim's default window sizes (``None``:
#: whole documents).
GENSIM_WINDOW_SIZES = {"c_v": 110, "c_npmi": 10, "c_uci": 10, "u_mass": None}

#: With ``device='auto'``, reference corpora of at least this many tokens are counted on the GPU
#: (when there is one); smaller ones count faster on the CPU than the transfers take.
GPU_MIN_TOKENS = 1_000_000

# gensim adds this to every joint probability (its direct_confirmation_measure.EPSILON).
_EPSILON = 1e-12


class CoherenceScores(NamedTuple):
    """What :func:`gensim_coherence` returns: ``per_topic, mean = gensim_coherence(...)``."""

    #: One score per topic, float64 (gensim's ``get_coherence_per_topic()``).
    per_topic: np.ndarray
    #: Their arithmetic mean (gensim's ``get_coherence()``); NaN or infinite when a score is.
    mean: float


def gensim_coherence(topics, texts, measure="c_v", *, window_size=None, top_n=None,
                     feature_names=None, device="auto"):
    """Topic coherence as gensim 4.x computes it: c_v, c_npmi, c_uci or u_mass.

    The scores agree with ``gensim.models.CoherenceModel(topics=..., texts=..., dictionary=...,
    coherence=measure, window_size=window_size).get_coherence_per_topic()`` and
    ``.get_coherence()`` (to 1e-10, relative, in the tests), where gensim's dictionary holds every
    topic word. For a topic of words ``w_1, ..., w_M`` (in order), with ``N`` reference units
    (documents for u_mass, sliding windows for the others), ``P(w) = N(w) / N`` the fraction of
    units holding ``w``, ``P(w, w') = N(w, w') / N`` and ``eps = 1e-12``:

    - ``"u_mass"``: mean over ``i > j`` of ``log((P(w_i, w_j) + eps) / P(w_j))``, from
      document co-occurrence (a pair whose ``w_j`` never occurs counts 0, as in gensim);
    - ``"c_uci"``: mean over ordered pairs ``i != j`` of the PMI
      ``log((P(w_i, w_j) + eps) / (P(w_i) P(w_j)))``, from windows of 10 tokens by default;
    - ``"c_npmi"``: the same mean of the NPMI, the PMI divided by ``-log(P(w_i, w_j) + eps)``;
    - ``"c_v"``: each word gets a context vector, its NPMI with every word of the topic, and the
      topic a vector, the sum of those; the score is the mean cosine between a word's vector
      and the topic's, from windows of 110 tokens by default.

    Windows slide one token at a time over each text, with every token in place (words outside
    the topics still take up room), and are counted with gensim's word-set update (see Notes); a
    text no longer than the window is one window, an empty text one empty window.

    Parameters
    ----------
    topics : list of lists of str, or ndarray or sparse matrix of shape (n_topics, n_words)
        The topics: each a list of words, most important first (gensim's ``topics``); or
        topic-word weights such as ``components_``, whose ``top_n`` heaviest words (ties by
        column) are taken from ``feature_names``. A topic's words may repeat; they count with
        their repetitions, as in gensim.
    texts : list of lists of str, or sparse matrix or ndarray of shape (n_docs, n_vocab)
        The reference corpus: tokenised documents, in order (gensim's ``texts``). For
        ``"u_mass"`` only, a document-term count matrix whose columns are ``feature_names``
        (gensim's ``corpus``) does as well; windows need word order, which counts do not keep.
        A topic word absent from the texts has no occurrence: c_uci and c_npmi are then +inf
        for its topic and c_v NaN, as in gensim when its dictionary knows the word.
    measure : {"c_v", "c_npmi", "c_uci", "u_mass"}, default="c_v"
        The coherence measure.
    window_size : int or None, default=None
        Tokens per sliding window, at least 1; ``None`` takes gensim's default (110 for c_v, 10
        for c_npmi and c_uci). Must be ``None`` for u_mass, which counts whole documents.
    top_n : int or None, default=None
        Words per topic, at least 2. A matrix gives its ``top_n`` heaviest words (10 when
        ``None``); a word list is cut to its first ``top_n`` words (used whole when ``None``).
    feature_names : array-like of str of shape (n_words,) or None, default=None
        The vocabulary: the words of the columns of ``topics`` when it is a matrix, and of
        ``texts`` when it is a count matrix; needed in those cases, unused otherwise.
    device : {'auto', 'cpu', 'cuda'} or str, default='auto'
        Where the co-occurrences are counted (as the estimator's ``device``, e.g. ``'cuda:1'``):
        ``'auto'`` takes the GPU when CuPy sees one and the reference corpus holds at least
        ``GPU_MIN_TOKENS`` (1,000,000) tokens (non-zero counts for a count matrix), else the
        CPU. Both count exactly, so the scores are the same; the GPU counts windows as a
        matrix product, the CPU by pairs of overlapping intervals. Reading the texts into word
        ids stays on the CPU.

    Returns
    -------
    scores : CoherenceScores
        A named tuple ``(per_topic, mean)``: ``per_topic`` an ndarray of float64 of shape
        ``(n_topics,)``, higher being more coherent for every measure, and ``mean`` their mean.

    Raises
    ------
    ValueError
        For an unknown measure, a window size that is not a positive integer (or any for
        u_mass), a topic of fewer than two words, a count matrix for a window measure, a
        matrix of topics without a vocabulary of its width, or a topic word outside the
        vocabulary of a count matrix.
        Also for a misspelled ``device``.
    RuntimeError
        ``device`` names a GPU and CuPy cannot use it.

    See Also
    --------
    umass_coherence : UMass from document co-occurrence, a sum with +1 smoothing.
    npmi_coherence : NPMI from document co-occurrence.

    Notes
    -----
    gensim updates its word set as the window slides: the leaving token is struck out even when
    it occurs again inside the window, and a word comes back only when it enters at the
    window's end. So a word occurring twice fewer than ``window_size`` tokens apart is missing
    from some windows that hold it; this function counts the same way, to give gensim's
    numbers. gensim drops a topic word its ``Dictionary`` does not know (usually a word absent
    from the texts the dictionary was built from); remove such words from ``topics`` to get
    that behaviour.

    References
    ----------
    Röder, Both and Hinneburg (2015), "Exploring the space of topic coherence measures", WSDM.
    Mimno et al. (2011), "Optimizing semantic coherence in topic models", EMNLP (UMass).
    Newman et al. (2010), "Automatic evaluation of topic coherence", NAACL (UCI).

    Examples
    --------
    >>> from sklearn_gpulda.metrics import gensim_coherence
    >>> texts = [["apple", "banana", "fruit", "juice"], ["apple", "fruit", "tree"],
    ...          ["car", "engine", "road"], ["car", "road", "truck", "engine"]]
    >>> topics = [["apple", "fruit", "banana"], ["car", "engine", "apple"]]
    >>> per_topic, mean = gensim_coherence(topics, texts)  # c_v, windows of 110 tokens
    >>> per_topic.round(4), round(mean, 4)
    (array([0.958 , 0.3341]), 0.6461)
    >>> gensim_coherence(topics, texts, "c_npmi", window_size=3).per_topic.round(4)
    array([ 0.4961, -0.5382])
    >>> gensim_coherence(topics, texts, "u_mass").per_topic.round(4)  # "apple" never with "car"
    array([ -0.4621, -17.9586])
    """
    if measure not in GENSIM_WINDOW_SIZES:
        raise ValueError(
            f"measure must be one of {sorted(GENSIM_WINDOW_SIZES)}, got {measure!r}")
    window_size = _check_window_size(window_size, measure)
    parse_device(device)  # its spelling, before any work
    words = _topic_words(topics, top_n, feature_names)

    # Dense ids over the distinct topic words, in order of first appearance.
    relevant = {}
    for topic in words:
        for word in topic:
            relevant.setdefault(word, len(relevant))
    ids = [np.fromiter((relevant[w] for w in topic), dtype=np.int64, count=len(topic))
           for topic in words]

    if _is_count_matrix(texts):
        if measure != "u_mass":
            raise ValueError(
                f"{measure} counts sliding windows, which need word order: pass tokenised texts "
                "(a list of lists of str), not a count matrix")
        units, n_units = _documents_from_counts(texts, feature_names, relevant)
        gpu = _counting_gpu(device, units.nnz)
        if gpu is None:
            counts = document_cooccurrence(units)
        else:
            units = units.tocoo()
            counts = on_gpu(gpu, document_counts, units.row, units.col, len(relevant))
    else:
        doc, pos, word, lengths = _encode_texts(texts, relevant)
        gpu = _counting_gpu(device, int(lengths.sum()))
        if measure == "u_mass":
            n_units = lengths.size
            if gpu is None:
                units = sp.csr_matrix(
                    (np.ones(doc.size), (doc, word)), shape=(lengths.size, len(relevant)))
                units.data[:] = 1.0  # whether a document holds the word, not how often
                counts = document_cooccurrence(units)
            else:
                counts = on_gpu(gpu, document_counts, doc, word, len(relevant))
        elif gpu is None:
            counts, n_units = window_cooccurrence(doc, pos, word, lengths, window_size,
                                                  len(relevant))
        else:
            counts, n_units = on_gpu(gpu, window_counts, doc, pos, word, lengths,
                                     window_size, len(relevant))

    per_topic = np.empty(len(ids))
    score = _MEASURES[measure]
    # Topics of one length are scored together, as a (topics, M, M) block of pair counts.
    lengths_of_topics = np.array([len(t) for t in ids])
    for m in np.unique(lengths_of_topics):
        which = np.flatnonzero(lengths_of_topics == m)
        block = np.stack([ids[k] for k in which])
        joint = np.asarray(counts[np.repeat(block, m, axis=1).ravel(),
                                  np.tile(block, (1, m)).ravel()]).reshape(len(which), m, m)
        single = np.diagonal(joint, axis1=1, axis2=2)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            per_topic[which] = score(joint / n_units, single / n_units, block)
    with np.errstate(invalid="ignore"):
        mean = float(np.mean(per_topic))
    return CoherenceScores(per_topic, mean)


# --------------------------------------------------------------------------------------------------
# confirmation measures, each on a block: joint (K, M, M) and single (K, M) probabilities
# --------------------------------------------------------------------------------------------------


def _u_mass(joint, single, words):
    # gensim's "one-preceding" segmentation: each word against every word before it.
    later, earlier = np.tril_indices(joint.shape[1], k=-1)
    conditioning = single[:, earlier]
    terms = np.log((joint[:, later, earlier] + _EPSILON) / conditioning)
    terms[conditioning == 0] = 0.0  # gensim's ZeroDivisionError branch
    return terms.mean(axis=1)


def _pmi(joint, single):
    return np.log((joint + _EPSILON) / (single[:, :, None] * single[:, None, :]))


def _npmi(joint, single):
    return _pmi(joint, single) / -np.log(joint + _EPSILON)


def _off_diagonal_mean(values):
    # gensim's "one-one" segmentation: every ordered pair of distinct positions.
    m = values.shape[1]
    i, j = np.nonzero(~np.eye(m, dtype=bool))
    return values[:, i, j].mean(axis=1)


def _c_uci(joint, single, words):
    return _off_diagonal_mean(_pmi(joint, single))


def _c_npmi(joint, single, words):
    return _off_diagonal_mean(_npmi(joint, single))


def _c_v(joint, single, words):
    # Word i's context vector holds, for each distinct topic word u, the sum of NPMI(w_i, w_j)
    # over the positions j where u stands; the topic's vector is the sum of the words' vectors
    # ("one-set" segmentation). With same[j, j'] = [w_j == w_j'], a dot product of two such
    # vectors a and b is a_pos @ same @ b_pos in position space, repeated words included.
    npmi = _npmi(joint, single)                               # (K, M, M): row i, position j
    same = (words[:, :, None] == words[:, None, :]).astype(np.float64)
    topic = npmi.sum(axis=1)                                  # (K, M)
    topic_same = np.einsum("kj,kjl->kl", topic, same)
    dots = np.einsum("kij,kj->ki", npmi, topic_same)
    norms = np.sqrt(np.einsum("kij,kjl,kil->ki", npmi, same, npmi))
    topic_norm = np.sqrt(np.einsum("kl,kl->k", topic_same, topic))
    return (dots / (norms * topic_norm[:, None])).mean(axis=1)


_MEASURES = {"u_mass": _u_mass, "c_uci": _c_uci, "c_npmi": _c_npmi, "c_v": _c_v}


# --------------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------------


def _check_window_size(window_size, measure):
    if measure == "u_mass":
        if window_size is not None:
            raise ValueError(
                "u_mass counts whole documents: window_size must be None, got "
                f"{window_size!r}")
        return None
    if window_size is None:
        return GENSIM_WINDOW_SIZES[measure]
    if (not isinstance(window_size, numbers.Integral) or isinstance(window_size, bool)
            or window_size < 1):
        raise ValueError(f"window_size must be a positive integer, got {window_size!r}")
    return int(window_size)


def _is_count_matrix(a):
    return sp.issparse(a) or (isinstance(a, np.ndarray) and a.ndim == 2
                              and a.dtype.kind in "biuf")


def _check_top_n(top_n, upper=None):
    if top_n is None:
        return None
    if (not isinstance(top_n, numbers.Integral) or isinstance(top_n, bool) or top_n < 2
            or (upper is not None and top_n > upper)):
        bound = f"2..{upper}" if upper is not None else "at least 2"
        raise ValueError(f"top_n must be an integer in {bound}, got {top_n!r}")
    return int(top_n)


def _vocabulary(feature_names, width, what):
    if feature_names is None:
        raise ValueError(f"feature_names is needed to read the words of {what}")
    names = np.asarray(feature_names, dtype=object)
    if names.ndim != 1 or names.shape[0] != width:
        raise ValueError(
            f"vocabulary size mismatch: feature_names has {names.size} entries but {what} has "
            f"{width} columns")
    return [n.item() if isinstance(n, np.generic) else n for n in names]


def _topic_words(topics, top_n, feature_names):
    """The topics as lists of words, checked."""
    if _is_count_matrix(topics):
        components = as_float_matrix(topics, "topics")
        names = _vocabulary(feature_names, components.shape[1], "the topics matrix")
        top_n = _check_top_n(10 if top_n is None else top_n, components.shape[1])
        return [[names[v] for v in row] for row in _top_indices(components, top_n)]
    top_n = _check_top_n(top_n)
    if isinstance(topics, str):
        raise ValueError("topics must be a list of lists of words, got a str")
    words = []
    for k, topic in enumerate(topics):
        if isinstance(topic, str):
            raise ValueError(f"topic {k} is a str; each topic must be a list of words")
        topic = list(topic)[:top_n]
        if len(topic) < 2:
            raise ValueError(f"topic {k} has {len(topic)} word(s); coherence needs at least 2")
        words.append(topic)
    if not words:
        raise ValueError("topics is empty")
    return words


def _encode_texts(texts, relevant):
    """Document, position and word id of every occurrence of a topic word; document lengths."""
    if isinstance(texts, str) or not hasattr(texts, "__iter__"):
        raise ValueError("texts must be a list of tokenised documents (lists of str)")
    texts = texts if isinstance(texts, (list, tuple)) else list(texts)
    if any(isinstance(text, str) for text in texts):
        raise ValueError("texts must be tokenised: each document a list of str, not a str")
    if not texts:
        raise ValueError("texts is empty")
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    tokens = np.fromiter(map(relevant.get, chain.from_iterable(texts), repeat(-1)),
                         dtype=np.int64, count=int(lengths.sum()))
    where = np.flatnonzero(tokens >= 0)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    doc = np.searchsorted(starts, where, side="right") - 1
    return doc, where - starts[doc], tokens[where], lengths


def _documents_from_counts(X, feature_names, relevant):
    X = as_counts(X, "texts (a count matrix)")
    names = _vocabulary(feature_names, X.shape[1], "texts")
    column = {}
    for c, name in enumerate(names):
        column.setdefault(name, c)
    missing = [w for w in relevant if w not in column]
    if missing:
        raise ValueError(
            f"{len(missing)} topic word(s) are not in feature_names, the columns of texts, "
            f"e.g. {missing[:5]!r}")
    cols = np.array([column[w] for w in relevant])
    units = X[:, cols]
    units.data[:] = 1.0
    return units, X.shape[0]


# --------------------------------------------------------------------------------------------------
# where the counting runs
# --------------------------------------------------------------------------------------------------


def _counting_gpu(device, n_tokens):
    """The GPU ordinal to count on, or None for the CPU (``device`` already spelled right)."""
    kind, _ = parse_device(device)
    if kind == "cpu":
        return None
    if kind == "auto":
        if n_tokens < GPU_MIN_TOKENS or import_cupy()[0] is None:
            return None
    where = resolve_device(device)
    return None if where.kind == "cpu" else where.lead.index
