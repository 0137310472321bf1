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

With ``--gpu-compare`` the script instead compares, at the estimator's defaults (prior learning,
averaging), on the NYTimes shape of ``bench_multi_gpu.py`` stacked ``--stack`` times (4: about
400 M tokens):

- one process on one GPU (``device='cuda:0'``),
- the in-process several-GPU chain (``device='cuda:0,..,n-1'``) for each ``--workers`` n,
- n Dask GPU workers, one process per GPU (:func:`sklearn_gpulda.dask._cluster.
  local_gpu_cluster`: dask-cuda where installed, else a nanny per GPU), the corpus scattered to
  them once as a Dask array of one row block per worker; the sweeps run on the workers, B summed
  over NCCL every sweep.

Each is fitted for the two sweep counts of ``--sweeps`` after a warm-up fit, and::

    ms per sweep = (wall(n2) - wall(n1)) / (n2 - n1)

is printed with whether ``components_`` equals the one-GPU fit's, the bytes a worker sends per
sweep in NCCL's ring all-reduce of B (``2 (n - 1) / n * V * K * 4``), and, from one more Dask
fit with the first shard counting them (the chain is the same whatever the workers), the cells
of B each sweep changed, as a share of ``V * K``, with what sending only them would take
(8 bytes a cell: its id and its change), for the last sweeps. ``--json`` keeps every figure.

    python benchmarks/bench_dask.py --gpu-compare --workers 2 4 --stack 4 --sweeps2 10 30
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import numpy as np  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.datasets import load_uci_bow, make_lda_corpus  # noqa: E402


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


# -- --gpu-compare: one GPU, the in-process several-GPU chain, Dask GPU workers ----------------
def _wall(make, X, n_sweeps):
    """Wall seconds of one fit of ``n_sweeps`` sweeps from the outside, and the model."""
    lda = make(n_sweeps)
    tic = time.perf_counter()
    lda.fit(X)
    return time.perf_counter() - tic, lda


def _per_sweep(make, X, sweeps):
    """A warm-up fit, then fits of n1 and n2 sweeps: ms per sweep by differencing, the fixed
    cost, and the n2 fit's components. The warm-up runs n2 sweeps, so that everything the timed
    fits run (a prior update and its first-use costs in a fresh worker included) has run once;
    n1 and n2 a multiple of the prior updates' 10 sweeps apart keep their share per sweep."""
    n1, n2 = sweeps
    _wall(make, X, n2)
    wall1, _ = _wall(make, X, n1)
    wall2, lda = _wall(make, X, n2)
    per_sweep = (wall2 - wall1) / (n2 - n1)
    return dict(ms_per_sweep=per_sweep * 1e3, fixed_s=wall1 - n1 * per_sweep,
                wall_s=[wall1, wall2]), lda.components_


def stacked_nytimes(scale, stack):
    """The NYTimes shape at ``scale`` (``bench_end_to_end.nytimes_counts``) stacked ``stack``
    times, as a CSR matrix: the corpus of the several-GPU comparisons here and in the Dask
    probes."""
    import scipy.sparse as sp

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_end_to_end import nytimes_counts

    base = nytimes_counts(scale)[0]
    return sp.vstack([base] * stack).tocsr() if stack > 1 else base


def gpu_probe_arguments(parser, sweeps):
    """The Dask probes' corpus and fit arguments: ``--workers`` (one per GPU), ``--stack``,
    ``--scale``, ``--topics``, ``--sweeps``."""
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--stack", type=int, default=4)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--sweeps", type=int, default=sweeps)


def _scattered(client, X, n_workers):
    """``X`` as a Dask array of one row block per worker, the blocks scattered once (each fit
    then reads them where they are instead of sending the corpus again)."""
    import dask
    import dask.array as da

    cuts = np.searchsorted(X.indptr, np.linspace(0, X.indptr[-1], n_workers + 1)[1:-1])
    cuts = np.unique(np.concatenate(([0], cuts, [X.shape[0]])))
    parts = [X[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    futures = client.scatter(parts, hash=False)
    blocks = [da.from_delayed(dask.delayed(f), shape=p.shape, dtype=p.dtype, meta=p[:0])
              for f, p in zip(futures, parts)]
    return da.concatenate(blocks, axis=0)


def _changes(counts, cells, last=5):
    """The changed cells of the last ``last`` sweeps, as a share of ``cells``."""
    tail = np.asarray(counts[-last:], dtype=np.float64)
    return float(tail.mean() / cells) if tail.size else float("nan")


def gpu_compare(args):
    """The ``--gpu-compare`` table (see the module's docstring)."""
    from distributed import Client

    from sklearn_gpulda._runtime.device import describe_device
    from sklearn_gpulda.dask import LatentDirichletAllocation
    from sklearn_gpulda.dask._cluster import local_gpu_cluster
    from sklearn_gpulda.dask._nccl_sampler import NcclDaskSampler

    tic = time.perf_counter()
    X = stacked_nytimes(args.scale, args.stack)
    k = args.topics
    v = X.shape[1]
    b_bytes = 4 * v * k
    print(f"# {describe_device('cuda:0')}; NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}")
    print(f"NYTimes shape x{args.scale:g} stacked {args.stack}x: {X.shape[0]:,} documents, "
          f"V = {v:,}, {X.sum() / 1e6:.1f} M tokens, K = {k}, defaults; sweeps "
          f"{args.sweeps[0]} and {args.sweeps[1]} (corpus made in "
          f"{time.perf_counter() - tic:.1f} s); B = {b_bytes / 1e6:.0f} MB float32", flush=True)
    params = dict(n_components=k, random_state=0)
    results = dict(n_tokens=float(X.sum()), n_words=v, K=k, sweeps=args.sweeps, points=[])

    def report(name, n, point, same, sends=None):
        point.update(name=name, n=n, same_model=same, sends_bytes=sends)
        results["points"].append(point)
        one = results["points"][0]["ms_per_sweep"]
        extra = "" if sends is None else f", sends {sends / 1e6:.0f} MB/sweep"
        print(f"{name:<24} {point['ms_per_sweep']:>9.2f} ms/sweep "
              f"({point['ms_per_sweep'] / one:.3f}"
              f" of one GPU), fixed {point['fixed_s']:.1f} s, same model: {same}{extra}",
              flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))

    def local(device):
        return lambda n: GPULatentDirichletAllocation(**params, max_iter=n, device=device)

    one, reference = _per_sweep(local("cuda:0"), X, args.sweeps)
    report("one process, cuda:0", 1, one, True)
    if args.rounds:
        return _paired_rounds(args, X, local, params, reference, results)
    for n in args.workers:
        point, comp = _per_sweep(local("cuda:" + ",".join(map(str, range(n)))), X, args.sweeps)
        report(f"in-process, {n} GPUs", n, point, bool(np.array_equal(comp, reference)))
    _free_pools(max(args.workers))
    measured = False
    for n in args.workers:
        with local_gpu_cluster(n) as cluster, Client(cluster) as client:
            Xd = _scattered(client, X, n)

            def dask_fit(n_sweeps, client=client):
                return LatentDirichletAllocation(client=client, **params, max_iter=n_sweeps,
                                                 device="cuda")

            for exchange in args.exchange:
                NcclDaskSampler.exchange = exchange
                try:
                    point, comp = _per_sweep(dask_fit, Xd, args.sweeps)
                    sends = (2 * (n - 1) / n * b_bytes if exchange == "ring"
                             else _sent_per_sweep(NcclDaskSampler, dask_fit, Xd, args.sweeps[1]))
                finally:
                    NcclDaskSampler.exchange = None
                report(f"Dask, {n} GPU workers, {exchange}", n, point,
                       bool(np.array_equal(comp, reference)), sends=sends)
            if args.profile:
                _profiled(f"Dask, {n} GPU workers", lambda: dask_fit(args.sweeps[1]).fit(Xd))
            if not measured:  # the same chain whatever the workers: once is enough
                log = NcclDaskSampler.change_log = []
                try:
                    dask_fit(args.sweeps[1]).fit(Xd)
                finally:
                    NcclDaskSampler.change_log = None
                share = _changes(log, v * k)
                results["changed_cells"] = [int(c) for c in log]
                results["changed_share_last5"] = share
                ring = 2 * (n - 1) / n * b_bytes
                print(f"changed cells of B per sweep (sweeps 1..{len(log)}): "
                      f"{', '.join(f'{c / (v * k):.2%}' for c in log)}", flush=True)
                print(f"  last 5 sweeps: {share:.2%} of V K; as (cell, change) pairs "
                      f"{8 * share * v * k / 1e6:.0f} MB against the ring's {ring / 1e6:.0f} MB "
                      f"for {n} workers ({ring / max(8 * share * v * k, 1):.2f}x)", flush=True)
                measured = True
    if args.profile:
        _profiled(f"in-process, {max(args.workers)} GPUs", lambda: local(
            "cuda:" + ",".join(map(str, range(max(args.workers)))))(args.sweeps[1]).fit(X))
    if args.again:
        again, _ = _per_sweep(local("cuda:0"), X, args.sweeps)
        report("one process, cuda:0, again", 1, again, True)
    return results


def _free_pools(n_gpus):
    """Give back what this process's memory pools keep on the first ``n_gpus`` GPUs (the Dask
    workers' GPUs are this process's too)."""
    import cupy

    for gpu in range(n_gpus):
        with cupy.cuda.Device(gpu):
            cupy.get_default_memory_pool().free_all_blocks()


def _paired_rounds(args, X, local, params, reference, results):
    """``--rounds R``: the in-process chain on n GPUs and n Dask GPU workers (n the largest
    ``--workers``), timed in turn R times on the same cluster, each round's order the reverse
    of the last's, so that drift of the host or the GPUs weighs on both alike. Prints each
    round's ms per sweep of both and their ratio, then the median ratio: the Dask workers'
    overhead over the in-process chain."""
    from distributed import Client

    from sklearn_gpulda.dask import LatentDirichletAllocation
    from sklearn_gpulda.dask._cluster import local_gpu_cluster

    n = max(args.workers)
    n1, n2 = args.sweeps
    in_process = local("cuda:" + ",".join(map(str, range(n))))
    _wall(in_process, X, n2)  # warm-up
    _free_pools(n)
    rounds = results["rounds"] = []
    with local_gpu_cluster(n) as cluster, Client(cluster) as client:
        Xd = _scattered(client, X, n)

        def dask_fit(n_sweeps):
            return LatentDirichletAllocation(client=client, **params, max_iter=n_sweeps,
                                             device="cuda")

        _wall(dask_fit, Xd, n2)  # warm-up
        same = True

        def measure(make, data):
            nonlocal same
            wall1, _ = _wall(make, data, n1)
            wall2, lda = _wall(make, data, n2)
            same = same and bool(np.array_equal(lda.components_, reference))
            return (wall2 - wall1) / (n2 - n1) * 1e3

        for r in range(args.rounds):
            order = ["in-process", "dask"] if r % 2 == 0 else ["dask", "in-process"]
            ms = {}
            for name in order:
                if name == "dask":
                    ms[name] = measure(dask_fit, Xd)
                else:
                    ms[name] = measure(in_process, X)
                    _free_pools(n)
            ratio = ms["dask"] / ms["in-process"]
            rounds.append(dict(order=order, ms_per_sweep=ms, ratio=ratio))
            print(f"round {r + 1} ({' then '.join(order)}): in-process, {n} GPUs "
                  f"{ms['in-process']:.2f} ms/sweep; Dask, {n} GPU workers {ms['dask']:.2f}; "
                  f"Dask / in-process {ratio:.3f}", flush=True)
        if args.profile:
            _profiled(f"Dask, {n} GPU workers", lambda: dask_fit(n2).fit(Xd))
            _profiled(f"in-process, {n} GPUs", lambda: in_process(n2).fit(X))
    ratios = sorted(r["ratio"] for r in rounds)
    results["median_ratio"] = float(np.median(ratios))
    results["same_model"] = same
    print(f"median Dask / in-process over {len(ratios)} rounds: {np.median(ratios):.3f} "
          f"(range {ratios[0]:.3f}-{ratios[-1]:.3f}); every model the one-GPU model: {same}",
          flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


def _sent_per_sweep(sampler_cls, dask_fit, X, n_sweeps, last=5):
    """Bytes the busiest shard sent per sweep over the last ``last`` sweeps of one more fit
    under the 'changes' exchange (each shard's own record, read after every run)."""
    sent = []
    real = sampler_cls.sweeps

    def sweeps(self, first, end, accumulate_from=None):
        real(self, first, end, accumulate_from)
        sent[:] = [record["sent"] for record in self.exchange_records()]

    sampler_cls.sweeps = sweeps
    try:
        dask_fit(n_sweeps).fit(X)
    finally:
        sampler_cls.sweeps = real
    per_shard = np.asarray(sent, dtype=np.float64)[:, -last:]
    print(f"  'changes': bytes sent per sweep by each shard, last {last} sweeps: "
          f"{np.round(per_shard / 1e6, 2).tolist()} MB", flush=True)
    return float(per_shard.mean(axis=1).max())


def _profiled(name, fit, top=22):
    """cProfile of one fit in this (the driver's) process: where its wall time goes."""
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()
    tic = time.perf_counter()
    profile.runcall(fit)
    wall = time.perf_counter() - tic
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(top)
    body = text.getvalue()
    print(f"-- profile of one fit, {name}: {wall:.2f} s; functions by own time --")
    print(body[body.find("ncalls"):], flush=True)


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
    p.add_argument("--gpu-compare", action="store_true",
                   help="one GPU, the in-process several-GPU chain and Dask GPU workers at the "
                        "defaults (see the module's docstring)")
    p.add_argument("--stack", type=int, default=4,
                   help="--gpu-compare: copies of the NYTimes shape stacked (default 4)")
    p.add_argument("--sweeps2", dest="sweep_pair", type=int, nargs=2, default=[10, 30],
                   metavar=("N1", "N2"), help="--gpu-compare: the two fits' sweeps")
    p.add_argument("--json", help="--gpu-compare: write the figures here")
    p.add_argument("--exchange", nargs="+", default=["ring"], choices=["ring", "changes"],
                   help="--gpu-compare: how the Dask GPU workers sum B, each measured in turn "
                        "(default ring, the one-host choice)")
    p.add_argument("--again", action="store_true",
                   help="--gpu-compare: time one GPU again at the end (its drift)")
    p.add_argument("--rounds", type=int, default=0,
                   help="--gpu-compare: instead of the table, time the in-process chain and "
                        "the Dask workers (the largest --workers) in turn this many times")
    p.add_argument("--nccl-debug", action="store_true",
                   help="--gpu-compare: NCCL_DEBUG=INFO (subsystems INIT and P2P) in this process "
                        "and the workers it starts: NCCL prints the transport each pair of ranks "
                        "uses (P2P over NVLink, through CUDA IPC, or shared host memory)")
    p.add_argument("--profile", action="store_true",
                   help="--gpu-compare: also profile one fit of N2 sweeps on the driver, Dask "
                        "workers and the in-process several-GPU chain")
    args = p.parse_args(argv)
    if args.gpu_compare:
        if args.nccl_debug:
            # Before any communicator or worker exists: both read it when they start.
            os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,P2P")
        if args.scale == 0.01:
            args.scale = 1.0  # the whole NYTimes shape unless asked otherwise
        args.sweeps = args.sweep_pair
        return gpu_compare(args)

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
