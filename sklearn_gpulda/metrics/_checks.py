"""Validation of the arrays every metric takes: topic matrices, counts, vocabularies, priors."""

import numpy as np
import scipy.sparse as sp


def as_float_matrix(a, name):
    if sp.issparse(a):
        a = a.toarray()
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array, got {a.ndim} dimension(s)")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinity")
    if a.size and a.min() < 0:
        raise ValueError(f"{name} must be non-negative")
    return a


def normalise_rows(a, name):
    sums = a.sum(axis=1, keepdims=True)
    if np.any(sums <= 0):
        bad = int(np.flatnonzero(sums.ravel() <= 0)[0])
        raise ValueError(f"row {bad} of {name} sums to zero and cannot be normalised")
    return a / sums


def as_counts(X, name="X"):
    """Canonical CSR float64 copy of a non-negative count matrix."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    X.sum_duplicates()
    if X.nnz and (not np.all(np.isfinite(X.data)) or X.data.min() < 0):
        raise ValueError(f"{name} must hold finite non-negative counts")
    X.eliminate_zeros()
    return X


def check_vocabulary(X, n_words, what):
    if X.shape[1] != n_words:
        raise ValueError(
            f"vocabulary size mismatch: X has {X.shape[1]} columns (words) but {what} has "
            f"{n_words}"
        )


def check_alpha(alpha, n_topics):
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 0:
        alpha = np.full(n_topics, float(alpha))
    if alpha.shape != (n_topics,) or not np.all(alpha > 0) or not np.all(np.isfinite(alpha)):
        raise ValueError(f"alpha must be a positive number or {n_topics} positive numbers")
    return alpha
