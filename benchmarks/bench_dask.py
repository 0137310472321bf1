"""What a sweep costs on a Dask cluster, and how much of it is the reduction.

For each ``--workers`` value the script starts a ``LocalCluster`` of that many worker processes
(``--threads`` each; with ``--cuda-cluster``, dask-cuda's ``LocalCUDACluster``, one worker per
GPU), fits ``sklearn_gpulda.dask.LatentDirichletAllocation`` on ``--device`` for ``--sweeps``
sweeps at fixed priors without averaging, and reports the mean time per sweep (after the first),
the part of it spent in the reduction (the client summing the shards' word-topic parts and sending
the total back to every shard, timed around ``DaskSampler._reduce``, which excludes the shards'
sampling), the bytes sent up and down per sweep, and whether ``components_`` equals a
single-process fit's on the same device, whose time per sweep is printed first.

Usage::

    python benchmarks/bench_dask.py --workers 1 2 --topics 1000 --scale 0.01
    python benchmarks/bench_dask.py --data docword.kos.txt.gz --topics 100 --workers 1 2 3
    python benchmarks/bench_dask.py --device cuda --cuda-cluster --workers 1 --topics 1000 --scale 1

The corpus is a NYTimes-shaped sample (V = 102,660, ``--scale`` of its 300,000 documents) unless
``--data`` names a UCI file.
"""

import argparse
import time

import numpy as np

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import load_uci_bow, make_lda_corpus


def _corpus(args):
    if args.data:
        return load_uci_bow(args.data).data
    return make_lda_corpus(shape="nytimes", scale=args.scale, random_state=0).data


class _ReduceClock:
    """Wraps DaskSampler's reduction: seconds and bytes per call."""

    def __init__(self, sampler_cls):
        self.cls = sampler_cls
        self.original = sampler_cls._reduce
        self.seconds, self.up, self.down = [], [], []
        clock = self

        def timed(sampler, parts):
            tic = time.perf_counter()
            clock.original(sampler, parts)
            clock.seconds.append(time.perf_counter() - tic)
            clock.up.append(sum(c.nbytes + v.nbytes for c, v in parts))
            clock.down.append((sampler._cells.nbytes + sampler._counts.nbytes)
                              * len(sampler.shards))

        sampler_cls._reduce = timed

    def restore(self):
        self.cls._reduce = self.original


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    p.add_argument("--threads", type=int, default=1, help="threads per worker (n_jobs)")
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--sweeps", type=int, default=6)
    p.add_argument("--data")
    p.add_argument("--scale", type=float, default=0.01)
    p.add_argument("--no-reference", action="store_true",
                   help="skip the single-process fit (and the identity check)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--cuda-cluster", action="store_true",
                   help="dask-cuda's LocalCUDACluster (one worker per GPU) instead of LocalCluster")
    args = p.parse_args(argv)

    from distributed import Client, LocalCluster

    from sklearn_gpulda.dask import LatentDirichletAllocation
    from sklearn_gpulda.dask._sampler import DaskSampler

    X = _corpus(args)
    k = args.topics
    params = dict(n_components=k, max_iter=args.sweeps, random_state=0, device=args.device,
                  doc_topic_prior=1.0 / k, topic_word_prior=0.01, n_averaged_sweeps=0,
                  n_jobs=args.threads)
    n_tokens = float(X.sum())
    print(f"{X.shape[0]} documents, V = {X.shape[1]}, {n_tokens:,.0f} tokens, K = {k}, "
          f"{args.sweeps} sweeps on {args.device}, {args.threads} thread(s) per worker")
    reference = None
    if not args.no_reference:
        GPULatentDirichletAllocation(**dict(params, max_iter=1)).fit(X)  # kernels loaded
        ends = []

        def sweep_end(iteration, info):
            if args.device == "cuda":  # the GPU runs ahead of the host: wait for the sweep
                import cupy

                cupy.cuda.Device().synchronize()
            ends.append(time.perf_counter())

        tic = time.perf_counter()
        reference = GPULatentDirichletAllocation(**params).fit(X, callback=sweep_end)
        print(f"one process: {time.perf_counter() - tic:.2f} s for the fit, "
              f"{np.diff(ends).mean() * 1e3:.1f} ms per sweep")
    print(f"{'workers':>7} {'ms/sweep':>9} {'reduce ms':>9} {'share':>6} {'MB up':>7} "
          f"{'MB down':>8}  same model")
    for n in args.workers:
        if args.cuda_cluster:
            from dask_cuda import LocalCUDACluster

            cluster = LocalCUDACluster(n_workers=n, threads_per_worker=args.threads,
                                       dashboard_address=None)
        else:
            cluster = LocalCluster(n_workers=n, threads_per_worker=args.threads, processes=True,
                                   dashboard_address=None)
        with cluster, Client(cluster) as client:
            sweep_ends = []
            clock = _ReduceClock(DaskSampler)
            try:
                model = LatentDirichletAllocation(client=client, **params).fit(
                    X, callback=lambda i, info: sweep_ends.append(time.perf_counter()))
            finally:
                clock.restore()
        per_sweep = np.diff(sweep_ends).mean() if len(sweep_ends) > 1 else float("nan")
        # The first reduction belongs to the initial topics; the rest to sweeps 1.. n.
        reduce_s = float(np.mean(clock.seconds[2:])) if len(clock.seconds) > 2 else float("nan")
        same = "-" if reference is None else np.array_equal(model.components_,
                                                             reference.components_)
        print(f"{n:>7} {per_sweep * 1e3:>9.1f} {reduce_s * 1e3:>9.1f} "
              f"{reduce_s / per_sweep:>6.0%} {np.mean(clock.up[1:]) / 1e6:>7.1f} "
              f"{np.mean(clock.down[1:]) / 1e6:>8.1f}  {same}")


if __name__ == "__main__":
    main()
