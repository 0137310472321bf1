"""Synthetic corpora drawn from the LDA generative model, at the sizes of the UCI corpora."""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

# The shapes make_lda_corpus(shape=...) takes by name: D, W and mean length N / D of UCI corpora
# (documented where the package binds the name, __init__.py).
CORPUS_SHAPES = {
    "kos": dict(n_docs=3_430, n_words=6_906, doc_length=467_714 / 3_430),
    "nips": dict(n_docs=1_500, n_words=12_419, doc_length=1_932_365 / 1_500),
    "enron": dict(n_docs=39_861, n_words=28_102, doc_length=6_400_000 / 39_861),
    "nytimes": dict(n_docs=300_000, n_words=102_660, doc_length=99_542_125 / 300_000),
    "pubmed": dict(n_docs=8_200_000, n_words=141_043, doc_length=730_000_000 / 8_200_000),
}

# Documents are generated in blocks. Each block costs one O(n_words) multinomial per topic, so
# blocks grow with n_topics * n_words (from 8 M to 64 M expected tokens) to keep that overhead
# small, while the (documents x topics) count table of a block stays under 2**27 entries.
_BLOCK_TOKENS_MIN = 1 << 23
_BLOCK_TOKENS_MAX = 1 << 26
_BLOCK_TABLE_ENTRIES = 1 << 27

# Rows of a Dirichlet draw made at once: bounds the float64 temporaries of large topic matrices.
_DIRICHLET_ENTRIES = 1 << 24


def as_generator(random_state):
    """A numpy Generator from None, an int, a Generator or a legacy RandomState."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        # Derive a seed so that a seeded RandomState still gives reproducible output.
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    if random_state is None or isinstance(random_state, numbers.Integral):
        return np.random.default_rng(random_state)
    raise ValueError(
        f"random_state must be None, an int or a numpy random generator, got {random_state!r}"
    )


def _dirichlet_rows(rng, concentration, n_rows):
    """Rows drawn from Dirichlet(concentration), robust to tiny concentrations.

    With parameters far below 1 (beta = 0.01 spread over a Zipf profile gives 1e-4 and less) plain
    gamma draws underflow to 0 and a row can even be all zeros. The draws are made in log space
    instead, through Gamma(a) = Gamma(a + 1) * U**(1/a), then normalised after a max shift.
    """
    concentration = np.asarray(concentration, dtype=np.float64)
    rows = np.empty((n_rows, concentration.size))
    step = max(1, _DIRICHLET_ENTRIES // max(1, concentration.size))
    for r0 in range(0, n_rows, step):
        a = np.broadcast_to(concentration, (min(step, n_rows - r0), concentration.size))
        log_g = np.log(rng.standard_gamma(a + 1.0))
        log_g += np.log(rng.random(a.shape)) / a
        log_g -= log_g.max(axis=1, keepdims=True)
        block = np.exp(log_g, out=log_g)
        block /= block.sum(axis=1, keepdims=True)
        rows[r0:r0 + block.shape[0]] = block
    return rows


def _check_positive(value, name, integer=False):
    kind = numbers.Integral if integer else numbers.Real
    if not isinstance(value, kind) or isinstance(value, bool) or not value > 0:
        what = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{name} must be {what}, got {value!r}")


def make_lda_corpus(n_docs=1000, n_words=5000, n_topics=20, doc_length=100, alpha=0.1, beta=0.01,
                    zipf_exponent=1.0, shape=None, scale=1.0, random_state=None, dtype=np.int64):
    """Draw a document-term count matrix from the LDA generative model.

    Topics are ``phi_k ~ Dirichlet(beta * V * z)`` where ``z_r ∝ 1 / (r + 1) ** zipf_exponent``
    is a normalised Zipf profile, so each topic's expected word distribution is Zipfian, and so
    are the expected corpus word frequencies, while ``beta`` keeps its usual meaning of a per-word
    concentration (the parameters sum to ``beta * V`` as in a symmetric prior). Word id ``r`` has
    expected rank ``r``. Documents get ``theta_d ~ Dirichlet(alpha)``, a length
    ``max(1, Poisson(doc_length))``, and their tokens' topics and words are drawn as the model
    says; only the counts are kept.

    Generation is vectorised over documents and tokens (per block of documents, one multinomial
    over topics per document and one over words per topic), so the NYTimes shape, 100 M tokens,
    takes about 10 s and 2 GB of memory with 20 topics on one CPU core, and about 75 s and 6 GB
    with 1000 topics (the returned dense ``doc_topic`` alone is then 2.4 GB).

    Parameters
    ----------
    n_docs : int, default=1000
        Number of documents (multiplied by ``scale``).
    n_words : int, default=5000
        Vocabulary size.
    n_topics : int, default=20
        Number of topics.
    doc_length : float, default=100
        Mean document length (Poisson mean).
    alpha : float or array-like of shape (n_topics,), default=0.1
        Dirichlet parameter of the document-topic distributions.
    beta : float, default=0.01
        Per-word Dirichlet concentration of the topic-word distributions.
    zipf_exponent : float, default=1.0
        Exponent of the Zipf profile; 0 gives a flat profile (a symmetric Dirichlet prior).
    shape : {"kos", "nips", "enron", "nytimes", "pubmed"} or None, default=None
        Take ``n_docs``, ``n_words`` and ``doc_length`` from a UCI corpus (see ``CORPUS_SHAPES``):
        "nytimes" is 300,000 documents of mean length ~332 over 102,660 words, "pubmed" is
        8.2 M documents of mean length ~89 over 141,043 words. Overrides those three arguments.
    scale : float, default=1.0
        Multiplies the number of documents (at least one is kept), e.g. ``shape="pubmed",
        scale=0.05`` for a PubMed-shaped corpus of 410,000 documents.
    random_state : int, numpy.random.Generator, numpy.random.RandomState or None, default=None
        Seed; the same integer always gives the same corpus.
    dtype : numpy dtype, default=numpy.int64
        Dtype of the returned counts.

    Returns
    -------
    bunch : sklearn.utils.Bunch
        With fields ``data`` (CSR counts of shape ``(n_docs, n_words)`` in canonical form),
        ``topic_word`` (true ``phi``, float64 ``(n_topics, n_words)``, rows sum to 1),
        ``doc_topic`` (true ``theta``, float64 ``(n_docs, n_topics)``, rows sum to 1),
        ``doc_lengths`` (int64 ``(n_docs,)``) and ``feature_names`` (``"w0"``, ``"w1"``, ...).

    Notes
    -----
    With a small ``beta`` the topics are sparse: a tail word gets a non-negligible probability in
    few topics or none, so part of the vocabulary never occurs when there are few topics. For the
    NYTimes shape with ``beta=0.01`` about 35,000 of the 102,660 words occur with 20 topics,
    73,000 with 100 and 102,000 with 1000. A larger ``beta`` (0.1 gives 80,000 at 20 topics on
    a fifth of the documents) fills the vocabulary if the benchmark needs it.

    Examples
    --------
    >>> from sklearn_gpulda.datasets import make_lda_corpus
    >>> corpus = make_lda_corpus(n_docs=50, n_words=200, n_topics=5, doc_length=40,
    ...                          random_state=0)
    >>> corpus.data.shape, corpus.topic_word.shape, corpus.doc_topic.shape
    ((50, 200), (5, 200), (50, 5))
    >>> bool((corpus.data.sum(axis=1).A1 == corpus.doc_lengths).all())
    True
    """
    if shape is not None:
        if shape not in CORPUS_SHAPES:
            raise ValueError(f"shape must be one of {sorted(CORPUS_SHAPES)} or None, got {shape!r}")
        n_docs = CORPUS_SHAPES[shape]["n_docs"]
        n_words = CORPUS_SHAPES[shape]["n_words"]
        doc_length = CORPUS_SHAPES[shape]["doc_length"]
    _check_positive(n_docs, "n_docs", integer=True)
    _check_positive(n_words, "n_words", integer=True)
    _check_positive(n_topics, "n_topics", integer=True)
    _check_positive(doc_length, "doc_length")
    _check_positive(beta, "beta")
    _check_positive(scale, "scale")
    if not isinstance(zipf_exponent, numbers.Real) or not zipf_exponent >= 0:
        raise ValueError(f"zipf_exponent must be a non-negative number, got {zipf_exponent!r}")
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 0:
        alpha = np.full(n_topics, float(alpha))
    if alpha.shape != (n_topics,) or not np.all(alpha > 0) or not np.all(np.isfinite(alpha)):
        raise ValueError(f"alpha must be a positive number or {n_topics} positive numbers")
    n_docs = max(1, int(round(n_docs * scale)))
    rng = as_generator(random_state)

    profile = (np.arange(n_words, dtype=np.float64) + 1.0) ** -float(zipf_exponent)
    profile *= n_words / profile.sum()
    topic_word = _dirichlet_rows(rng, beta * profile, n_topics)
    doc_topic = _dirichlet_rows(rng, alpha, n_docs)
    doc_lengths = np.maximum(rng.poisson(doc_length, size=n_docs), 1).astype(np.int64)

    # Block sizes depend only on the arguments, so the same seed gives the same corpus.
    block_tokens = min(max(n_topics * n_words // 8, _BLOCK_TOKENS_MIN), _BLOCK_TOKENS_MAX)
    docs_per_block = max(1, min(int(block_tokens / doc_length), _BLOCK_TABLE_ENTRIES // n_topics))
    bounds = np.r_[np.arange(0, n_docs, docs_per_block), n_docs]
    word_ids = np.arange(n_words, dtype=np.int32)
    indptr_parts, index_parts, count_parts = [np.zeros(1, dtype=np.int64)], [], []
    nnz_so_far = 0
    for d0, d1 in zip(bounds[:-1], bounds[1:]):
        lengths = doc_lengths[d0:d1]
        # Topic counts of every (document, topic) pair of the block in one broadcast call.
        topic_counts = rng.multinomial(lengths, doc_topic[d0:d1])
        slot_start = np.zeros(topic_counts.size, dtype=np.int64)
        np.cumsum(topic_counts.ravel()[:-1], out=slot_start[1:])
        slot_start = slot_start.reshape(topic_counts.shape)
        words = np.empty(int(lengths.sum()), dtype=np.int32)
        for k in range(n_topics):
            per_doc = topic_counts[:, k]
            n_k = int(per_doc.sum())
            if n_k == 0:
                continue
            # The block's tokens of topic k are iid draws from phi_k: draw how many of each word,
            # then deal them to the (document, topic k) slots in a uniformly random order.
            drawn = np.repeat(word_ids, rng.multinomial(n_k, topic_word[k]))
            rng.shuffle(drawn)
            first = np.cumsum(per_doc) - per_doc
            dest = np.repeat(slot_start[:, k] - first, per_doc)
            dest += np.arange(n_k, dtype=np.int64)
            words[dest] = drawn
        block_ptr = np.zeros(lengths.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=block_ptr[1:])
        block = sp.csr_matrix((np.ones(words.size, dtype=np.int64), words, block_ptr),
                              shape=(lengths.size, n_words))
        block.sum_duplicates()
        index_parts.append(block.indices.astype(np.int32, copy=False))
        count_parts.append(block.data)
        indptr_parts.append(block.indptr[1:].astype(np.int64) + nnz_so_far)
        nnz_so_far += block.nnz
    indptr = np.concatenate(indptr_parts)
    indices = np.concatenate(index_parts)
    counts = np.concatenate(count_parts).astype(dtype, copy=False)
    if indptr[-1] <= np.iinfo(np.int32).max:
        indptr = indptr.astype(np.int32)
    data = sp.csr_matrix((counts, indices, indptr), shape=(n_docs, n_words))
    feature_names = np.char.add("w", np.arange(n_words).astype(str))
    return Bunch(data=data, topic_word=topic_word, doc_topic=doc_topic, doc_lengths=doc_lengths,
                 feature_names=feature_names)
