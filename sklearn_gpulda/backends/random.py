"""Counter-based randomness shared by every engine.

Each random draw is a pure function of ``(seed, iteration, stream, token, sweep)``: Philox4x32-10
(Salmon et al., SC'11) with key ``(seed, iteration)`` and counter ``(token_lo, token_hi, stream,
sweep)``. Because nothing is carried from one draw to the next, the NumPy and CUDA engines draw the
same numbers for the same token whatever order or thread processes it. ``cuda/philox.cuh`` is the
device twin of this file; ``tests/test_random.py`` pins both to the published known-answer vectors.
"""

import numpy as np

# Philox4x32 round multipliers and Weyl key increments (Random123's constants).
_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint32(0x9E3779B9)
_W1 = np.uint32(0xBB67AE85)
_LO = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)

#: Draw purposes; the stream id is the third counter word, so purposes never share a number.
STREAM_INIT = 0  # initial topic of each training token (iteration 0)
STREAM_SAMPLE = 1  # E-step draw of each training token
STREAM_BATCH_INIT = 2  # initial topic of a mini-batch token (partial_fit / online)
STREAM_BATCH_SAMPLE = 3  # E-step draw of a mini-batch token with topics fixed
STREAM_MH = 4  # Metropolis-Hastings steps of a token (backends/numpy/mh_rule.py)

#: 2**-24: uniforms carry 24 random bits so that they are exact in float32 on every engine.
_INV_2_24 = np.float32(1.0 / (1 << 24))


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 block function, vectorised over the counter words.

    Parameters
    ----------
    c0, c1, c2, c3 : array-like of uint32
        Counter words; broadcast against each other.
    k0, k1 : int
        Key words (taken modulo 2**32).

    Returns
    -------
    x0, x1, x2, x3 : ndarray of uint32
        The four output words.
    """
    c0, c1, c2, c3 = np.broadcast_arrays(
        *(np.asarray(c, dtype=np.uint32) for c in (c0, c1, c2, c3)))
    c0, c1, c2, c3 = (c.astype(np.uint32, copy=True) for c in (c0, c1, c2, c3))
    k0 = np.uint32(int(k0) & 0xFFFFFFFF)
    k1 = np.uint32(int(k1) & 0xFFFFFFFF)
    with np.errstate(over="ignore"):
        for r in range(10):
            if r:
                k0 = np.uint32(k0 + _W0)
                k1 = np.uint32(k1 + _W1)
            p0 = _M0 * c0.astype(np.uint64)
            p1 = _M1 * c2.astype(np.uint64)
            hi0 = (p0 >> _SHIFT).astype(np.uint32)
            lo0 = (p0 & _LO).astype(np.uint32)
            hi1 = (p1 >> _SHIFT).astype(np.uint32)
            lo1 = (p1 & _LO).astype(np.uint32)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def token_bits(seed, iteration, stream, token, sweep=0):
    """First Philox output word for each token index.

    Parameters
    ----------
    seed : int
        Model seed (32 bits).
    iteration : int
        Iteration number, the second key word.
    stream : int
        One of the ``STREAM_*`` constants.
    token : ndarray of int64
        Global token indices (the counter's low 64 bits).
    sweep : int, default=0
        Sweep number inside one iteration (mini-batch sampling), the fourth counter word.

    Returns
    -------
    bits : ndarray of uint32
    """
    token = np.asarray(token, dtype=np.int64)
    lo = (token & 0xFFFFFFFF).astype(np.uint32)
    hi = (token >> 32).astype(np.uint32)
    x0, _, _, _ = philox4x32(lo, hi, np.uint32(stream), np.uint32(sweep), seed, iteration)
    return x0


def token_uniform(seed, iteration, stream, token, sweep=0):
    """Uniform float32 in [0, 1) with 24 random bits, one per token.

    The top 24 bits of :func:`token_bits`, times 2**-24; the CUDA engine computes the same value
    bit for bit.
    """
    return bits_uniform(token_bits(seed, iteration, stream, token, sweep))


def token_topic(seed, iteration, stream, token, n_topics, sweep=0):
    """Uniform topic in ``[0, n_topics)`` per token: the high word of ``bits * n_topics``."""
    return bits_topic(token_bits(seed, iteration, stream, token, sweep), n_topics)


def bits_uniform(bits):
    """Philox words (uint32) as uniforms in [0, 1): their top 24 bits times 2**-24, float32."""
    return (bits >> np.uint32(8)).astype(np.float32) * _INV_2_24


def bits_topic(bits, n_topics):
    """Philox words (uint32) as uniform topics in ``[0, n_topics)``: the high word of
    ``bits * n_topics``."""
    return ((bits.astype(np.uint64) * np.uint64(n_topics)) >> _SHIFT).astype(np.int32)
