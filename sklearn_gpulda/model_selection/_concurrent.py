"""Several fits of one training corpus at once, for :func:`choose_n_components`.

A fit of a small corpus leaves most of a GPU idle: its sweeps are short kernels separated by
host work (launches, the prior updates' small reads). Fits run in threads, each on its own
non-blocking CUDA stream, fill those gaps with each other's kernels. The fits share one copy of
the training counts on the device (the estimator keeps device input where it lies), so the
corpus crosses to the GPU once.

Each fit queues its work on its thread's current stream and waits on that stream alone
(:meth:`~sklearn_gpulda.backends.cuda.chain.CudaChain.synchronize`), and every kernel of the
engines launches on the current stream, so the fits do not wait for one another. They draw
from the same random streams as sequential fits and make the same models.
"""

from concurrent.futures import ThreadPoolExecutor

from .._runtime.device import resolve_device


def n_workers(n_jobs, n_fits):
    """Fits at once for ``n_jobs`` (None or 1: one; -1: all; otherwise that many)."""
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs must be None, -1 or a positive integer, got {n_jobs!r}")
    return n_fits if n_jobs == -1 else max(1, min(n_jobs, n_fits))


def single_gpu(estimator):
    """The ordinal of the one GPU ``estimator`` fits on, or None (the CPU, several GPUs)."""
    device = resolve_device(estimator.device)
    if device.kind == "cuda" and len(device.indices) == 1:
        return device.index
    return None


def shared_counts(X_train, estimator, gpu):
    """The training counts for every fit: one validated device copy on GPU ``gpu`` where the
    estimator keeps device input there (no ``max_device_memory``, which may stream the corpus
    from the host), else ``X_train`` itself."""
    if gpu is None or estimator.max_device_memory is not None:
        return X_train
    import cupy
    import cupyx.scipy.sparse as csp
    from sklearn.base import clone

    from .._input.validation import check_device_counts

    with cupy.cuda.Device(gpu):
        # Checked once here, on this thread: the fits' own checks then find canonical counts,
        # and CuPy compiles the checks' kernels once rather than in every thread at once.
        X = check_device_counts(clone(estimator), csp.csr_matrix(X_train), reset=True,
                                whom="fit")
        cupy.cuda.get_current_stream().synchronize()  # the fits' streams do not wait for it
    return X


def run_fits(work, items, n_workers, gpu):
    """``[work(item) for item in items]``, ``n_workers`` at a time, each call on a stream of its
    own on GPU ``gpu`` (None: no GPU). The first error raised is raised again, once every call
    has ended."""
    if n_workers <= 1:
        return [work(item) for item in items]

    def on_own_stream(item):
        if gpu is None:
            return work(item)
        import cupy

        with cupy.cuda.Device(gpu):
            stream = cupy.cuda.Stream(non_blocking=True)
            with stream:
                result = work(item)
            stream.synchronize()
        return result

    with ThreadPoolExecutor(n_workers, thread_name_prefix="gpulda-choose-k") as pool:
        futures = [pool.submit(on_own_stream, item) for item in items]
        return [future.result() for future in futures]
