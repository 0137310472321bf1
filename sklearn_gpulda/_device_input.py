"""CuPy and cupyx sparse input, validated and turned into tokens on the device.

scikit-learn's validators only take host arrays, and copying a large corpus to the host and back
would cost more than several sampling iterations. This module applies the same checks, with the
same messages, on the device, and expands counts into a :class:`~sklearn_gpulda._corpus.TokenCorpus`
whose token arrays stay there. Only per-document offsets (``n_docs + 1`` integers) and scalars
cross to the host. CuPy is imported only when such input arrives.
"""

import numpy as np

from ._corpus import TokenCorpus


def is_device_array(X):
    """True for CuPy arrays and cupyx sparse matrices."""
    return type(X).__module__.startswith("cupy")


def to_host(X):
    """Host twin of a device array (NumPy or SciPy sparse); anything else unchanged."""
    return X.get() if is_device_array(X) else X


def check_device_counts(estimator, X, reset, whom):
    """Validate device counts as ``validate_data`` plus ``check_non_negative`` would.

    Parameters
    ----------
    estimator : GPULatentDirichletAllocation
        Holds ``n_features_in_``; set when ``reset``.
    X : cupy.ndarray or cupyx.scipy.sparse matrix of shape (n_samples, n_features)
    reset : bool
        First call of a fit: record the number of features instead of checking it.
    whom : str
        Method name used in the negative-values message.

    Returns
    -------
    X : cupyx.scipy.sparse.csr_matrix
        float32 for float32 input, else float64; canonical (sorted, no duplicates).
    """
    import cupy
    import cupyx.scipy.sparse as csp

    if csp.issparse(X):
        X = X.tocsr()
    else:
        X = cupy.asarray(X)
        if X.ndim != 2:
            raise ValueError(
                f"Expected 2D array, got {X.ndim}D array instead. Reshape your data using "
                "array.reshape(-1, 1) if your data has a single feature or array.reshape(1, -1) "
                "if it contains a single sample."
            )
    if X.dtype.kind not in "biuf":
        raise ValueError(f"device input must hold real numbers, got dtype {X.dtype}")
    n_samples, n_features = X.shape
    if n_samples < 1:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required."
        )
    if n_features < 1:
        raise ValueError(
            f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required."
        )
    dtype = cupy.float32 if X.dtype == cupy.float32 else cupy.float64
    values = X.data if csp.issparse(X) else X
    if values.size:
        if bool(cupy.isnan(values).any()):
            raise ValueError("Input X contains NaN.")
        if bool(cupy.isinf(values).any()):
            raise ValueError(f"Input X contains infinity or a value too large for {np.dtype(dtype)!r}.")
        if bool((values < 0).any()):
            raise ValueError(f"Negative values in data passed to {whom}")
    if reset:
        estimator.n_features_in_ = n_features
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
    elif n_features != estimator.n_features_in_:
        raise ValueError(
            f"X has {n_features} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input."
        )
    X = csp.csr_matrix(X, dtype=dtype) if csp.issparse(X) else csp.csr_matrix(X.astype(dtype))
    X.sum_duplicates()
    X.eliminate_zeros()
    return X


def tokens_from_device_counts(X):
    """Device twin of :func:`~sklearn_gpulda._corpus.tokens_from_counts`.

    Parameters
    ----------
    X : cupyx.scipy.sparse.csr_matrix
        Canonical counts from :func:`check_device_counts`.

    Returns
    -------
    corpus : TokenCorpus
        ``doc``, ``word`` and ``weight`` are CuPy arrays; ``doc_ptr`` is on the host.
    """
    import cupy

    n_docs, n_words = X.shape
    data = X.data.astype(cupy.float64)
    reps = cupy.ceil(data).astype(cupy.int64)
    integral = bool((reps == data).all())
    nz_ptr = cupy.zeros(X.nnz + 1, dtype=cupy.int64)
    cupy.cumsum(reps, out=nz_ptr[1:])
    doc_ptr_d = nz_ptr[X.indptr.astype(cupy.int64)]
    n_tokens = int(nz_ptr[-1])
    token = cupy.arange(n_tokens, dtype=cupy.int64)
    # Each token's non-zero and document by binary search over the running offsets: the device
    # has no repeat-by-array, and a search per token is cheap next to one sampling iteration.
    nz_of_token = cupy.searchsorted(nz_ptr[1:], token, side="right")
    doc = (cupy.searchsorted(doc_ptr_d[1:], token, side="right")).astype(cupy.int32)
    del token
    word = X.indices.astype(cupy.int32)[nz_of_token]
    weight = None
    if not integral:
        weight = (data / reps).astype(cupy.float32)[nz_of_token]
    return TokenCorpus(n_docs, n_words, doc_ptr_d.get(), doc, word, weight)
