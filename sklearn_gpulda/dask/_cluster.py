"""A local cluster of GPU workers, one process per GPU of this host, for the tests and
benchmarks of :mod:`sklearn_gpulda.dask`.

dask-cuda's ``LocalCUDACluster`` where it is installed; otherwise the same arrangement made with
``distributed`` alone: one nanny-supervised worker process per GPU, each started with
``CUDA_VISIBLE_DEVICES`` listing every GPU with its own first (as dask-cuda does), so that a
worker's first visible GPU is its own while NCCL still sees the others (for peer-to-peer
transfers between the processes).
"""

import os


def visible_gpus():
    """The GPUs this process may hand to workers: ``CUDA_VISIBLE_DEVICES`` as listed, or every
    GPU CuPy sees, by ordinal."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip()]
    from .._runtime.device import gpu_count

    return [str(i) for i in range(gpu_count())]


def rotated(gpus, i):
    """``gpus`` with its ``i``-th first, the others after it in turn: worker ``i``'s
    ``CUDA_VISIBLE_DEVICES``.

    >>> rotated(["0", "1", "2"], 1)
    '1,2,0'
    """
    return ",".join(gpus[i:] + gpus[:i])


def local_gpu_cluster(n_workers, threads_per_worker=1, use_dask_cuda=True, gpus=None):
    """A cluster of ``n_workers`` worker processes on this host, worker ``i`` on GPU ``i``.

    Parameters
    ----------
    n_workers : int
    threads_per_worker : int, default=1
    use_dask_cuda : bool, default=True
        Use dask-cuda's ``LocalCUDACluster`` where it imports.
    gpus : list of str, optional
        The GPUs to place the workers on (default :func:`visible_gpus`).

    Returns
    -------
    distributed.deploy.Cluster
        To be closed by the caller (a context manager).
    """
    gpus = visible_gpus() if gpus is None else [str(g) for g in gpus]
    if n_workers > len(gpus):
        raise ValueError(f"{n_workers} GPU workers asked for, {len(gpus)} GPU(s) visible")
    if use_dask_cuda:
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            pass
        else:
            return LocalCUDACluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                                    CUDA_VISIBLE_DEVICES=",".join(gpus),
                                    dashboard_address=None)
    from distributed import Nanny, Scheduler, SpecCluster

    env = {name: os.environ[name] for name in ("NCCL_NVLS_ENABLE",) if name in os.environ}
    workers = {
        f"gpu-{i}": {"cls": Nanny,
                     "options": {"nthreads": threads_per_worker, "dashboard": False,
                                 # Nanny's default is the host's memory times this worker's
                                 # share of its cores (1/64 of 512 GiB on a 64-core host), far
                                 # below a GPU shard's host copy; a worker per GPU gets an equal
                                 # share of the host's memory instead, as LocalCUDACluster does.
                                 "memory_limit": 1.0 / n_workers,
                                 "env": dict(env, CUDA_VISIBLE_DEVICES=rotated(gpus, i))}}
        for i in range(n_workers)
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    return SpecCluster(workers=workers, scheduler=scheduler)
