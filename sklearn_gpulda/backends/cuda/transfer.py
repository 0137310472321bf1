"""Copies of the engines' word-major device tables to the host in topic-major order.

Both CUDA engines keep topic-word counts as a (V, K) array on the device, the sparse engine
with its words relabelled by frequency; scikit-learn's ``components_`` is (K, V) in the
caller's word order. Transposing a (V, K) array on the host walks memory with a stride of K
elements: at K = 1,000 and V = 100,000 it took 2.7 s on a 2-core host, longer than a whole GPU
fit of that size. Here the gather, the transpose, the arithmetic (averaging's division, the
prior) and the conversion to the caller's dtype happen on the device, a block of topics at a
time; a block of topics is a contiguous run of rows of the (K, V) result, so each block is
copied once, straight into its place in the host array.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..._runtime.device import is_device_array
from . import model_kernels

#: Device bytes of one block in flight (and of each of the two pinned host buffers).
BLOCK_BYTES = 64 << 20


def topic_major_to_host(xp, word_major, rows=None, divisor=None, add=None, dtype=np.float64,
                        block_bytes=BLOCK_BYTES):
    """Host ``(K, V)`` C-ordered copy of a word-major ``(V', K)`` array.

    Parameters
    ----------
    xp : module
        The array module of ``word_major`` (CuPy on the device; NumPy works too, for tests).
    word_major : array of shape (V', K)
        Topic counts per word, any real dtype.
    rows : integer array of shape (V,), optional
        On the same device: column ``v`` of the result is ``word_major[rows[v]]`` (the engine's
        row of the caller's word ``v``). Default: the identity, with ``V = V'``.
    divisor : float, optional
        Divides every entry, in float64 after the conversion.
    add : float, optional
        Added to every entry after the division, in float64 (the topic-word prior).
    dtype : numpy dtype, default=float64
        Of the result; the arithmetic is in float64 and the conversion comes last.
    block_bytes : int, default=64 MiB
        Size of the float64 block made at a time.

    Returns
    -------
    out : ndarray of shape (K, V)
    """
    n_words = word_major.shape[0] if rows is None else int(rows.shape[0])
    n_topics = word_major.shape[1]
    out = np.empty((n_topics, n_words), dtype=dtype)
    step = max(1, int(block_bytes) // (8 * max(n_words, 1)))
    blocks = [(lo, min(lo + step, n_topics)) for lo in range(0, n_topics, step)]

    # On the device, a kernel makes each block (no kernel compiled at run time); the CuPy
    # expression below stays for NumPy and for tables the kernel does not take.
    on_kernel = xp is not np and model_kernels.can_make_topic_major(word_major, rows, dtype)

    def block(lo, hi):
        if on_kernel:
            return model_kernels.topic_major(word_major, rows, lo, hi, divisor, add, dtype)
        part = word_major[:, lo:hi] if rows is None else word_major[rows, lo:hi]
        made = xp.ascontiguousarray(part.T, dtype=xp.float64)
        if divisor is not None:
            made /= divisor
        if add is not None:
            made += add
        return made.astype(dtype, copy=False)

    if xp is np or len(blocks) < 2 or out.size == 0:
        for lo, hi in blocks:
            made = block(lo, hi)
            out[lo:hi] = made.get() if is_device_array(made) else made
        return out
    _pipelined(xp, blocks, block, out, step)
    return out


def _pipelined(cp, blocks, block, out, step):
    """Blocks to the host through two pinned buffers: while the device makes block i and copies
    it into one buffer, host threads copy block i - 1 out of the other into ``out``.

    A copy from the device into pageable memory goes through the driver's own staging and the
    page faults of a fresh array on one thread, far below the link's speed for a large model.
    Into pinned memory it runs at the link's speed, and the threads share the page faults.
    """
    import cupyx

    n_threads = max(1, min(8, os.cpu_count() or 1))
    stream = cp.cuda.Stream(non_blocking=True)
    # A non-blocking stream does not wait for the caller's stream by itself: without this, the
    # blocks could be read while the table is still being written (an averaged sum updated just
    # before would come back corrupted).
    stream.wait_event(cp.cuda.get_current_stream().record())
    buffers = [cupyx.empty_pinned((step, out.shape[1]), dtype=out.dtype) for _ in range(2)]
    events = [None, None]
    pending = [[], []]  # host copies still reading each buffer

    def copy_rows(src, dst, r0, r1):
        np.copyto(dst[r0:r1], src[r0:r1])

    def drain(slot, lo, hi):
        events[slot].synchronize()
        rows = hi - lo
        bounds = np.linspace(0, rows, min(n_threads, rows) + 1).astype(int)
        pending[slot] = [pool.submit(copy_rows, buffers[slot], out[lo:hi], a, b)
                         for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    with ThreadPoolExecutor(n_threads) as pool:
        previous = None
        with stream:
            for i, (lo, hi) in enumerate(blocks):
                slot = i % 2
                for done in pending[slot]:
                    done.result()
                made = block(lo, hi)
                made.get(stream=stream, out=buffers[slot][: hi - lo], blocking=False)
                events[slot] = stream.record()
                if previous is not None:
                    drain(*previous)
                previous = (slot, lo, hi)
        drain(*previous)
        for slot in (0, 1):
            for done in pending[slot]:
                done.result()
