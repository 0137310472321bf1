"""The test-only kernels of ``tests/kernels/probes.cu``, compiled with NVRTC on first use.

They expose device functions of ``cuda/`` (Philox, the single-token draw) so that tests can pin
them to NumPy; they are not in the package's fatbins.
"""

import functools
from pathlib import Path

import numpy as np

PROBES = Path(__file__).resolve().parent / "kernels" / "probes.cu"


@functools.lru_cache(maxsize=None)
def _module(device_id):
    import cupy

    from sklearn_gpulda.backends.cuda.kernels import source_dir

    return cupy.RawModule(code=PROBES.read_text(),
                          options=("-std=c++17", f"-I{source_dir()}"), backend="nvrtc")


def kernel(name):
    import cupy

    return _module(cupy.cuda.Device().id).get_function(name)


def philox_words(ctr, k0, k1):
    """The four Philox4x32-10 output words for each counter row of ``ctr`` (n x 4 uint32)."""
    import cupy as cp

    ctr_d = cp.asarray(np.ascontiguousarray(ctr, dtype=np.uint32))
    n = ctr_d.shape[0]
    out = cp.empty((n, 4), dtype=cp.uint32)
    kernel("philox_words")((-(-n // 256),), (256,),
                           (ctr_d, np.int64(n), np.uint32(k0), np.uint32(k1), out))
    return out.get()


def draw_fixed_row(a_row, bhat, alpha, own, own_w, u, packed, word_side=None, large=None):
    """The sparse sampler's draw for one fixed (A row, Bhat row, own topic and weight), once per
    uniform of ``u``; the row is laid out in the lane-segment layout of ``cuda/entry.cuh``.
    ``word_side`` = (the word's counts B[v, :], n + V beta, beta) takes the token's own count out
    of the word side too; None holds Bhat fixed. ``large`` takes the large-K sampler's table
    (leaves in global memory); None takes it where the sampler would (K > 32,768)."""
    import cupy as cp

    nz = np.flatnonzero(a_row)
    m = max(1, -(-nz.size // 32))
    e = np.arange(nz.size)
    slot = (e % m) * 32 + e // m
    if packed:
        ent = np.zeros(32 * m, dtype=np.uint32)
        ent[slot] = (nz.astype(np.uint32) << 16) | a_row[nz].astype(np.uint32)
    else:
        ent = np.zeros((32 * m, 2), dtype=np.int32)
        ent[slot] = np.stack(
            [nz.astype(np.int32), a_row[nz].astype(np.float32).view(np.int32)], axis=1
        )
    k = bhat.size
    out = cp.empty(u.size, dtype=cp.int32)
    alpha = np.broadcast_to(np.asarray(alpha, np.float32), (k,))
    from sklearn_gpulda.backends.cuda.constants import SAMPLE_BLOCK, SHARED_MAX_TOPICS
    from sklearn_gpulda.backends.cuda.sparse.sample_sparse import tree_floats

    if large is None:
        large = k > SHARED_MAX_TOPICS
    fn = kernel("draw_fixed_row_" + ("packed" if packed else "wide") + ("_large" if large else ""))
    smem = tree_floats(k, leaves=not large) * 4
    grid = 264
    leaf_rows = cp.empty((grid, k), dtype=cp.float32) if large else None
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem
    if word_side is None:
        b_row, denom, beta = None, None, 0.0
    else:
        b_row = cp.asarray(word_side[0], dtype=cp.float32)
        denom, beta = cp.asarray(word_side[1], dtype=cp.float64), word_side[2]
    fn((grid,), (SAMPLE_BLOCK,),
       (cp.asarray(ent), np.int32(nz.size), cp.asarray(bhat, dtype=cp.float32),
        cp.asarray(np.ascontiguousarray(alpha)), b_row if b_row is not None else np.uintp(0),
        denom if denom is not None else np.uintp(0), np.float64(beta), np.int32(k), np.int32(own),
        np.float32(own_w), cp.asarray(u, dtype=cp.float32), np.int64(u.size), out,
        leaf_rows if leaf_rows is not None else np.uintp(0)),
       shared_mem=smem)
    return out.get()
