"""ESCA on an NVIDIA GPU through CuPy: the :class:`~sklearn_gpulda._engines.base.Engine` protocol
on PDOW chunks (SaberLDA, Li et al., ASPLOS 2017, Sec. 3).

Layout on the device, per chunk of whole documents (``_corpus.pdow_chunks`` semantics, built on
the device): tokens sorted by frequency-relabelled word, then canonical index; per token its
canonical index minus the chunk's first (uint32), its document minus the chunk's first (int32)
and its topic (uint16 while K <= 65,536). A is stored as rows sorted by topic, each at a fixed
offset: the document's first canonical slot plus 31 per earlier document (a document of n tokens
has at most n non-zeros, and the lane-segment layout of ``cuda/entry.cuh`` pads a row by at most
31). Entries take 4 bytes (16-bit topic and count) for integer counts, else 8. B is dense,
word-major, float32; Bhat and each word's W-ary tree are never stored: the block that samples a
word builds them in shared memory from B and the topic totals. ``doc/performance.md`` has the
measurements behind these choices.

One iteration: for each chunk, sample (``sample_sparse.cu``) then rebuild that chunk's A
(``counts.cu``; A rows are private to a chunk); then B by atomics over every chunk and the
topic totals. Only the E-step needs the previous B, so a later streaming version can move chunks
in and out around the per-chunk steps without changing this order.
"""

import numpy as np

from .. import _kernels
from .._corpus import frequency_relabel
from .._random import STREAM_BATCH_INIT, STREAM_BATCH_SAMPLE, STREAM_INIT, STREAM_SAMPLE
from ._transfer import topic_major_to_host
from .base import Engine

# Compile-time constants of the kernels (cuda/*.cu).
_COUNT_BLOCK = 128
_SHORT_DOC_MAX = 1024
_HIST_MAX_TOPICS = 2048
_ROW_PAD = 31
_INFER_BLOCK = 256
_WARP = 32
#: Largest K of the three-level tree (cuda/tree.cuh, kMaxTopics).
MAX_TOPICS = 32 * 32 * 32
#: Tokens per work item: a frequent word is split into items of this size so that one block
#: never holds the tail of an iteration (ezLDA V-A splits large words for the same reason).
_PIECE = 4096
#: Rows of B per slice in the topic-total reduction.
_ROWS_PER_SLICE = 128
#: Scratch budget of one fold-in launch (theta and gamma, float64).
_FOLD_IN_SCRATCH = 256 << 20


def cuda_available():
    """True when CuPy imports and sees at least one CUDA device; never raises."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def free_device_bytes(cp):
    """Bytes a new allocation on the current device can use: the driver's free memory plus what
    CuPy's pool holds unused. Returns ``(free, total)``."""
    free, total = cp.cuda.runtime.memGetInfo()
    return free + cp.get_default_memory_pool().free_bytes(), total


class _OnDevice:
    """What the sparse and dense CUDA engines share: their device, and the state on it."""

    def _attach(self, device):
        # Imported here, after the engine has checked its arguments, so that a bad n_topics is
        # reported as such on a machine without CuPy.
        import cupy as cp

        self._cp = cp
        self.device = cp.cuda.Device().id if device is None else int(device)

    def _dev(self):
        return self._cp.cuda.Device(self.device)

    def synchronize(self):
        self._dev().synchronize()

    def _require(self):
        if self._state is None:
            raise RuntimeError("the engine holds no corpus; call initialize or set_topics first")
        return self._state

    def _check_memory(self, corpus):
        """Raise MemoryError, before allocating, when a fit on ``corpus`` would not fit: each
        engine's ``estimate_bytes`` gives what it keeps and its peak, ``_memory_message`` the
        explanation."""
        steady, peak = self.estimate_bytes(corpus)
        free, total = free_device_bytes(self._cp)
        if peak > free:
            raise MemoryError(self._memory_message(corpus, steady, peak, free, total))

    def release(self):
        if self._state is not None:
            self._state.release()
            self._state = None
        try:
            self._cp.get_default_memory_pool().free_all_blocks()
        except Exception:
            pass


def describe_device(device=None):
    """Name of a CUDA device, e.g. ``'NVIDIA H100 80GB HBM3'``; ``''`` when none is usable."""
    try:
        import cupy

        index = cupy.cuda.Device().id if device is None else int(device)
        name = cupy.cuda.runtime.getDeviceProperties(index)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return ""


def _tree_floats(n_topics):
    tiles = -(-n_topics // _WARP)
    return n_topics + tiles + _WARP


def _sample_shape(smem_block, smem_sm, max_threads_sm=2048):
    """Sampler block size and resident blocks per SM: the smallest block reaching the most warps.

    A large K takes enough shared memory per block (the word's Bhat row and tree) to cap resident
    blocks; larger blocks then keep the SM's warp slots full.
    """
    best = None
    for block in (256, 512, 1024):
        per_sm = max(1, min(max_threads_sm // block, smem_sm // (smem_block + 1024)))
        if best is None or per_sm * block > best[0] * best[1]:
            best = (block, per_sm)
    return best


def _topic_dtype(n_topics):
    return np.uint16 if n_topics <= 65536 else np.int32


class _Chunk:
    """Device arrays of one PDOW chunk (documents ``d0:d1``, canonical tokens ``t0:t1``)."""

    def __init__(
        self, cp, corpus, d0, d1, new_of_old_d, doc_d, word_d, weight_d, n_topics, topic_dtype
    ):
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
        row_off = doc_ptr[:-1] + _ROW_PAD * np.arange(self.n_docs, dtype=np.int64)
        self.n_slots = n + _ROW_PAD * self.n_docs
        if self.n_slots >= 1 << 31:
            raise ValueError(
                "a chunk's A storage must stay below 2**31 entries; lower max_chunk_tokens"
            )
        self.row_off = cp.asarray(row_off.astype(np.int32))
        self.doc_len = cp.asarray(doc_len)
        self.short_docs = cp.asarray(np.flatnonzero(doc_len <= _SHORT_DOC_MAX).astype(np.int32))
        self.long_docs = cp.asarray(np.flatnonzero(doc_len > _SHORT_DOC_MAX).astype(np.int32))
        self.all_docs = cp.arange(self.n_docs, dtype=cp.int32)
        lengths = corpus.doc_lengths()[self.d0 : self.d1]
        self.doc_norm = cp.asarray(lengths)  # N_d; the engine adds K * alpha
        self.items, self.n_batches = self._items(word_count)
        self.z = cp.empty(n, dtype=topic_dtype)
        self.z_can = cp.empty(n, dtype=topic_dtype)
        # Packed entries (cuda/entry.cuh) when every count of A fits 16 bits as an integer.
        self.packed = weight_d is None and (doc_len.max(initial=0) < 65536) and n_topics <= 65536
        slots = self.n_slots
        self.a_ent = (
            cp.empty(slots, dtype=cp.uint32)
            if self.packed
            else cp.empty((slots, 2), dtype=cp.int32)
        )
        self.ent_dtype = np.uint32 if self.packed else np.int32
        self.fmt = "packed" if self.packed else "wide"
        self.a_row = cp.empty((self.n_docs, 2), dtype=cp.int32)

    @staticmethod
    def _items(word_count):
        import cupy as cp

        word_ptr = np.zeros(word_count.size + 1, dtype=np.int64)
        np.cumsum(word_count, out=word_ptr[1:])
        words = np.flatnonzero(word_count)
        pieces = -(-word_count[words] // _PIECE)
        word = np.repeat(words, pieces)
        first = np.repeat(np.cumsum(pieces) - pieces, pieces)
        j = np.arange(word.size) - first
        begin = word_ptr[word] + j * _PIECE
        end = np.minimum(begin + _PIECE, word_ptr[word + 1])
        batches = -(-(end - begin) // _WARP)
        batch0 = np.cumsum(batches) - batches
        items = np.stack([word, begin, end, batch0], axis=1).astype(np.int32)
        return cp.asarray(items), int(batches.sum())


class CudaEngine(_OnDevice, Engine):
    """ESCA on a CUDA GPU (see :class:`~sklearn_gpulda._engines.base.Engine`).

    Parameters
    ----------
    n_topics, alpha, beta, seed
        As :class:`~sklearn_gpulda._engines.base.Engine`.
    device : int or None
        CUDA device index; None for the current one.
    max_chunk_tokens : int or None
        Token budget of one PDOW chunk; None puts the whole corpus in one chunk.
    profile : bool
        Record CUDA events around each stage of :meth:`sweep` into ``self.stage_ms``.
    """

    name = "cuda"

    def __init__(
        self, n_topics, alpha, beta, seed, device=None, max_chunk_tokens=None, profile=False
    ):
        super().__init__(n_topics, alpha, beta, seed)
        if not 1 <= self.n_topics <= MAX_TOPICS:
            raise ValueError(
                f"the CUDA engine supports 1 <= n_topics <= {MAX_TOPICS}, got {self.n_topics}"
            )
        self._attach(device)
        self.max_chunk_tokens = max_chunk_tokens
        self.profile = profile
        self.stage_ms = {}
        self._topic_dtype = _topic_dtype(self.n_topics)
        self._suffix = "u16" if self._topic_dtype == np.uint16 else "i32"
        self._state = None
        with self._dev():
            props = self._cp.cuda.runtime.getDeviceProperties(self.device)
            self._n_sm = int(props["multiProcessorCount"])
            smem_sm = int(props["sharedMemPerMultiprocessor"])
            self._smem_block_max = int(
                props.get("sharedMemPerBlockOptin", props["sharedMemPerBlock"])
            )
        self._sample_smem = _tree_floats(self.n_topics) * 4
        if self._sample_smem > self._smem_block_max:
            raise ValueError(
                f"n_topics={self.n_topics} needs {self._sample_smem} bytes of shared memory "
                f"per block, the device allows {self._smem_block_max}"
            )
        self._sample_block, per_sm = _sample_shape(self._sample_smem, smem_sm)
        self._sample_grid = self._n_sm * per_sm

    # -- memory ---------------------------------------------------------------------------
    def estimate_bytes(self, corpus):
        """Device bytes a fit on ``corpus`` holds, and the peak while building the layout.

        Returns
        -------
        steady, build : int
        """
        n, d, v, k = corpus.n_tokens, corpus.n_docs, corpus.n_words, self.n_topics
        tsize = np.dtype(self._topic_dtype).itemsize
        chunk = n if self.max_chunk_tokens is None else min(n, int(self.max_chunk_tokens))
        per_token = 4 + 4 + 2 * tsize + 8 + (4 if corpus.weight is not None else 0)
        per_doc = 8 + 4 + 4 + 4 + 8 + 4 + _ROW_PAD * 8
        items = (n // _PIECE + v) * 16 * 2
        table = v * k * 4 + (-(-v // _ROWS_PER_SLICE)) * k * 8 + k * 8
        steady = n * per_token + d * per_doc + items + table + (n // _WARP + v) * 8
        # Building: corpus doc/word/weight copies plus one chunk's sort (key, order, sort scratch).
        build = (
            steady + n * (8 + (4 if corpus.weight is not None else 0)) + chunk * (8 + 8 + 16 + 4)
        )
        return int(steady), int(build)

    def _memory_message(self, corpus, steady, build, free, total):
        return (
            f"the CUDA engine needs about {build / 2**30:.2f} GiB of device memory to lay out "
            f"{corpus.n_tokens} tokens, {corpus.n_docs} documents, {corpus.n_words} words at "
            f"K={self.n_topics} ({steady / 2**30:.2f} GiB kept), but only "
            f"{free / 2**30:.2f} GiB of {total / 2**30:.2f} GiB is free on device {self.device}"
        )

    # -- layout -----------------------------------------------------------------------------
    def _build(self, corpus):
        cp = self._cp
        self.release()
        self._check_memory(corpus)
        st = _State()
        st.corpus = corpus
        st.n_words = corpus.n_words
        st.new_of_old, st.old_of_new = frequency_relabel(corpus.word_frequencies())
        limit = corpus.n_tokens if self.max_chunk_tokens is None else int(self.max_chunk_tokens)
        limit = max(1, min(limit, (1 << 31) - 1))
        from .._corpus import chunk_bounds

        bounds = chunk_bounds(corpus.doc_ptr, limit) if corpus.n_docs else np.array([0, 0])
        for d0, d1 in zip(bounds[:-1], bounds[1:]):
            if corpus.doc_ptr[d1] - corpus.doc_ptr[d0] >= 1 << 31:
                raise ValueError(
                    f"documents {d0}:{d1} hold 2**31 tokens or more; lower max_chunk_tokens"
                )
        new_of_old_d = cp.asarray(st.new_of_old)
        doc_d = cp.asarray(corpus.doc)
        word_d = cp.asarray(corpus.word)
        weight_d = None if corpus.weight is None else cp.asarray(corpus.weight, dtype=cp.float32)
        st.chunks = [
            _Chunk(
                cp,
                corpus,
                d0,
                d1,
                new_of_old_d,
                doc_d,
                word_d,
                weight_d,
                self.n_topics,
                self._topic_dtype,
            )
            for d0, d1 in zip(bounds[:-1], bounds[1:])
        ]
        for ch in st.chunks:
            ch.doc_norm += self.n_topics * self.alpha
        del doc_d, word_d, weight_d, new_of_old_d
        # Drop the layout's sort scratch before the large table, so the pool's peak is the larger
        # of the two phases rather than their sum.
        cp.get_default_memory_pool().free_all_blocks()
        st.B = cp.zeros((corpus.n_words, self.n_topics), dtype=cp.float32)
        st.n_slices = max(1, -(-corpus.n_words // _ROWS_PER_SLICE))
        st.partial = cp.empty((st.n_slices, self.n_topics), dtype=cp.float64)
        st.denom = cp.empty(self.n_topics, dtype=cp.float64)
        st.counter = cp.zeros(1, dtype=cp.int32)
        st.bhat_fixed = None
        return st

    # -- kernels ----------------------------------------------------------------------------
    def _launch(self, stem, name, grid, block, args, shared_mem=0):
        _kernels.launch(stem, name, grid, block, args, shared_mem)

    def _init_topics(self, st, iteration, stream):
        for ch in st.chunks:
            n = ch.n_tokens
            if n:
                self._launch(
                    "sample_sparse",
                    f"init_topics_{self._suffix}",
                    -(-n // 256),
                    256,
                    [
                        (ch.tok, np.uint32),
                        (n, "i64"),
                        (ch.t0, "i64"),
                        (self.n_topics, "u32"),
                        (self.seed, "u32"),
                        (iteration, "u32"),
                        (stream, "u32"),
                        (0, "u32"),
                        (ch.z, self._topic_dtype),
                    ],
                )

    def _sample(self, st, ch, iteration, stream, sweep):
        if ch.n_tokens == 0:
            return
        fixed = st.bhat_fixed is not None
        self._launch_token_walk(
            st,
            ch,
            f"sample_tokens_{self._suffix}_{ch.fmt}",
            [
                (ch.t0, "i64"),
                (None if fixed else st.B, np.float32),
                (None if fixed else st.denom, np.float64),
                (self.beta, "f64"),
                (st.bhat_fixed, np.float32),
                (self.n_topics, "i32"),
                (self.alpha, "f32"),
                (self.seed, "u32"),
                (iteration, "u32"),
                (stream, "u32"),
                (sweep, "u32"),
                (ch.z, self._topic_dtype),
            ],
        )

    def _launch_token_walk(self, st, ch, kernel, tail):
        # The kernels of sample_sparse.cu that walk a chunk's tokens word by word (the sampler,
        # the token log-likelihood) share their first arguments: the work items, the scheduling
        # counter they take items from, the tokens and the documents' A rows.
        st.counter.fill(0)
        self._launch(
            "sample_sparse",
            kernel,
            self._sample_grid,
            self._sample_block,
            [
                (ch.items, np.int32),
                (ch.items.shape[0], "i32"),
                (st.counter, np.int32),
                (ch.tok, np.uint32),
                (ch.doc, np.int32),
                (ch.a_row, np.int32),
                (ch.a_ent, ch.ent_dtype),
                *tail,
            ],
            shared_mem=self._sample_smem,
        )

    def _rebuild_a(self, ch):
        n = ch.n_tokens
        if n == 0:
            return
        td = self._topic_dtype
        self._launch(
            "counts",
            f"scatter_topics_{self._suffix}",
            -(-n // 256),
            256,
            [(ch.z, td), (ch.tok, np.uint32), (n, "i64"), (ch.z_can, td)],
        )
        if ch.weight is None and self.n_topics <= _HIST_MAX_TOPICS:
            # Per-warp histograms: O(n + K) per document, cheaper than sorting while K is small.
            self._launch_rebuild(
                ch, "hist", ch.all_docs, ch.n_docs, 16, [(self.n_topics, "i32")],
                (_COUNT_BLOCK // _WARP) * self.n_topics * 4,
            )
            return
        n_short = int(ch.short_docs.shape[0])
        if ch.weight is None:
            # Large K, integer counts: a topic bitmap per warp, O(n + K / 32) per document.
            bitmap_words = 2 * (-(-self.n_topics // 32)) + _SHORT_DOC_MAX
            self._launch_rebuild(
                ch, "bitmap", ch.short_docs, n_short, 16, [(self.n_topics, "i32")],
                (_COUNT_BLOCK // _WARP) * bitmap_words * 4,
            )
        else:
            self._launch_rebuild(
                ch, "short", ch.short_docs, n_short, 12, [(ch.weight, np.float32)], 0
            )
        n_long = int(ch.long_docs.shape[0])
        self._launch_rebuild(
            ch, "long", ch.long_docs, n_long, None,
            [(ch.weight, np.float32), (self.n_topics, "i32")], self.n_topics * 4,
        )

    def _launch_rebuild(self, ch, kind, docs, n_docs, blocks_per_sm, extra, shared_mem):
        """Launch ``rebuild_a_<kind>`` over ``n_docs`` documents listed in ``docs``.

        Warp-strided kernels get at most ``blocks_per_sm`` blocks per SM; the block-per-document
        kernel (``blocks_per_sm=None``) at most four. ``extra`` are the kernel's arguments between
        ``z_can`` and ``a_row`` (counts.cu gives each kernel's contract).
        """
        if not n_docs:
            return
        if blocks_per_sm is None:
            grid = min(n_docs, self._n_sm * 4)
        else:
            grid = min(-(-n_docs // (_COUNT_BLOCK // _WARP)), self._n_sm * blocks_per_sm)
        self._launch(
            "counts",
            f"rebuild_a_{kind}_{self._suffix}_{ch.fmt}",
            grid,
            _COUNT_BLOCK,
            [
                (docs, np.int32),
                (n_docs, "i32"),
                (ch.doc_off, np.int32),
                (ch.doc_len, np.int32),
                (ch.row_off, np.int32),
                (ch.z_can, self._topic_dtype),
            ]
            + extra
            + [(ch.a_row, np.int32), (ch.a_ent, ch.ent_dtype)],
            shared_mem=shared_mem,
        )

    def _count_b(self, st, ch):
        if ch.n_tokens == 0:
            return
        n_items = int(ch.items.shape[0])
        self._launch(
            "counts",
            f"count_b_{self._suffix}",
            min(n_items, self._n_sm * 16),
            256,
            [
                (ch.items, np.int32),
                (n_items, "i32"),
                (ch.z, self._topic_dtype),
                (ch.tok, np.uint32),
                (ch.weight, np.float32),
                (self.n_topics, "i32"),
                (st.B, np.float32),
            ],
        )

    def _topic_totals(self, st):
        k = self.n_topics
        self._launch(
            "counts",
            "column_partials",
            (-(-k // 128), st.n_slices),
            128,
            [
                (st.B, np.float32),
                (st.n_words, "i32"),
                (k, "i32"),
                (_ROWS_PER_SLICE, "i32"),
                (st.partial, np.float64),
            ],
        )
        self._cp.sum(st.partial, axis=0, out=st.denom)
        st.denom += st.n_words * self.beta

    def _mstep(self, st, rebuild_a=True):
        if rebuild_a:
            for ch in st.chunks:
                self._rebuild_a(ch)
        st.B.fill(0)
        for ch in st.chunks:
            self._count_b(st, ch)
        self._topic_totals(st)

    # -- protocol -----------------------------------------------------------------------------
    def initialize(self, corpus):
        with self._dev():
            self._state = self._build(corpus)
            self._init_topics(self._state, 0, STREAM_INIT)
            self._mstep(self._state)

    def set_topics(self, corpus, topics):
        cp = self._cp
        topics = self._checked_topics(corpus, topics)
        with self._dev():
            self._state = st = self._build(corpus)
            for ch in st.chunks:
                # PDOW order from canonical: position p holds token t0 + tok[p].
                ch.z[...] = cp.asarray(topics[ch.t0 : ch.t1].astype(self._topic_dtype))[ch.tok]
            self._mstep(st)

    def sweep(self, iteration):
        st = self._require()
        cp = self._cp
        with self._dev():
            if not self.profile:
                for ch in st.chunks:
                    self._sample(st, ch, iteration, STREAM_SAMPLE, 0)
                    self._rebuild_a(ch)
                self._mstep(st, rebuild_a=False)
                return
            ev = [cp.cuda.Event() for _ in range(4)]
            ev[0].record()
            for ch in st.chunks:
                self._sample(st, ch, iteration, STREAM_SAMPLE, 0)
            ev[1].record()
            for ch in st.chunks:
                self._rebuild_a(ch)
            ev[2].record()
            self._mstep(st, rebuild_a=False)
            ev[3].record()
            ev[3].synchronize()
            self.stage_ms = {
                "sample": cp.cuda.get_elapsed_time(ev[0], ev[1]),
                "rebuild_a": cp.cuda.get_elapsed_time(ev[1], ev[2]),
                "count_b_totals": cp.cuda.get_elapsed_time(ev[2], ev[3]),
            }

    def topics(self):
        st = self._require()
        with self._dev():
            parts = [ch.z_can.get().astype(np.int32) for ch in st.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)

    def word_topic_counts(self):
        st = self._require()
        cp = self._cp
        with self._dev():
            return topic_major_to_host(cp, st.B, cp.asarray(st.new_of_old))

    def doc_topic_counts(self):
        st = self._require()
        corpus = st.corpus
        out = np.zeros((corpus.n_docs, self.n_topics), dtype=np.float64)
        with self._dev():
            for ch in st.chunks:
                row = ch.a_row.get().astype(np.int64)
                ent = ch.a_ent.get()
                nnz = row[:, 1]
                doc = np.repeat(np.arange(ch.n_docs), nnz)
                e = np.arange(doc.size) - np.repeat(np.cumsum(nnz) - nnz, nnz)
                m = (nnz[doc] + 31) // 32
                slot = row[doc, 0] + (e % m) * 32 + e // m
                if ch.packed:
                    out[doc + ch.d0, ent[slot] >> 16] = ent[slot] & 0xFFFF
                else:
                    out[doc + ch.d0, ent[slot, 0]] = ent[slot, 1].view(np.float32)
        return out

    def log_likelihood(self):
        st = self._require()
        cp = self._cp
        total = 0.0
        with self._dev():
            for ch in st.chunks:
                if ch.n_tokens == 0:
                    continue
                partial = cp.empty(ch.n_batches, dtype=cp.float64)
                self._launch_token_walk(
                    st,
                    ch,
                    f"token_loglik_{ch.fmt}",
                    [
                        (ch.weight, np.float32),
                        (ch.doc_norm, np.float64),
                        (st.B, np.float32),
                        (st.denom, np.float64),
                        (self.beta, "f64"),
                        (self.n_topics, "i32"),
                        (self.alpha, "f64"),
                        (partial, np.float64),
                    ],
                )
                total += float(partial.sum())
        return total

    # -- topics fixed -----------------------------------------------------------------------------
    def fold_in(self, X, components, alpha, max_iter, tol, return_loglik=False):
        import scipy.sparse as sp

        cp = self._cp
        on_device = type(X).__module__.startswith("cupy")
        if not on_device:
            X = sp.csr_matrix(X)
        X.sort_indices()
        comp = np.asarray(components, dtype=np.float64)
        n_topics = comp.shape[0]
        n_docs = X.shape[0]
        theta = np.empty((n_docs, n_topics), dtype=np.float64)
        loglik = np.empty(n_docs, dtype=np.float64)
        with self._dev():
            # phi is held transposed in float64 (the fold-in's reductions are float64 end to end).
            need = comp.size * 8 + min(_FOLD_IN_SCRATCH, 16 * n_topics * max(1, n_docs))
            need += X.nnz * 16 + n_docs * 16
            free = free_device_bytes(cp)[0]
            if need > free:
                raise MemoryError(
                    f"fold-in needs about {need / 2**30:.2f} GiB of device memory (phi of "
                    f"{n_topics} x {comp.shape[1]} float64 plus scratch), {free / 2**30:.2f} GiB "
                    f"is free on device {self.device}"
                )
            phi_t = cp.ascontiguousarray(cp.asarray(comp / comp.sum(axis=1, keepdims=True)).T)
            # Device input (cupyx CSR) is used where it lies; host input is uploaded once.
            indptr = cp.asarray(X.indptr).astype(cp.int64)
            indices = cp.asarray(X.indices).astype(cp.int32)
            data = cp.asarray(X.data).astype(cp.float64)
            step = max(1, min(n_docs, _FOLD_IN_SCRATCH // (16 * n_topics)))
            for d0 in range(0, n_docs, step):
                m = min(step, n_docs - d0)
                th = cp.empty((m, n_topics), dtype=cp.float64)
                ga = cp.empty((m, n_topics), dtype=cp.float64)
                ll = cp.empty(m, dtype=cp.float64)
                self._launch(
                    "infer",
                    "fold_in_docs",
                    m,
                    _INFER_BLOCK,
                    [
                        (indptr, np.int64),
                        (indices, np.int32),
                        (data, np.float64),
                        (phi_t, np.float64),
                        (n_topics, "i32"),
                        (alpha, "f64"),
                        (max_iter, "i32"),
                        (tol, "f64"),
                        (d0, "i64"),
                        (th, np.float64),
                        (ga, np.float64),
                        (ll, np.float64),
                    ],
                )
                theta[d0 : d0 + m] = th.get()
                loglik[d0 : d0 + m] = ll.get()
        if return_loglik:
            return theta, loglik
        return theta

    def batch_statistics(self, corpus, components, n_sweeps, iteration, first):
        cp = self._cp
        with self._dev():
            saved = self._state
            self._state = None
            try:
                st = self._build(corpus)
            finally:
                self._state = saved
            try:
                self._init_topics(st, iteration, STREAM_BATCH_INIT)
                if first:
                    self._mstep(st)
                    for s in range(n_sweeps):
                        for ch in st.chunks:
                            self._sample(st, ch, iteration, STREAM_BATCH_SAMPLE, s)
                        self._mstep(st)
                    out = topic_major_to_host(cp, st.B, cp.asarray(st.new_of_old))
                else:
                    comp = np.asarray(components, dtype=np.float64)
                    bhat = (comp / comp.sum(axis=1, keepdims=True)).T[st.old_of_new]
                    st.bhat_fixed = cp.asarray(np.ascontiguousarray(bhat, dtype=np.float32))
                    for ch in st.chunks:
                        self._rebuild_a(ch)
                    keep_from = n_sweeps - (n_sweeps + 1) // 2
                    st.B.fill(0)
                    for s in range(n_sweeps):
                        for ch in st.chunks:
                            self._sample(st, ch, iteration, STREAM_BATCH_SAMPLE, s)
                            self._rebuild_a(ch)
                            if s >= keep_from:
                                # B is free while Bhat is fixed: it accumulates the kept sweeps
                                # (exact for integer counts below 2**24).
                                self._count_b(st, ch)
                    out = topic_major_to_host(
                        cp, st.B, cp.asarray(st.new_of_old), divisor=n_sweeps - keep_from
                    )
            finally:
                st.release()
        return out



class _State:
    """Everything the engine holds on the device for one corpus."""

    chunks = ()

    def release(self):
        for ch in self.chunks:
            ch.__dict__.clear()
        self.chunks = ()
        for name in ("B", "partial", "denom", "counter", "bhat_fixed"):
            setattr(self, name, None)
