"""Launchers of ``cuda/sample_minibatch.cu``: the three kernels of one batch of a mini-batched
sweep (the batch's document side, its draws, and moving its changed tokens in B and the totals).
:class:`~.minibatch.CudaMinibatchSampler` decides what to launch when."""

import numpy as np

from .. import kernels as _kernels
from ..constants import BATCH_BLOCK as BLOCK, WARP

STEM = "sample_minibatch"
#: Warps per SM the draw kernel's grid provides; more tokens are grid-strided.
DRAW_WARPS_PER_SM = 64


def doc_side(layout, chain, batch, a_batch, dnt):
    """A rows and dnt of the batch's documents (``a_batch``, ``dnt``: device float32 arrays of
    at least ``n_batch_docs x K``)."""
    d0, d1 = layout.batch_docs(batch)
    if d1 == d0:
        return
    words = chain.words
    _kernels.launch(
        STEM, f"batch_doc_side_{layout.suffix}", d1 - d0, BLOCK,
        [(layout.doc_off, np.int32), (layout.doc_len, np.int32), (d0, "i32"),
         (layout.z_can, layout.topic_dtype), (layout.weight, np.float32),
         (words.totals, np.float64), (chain.alpha64, np.float64),
         (words.n_words * words.beta, "f64"), (words.n_topics, "i32"),
         (a_batch, np.float32), (dnt, np.float32)],
        shared_mem=words.n_topics * 4,
    )


def draw(layout, chain, batch, a_batch, dnt, seed, iteration, stream, sweep, n_sm):
    """Every token of the batch draws its new topic into ``layout.z_new``."""
    p0, p1 = layout.batch_positions(batch)
    if p1 == p0:
        return
    d0, _ = layout.batch_docs(batch)
    words = chain.words
    warps_per_block = BLOCK // WARP
    grid = max(1, min(-(-(p1 - p0) // warps_per_block),
                      n_sm * DRAW_WARPS_PER_SM // warps_per_block))
    _kernels.launch(
        STEM, f"draw_batch_{layout.suffix}", grid, BLOCK,
        [(layout.tok, np.uint32), (layout.doc, np.int32), (layout.word, np.int32),
         (p0, "i64"), (p1, "i64"), (d0, "i32"), (layout.weight, np.float32),
         (chain.token_offset, "i64"), (a_batch, np.float32), (dnt, np.float32),
         (words.B, np.float32), (words.totals, np.float64), (chain.alpha64, np.float64),
         (words.beta, "f64"), (words.n_words * words.beta, "f64"), (words.n_topics, "i32"),
         (seed, "u32"), (iteration, "u32"), (stream, "u32"), (sweep, "u32"),
         (layout.z_can, layout.topic_dtype), (layout.z_new, layout.topic_dtype)],
    )


def apply(layout, chain, batch, n_sm):
    """B, the topic totals and ``layout.z_can`` take the batch's new topics."""
    p0, p1 = layout.batch_positions(batch)
    if p1 == p0:
        return
    words = chain.words
    grid = max(1, min(-(-(p1 - p0) // BLOCK), n_sm * 4))
    _kernels.launch(
        STEM, f"apply_batch_{layout.suffix}", grid, BLOCK,
        [(layout.tok, np.uint32), (layout.word, np.int32), (p0, "i64"), (p1, "i64"),
         (layout.weight, np.float32), (words.n_topics, "i32"),
         (layout.z_new, layout.topic_dtype), (layout.z_can, layout.topic_dtype),
         (words.B, np.float32), (words.totals, np.float64)],
        shared_mem=words.n_topics * 8,
    )
