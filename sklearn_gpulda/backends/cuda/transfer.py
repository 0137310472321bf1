"""Copies of the engines' word-major device tables to the host in topic-major order.

Both CUDA engines keep topic-word counts as a (V, K) array on the device, the sparse engine
with its words relabelled by frequency; scikit-learn's ``components_`` is (K, V) in the
caller's word order. Transposing a (V, K) array on the host walks memory with a stride of K
elements: at K = 1,000 and V = 100,000 it took 2.7 s on a 2-core host, longer than a whole GPU
fit of that size. Here the gather and the transpose happen on the device, a block of words at a
time (so the float64 copy adds at most ``block_bytes`` of device memory), and each block lands
in its columns of the host array.
"""

import numpy as np

from ..._device import to_host

#: Device bytes of one float64 block in flight.
BLOCK_BYTES = 64 << 20


def topic_major_to_host(xp, word_major, rows=None, divisor=None, block_bytes=BLOCK_BYTES):
    """Host float64 ``(K, V)`` C-ordered copy of a word-major ``(V', K)`` array.

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
    block_bytes : int, default=64 MiB
        Size of the float64 block moved at a time.

    Returns
    -------
    out : ndarray of shape (K, V), float64
    """
    n_words = word_major.shape[0] if rows is None else int(rows.shape[0])
    n_topics = word_major.shape[1]
    out = np.empty((n_topics, n_words), dtype=np.float64)
    step = max(1, int(block_bytes) // (8 * max(n_topics, 1)))
    for lo in range(0, n_words, step):
        hi = min(lo + step, n_words)
        part = word_major[lo:hi] if rows is None else word_major[rows[lo:hi]]
        block = xp.ascontiguousarray(part.T, dtype=xp.float64)
        if divisor is not None:
            block /= divisor
        out[:, lo:hi] = to_host(block)
    return out
