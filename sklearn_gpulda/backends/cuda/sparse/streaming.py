"""Chunks kept in pinned host memory and streamed through the device (SaberLDA 3.1.2).

When a corpus's tokens do not fit the device's memory budget, each PDOW chunk's per-token arrays
(token places, documents, weights, topics in canonical order) live in pinned host memory; the
per-document and per-work-item arrays, small next to them, stay on the device. Two device
*slots*, each the size of the largest chunk, take turns: while the compute stream works on the
chunk in one slot, one copy stream brings the next chunk into the other slot and a second copy
stream takes the finished chunk's topics back. Events order the three, so the host queues a
whole sweep without waiting.

What travels per token and sweep is 8 bytes in (place 2, document 4, topic 2; 2 more for
places in chunks of wide entries and 4 for weighted tokens) and 2 bytes out (the new topic). A
is not stored between sweeps: it is rebuilt from the topics when a chunk arrives, which the
in-memory chain also does once per sweep (after sampling instead of before), so the streamed
chain samples from the same A and B and is the in-memory chain, bit for bit.
"""

import numpy as np

from ...._runtime.stages import stage
from ..constants import ROW_PAD
from ..counts import ROWS_PER_SLICE
from .layout import BUILD_PIECE_TOKENS, PIECE, topic_dtype

#: Fewest tokens a streamed chunk may hold: below this the per-chunk launches and copies cost
#: more than the sampling they feed.
MIN_STREAM_CHUNK = 1 << 16


def slot_bytes(n_tokens, n_docs, topic_bytes, entry_bytes, weighted):
    """Device bytes of one slot holding ``n_tokens`` tokens of ``n_docs`` documents: place,
    document, weight, the topic in both orders and A's entries per token; A's row header and
    padding per document. Places take 2 bytes beside packed entries, 4 beside wide ones."""
    place = 2 if entry_bytes == 4 else 4
    per_token = place + 4 + (4 if weighted else 0) + 2 * topic_bytes + entry_bytes
    return n_tokens * per_token + n_docs * (8 + ROW_PAD * entry_bytes)


def streamed_chunk_tokens(corpus, n_topics, budget, max_chunk_tokens=None, gpu=0,
                          scratch_bytes=0, table_bytes=None, averaging_bytes=None):
    """Tokens per chunk of a streamed layout of ``corpus``, and per piece of its build, within
    ``budget`` device bytes: while building, the documents' arrays and one chunk's build; while
    sampling, the model (B twice, averaging's sum, and ``scratch_bytes`` the sampler keeps
    beside them), the documents' arrays and two slots. ``table_bytes`` is one B's device bytes
    (None: dense, V x K float32 with the totals' scratch) and ``averaging_bytes`` what averaging's
    sum is given (None: the float64 of a dense B; 0 where the fit does not average).

    Raises
    ------
    MemoryError
        When chunks of :data:`MIN_STREAM_CHUNK` tokens do not fit (``gpu`` names the GPU).
    """
    k, v, n, d = n_topics, corpus.n_words, corpus.n_tokens, corpus.n_docs
    weighted = corpus.weighted
    entry = 8 if weighted else 4  # packed 4-byte A entries for integer counts (any K taken)
    tbytes = np.dtype(topic_dtype(k)).itemsize
    # Two B (the one sampled from, the one counted into) and averaging's sum.
    if table_bytes is None:
        table_bytes = v * k * 4 + (-(-v // ROWS_PER_SLICE)) * k * 8 + 4 * k * 8
    if averaging_bytes is None:
        averaging_bytes = v * k * 8
    model = 2 * int(table_bytes) + int(averaging_bytes) + scratch_bytes
    documents = d * 40 + (n // PIECE) * 16
    per_token_docs = d / max(n, 1)
    slots = 2 * (slot_bytes(1, 0, tbytes, entry, weighted)
                 + slot_bytes(0, 1, tbytes, entry, weighted) * per_token_docs)
    # A chunk's build: offsets, documents and weights; its counts on the device (first token,
    # word, the uploaded indices and weights per non-zero); the sort scratch of a piece of a
    # quarter of the chunk (about 80 bytes a token); its work items.
    nz_per_token = corpus.n_nonzero / max(n, 1)
    build = (8 + (4 if weighted else 0) + nz_per_token * (8 + 4 + 4 + (4 if weighted else 0))
             + 80 / 4 + 16 * v / max(n, 1))
    usable = 0.9 * budget - documents
    tokens = int(min(usable / build, (usable - model) / slots))
    if tokens < min(MIN_STREAM_CHUNK, n):
        raise MemoryError(
            f"the CUDA engine cannot stream {n} tokens at K={k}, V={v} within "
            f"{budget / 2**30:.2f} GiB of GPU {gpu}: the word-topic tables take "
            f"{model / 2**30:.2f} GiB and chunks of at least {MIN_STREAM_CHUNK} tokens must fit "
            "beside them; raise max_device_memory, free device memory or lower n_components")
    if max_chunk_tokens is not None:
        tokens = min(tokens, int(max_chunk_tokens))
    tokens = max(1, tokens)
    return tokens, min(BUILD_PIECE_TOKENS, max(1, tokens // 4))


def plan_stream(corpus, n_topics, budget, averaging, averaging_bytes, **options):
    """:func:`streamed_chunk_tokens` with averaging's sum reserved as ``averaging`` says:
    'required', 'optional' (reserved where chunks still fit beside it; otherwise averaging will
    find no room and the fit goes on without it) or 'none'. Returns ``(tokens, piece_tokens,
    reserved)``."""
    if averaging == "none":
        return streamed_chunk_tokens(corpus, n_topics, budget, averaging_bytes=0,
                                     **options) + (False,)
    try:
        return streamed_chunk_tokens(corpus, n_topics, budget, averaging_bytes=averaging_bytes,
                                     **options) + (True,)
    except MemoryError:
        if averaging != "optional":
            raise
    return streamed_chunk_tokens(corpus, n_topics, budget, averaging_bytes=0,
                                 **options) + (False,)


class Slot:
    """Device buffers for one chunk at a time (sized for the largest chunk)."""

    def __init__(self, cp, chunks):
        n = max(ch.n_tokens for ch in chunks)
        n_slots = max(ch.n_slots for ch in chunks)
        n_docs = max(ch.n_docs for ch in chunks)
        topic = chunks[0].topic_dtype
        wide = any(not ch.packed for ch in chunks)
        # Places in bytes: viewed as each chunk's dtype (uint16 packed, uint32 wide).
        self.place = cp.empty(n * (4 if wide else 2), dtype=cp.uint8)
        self.doc = cp.empty(n, dtype=cp.int32)
        self.weight = cp.empty(n, dtype=cp.float32) if any(ch.weighted for ch in chunks) else None
        self.z = cp.empty(n, dtype=topic)
        self.z_can = cp.empty(n, dtype=topic)
        self.a_ent = cp.empty(n_slots * (2 if wide else 1), dtype=cp.int32)
        self.a_row = cp.empty((n_docs, 2), dtype=cp.int32)

    def attach(self, chunk):
        """Point the chunk's per-token arrays at this slot's buffers."""
        n = chunk.n_tokens
        size = np.dtype(chunk.place_dtype).itemsize
        chunk.place = self.place[: n * size].view(chunk.place_dtype)
        chunk.doc = self.doc[:n]
        chunk.weight = self.weight[:n] if chunk.weighted else None
        chunk.z, chunk.z_can = self.z[:n], self.z_can[:n]
        if chunk.packed:
            chunk.a_ent = self.a_ent[: chunk.n_slots].view(np.uint32)
        else:
            chunk.a_ent = self.a_ent[: 2 * chunk.n_slots].reshape(chunk.n_slots, 2)
        chunk.a_row = self.a_row[: chunk.n_docs]


def evict(chunk):
    """Move a freshly built chunk's token arrays to pinned host memory (its topics' host array
    is allocated, to be filled by the first pass)."""
    import cupyx

    chunk.weighted = chunk.weight is not None
    chunk.host = {}
    with stage("load: to host memory"):
        for name in ("place", "doc", "weight"):
            device = getattr(chunk, name)
            if device is None:
                continue
            host = cupyx.empty_pinned(device.shape, dtype=device.dtype)
            device.get(out=host)
            chunk.host[name] = host
            setattr(chunk, name, None)
        chunk.host_z_can = cupyx.empty_pinned((chunk.n_tokens,), dtype=chunk.topic_dtype)


class ChunkStream:
    """Runs work over streamed chunks with the copies overlapped (see the module's docstring).

    Parameters
    ----------
    cp : module
        CuPy.
    chunks : list of Chunk
        Evicted chunks (:func:`evict`).
    """

    def __init__(self, cp, chunks):
        self._cp = cp
        self.chunks = chunks
        self.slots = []
        self.freed_bytes = 0  # the slots' bytes while free_slots has them in the pool
        self._ensure_slots()
        self.copy_in = cp.cuda.Stream(non_blocking=True)
        self.compute = cp.cuda.Stream(non_blocking=True)
        self.copy_out = cp.cuda.Stream(non_blocking=True)

    def _ensure_slots(self):
        """The two device slots, made again where :meth:`free_slots` dropped them."""
        if not self.slots and self.chunks:
            self.slots = [Slot(self._cp, self.chunks) for _ in range(min(2, len(self.chunks)))]
            self.freed_bytes = 0

    def free_slots(self):
        """Give the slots back to CuPy's pool until the next pass over the chunks (a reader of
        the model then has their memory for its scratch). The device must have drained."""
        self.freed_bytes += sum(a.nbytes for slot in self.slots for a in vars(slot).values()
                                if a is not None)
        self.slots = []
        for chunk in self.chunks:
            chunk.place = chunk.doc = chunk.weight = chunk.z = chunk.z_can = None
            chunk.a_ent = chunk.a_row = None

    def _upload(self, chunk, slot):
        slot.attach(chunk)
        for name, host in chunk.host.items():
            getattr(chunk, name).set(host, stream=self.copy_in)
        chunk.z_can.set(chunk.host_z_can, stream=self.copy_in)

    def run(self, work, write_back=True):
        """``work(chunk)`` for every chunk in order, each launched on the compute stream with
        the chunk in a slot; with ``write_back`` its canonical topics go back to the host
        afterwards. The caller's stream waits for all of it (the host does not)."""
        cp = self._cp
        self._ensure_slots()
        current = cp.cuda.get_current_stream()
        start = current.record()
        for stream in (self.copy_in, self.compute, self.copy_out):
            stream.wait_event(start)
        n = len(self.chunks)
        loaded = [None] * n
        freed = [None] * len(self.slots)

        def upload(i):
            s = i % len(self.slots)
            if freed[s] is not None:
                self.copy_in.wait_event(freed[s])
            self._upload(self.chunks[i], self.slots[s])
            loaded[i] = self.copy_in.record()

        if n:
            upload(0)
        for i, chunk in enumerate(self.chunks):
            s = i % len(self.slots)
            self.compute.wait_event(loaded[i])  # the chunk is in slot s since its upload
            with self.compute:
                work(chunk)
            done = self.compute.record()
            if write_back:
                self.copy_out.wait_event(done)
                chunk.z_can.get(stream=self.copy_out, out=chunk.host_z_can, blocking=False)
                freed[s] = self.copy_out.record()
            else:
                freed[s] = done
            # The next chunk's copy is queued after this chunk's work, so that when it needs
            # this chunk's slot (two chunks back) it waits only on what is already queued.
            if i + 1 < n:
                upload(i + 1)
        for stream in (self.compute, self.copy_out):
            current.wait_event(stream.record())

    def each(self):
        """Each chunk in a slot in turn, for readers of the state (no overlap): yields after the
        chunk's arrays arrived, on the caller's stream."""
        self._ensure_slots()
        current = self._cp.cuda.get_current_stream()
        for chunk in self.chunks:
            # The slot is free once the caller's work on the previous chunk is done.
            self.copy_in.wait_event(current.record())
            self._upload(chunk, self.slots[0])
            current.wait_event(self.copy_in.record())
            yield chunk

    def host_topics(self):
        """Every chunk's canonical topics, from the host copies (after the device drained)."""
        self.compute.synchronize()
        self.copy_out.synchronize()
        return [chunk.host_z_can for chunk in self.chunks]

    def release(self):
        """Drop the slots (the chunks, with their host arrays, are the sampler's to release)."""
        self.slots = []
        self.chunks = []
