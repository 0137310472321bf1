"""The mini-batched CUDA backend (``algorithm='minibatch'``; Moon, thesis ch. 2, Alg. 8-12).

A sweep draws the documents batch by batch: each batch's tokens draw from the counts of its
start, then B and the topic totals take its new topics on the device before the next batch draws
(``doc/algorithm.md``, mini-batched sweeps). The batch's tokens are laid out in segmented CSR
(``_layouts.segmented_csr``: vocabulary panels of ``PANEL_BYTES`` of B rows, documents in order
inside a panel), so the warps of a block share the B rows of a few words and the dnt rows of a
few documents. Everything else (the PDOW chunk that keeps A's sparse rows, the M-step at the end
of a sweep, the readers of the state, the likelihood) is the sparse backend's.
"""

import numpy as np

from ...._input.corpus import expand_counts
from ...._input.layouts import DEFAULT_BATCH_TOKENS, batch_bounds, segmented_csr
from ...._runtime.device import to_host
from ...._runtime.stages import stage
from ...random import STREAM_SAMPLE
from .. import counts
from ..chain import StageClock
from ..sparse.layout import topic_dtype
from ..sparse.sampler import CudaSparseSampler
from . import sample_minibatch

#: Bytes of B rows (float32) in one vocabulary panel: a block's worth of shared memory, the
#: size of Moon's panels, so the rows a tile's warps read stay in the SM's L1.
PANEL_BYTES = 48 * 1024


def panel_width(n_topics):
    """Words per vocabulary panel at K topics."""
    return max(1, PANEL_BYTES // (4 * int(n_topics)))


class BatchLayout:
    """The tokens of a corpus in segmented CSR on the device, with the batches' bounds.

    Attributes
    ----------
    tok, doc, word : device arrays (uint32, int32, int32)
        Per layout position: canonical index, document and relabelled word.
    bounds : ndarray of int64
        Document bounds of the batches (host).
    positions : ndarray of int64
        Layout positions of the batches (host): batch b is ``positions[b]:positions[b + 1]``.
    z_can, z_new, weight, doc_off, doc_len : device arrays
        The chunk's canonical topics and weights and its documents' offsets and lengths, and
        the batch's drawn topics (canonical order).
    """

    def __init__(self, cp, corpus, new_of_old, n_topics, bounds, chunk):
        host = _HostTokens(corpus)
        tiles = segmented_csr(host, new_of_old, bounds, panel_width(n_topics))
        token = tiles.token
        self.bounds = bounds
        self.positions = tiles.tile_ptr[::tiles.n_panels].astype(np.int64)
        self.tok = cp.asarray(token.astype(np.uint32))
        self.doc = cp.asarray(host.doc[token].astype(np.int32))
        self.word = cp.asarray(new_of_old[host.word[token]].astype(np.int32))
        self.chunk = chunk
        self.topic_dtype = chunk.topic_dtype
        self.suffix = chunk.suffix
        self.z_new = cp.empty(chunk.n_tokens, dtype=chunk.topic_dtype)

    # The chunk's arrays, read where the chunk holds them (its state is allocated late).
    z_can = property(lambda self: self.chunk.z_can)
    weight = property(lambda self: self.chunk.weight)
    doc_off = property(lambda self: self.chunk.doc_off)
    doc_len = property(lambda self: self.chunk.doc_len)

    @property
    def n_batches(self):
        return self.bounds.size - 1

    def batch_docs(self, batch):
        return int(self.bounds[batch]), int(self.bounds[batch + 1])

    def batch_positions(self, batch):
        return int(self.positions[batch]), int(self.positions[batch + 1])

    @staticmethod
    def nbytes(n_tokens, topic_bytes):
        return n_tokens * (12 + topic_bytes)


class _HostTokens:
    """A corpus's document and word per token on the host, as ``segmented_csr`` reads them.
    Counts on the device are expanded there and copied once, and not kept on the corpus (whose
    device token arrays no memory plan counts)."""

    def __init__(self, corpus):
        self.n_docs, self.n_words = corpus.n_docs, corpus.n_words
        if corpus.on_device:
            doc, word, _ = expand_counts(corpus)
            self.doc, self.word = to_host(doc), to_host(word)
        else:
            self.doc, self.word = corpus.doc, corpus.word


class CudaMinibatchSampler(CudaSparseSampler):
    """Mini-batched sweeps on one CUDA GPU (see :class:`~sklearn_gpulda.backends.base.Sampler`).

    Parameters
    ----------
    n_topics, alpha, beta, seed, device, profile, max_device_memory
        As :class:`~.sparse.CudaSparseSampler`. The corpus must fit on the device (no streaming).
    batch_tokens : int, default=DEFAULT_BATCH_TOKENS
        Most tokens of a batch (whole documents; a longer document is a batch of its own).

    Attributes
    ----------
    batch_hook : callable or None
        Called as ``batch_hook(batch)`` after each batch of a sweep, when B, the totals and the
        chunk's ``z_can`` have taken the batch's topics (for the per-batch invariant tests).
    """

    #: Its prior updates keep the two-step path, as tested with its batches.
    resident_priors = False

    #: The sparse chain's kernels and the mini-batched draws' (:mod:`..process_memory`).
    budget_kernels = CudaSparseSampler.budget_kernels + tuple(
        ("sample_minibatch", f"{name}_{t}") for name in ("batch_doc_side", "draw_batch",
                                                         "apply_batch") for t in ("u16", "i32"))

    def __init__(self, n_topics, alpha, beta, seed, device, batch_tokens=DEFAULT_BATCH_TOKENS,
                 profile=False, max_device_memory=None):
        super().__init__(n_topics, alpha, beta, seed, device, max_chunk_tokens=None,
                         profile=profile, max_device_memory=max_device_memory)
        batch_bounds(np.zeros(2, dtype=np.int64), batch_tokens)  # the same check as at load
        self.batch_tokens = int(batch_tokens)
        self.batch_hook = None
        self.layout = None
        self.alpha64 = None
        self._scratch = None

    def _widest_batch(self, corpus):
        """The batches' document bounds and the most documents one of them holds."""
        bounds = batch_bounds(corpus.doc_ptr, self.batch_tokens)
        return bounds, int(np.diff(bounds).max(initial=0))

    def _extra_bytes(self, corpus):
        # The segmented CSR and the batches' scratch, beside the sparse chain.
        topic_bytes = np.dtype(topic_dtype(self.n_topics)).itemsize
        extra = BatchLayout.nbytes(corpus.n_tokens, topic_bytes)
        extra += 2 * 4 * self._widest_batch(corpus)[1] * self.n_topics  # A rows and dnt
        return extra + super()._extra_bytes(corpus)  # and a matrix prior's seeded cells

    def _load_plan(self, corpus, frequencies):
        # Refused before anything is allocated: the batches read one resident chunk.
        why = ("algorithm='minibatch' keeps the whole corpus on the GPU in one piece, and this "
               "corpus does not fit there; use algorithm='sparse', which streams it")
        try:
            plan = super()._load_plan(corpus, frequencies)
        except MemoryError as exc:
            raise MemoryError(why) from exc
        if plan.streamed:
            raise MemoryError(why)
        return plan

    def load(self, corpus):
        super().load(corpus)
        cp = self.cp
        bounds, widest = self._widest_batch(corpus)
        with self.device_context(), stage("load: segmented CSR"):
            self.layout = BatchLayout(cp, corpus, self.new_of_old, self.n_topics, bounds,
                                      self.chunks[0])
            self._scratch = (cp.empty((widest, self.n_topics), dtype=cp.float32),
                             cp.empty((widest, self.n_topics), dtype=cp.float32))

    def _priors_changed(self):
        super()._priors_changed()
        if self.words is not None:
            with self.device_context():
                self.alpha64 = self.cp.asarray(self.alpha, dtype=self.cp.float64)

    def sweep(self, iteration, stream=STREAM_SAMPLE, sub=0):
        self._require()
        if self.words.bhat_fixed is not None:
            # Batches do not interact while the topic-word side is fixed: ESCA's E-step.
            return super().sweep(iteration, stream, sub)
        cp = self.cp
        layout, (a_batch, dnt), n_sm = self.layout, self._scratch, self._n_sm
        with self.device_context():
            clock = StageClock(cp, ("batches", "mstep"), self.profile)
            # A matrix prior's seeded cells are pseudo-counts for the whole run of batches: in
            # B (the sparse chain's seed_cells) and in the totals, from which the kernels form
            # every denominator as totals + V beta. The batches move counts on top of them; the
            # M-step below recounts B and the totals from the topics alone.
            with self._seeded_b():
                self._seed_totals()
                for b in range(layout.n_batches):
                    sample_minibatch.doc_side(layout, self, b, a_batch, dnt)
                    sample_minibatch.draw(layout, self, b, a_batch, dnt, self.seed, iteration,
                                          stream, sub, n_sm)
                    sample_minibatch.apply(layout, self, b, n_sm)
                    if self.batch_hook is not None:
                        self.batch_hook(b)
            clock.mark()
            # The M-step: A's sparse rows, and B and the totals recounted from the topics (the
            # same numbers for integer counts; for weights, the sums in the sparse chain's order).
            ch = self.chunks[0]
            counts.gather_topics(ch)
            counts.count_rows(ch, self.n_topics, n_sm)
            self._count_words()
            clock.mark()
            self.stage_ms = clock.stage_ms(self.stage_ms)

    def _seed_totals(self):
        """``totals[k] += E[k]`` (a matrix prior's seeded cells' topic sums) for the batches of
        a sweep; nothing for a scalar prior."""
        seeded = self.words.seeded
        if seeded is not None:
            self.words.totals += seeded.topic_sums

    def _release_state(self):
        super()._release_state()
        self.layout = self._scratch = None
