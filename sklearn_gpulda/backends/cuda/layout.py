"""The PDOW layout on the device (SaberLDA 3.1.4): what :class:`~.sparse.CudaSparseSampler` reads.

Per chunk of whole documents: tokens sorted by frequency-relabelled word, then canonical index;
per token its canonical index minus the chunk's first (uint32), its document minus the chunk's
first (int32) and its topic (uint16 while K <= 65,536). A is stored as rows sorted by topic, each
at a fixed offset: the document's first canonical slot plus ``ROW_PAD`` per earlier document (a
document of n tokens has at most n non-zeros, and the lane-segment layout of ``cuda/entry.cuh``
pads a row by at most ``ROW_PAD``). Entries take 4 bytes (16-bit topic and count) for integer
counts, else 8. :func:`sklearn_gpulda._corpus.pdow_chunks` builds the same token order on the
host; the GPU tests check the two agree.
"""

import numpy as np

from ..._corpus import chunk_bounds
from .constants import ROW_PAD, SHORT_DOC_MAX, WARP

#: Tokens per work item: a frequent word is split into items of this size so that one block
#: never holds the tail of an iteration (ezLDA V-A splits large words for the same reason).
PIECE = 4096


def topic_dtype(n_topics):
    """Topics take 16 bits while they fit."""
    return np.uint16 if n_topics <= 65536 else np.int32


def chunk_ranges(corpus, max_chunk_tokens):
    """Document ranges ``(d0, d1)`` of the chunks: all documents in one chunk, or consecutive
    ranges of at most ``max_chunk_tokens`` tokens (a longer document gets a chunk of its own)."""
    limit = corpus.n_tokens if max_chunk_tokens is None else int(max_chunk_tokens)
    limit = max(1, min(limit, (1 << 31) - 1))
    bounds = chunk_bounds(corpus.doc_ptr, limit) if corpus.n_docs else np.array([0, 0])
    ranges = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    for d0, d1 in ranges:
        if corpus.doc_ptr[d1] - corpus.doc_ptr[d0] >= 1 << 31:
            raise ValueError(
                f"documents {d0}:{d1} hold 2**31 tokens or more; lower max_chunk_tokens"
            )
    return ranges


class Chunk:
    """Device arrays of one PDOW chunk (documents ``d0:d1``, canonical tokens ``t0:t1``).

    Parameters
    ----------
    cp : module
        CuPy.
    corpus : TokenCorpus
    d0, d1 : int
    new_of_old_d, doc_d, word_d, weight_d : cupy.ndarray
        The word relabelling and the corpus's token arrays, on the device (weight may be None).
    n_topics : int
    """

    def __init__(self, cp, corpus, d0, d1, new_of_old_d, doc_d, word_d, weight_d, n_topics):
        self.d0, self.d1 = int(d0), int(d1)
        self.t0, self.t1 = int(corpus.doc_ptr[d0]), int(corpus.doc_ptr[d1])
        n = self.n_tokens = self.t1 - self.t0
        self.n_docs = self.d1 - self.d0
        relabelled = new_of_old_d[word_d[self.t0 : self.t1]]
        # Word-major, canonical order inside a word; unique keys make the order independent of
        # the sort's stability.
        key = (relabelled.astype(cp.int64) << 32) | cp.arange(n, dtype=cp.int64)
        order = cp.argsort(key)
        del key
        self.tok = order.astype(cp.uint32)
        del order
        self.doc = (doc_d[self.t0 : self.t1][self.tok] - self.d0).astype(cp.int32)
        word_count = cp.bincount(relabelled, minlength=corpus.n_words).get()
        del relabelled
        self.weight = (
            None if weight_d is None else cp.ascontiguousarray(weight_d[self.t0 : self.t1])
        )
        doc_ptr = corpus.doc_ptr[self.d0 : self.d1 + 1] - self.t0
        doc_len = np.diff(doc_ptr).astype(np.int32)
        self.doc_off = cp.asarray(doc_ptr[:-1].astype(np.int32))
        # A row's slots: the document's tokens plus the lane-segment layout's padding (entry.cuh).
        row_off = doc_ptr[:-1] + ROW_PAD * np.arange(self.n_docs, dtype=np.int64)
        self.n_slots = n + ROW_PAD * self.n_docs
        if self.n_slots >= 1 << 31:
            raise ValueError(
                "a chunk's A storage must stay below 2**31 entries; lower max_chunk_tokens"
            )
        self.row_off = cp.asarray(row_off.astype(np.int32))
        self.doc_len = cp.asarray(doc_len)
        self.short_docs = cp.asarray(np.flatnonzero(doc_len <= SHORT_DOC_MAX).astype(np.int32))
        self.long_docs = cp.asarray(np.flatnonzero(doc_len > SHORT_DOC_MAX).astype(np.int32))
        self.all_docs = cp.arange(self.n_docs, dtype=cp.int32)
        #: N_d (weighted lengths); doc_norm = N_d + sum(alpha) is set by the sampler.
        self.doc_weight = cp.asarray(corpus.doc_lengths()[self.d0 : self.d1])
        self.doc_norm = None
        self.items, self.n_batches = self._items(cp, word_count)
        tdt = topic_dtype(n_topics)
        self.suffix = "u16" if tdt == np.uint16 else "i32"
        self.z = cp.empty(n, dtype=tdt)
        self.z_can = cp.empty(n, dtype=tdt)
        # Packed entries (cuda/entry.cuh) when every count of A fits 16 bits as an integer.
        self.packed = weight_d is None and (doc_len.max(initial=0) < 65536) and n_topics <= 65536
        self.a_ent = (
            cp.empty(self.n_slots, dtype=cp.uint32)
            if self.packed
            else cp.empty((self.n_slots, 2), dtype=cp.int32)
        )
        self.ent_dtype = np.uint32 if self.packed else np.int32
        self.fmt = "packed" if self.packed else "wide"
        self.a_row = cp.empty((self.n_docs, 2), dtype=cp.int32)

    @staticmethod
    def _items(cp, word_count):
        """Work items ``(word, begin, end, first batch)``: each word's tokens in pieces of at most
        :data:`PIECE`, words in decreasing frequency (the relabelled order)."""
        word_ptr = np.zeros(word_count.size + 1, dtype=np.int64)
        np.cumsum(word_count, out=word_ptr[1:])
        words = np.flatnonzero(word_count)
        pieces = -(-word_count[words] // PIECE)
        word = np.repeat(words, pieces)
        first = np.repeat(np.cumsum(pieces) - pieces, pieces)
        j = np.arange(word.size) - first
        begin = word_ptr[word] + j * PIECE
        end = np.minimum(begin + PIECE, word_ptr[word + 1])
        batches = -(-(end - begin) // WARP)
        batch0 = np.cumsum(batches) - batches
        items = np.stack([word, begin, end, batch0], axis=1).astype(np.int32)
        return cp.asarray(items), int(batches.sum())

    def release(self):
        self.__dict__.clear()


def build_chunks(cp, corpus, new_of_old, n_topics, max_chunk_tokens):
    """Every chunk of ``corpus``, with the token arrays uploaded once and dropped after."""
    ranges = chunk_ranges(corpus, max_chunk_tokens)
    new_of_old_d = cp.asarray(new_of_old)
    doc_d = cp.asarray(corpus.doc)
    word_d = cp.asarray(corpus.word)
    weight_d = None if corpus.weight is None else cp.asarray(corpus.weight, dtype=cp.float32)
    chunks = [
        Chunk(cp, corpus, d0, d1, new_of_old_d, doc_d, word_d, weight_d, n_topics)
        for d0, d1 in ranges
    ]
    del doc_d, word_d, weight_d, new_of_old_d
    return chunks


def chunk_bytes(corpus, n_topics, max_chunk_tokens):
    """Device bytes of the layout kept (steady) and the extra while building it.

    Returns
    -------
    steady, build : int
    """
    n, d, v = corpus.n_tokens, corpus.n_docs, corpus.n_words
    weighted = corpus.weight is not None
    tsize = np.dtype(topic_dtype(n_topics)).itemsize
    chunk = n if max_chunk_tokens is None else min(n, int(max_chunk_tokens))
    per_token = 4 + 4 + 2 * tsize + 8 + (4 if weighted else 0)
    per_doc = 8 + 4 + 4 + 4 + 8 + 8 + 4 + ROW_PAD * 8
    items = (n // PIECE + v) * 16 * 2
    steady = n * per_token + d * per_doc + items + (n // WARP + v) * 8
    # Building: the corpus's doc/word/weight copies plus one chunk's sort (key, order, scratch).
    build = n * (8 + (4 if weighted else 0)) + chunk * (8 + 8 + 16 + 4)
    return int(steady), int(build)
