"""Launchers of ``cuda/sample_mh.cu``: the chains' E-step, the counts of new topics, and the
denominators. Each checks nothing the kernel cannot run safely without (``kernels.launch``
checks every array's dtype and contiguity and casts every scalar)."""

import numpy as np

from .. import counts as _counts
from .. import kernels as _kernels
from ..constants import MH_BLOCK, MH_SHARED_TOTALS

STEM = "sample_mh"

#: Blocks per SM of the counting kernel: enough to fill the GPU, few enough that flushing each
#: block's shared topic totals costs little.
COUNT_BLOCKS_PER_SM = 8


def _suffix(z, a):
    topic = "u16" if z.dtype == np.uint16 else "i32"
    count = "f32" if a.dtype == np.float32 else "i32"
    return f"{topic}_{count}"


def _blocks(n):
    return max(1, min(-(-int(n) // MH_BLOCK), 2**31 - 1))


def sample(tokens, state, z_in, z_out, t0, seed, iteration, n_cycles):
    """Every token's chain from ``z_in`` into ``z_out`` (``sample_mh_*``).

    Parameters
    ----------
    tokens : DeviceTokens
        The token arrays (:mod:`.chain`).
    state : DeviceCounts
        A, B, the denominators and alpha's tables of ``z_in``.
    z_in, z_out : cupy.ndarray of uint16 or int32
        Must not alias.
    t0, seed, iteration, n_cycles : int
    """
    n = int(z_in.shape[0])
    k = int(state.alpha.shape[0])
    _kernels.launch(
        STEM, f"sample_mh_{_suffix(z_in, state.A)}", _blocks(n), MH_BLOCK,
        [(n, "i64"), (t0, "i64"), (k, "i32"), (n_cycles, "i32"), (seed, "u32"),
         (iteration, "u32"), (z_in, z_in.dtype), (tokens.doc, np.int32),
         (tokens.word, np.int32), (tokens.doc_ptr, np.int64), (tokens.by_word, np.int64),
         (tokens.word_ptr, np.int64), (tokens.word_rank, np.int64), (state.A, state.A.dtype),
         (state.B, np.float32), (state.denom, np.float64), (state.alpha, np.float64),
         (state.alpha_cumsum, np.float64), (state.beta, "f64"), (k * state.beta, "f64"),
         (z_out, z_out.dtype)],
    )


def count(tokens, z, state, n_sm):
    """A, B and the topic totals of ``z`` (``mh_count_*``), then ``denom = n_k + V beta``
    (``mh_denominators``). Zeroes the three tables first."""
    for table in (state.A, state.B, state.totals):
        _counts.clear(table)
    n = int(z.shape[0])
    k = int(state.alpha.shape[0])
    shared = 4 * k if k <= MH_SHARED_TOTALS else 0
    _kernels.launch(
        STEM, f"mh_count_{_suffix(z, state.A)}", min(_blocks(n), COUNT_BLOCKS_PER_SM * n_sm),
        MH_BLOCK,
        [(n, "i64"), (k, "i32"), (z, z.dtype), (tokens.doc, np.int32), (tokens.word, np.int32),
         (state.A, state.A.dtype), (state.B, np.float32), (state.totals, np.uint64)],
        shared_mem=shared,
    )
    n_words = int(state.B.shape[0])
    _kernels.launch(
        STEM, "mh_denominators", _blocks(k), MH_BLOCK,
        [(k, "i32"), (state.totals, np.uint64), (n_words * state.beta, "f64"),
         (state.denom, np.float64)],
    )
