"""Launcher of ``cuda/infer.cu``: the deterministic fold-in of ``doc/algorithm.md`` on a GPU.

It needs no sampling state, only the documents and a fitted topic-word matrix, so it is a
function of the device rather than a method of a sampler; ``transform``, ``score`` and online
learning's evaluation call it through :func:`sklearn_gpulda.backends.fold_in`.
"""

import numpy as np
import scipy.sparse as sp

from ..._runtime.device import free_device_bytes, is_device_array
from ..base import topic_prior
from . import kernels as _kernels
from .constants import INFER_BLOCK

#: Scratch budget of one launch (theta and gamma, float64).
FOLD_IN_SCRATCH = 256 << 20


def fold_in(device, X, components, alpha, max_iter, tol, return_loglik=False):
    """:func:`sklearn_gpulda.backends.numpy.fold_in` on GPU ``device`` (one block per document).

    ``X`` may be a host matrix (uploaded once) or a cupyx CSR matrix (used where it lies).

    Raises
    ------
    MemoryError
        Before allocating, when phi, the documents and the scratch would not fit.
    """
    import cupy as cp

    on_device = is_device_array(X)
    if not on_device:
        X = sp.csr_matrix(X)
    X.sort_indices()
    # A model kept on the device (online learning's) is read there; a host one goes up once.
    comp = components if is_device_array(components) else np.asarray(components, np.float64)
    n_topics = comp.shape[0]
    n_docs = X.shape[0]
    alpha = topic_prior(alpha, n_topics)
    theta = np.empty((n_docs, n_topics), dtype=np.float64)
    loglik = np.empty(n_docs, dtype=np.float64)
    with cp.cuda.Device(device.index):
        # phi is held transposed in float64 (the fold-in's reductions are float64 end to end).
        need = comp.size * 8 + min(FOLD_IN_SCRATCH, 16 * n_topics * max(1, n_docs))
        need += X.nnz * 16 + n_docs * 16
        free = free_device_bytes(cp)[0]
        if need > free:
            raise MemoryError(
                f"fold-in needs about {need / 2**30:.2f} GiB of device memory (phi of "
                f"{n_topics} x {comp.shape[1]} float64 plus scratch), {free / 2**30:.2f} GiB "
                f"is free on GPU {device.index}"
            )
        if is_device_array(comp):
            comp = comp.astype(cp.float64, copy=False)
            phi_t = cp.ascontiguousarray((comp / comp.sum(axis=1, keepdims=True)).T)
        else:
            phi_t = cp.ascontiguousarray(cp.asarray(comp / comp.sum(axis=1, keepdims=True)).T)
        alpha_d = cp.asarray(alpha)
        indptr = cp.asarray(X.indptr).astype(cp.int64)
        indices = cp.asarray(X.indices).astype(cp.int32)
        data = cp.asarray(X.data).astype(cp.float64)
        step = max(1, min(n_docs, FOLD_IN_SCRATCH // (16 * n_topics)))
        for d0 in range(0, n_docs, step):
            m = min(step, n_docs - d0)
            th = cp.empty((m, n_topics), dtype=cp.float64)
            ga = cp.empty((m, n_topics), dtype=cp.float64)
            ll = cp.empty(m, dtype=cp.float64)
            _kernels.launch(
                "infer", "fold_in_docs", m, INFER_BLOCK,
                [(indptr, np.int64), (indices, np.int32), (data, np.float64),
                 (phi_t, np.float64), (n_topics, "i32"), (alpha_d, np.float64),
                 (max_iter, "i32"), (tol, "f64"), (d0, "i64"), (th, np.float64),
                 (ga, np.float64), (ll, np.float64)],
            )
            theta[d0 : d0 + m] = th.get()
            loglik[d0 : d0 + m] = ll.get()
    if return_loglik:
        return theta, loglik
    return theta
