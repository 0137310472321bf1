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

How many tokens a chunk holds, within the budget, is the memory plan's answer
(:func:`.memory_plan.streamed_chunk_tokens`).
"""

import numpy as np

from ...._runtime.stages import stage


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
        self.cp = cp
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
            self.slots = [Slot(self.cp, self.chunks) for _ in range(min(2, len(self.chunks)))]
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
        cp = self.cp
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
        current = self.cp.cuda.get_current_stream()
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
