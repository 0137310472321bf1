"""The sparse chain's passes over streamed chunks (:mod:`.streaming` moves the chunks): the first
topics, the sweep that counts into a second B while its chunks sample from the first, B recounted
from the host's topics, the chunks brought in for the readers, and the sweeps' buffers given back
while a reader of the model needs their memory.

A mixin of :class:`~.sparse.CudaSparseSampler`, which provides ``words`` (its WordSide),
``_stream`` (a :class:`~.streaming.ChunkStream`, or None when the chunks are resident),
``_b_next``, the M-step's ``_topic_totals`` and ``_seeded_b`` (B with a matrix prior's
pseudo-counts while the chunks sample).
"""

from .. import counts
from . import hybrid, sample_sparse


class StreamedChain:
    """What the sparse sampler does over chunks that live in pinned host memory."""

    @property
    def streamed(self):
        """Whether the chunks live in host memory and are streamed through the device."""
        return self._stream is not None

    def _init_streamed(self, iteration, stream):
        """The first topics of every chunk, and B and the totals counted from them."""
        w = self.words

        def first_topics(ch):
            sample_sparse.init_topics(self.token_offset + ch.t0, self.n_topics,
                                      self.seed, iteration, stream, ch.z_can)
            counts.gather_topics(ch)
            counts.count_b(ch, self.n_topics, w.B, self._n_sm, w.rare)

        w.zero()
        self._stream.run(first_topics)
        self._topic_totals()

    def _sweep_streamed(self, iteration, stream, sub):
        """One iteration over streamed chunks: per chunk, A from its topics, the E-step against
        B, and its counts into the next B (the E-step of later chunks still reads this one)."""
        cp = self.cp
        w, k, n_sm = self.words, self.n_topics, self._n_sm
        if self._b_next is None:
            # The B this sweep counts into while its chunks sample from the other (made again
            # after a reader of the model had its memory: _shed_sweep_buffers).
            self._b_next = (cp.empty_like(w.B), None if w.rare is None else w.rare.twin(cp))
        b_next = self._b_next

        def iterate(ch):
            counts.gather_topics(ch)
            counts.count_rows(ch, k, n_sm)
            sample_sparse.sample_tokens(ch, w, self._shape, self.seed, iteration, stream, sub,
                                        self.token_offset)
            counts.scatter_topics(ch)
            counts.count_b(ch, k, b_next[0], n_sm, b_next[1])

        with self.device_context():
            hybrid.zero(*b_next)
            with self._seeded_b():
                self._stream.run(iterate)
            self._b_next = (w.B, w.rare)
            w.B, w.rare = b_next
            w.b_current = True
            self._topic_totals()

    def _count_b_streamed(self):
        """B (already zeroed) counted from the topics of every streamed chunk."""
        w = self.words

        def count(ch):
            counts.gather_topics(ch)
            counts.count_b(ch, self.n_topics, w.B, self._n_sm, w.rare)

        self._stream.run(count, write_back=False)

    def _chunks_with_a(self):
        """Each chunk with its A current, for readers of the state: the resident chunks, or the
        streamed ones brought in one at a time with A rebuilt from their topics."""
        if not self.streamed:
            yield from self.chunks
            return
        for ch in self._stream.each():
            counts.count_rows(ch, self.n_topics, self._n_sm)
            yield ch

    def _shed_sweep_buffers(self):
        """Before a reader of the model makes its scratch: a streamed chain's buffers that only
        its sweeps use (the second B, the chunks' device slots) go back to CuPy's pool, and the
        next sweep takes them again. Their memory is then the readers' (``components_`` of a
        hybrid B decodes its entries; the beta histogram bins every slot) within the budget."""
        if self.streamed:
            self.synchronize()
            self._b_next = None
            self._stream.free_slots()

    def _shed_bytes(self):
        """Bytes of the sweeps' buffers now in the pool (the budget still counts them)."""
        if not self.streamed:
            return 0
        w = self.words
        b_next = 0 if self._b_next is not None else w.B.nbytes + (
            0 if w.rare is None else w.rare.slots.nbytes)
        return b_next + self._stream.freed_bytes
