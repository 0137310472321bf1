"""The training log-likelihood of a chain's dense counts, on the device.

``sum_t log(sum_k (A[d,k] + alpha_k) Bhat[v,k]) - sum_d N_d log(N_d + sum_k alpha_k)`` with
``Bhat = float32((B + beta) / (n + V beta))`` (``doc/algorithm.md``), summed over the corpus's
non-zero counts rather than its tokens (a token's term depends only on its document and word).
Every sum here runs in float64; the NumPy engine forms ``S`` and ``Q`` in float32, so the two
agree to about 1e-7 relative, not bit for bit.
"""

import numpy as np

#: Elements (non-zeros x topics) of one block's float64 temporaries: about 256 MB each.
_BLOCK_ELEMENTS = 1 << 25


def training_log_likelihood(tokens, counts, doc_lengths):
    """The log-likelihood (a float) of the counts ``counts`` (:class:`~.chain.DeviceCounts`)
    over the non-zeros of ``tokens`` (:class:`~.chain.DeviceTokens`); ``doc_lengths`` (host,
    float64) are the documents' token counts."""
    import cupy

    k = counts.alpha.shape[0]
    alpha = counts.alpha
    block = max(1, _BLOCK_ELEMENTS // k)
    total = 0.0
    nnz = int(tokens.nz_doc.shape[0])
    for j0 in range(0, nnz, block):
        j1 = min(nnz, j0 + block)
        theta = counts.A[tokens.nz_doc[j0:j1]].astype(np.float64) + alpha
        bhat = ((counts.B[tokens.nz_word[j0:j1]].astype(np.float64) + counts.beta)
                / counts.denom).astype(np.float32)
        mass = (theta * bhat).sum(axis=1)
        total += float((tokens.nz_count[j0:j1] * cupy.log(mass)).sum())
    lengths = doc_lengths[doc_lengths > 0]
    return total - float((lengths * np.log(lengths + float(np.sum(counts.alpha.get())))).sum())
