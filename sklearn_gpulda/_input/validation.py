"""Validation of count matrices, on the host as scikit-learn does it, and on the device.

scikit-learn's validators only take host arrays, and copying a large corpus to the host and back
would cost more than several sampling iterations. :func:`check_device_counts` applies the same
checks, with the same messages, to CuPy and cupyx input where it lies; only scalars cross to the
host. CuPy is imported only when such input arrives.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_non_negative, validate_data

from .._runtime import device as _device
from .._runtime.device import is_device_array, to_host
from .._runtime.warnings import warn_caller
from .row_blocks import is_block_sequence


def check_counts(estimator, X, reset, whom, device, upload=False, keep_integers=False):
    """Validate a document-term count matrix for ``estimator``.

    Parameters
    ----------
    estimator : GPULatentDirichletAllocation
    X : array-like, sparse matrix, CuPy array or cupyx sparse matrix
    reset : bool
        First call of a fit: record ``n_features_in_`` (and feature names) instead of checking.
    whom : str
        Method name used in the negative-values message.
    device : sklearn_gpulda._runtime.device.Device
        Where the work runs: device input stays on a GPU, and goes to the host for the CPU.
    upload : bool, default=False
        For a GPU ``device``: copy host counts to it as CSR, as they are, and check their values
        there (see :func:`upload_counts`).
    keep_integers : bool, default=False
        Host counts of an integer type stay integers instead of becoming float64 (for a batch
        fit on a GPU whose counts stay on the host: its token corpus reads them as they are).

    Returns
    -------
    X : scipy.sparse.csr_matrix or ndarray (host), or cupyx.scipy.sparse.csr_matrix (device)
    """
    if is_device_array(X):
        if device.kind == "cuda":
            return check_device_counts(estimator, X, reset, whom)
        X = to_host(X)
    elif upload and device.kind == "cuda":
        return upload_counts(estimator, X, reset, whom, device)
    if keep_integers:
        # Integers need no finiteness check; at 2 G tokens their float64 copy was a fresh
        # 11 GB array, most of a streamed fit's validation time.
        X = validate_data(estimator, X, reset=reset, accept_sparse="csr", dtype=None,
                          ensure_all_finite=False)
        if X.dtype.kind in "biu":
            check_non_negative(X, whom)
            return X
        reset = False  # recorded already; floats and the rest are checked as scikit-learn does
    X = validate_data(estimator, X, reset=reset, accept_sparse="csr",
                      dtype=[np.float64, np.float32])
    check_non_negative(X, whom)
    return X


def check_fit_input(estimator, X, whom, device, batch):
    """What ``fit`` learns from, checked: a count matrix, or (batch learning) a list of row blocks.

    A batch fit on several GPUs checks and keeps the counts on the first (:func:`counts_go_up`),
    unless the corpus may have to be streamed; otherwise integer counts stay integers on the
    host.

    Returns
    -------
    X : matrix or list of blocks
        As :func:`check_counts` or :func:`check_blocks` return them.
    blocks : bool
        Whether ``X`` is a list of row blocks.
    components_dtype : numpy dtype
        scikit-learn's rule: float32 when all counts are float32, float64 otherwise.
    """
    if isinstance(X, (list, tuple)) and X and all(is_device_array(b) for b in X):
        raise TypeError("X is a list of GPU arrays; row blocks must be host arrays (join "
                        "device arrays into one matrix instead)")
    blocks = is_block_sequence(X)
    if blocks and not batch:
        raise ValueError("a list of row blocks is for batch learning; for "
                         "learning_method='online' call partial_fit on each block")
    if blocks:
        X = check_blocks(estimator, X, whom, device)
        dtypes = {block.dtype for block in X}
    else:
        upload = batch and counts_go_up(X, device, estimator.max_device_memory)
        X = check_counts(estimator, X, reset=True, whom=whom, device=device, upload=upload,
                         keep_integers=batch and device.kind == "cuda" and not upload)
        dtypes = {X.dtype}
    dtype = np.float32 if all(t == np.float32 for t in dtypes) else np.float64
    return X, blocks, dtype


def counts_go_up(X, device, max_device_memory):
    """Whether a batch fit on ``device`` checks and keeps the whole count matrix ``X`` there.

    Counts on a GPU stay there. Host counts for one GPU stay on the host: they are checked
    there as scikit-learn checks them and the layout uploads what it reads, since the checks
    and the token offsets on the device would be CuPy kernels compiled at run time, seconds of
    a first fit (``cuda/layout.cu`` does the device's part with kernels shipped precompiled).
    Several GPUs take them onto the first one, which cuts them into the GPUs' parts and copies
    each part to its GPU, sparing the host the token offsets and the split; not when the corpus
    may have to be streamed (a ``max_device_memory`` budget is set, or the counts take more
    than an eighth of what the GPU has free; the layout takes about three times the counts):
    then they stay in host memory and go up a chunk at a time.
    """
    if device.kind != "cuda":
        return False
    if is_device_array(X):
        return max_device_memory is None  # already there
    if max_device_memory is not None or len(device.indices) < 2:
        return False
    device = device.lead
    cupy, _ = _device.import_cupy()
    with cupy.cuda.Device(device.index):
        free, _ = _device.free_device_bytes(cupy)
    if sp.issparse(X):
        size = X.nnz * (X.dtype.itemsize + 8)  # values and indices, whatever the format
    else:
        size = np.asarray(X).nbytes if hasattr(X, "__array__") else 0
    return size <= free / 8


def check_blocks(estimator, blocks, whom, device):
    """Check a sequence of row blocks one by one, as :func:`check_counts` checks a matrix (the
    first records the features, an error names its block).

    Returns
    -------
    blocks : list
        Each numeric block as given (a memory-mapped one stays on disk; it is read again when
        its tokens are laid out), any other as its checked conversion.
    """
    kept = []
    for i, block in enumerate(blocks):
        try:
            # Integer blocks are checked as integers: a float64 copy would be thrown away.
            valid = check_counts(estimator, block, reset=i == 0, whom=whom, device=device,
                                 keep_integers=True)
        except ValueError as exc:
            raise ValueError(f"block {i} of X: {exc}") from exc
        kept.append(block if block.dtype.kind in "biuf" else valid)
    return kept


def upload_counts(estimator, X, reset, whom, device):
    """Host counts to a GPU for a fit there: validated as :func:`check_counts` would, with the
    work split so that the host touches the values as little as possible.

    The host checks the shape and records the features, converting nothing it need not; the CSR
    arrays are copied to the device as they are (integer counts as integers), and the checks of
    values (NaN, infinity, negative), the conversion to float and the canonical form happen there,
    where a pass over 100 M counts takes microseconds instead of a tenth of a second each.
    Non-numeric input goes through scikit-learn's own conversion first, for its errors.
    """
    import cupy
    import cupyx.scipy.sparse as csp

    X = validate_data(estimator, X, reset=reset, accept_sparse="csr", dtype=None,
                      ensure_all_finite=False)
    if X.dtype.kind not in "biuf":
        X = validate_data(estimator, X, reset=False, accept_sparse="csr",
                          dtype=[np.float64, np.float32])
    if not sp.issparse(X):
        X = sp.csr_matrix(X)
    # Several GPUs: the counts go to the first, which cuts them into the GPUs' parts.
    with cupy.cuda.Device(device.lead.index):
        data = cupy.asarray(X.data)
        if data.dtype.kind in "biu":
            # Integer counts travel as they are and become float64 here (cupyx sparse holds
            # floats only), as scikit-learn would make them on the host.
            data = data.astype(cupy.float64)
        # The structure as int32 (cuSPARSE's and the kernels' index type).
        X_d = csp.csr_matrix(
            (data, cupy.asarray(X.indices.astype(np.int32, copy=False)),
             cupy.asarray(X.indptr)), shape=X.shape)
        return check_device_counts(estimator, X_d, reset=False, whom=whom, record_features=False)


def check_device_counts(estimator, X, reset, whom, record_features=True):
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
    record_features : bool, default=True
        Whether to record or check ``n_features_in_`` here (False when the host has already).

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
    if values.size and values.dtype.kind == "f":
        if bool(cupy.isnan(values).any()):
            raise ValueError("Input X contains NaN.")
        if bool(cupy.isinf(values).any()):
            raise ValueError("Input X contains infinity or a value too large for "
                             f"{np.dtype(dtype)!r}.")
    if values.size and values.dtype.kind in "if":
        if bool((values < 0).any()):
            raise ValueError(f"Negative values in data passed to {whom}")
    if record_features and reset:
        estimator.n_features_in_ = n_features
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
    elif record_features and n_features != estimator.n_features_in_:
        raise ValueError(
            f"X has {n_features} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input."
        )
    X = csp.csr_matrix(X, dtype=dtype) if csp.issparse(X) else csp.csr_matrix(X.astype(dtype))
    X.sum_duplicates()
    X.eliminate_zeros()
    return X


def warn_if_empty(total, whom):
    """Warn when the counts hold no token (their ``total`` is zero): the fit learns nothing."""
    if total == 0.0:
        warn_caller(
            f"{whom}: X holds no tokens (every count is zero), so there is nothing to learn "
            "from: the topics stay at the prior and the training perplexity is NaN",
            RuntimeWarning,
        )
