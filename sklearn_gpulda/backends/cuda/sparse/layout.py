"""The PDOW layout on the device (SaberLDA 3.1.4): what :class:`~.sparse.CudaSparseSampler` reads.

Per chunk of whole documents: tokens sorted by frequency-relabelled word, then canonical index;
per token its place in its document (``place``: uint16 in packed chunks, whose documents are all
shorter than 65,536 tokens, else uint32), its document minus the chunk's first (int32) and its
topic (uint16 while K <= 65,536). A token's canonical index minus the chunk's first is
``doc_off[doc] + place``: SaberLDA keeps that index itself (4 bytes), the place takes 2 bytes
where documents allow. A is stored as rows sorted by topic, each at a fixed offset: the
document's first canonical slot plus ``ROW_PAD`` per earlier document (a document of n tokens
has at most n non-zeros, and the lane-segment layout of ``cuda/entry.cuh`` pads a row by at most
``ROW_PAD``), so the kernels that read a row's header find the document's first slot there too.
Entries take 4 bytes (16-bit topic and count) for integer counts, else 8.
:func:`sklearn_gpulda._input.layouts.pdow_chunks` builds the same token order on the host; the GPU
tests check the two agree.

The corpus is cut (:func:`chunk_cuts`) before anything is built; how large a chunk and a piece
of its build may be, and what the layout takes on the device, is the memory plan's
(:mod:`.memory_plan`).
"""

import numpy as np

from ...._input.layouts import chunk_bounds, range_bounds
from ...._runtime.device import to_host
from ..constants import ROW_PAD, SHORT_DOC_MAX, WARP
from . import layout_kernels

#: Tokens per work item, at most: a frequent word is split into items of this size so that one
#: block never holds the tail of an iteration (ezLDA V-A splits large words for the same reason).
PIECE = 4096
#: Tokens per work item, at least (a small corpus's items; see :func:`item_tokens`).
MIN_PIECE = 128
#: Work items a chunk is cut into, at least, while its items can still shrink: about a
#: quarter of the warps an H100 or H200 holds at once (132 SMs x 64 warps).
ITEMS_TO_FILL = 2048


def item_tokens(n_tokens, weighted):
    """Tokens per work item of a chunk of ``n_tokens``: :data:`PIECE`, or for a small chunk the
    largest power of two down to :data:`MIN_PIECE` that cuts it into :data:`ITEMS_TO_FILL`
    items.

    A block's warps draw its item's tokens one after another, so the largest item is a sweep's
    critical path: at 4,096 tokens it took 0.48 of the 0.60 ms of GPU time a sweep of the KJV
    chapters (308 k tokens) took on an H100, with most SMs idle. Every size is a multiple of
    the 32-token batches the log-likelihood sums by, so the batches, their order and the
    likelihood are those of 4,096-token items. Weighted chunks keep :data:`PIECE`: their B
    counts are float atomics, whose order the items decide.
    """
    if weighted:
        return PIECE
    piece = PIECE
    while piece > MIN_PIECE and n_tokens < piece * ITEMS_TO_FILL:
        piece //= 2
    return piece


def topic_dtype(n_topics):
    """Topics take 16 bits while they fit."""
    return np.uint16 if n_topics <= 65536 else np.int32


def packed_format(weighted, longest, n_topics):
    """Whether a chunk takes packed A entries (16-bit topic and count, ``cuda/entry.cuh``) and
    16-bit places: integer counts, documents shorter than 65,536 tokens, K <= 65,536."""
    return not weighted and longest < 65536 and n_topics <= 65536


def place_dtype(packed):
    """The dtype of a chunk's token places (:func:`packed_format`)."""
    return np.uint16 if packed else np.uint32


#: Entries of a chunk's A storage (its tokens plus ROW_PAD per document) are indexed by int32.
MAX_CHUNK_SLOTS = (1 << 31) - 1


def chunk_ranges(corpus, max_chunk_tokens):
    """Document ranges ``(d0, d1)`` of the chunks: all documents in one chunk, or consecutive
    ranges of at most ``max_chunk_tokens`` tokens (a longer document gets a chunk of its own);
    a range whose A storage would reach 2**31 entries is cut further (corpora of about 2 G
    tokens and more)."""
    limit = corpus.n_tokens if max_chunk_tokens is None else int(max_chunk_tokens)
    limit = max(1, min(limit, MAX_CHUNK_SLOTS))
    doc_ptr = corpus.doc_ptr
    bounds = chunk_bounds(doc_ptr, limit) if corpus.n_docs else np.array([0, 0])
    ranges = []
    for d0, d1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        slots = doc_ptr[d0 : d1 + 1] - doc_ptr[d0] + ROW_PAD * np.arange(d1 - d0 + 1)
        if slots[-1] <= MAX_CHUNK_SLOTS:
            ranges.append((d0, d1))
            continue
        cuts = chunk_bounds(slots, MAX_CHUNK_SLOTS)
        ranges.extend((d0 + a, d0 + b) for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()))
    for d0, d1 in ranges:
        if doc_ptr[d1] - doc_ptr[d0] + ROW_PAD * (d1 - d0) > MAX_CHUNK_SLOTS:
            raise ValueError(
                f"document {d0} holds 2**31 tokens or more, more than one chunk can index"
            )
    return ranges


def fits_one_chunk(corpus, ranges):
    """Whether consecutive document ranges ``(d0, d1)`` (each starting where the one before
    ends) can be a chunk each (its A storage indexed by int32)."""
    doc_ptr = corpus.doc_ptr
    return (all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            and all(doc_ptr[d1] - doc_ptr[d0] + ROW_PAD * (d1 - d0) <= MAX_CHUNK_SLOTS
                    for d0, d1 in ranges))


def chunk_cuts(corpus, max_chunk_tokens, piece_tokens):
    """Where ``corpus`` is cut for its layout, all before anything is built: ``(d0, d1,
    pieces)`` of each chunk (:func:`chunk_ranges`), ``pieces`` the bounds of the pieces of at
    most ``piece_tokens`` tokens its documents are laid out in, numbered from ``d0``."""
    ranges = chunk_ranges(corpus, max_chunk_tokens)
    limit = max(1, int(piece_tokens))
    return [(d0, d1, range_bounds(corpus.doc_ptr, d0, d1, limit)) for d0, d1 in ranges]


#: Tokens laid out at a time while building a chunk: the build's scratch (about 80 bytes per
#: token of a piece: offsets, keys, the sort's buffers) is bounded by this, not by the corpus.
BUILD_PIECE_TOKENS = 1 << 23


def document_views(cp, corpus, d_first):
    """Per-document arrays of the chunks of consecutive documents ``d_first[b]:d_first[b + 1]``
    of ``corpus``, each numbered within its chunk, uploaded once for all: a dict of ``b ->
    view`` functions giving :meth:`Chunk._set_documents`'s keywords, and each chunk's longest
    document (tokens)."""
    d_first = np.asarray(d_first, dtype=np.int64)
    tok_first = corpus.doc_ptr[d_first]
    g_d0, g_d1 = int(d_first[0]), int(d_first[-1])
    doc_ptr = corpus.doc_ptr[g_d0 : g_d1 + 1]
    doc_len = np.diff(doc_ptr).astype(np.int32)
    doc_chunk = np.repeat(np.arange(d_first.shape[0] - 1), np.diff(d_first))
    in_chunk = np.arange(g_d1 - g_d0) - (d_first[doc_chunk] - g_d0)   # document within its chunk
    doc_off = doc_ptr[:-1] - tok_first[doc_chunk]
    row_off = doc_off + ROW_PAD * in_chunk
    short = doc_len <= SHORT_DOC_MAX
    # Each chunk's short documents, then its long ones, numbered within the chunk.
    by_kind = np.concatenate([in_chunk[short], in_chunk[~short]]).astype(np.int32)
    n_short = np.bincount(doc_chunk[short], minlength=d_first.shape[0] - 1)
    n_long = np.bincount(doc_chunk[~short], minlength=d_first.shape[0] - 1)
    short_first = np.append(0, np.cumsum(n_short))
    long_first = np.append(0, np.cumsum(n_long)) + short_first[-1]
    n_docs = np.diff(d_first)
    arrays = dict(
        doc_off=cp.asarray(doc_off.astype(np.int32)), row_off=cp.asarray(row_off.astype(np.int32)),
        doc_len=cp.asarray(doc_len), kinds=cp.asarray(by_kind),
        all_docs=cp.asarray(np.arange(int(n_docs.max(initial=0)), dtype=np.int32)),
        doc_weight=cp.asarray(corpus.doc_lengths()[g_d0:g_d1]))
    first = d_first - g_d0

    def docs(name):
        return lambda b: arrays[name][first[b] : first[b + 1]]

    views = {name: docs(name) for name in ("doc_off", "row_off", "doc_len", "doc_weight")}
    views["short_docs"] = lambda b: arrays["kinds"][short_first[b] : short_first[b + 1]]
    views["long_docs"] = lambda b: arrays["kinds"][long_first[b] : long_first[b + 1]]
    views["all_docs"] = lambda b: arrays["all_docs"][: n_docs[b]]
    longest = np.zeros(n_docs.shape[0], dtype=np.int64)
    filled = n_docs > 0
    if filled.any():
        # Chunks hold consecutive documents: one maximum per run (an empty one is no run).
        longest[filled] = np.maximum.reduceat(doc_len, first[:-1][filled])
    return views, longest


class CountsOnDevice:
    """The per-non-zero arrays of documents ``d0:d1`` of a :class:`~sklearn_gpulda._input.corpus.
    TokenCorpus` on the device, with the relabelling of its words: what the layout is built from
    (uploaded when the corpus is on the host; a streamed layout uploads one chunk's documents at
    a time).

    Non-zeros are numbered from the first of document ``d0`` (``indptr``, host, and
    ``indptr_d``, device, are rebased so); ``nz_ptr`` keeps canonical token indices.
    """

    def __init__(self, cp, corpus, new_of_old, d0=0, d1=None):
        d1 = corpus.n_docs if d1 is None else int(d1)
        indptr = to_host(corpus.indptr).astype(np.int64, copy=False)
        self.cp = cp
        self.d0 = int(d0)
        j0, j1 = int(indptr[self.d0]), int(indptr[d1])
        self.indptr = indptr[self.d0 : d1 + 1] - j0
        self.indptr_d = cp.asarray(self.indptr)
        self.nz_ptr = cp.asarray(corpus.nz_ptr[j0 : j1 + 1])
        # Vocabulary ids (int32) and the relabelling: the layout's kernels read a non-zero's word
        # as new_of_old[indices[j]], so no gather runs here.
        self.indices = cp.asarray(corpus.indices[j0:j1])
        self.new_of_old = cp.asarray(np.asarray(new_of_old, dtype=np.int32))
        self.nz_weight = (None if corpus.nz_weight is None
                          else cp.asarray(corpus.nz_weight[j0:j1]))

    @property
    def word(self):
        """The relabelled word of each non-zero (a gather; online mini-batches read it)."""
        return self.new_of_old[self.indices]

    def nz_range(self, d0, d1):
        """The (rebased) non-zeros of documents ``d0:d1``."""
        return int(self.indptr[d0 - self.d0]), int(self.indptr[d1 - self.d0])


class Chunk:
    """Device arrays of one PDOW chunk (documents ``d0:d1``, canonical tokens ``t0:t1``).

    The token layout is built in :meth:`__init__`; the chain's state (topics, A) is allocated by
    :meth:`allocate_state` when topics are first set, so that a fit can free its copy of the
    counts in between and the two never take memory at the same time.

    Parameters
    ----------
    cp : module
        CuPy.
    corpus : TokenCorpus
    d0, d1 : int
    counts : CountsOnDevice
    n_topics : int
    pieces : sequence of int
        Bounds of the pieces of documents laid out at a time, numbered from ``d0``
        (:func:`chunk_cuts`; :data:`BUILD_PIECE_TOKENS` tokens a piece).
    """

    def __init__(self, cp, corpus, d0, d1, counts, n_topics, pieces):
        self.d0, self.d1 = int(d0), int(d1)
        self.t0, self.t1 = int(corpus.doc_ptr[d0]), int(corpus.doc_ptr[d1])
        self.n_tokens = self.t1 - self.t0
        self.n_docs = self.d1 - self.d0
        doc_ptr = corpus.doc_ptr[self.d0 : self.d1 + 1] - self.t0
        documents, longest = document_views(cp, corpus, [self.d0, self.d1])
        self._set_documents(**{name: view(0) for name, view in documents.items()})
        # The format first: the places' dtype depends on it.
        self._set_format(n_topics, int(longest[0]), counts.nz_weight is not None)
        word_count = self._lay_out(cp, corpus, counts, doc_ptr, pieces)
        self.items, self.n_batches = self._items(
            cp, word_count, item_tokens(self.n_tokens, counts.nz_weight is not None))

    @classmethod
    def assembled(cls, frame, place, doc, weight, documents, items, n_batches, n_topics,
                  longest):
        """A chunk of arrays laid out elsewhere (:mod:`.online_layout`): ``frame`` is
        ``(d0, d1, t0, t1)``, ``place`` its tokens' places (any integer dtype; cast to the
        chunk's), ``documents`` the keywords of :meth:`_set_documents`, ``longest`` the tokens of
        its longest document."""
        self = cls.__new__(cls)
        self.d0, self.d1, self.t0, self.t1 = (int(x) for x in frame)
        self.n_tokens, self.n_docs = self.t1 - self.t0, self.d1 - self.d0
        self.doc, self.weight = doc, weight
        self._set_documents(**documents)
        self.items, self.n_batches = items, int(n_batches)
        self._set_format(n_topics, int(longest), weight is not None)
        self.place = place.astype(self.place_dtype, copy=False)
        return self

    def _set_documents(self, doc_off, row_off, doc_len, short_docs, long_docs, all_docs,
                       doc_weight):
        """Per-document arrays (device): first token, A row offset, length, the short and long
        documents, all of them, and N_d (weighted lengths)."""
        self.doc_off, self.doc_len = doc_off, doc_len
        # A row's slots: the document's tokens plus the lane-segment layout's padding (entry.cuh).
        self.row_off = row_off
        self.n_slots = self.n_tokens + ROW_PAD * self.n_docs  # at most MAX_CHUNK_SLOTS
        self.short_docs, self.long_docs, self.all_docs = short_docs, long_docs, all_docs
        #: N_d (weighted lengths); doc_norm = N_d + sum(alpha) is set by the sampler.
        self.doc_weight = doc_weight
        self.doc_norm = None

    def _set_format(self, n_topics, longest, weighted):
        """Topic, place and A entry types, from K, the longest document's tokens and whether
        the tokens carry weights."""
        tdt = topic_dtype(n_topics)
        self.topic_dtype = tdt
        self.suffix = "u16" if tdt == np.uint16 else "i32"
        # Packed entries (cuda/entry.cuh) when every count of A fits 16 bits as an integer.
        self.packed = packed_format(weighted, longest, n_topics)
        self.place_dtype = place_dtype(self.packed)
        self.ent_dtype = np.uint32 if self.packed else np.int32
        self.fmt = "packed" if self.packed else "wide"
        self.z = self.z_can = self.a_ent = self.a_row = None

    def _lay_out(self, cp, corpus, counts, doc_ptr, pieces):
        """``place`` (each token's place in its document, the chunk's ``place_dtype``; tokens
        word-major, canonical inside a word), ``doc`` of each, and ``weight`` in canonical
        order, a piece of documents at a time (``pieces``: their bounds, after
        :meth:`_set_documents` and :meth:`_set_format`), by the kernels of
        :mod:`.layout_kernels`.

        The chunk's word counts fix where each word's tokens go; each piece's tokens are sorted
        by (word, canonical index) and appended after the earlier pieces' tokens of their word.
        Pieces come in canonical order, so the result is the single sort of the whole chunk.

        Returns
        -------
        word_count : ndarray of int64, shape (n_words,), on the host
        """
        if cp is np:
            return self._lay_out_host(counts, corpus.n_words, doc_ptr, pieces)
        n, v = self.n_tokens, corpus.n_words
        j0, j1 = counts.nz_range(self.d0, self.d1)
        word_count = layout_kernels.word_tokens(cp, counts.indices[j0:j1], counts.new_of_old,
                                                counts.nz_ptr[j0 : j1 + 1], v)
        # Where the next piece's tokens of each word go: the exclusive sum of the word counts.
        cursor = np.zeros(v, dtype=np.int64)
        np.cumsum(word_count[:-1], out=cursor[1:])
        cursor = cp.asarray(cursor)
        self.place = cp.empty(n, dtype=self.place_dtype)
        self.doc = cp.empty(n, dtype=cp.int32)
        self.weight = None
        if counts.nz_weight is not None:
            self.weight = cp.empty(n, dtype=cp.float32)
            layout_kernels.token_weights(counts.nz_ptr[j0 : j1 + 1], counts.nz_weight[j0:j1],
                                         self.t0, self.weight)
        for p0, p1 in zip(pieces[:-1], pieces[1:]):
            self._lay_out_piece(cp, counts, int(p0), int(p1), cursor)
        return word_count

    def _lay_out_host(self, counts, n_words, doc_ptr, pieces):
        """:meth:`_lay_out` with NumPy: the same layout, the reference the device's is tested
        against (``tests/test_corpus.py``), built by binary searches, a sort and scatters."""
        n = self.n_tokens
        j0, j1 = counts.nz_range(self.d0, self.d1)
        reps = counts.nz_ptr[j0 + 1 : j1 + 1] - counts.nz_ptr[j0:j1]
        word = counts.word
        word_count = np.bincount(word[j0:j1], weights=reps, minlength=n_words).astype(np.int64)
        cursor = np.zeros(n_words, dtype=np.int64)  # where the next piece's tokens of each word go
        np.cumsum(word_count[:-1], out=cursor[1:])
        self.place = np.empty(n, dtype=self.place_dtype)
        self.doc = np.empty(n, dtype=np.int32)
        self.weight = None if counts.nz_weight is None else np.empty(n, dtype=np.float32)
        for p0, p1 in zip(pieces[:-1], pieces[1:]):
            a, b = int(doc_ptr[int(p0)]), int(doc_ptr[int(p1)])  # chunk-relative tokens
            if a == b:
                continue
            q0, q1 = counts.nz_range(self.d0 + int(p0), self.d0 + int(p1))
            local = np.arange(b - a, dtype=np.int64)
            # Each token's non-zero, and its document, by binary search.
            nz = np.searchsorted(counts.nz_ptr[q0 + 1 : q1 + 1] - (self.t0 + a), local,
                                 side="right") + q0
            if self.weight is not None:
                self.weight[a:b] = counts.nz_weight[nz]
            tok_word = word[nz]
            doc = np.searchsorted(counts.indptr_d[1:], nz, side="right") - (self.d0 - counts.d0)
            # Unique keys (word, position in the piece): the order does not depend on the
            # sort's stability.
            order = np.argsort((tok_word.astype(np.int64) << 32) | local)
            tok_word = tok_word[order]
            in_piece = np.bincount(tok_word, minlength=n_words)
            first = np.cumsum(in_piece) - in_piece
            slot = cursor[tok_word] + (local - first[tok_word])
            doc = doc[order]
            self.place[slot] = (order + (a - self.doc_off[doc])).astype(self.place_dtype)
            self.doc[slot] = doc.astype(np.int32)
            cursor += in_piece
        return word_count

    def _lay_out_piece(self, cp, counts, p0, p1, cursor):
        """Documents ``d0 + p0 : d0 + p1`` of the chunk into ``place`` and ``doc``: the piece's
        non-zeros sorted by (word, index), then each one's tokens written after the tokens of
        its word placed before (``cursor``, advanced past them)."""
        j0, j1 = counts.nz_range(self.d0 + p0, self.d0 + p1)
        if j0 == j1:
            return
        nz_ptr = counts.nz_ptr[j0 : j1 + 1]
        keys, ends = layout_kernels.sorted_nonzeros(cp, counts.indices[j0:j1], counts.new_of_old,
                                                    nz_ptr)
        layout_kernels.place_tokens(cp, keys, ends, cursor, nz_ptr, counts.indptr_d, j0,
                                    self.d0 - counts.d0, self.t0, self.doc_off, self.place,
                                    self.doc)

    def allocate_state(self, cp):
        """The chain's per-token and per-document state: topics in PDOW and canonical order,
        A's entries and row headers (idempotent)."""
        if self.z is not None:
            return
        n = self.n_tokens
        self.z = cp.empty(n, dtype=self.topic_dtype)
        self.z_can = cp.empty(n, dtype=self.topic_dtype)
        self.a_ent = (
            cp.empty(self.n_slots, dtype=cp.uint32)
            if self.packed
            else cp.empty((self.n_slots, 2), dtype=cp.int32)
        )
        self.a_row = cp.empty((self.n_docs, 2), dtype=cp.int32)

    @staticmethod
    def _items(cp, word_count, piece):
        """Work items ``(word, begin, end, first batch)``: each word's tokens in pieces of at most
        ``piece`` (a multiple of 32), words in decreasing frequency (the relabelled order)."""
        word_ptr = np.zeros(word_count.size + 1, dtype=np.int64)
        np.cumsum(word_count, out=word_ptr[1:])
        words = np.flatnonzero(word_count)
        pieces = -(-word_count[words] // piece)
        word = np.repeat(words, pieces)
        first = np.repeat(np.cumsum(pieces) - pieces, pieces)
        j = np.arange(word.size) - first
        begin = word_ptr[word] + j * piece
        end = np.minimum(begin + piece, word_ptr[word + 1])
        batches = -(-(end - begin) // WARP)
        batch0 = np.cumsum(batches) - batches
        items = np.stack([word, begin, end, batch0], axis=1).astype(np.int32)
        return cp.asarray(items), int(batches.sum())

    def release(self):
        self.__dict__.clear()


def build_chunks(cp, corpus, new_of_old, n_topics, max_chunk_tokens,
                 piece_tokens=BUILD_PIECE_TOKENS, each=None):
    """Every chunk of ``corpus`` (a :class:`~sklearn_gpulda._input.corpus.TokenCorpus`, or a
    :class:`~sklearn_gpulda._input.row_blocks.BlockCorpus` laid out block by block, each block's
    chunks then placed in the whole), from its counts.

    The counts go to the device once, whole, unless ``each`` is given: then each chunk's counts
    are uploaded alone, and ``each(chunk)`` is called as soon as the chunk is built (a streamed
    layout moves the chunk's tokens to host memory there), so the device never holds more than
    one chunk's build.
    """
    chunks = []
    for part, doc_offset, token_offset in _parts(corpus):
        for chunk in _build_part(cp, part, new_of_old, n_topics, max_chunk_tokens, piece_tokens,
                                 each):
            chunk.d0 += doc_offset
            chunk.d1 += doc_offset
            chunk.t0 += token_offset
            chunk.t1 += token_offset
            chunks.append(chunk)
    return chunks


def _parts(corpus):
    """``(part, doc_offset, token_offset)`` of each block of a corpus in row blocks
    (:mod:`sklearn_gpulda._input.row_blocks`), or of a token corpus as its one part."""
    return corpus.parts() if hasattr(corpus, "parts") else [(corpus, 0, 0)]


def _build_part(cp, corpus, new_of_old, n_topics, max_chunk_tokens, piece_tokens, each):
    """The chunks of one token corpus (:func:`build_chunks`); its counts on the device are
    dropped on return, before the next part uploads its own."""
    cuts = chunk_cuts(corpus, max_chunk_tokens, piece_tokens)
    if each is None:
        counts = CountsOnDevice(cp, corpus, new_of_old)
        return [Chunk(cp, corpus, d0, d1, counts, n_topics, pieces) for d0, d1, pieces in cuts]
    chunks = []
    for d0, d1, pieces in cuts:
        # A chunk's own counts, dropped once it is built.
        chunk = Chunk(cp, corpus, d0, d1, CountsOnDevice(cp, corpus, new_of_old, d0, d1),
                      n_topics, pieces)
        each(chunk)
        chunks.append(chunk)
    return chunks
