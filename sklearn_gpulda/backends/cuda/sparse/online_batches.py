"""Online learning's mini-batches held by the sparse CUDA chain together (``Sampler.
load_online_batches``): a mixin of :class:`~.sparse.CudaSparseSampler`, split from it so that each
module keeps one job.

The batches are laid out in one go (:mod:`.online_layout`), a chunk each, numbered as if each
batch were the loaded corpus (documents and tokens from 0, its words by rank), so that its
tokens draw the numbers they draw loaded alone. Selecting a batch points the chain at its chunk
and at the first rows of one B held for the corpus's words: the chain then holds its batch's
words' rows only, in the caller's order.
"""

from dataclasses import dataclass

from ...._input.layouts import frequency_relabel
from ...._runtime.stages import stage
from .layout import fits_one_chunk
from .online_layout import build_online_chunks


@dataclass
class OnlineBatchSet:
    """What :meth:`OnlineBatchChain.load_online_batches` keeps."""

    corpus: object      # the TokenCorpus the batches are documents of
    ranges: list        # (d0, d1) of each batch
    chunks: list        # a Chunk per batch, with its words (relabelled ids) in ``chunk.words``
    old_of_new: object  # the corpus's word of each relabelled id (host)
    b_rows: object      # (V, K) device B whose first rows each selected batch uses


class OnlineBatchChain:
    """:meth:`load_online_batches` and :meth:`select_online_batch` of the sparse CUDA chain, which
    provides the steps of its load (``_frequencies``, ``_load_plan``, ``_drop_build_scratch``,
    ``_make_word_side``), ``_denominators`` and the chain state."""

    def load_online_batches(self, corpus, ranges):
        """Lay every mini-batch out at once, a chunk each: one upload and one layout build for
        a ``partial_fit`` call or an online pass, where one per mini-batch cost a batch of 128
        documents at K = 20 about half its time (host work of CuPy calls, not the GPU's).

        Where they would not fit the device without streaming, or B is stored hybrid (its rare
        rows are placed for the whole vocabulary), each batch is laid out when selected, as
        the base class does.
        """
        ranges = [(int(d0), int(d1)) for d0, d1 in ranges]
        with self.device_context():
            self.release(return_cache=False)
            frequencies = self._frequencies(corpus)
            plan = self._load_plan(corpus, frequencies)
            self._cap_pool()
            if plan.streamed or plan.table.hybrid or not fits_one_chunk(corpus, ranges):
                return super().load_online_batches(corpus, ranges)
            with stage("load: relabel"):
                self.new_of_old, self.old_of_new = frequency_relabel(frequencies)
            with stage("load: layout"):
                self.chunks = build_online_chunks(self.cp, corpus, self.new_of_old,
                                                  self.n_topics, ranges)
                self._drop_build_scratch(plan)
            self._make_word_side(corpus, plan)
        self._batches = OnlineBatchSet(corpus, ranges, self.chunks, self.old_of_new, self.words.B)
        self.chunks = []

    def select_online_batch(self, i):
        held = self._batches
        if held is None:
            return super().select_online_batch(i)
        chunk = held.chunks[i]
        self.discard_accumulated()
        w = self.words
        w.bhat_fixed = None
        w.n_words = chunk.words.shape[0]
        w.B = held.b_rows[: w.n_words]
        w.b_current = False  # B holds no count of this batch's topics yet
        self._denominators()
        # The chain's words are the batch's, in the caller's order: no relabelling between.
        self.new_of_old = self.old_of_new = None
        self.chunks = [chunk]
        self.corpus = held.corpus.doc_range(*held.ranges[i])  # its documents and tokens
        return held.old_of_new[chunk.words]

    def _every_chunk(self):
        """The chunks of the loaded corpus, or of every held mini-batch."""
        return self._batches.chunks if self._batches is not None else self.chunks
