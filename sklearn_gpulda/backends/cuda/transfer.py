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

import numpy as np

from ..._device import is_device_array

#: Device bytes of one block in flight.
BLOCK_BYTES = 256 << 20


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
    block_bytes : int, default=256 MiB
        Size of the float64 block moved at a time.

    Returns
    -------
    out : ndarray of shape (K, V)
    """
    n_words = word_major.shape[0] if rows is None else int(rows.shape[0])
    n_topics = word_major.shape[1]
    out = np.empty((n_topics, n_words), dtype=dtype)
    step = max(1, int(block_bytes) // (8 * max(n_words, 1)))
    for lo in range(0, n_topics, step):
        hi = min(lo + step, n_topics)
        part = word_major[:, lo:hi] if rows is None else word_major[rows, lo:hi]
        block = xp.ascontiguousarray(part.T, dtype=xp.float64)
        if divisor is not None:
            block /= divisor
        if add is not None:
            block += add
        block = block.astype(dtype, copy=False)
        if is_device_array(block):
            block.get(out=out[lo:hi])
        else:
            out[lo:hi] = block
    return out
