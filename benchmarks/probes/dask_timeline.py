"""Probe: where a sweep's time goes, Dask GPU workers against the in-process several-GPU chain.

Both arrangements run the same :class:`~sklearn_gpulda.backends.cuda.multi_gpu.shard.
DeviceShard` per GPU; they differ in who drives it (a thread of the fitting process, or the
shard's own worker process), how the parts of B are summed (one process's communicators, or
one communicator across processes) and how prior updates reach the shards. This probe wraps,
in the fitting process and in every worker, the shard's sweep, the sum of B and the averaging's
accumulation, each followed by a wait for its GPU, and on the driver the runs of sweeps and the
prior updates, recording start and end on the host's monotonic clock (shared by the
processes). One fit of each is then split, per GPU and per sweep, into sampling, summing B
(which includes waiting for the slowest peer), accumulating, what the run's end fetches, and
the rest: the host between sweeps, prior updates, round trips.

The waits make the wrapped fit a little slower than a plain one; both arrangements pay them
alike. ``--plain`` also times both without the wrappers, as ``bench_dask.py`` does (the
difference of fits of ``--sweeps2`` sweeps).

    python benchmarks/probes/dask_timeline.py --workers 4 --stack 4 --topics 1000 --sweeps 120
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def install(where="driver"):
    """Wrap the shard's, the sampler's and the driver's methods in this process (idempotent);
    what they record goes to a dict kept on the shard module. Run on the driver and, through
    ``client.run``, on every worker (``where='worker'``: its host-side records are named so)."""
    import time as _time

    from sklearn_gpulda._fitting import batch
    from sklearn_gpulda.backends.cuda.multi_gpu import shard as shard_module
    from sklearn_gpulda.backends.cuda.multi_gpu.sampler import MultiGpuSampler
    from sklearn_gpulda.dask import _nccl_sampler as dask_sampler
    from sklearn_gpulda.dask import _shard as dask_shard

    if getattr(shard_module, "_PROBE", None) is not None:
        return os.getpid()
    state = shard_module._PROBE = {"on": False, "sync": False, "records": [], "events": []}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = visible.split(",") if visible else None

    def physical(chain):
        return int(visible[chain.gpu]) if visible else int(chain.gpu)

    def event(chain):
        with chain.device_context():
            e = chain.cp.cuda.Event()
            e.record()
        return e

    def wrap(cls, name, label, chain_of=None, host_only=False):
        """``chain_of(self)``: the DeviceShard the method runs on (its GPU is waited for, or
        marked with events, unless ``host_only``: then it only names the GPU), or None for a
        driver-side method (timed on the host only)."""
        original = getattr(cls, name)

        def wrapper(self, *args, **kwargs):
            if not state["on"]:
                return original(self, *args, **kwargs)
            chain = chain_of(self) if chain_of is not None else None
            marked = chain is not None and not host_only
            if marked and not state["sync"]:
                e0 = event(chain)
            t0 = _time.perf_counter()
            out = original(self, *args, **kwargs)
            if marked:
                if state["sync"]:
                    chain.synchronize()
                else:
                    state["events"].append((label, physical(chain), e0, event(chain)))
            gpu = physical(chain) if chain is not None else -1
            name = label if chain is not None or where == "driver" else f"{label} (worker)"
            state["records"].append((name, gpu, t0, _time.perf_counter()))
            return out

        setattr(cls, name, wrapper)

    def own(s):
        return s

    def chain(s):
        return s.chain

    DeviceShard = shard_module.DeviceShard
    wrap(DeviceShard, "sweep", "sample", own)
    wrap(DeviceShard, "finish_reduction", "totals", own)
    wrap(DeviceShard, "accumulate_word_topic", "accumulate", own)
    wrap(dask_shard.Shard, "_summed", "sum", chain)
    wrap(dask_shard.Shard, "sweeps_summed", "worker run", chain, host_only=True)
    wrap(dask_shard.Shard, "doc_topic_histogram", "fetch", chain)
    wrap(dask_shard.Shard, "word_topic_histogram", "fetch", chain)
    wrap(MultiGpuSampler, "_reduce", "sum")
    wrap(dask_sampler.NcclDaskSampler, "sweeps", "driver run")
    wrap(batch.PriorUpdates, "update", "prior update")
    return os.getpid()


def switch(on, sync=False):
    """Start (clearing what was recorded; ``sync``: wait for the GPU after each wrapped call
    instead of marking it with events) or stop recording in this process. Stopping returns
    ``(records, device)``: the host records, and the events' times as ``(label, gpu, start,
    end)`` in ms on each GPU's own clock from its first event."""
    from sklearn_gpulda.backends.cuda.multi_gpu import shard as shard_module

    state = shard_module._PROBE
    if on:
        state.update(records=[], events=[], sync=bool(sync), on=True)
        return None
    state["on"] = False
    device, first = [], {}
    for label, gpu, e0, e1 in state["events"]:
        e1.synchronize()
        origin = first.setdefault(gpu, e0)
        import cupy

        device.append((label, gpu, cupy.cuda.get_elapsed_time(origin, e0),
                       cupy.cuda.get_elapsed_time(origin, e1)))
    state["events"] = []
    return list(state["records"]), device


def analyse_device(name, device, n_sweeps):
    """Print one fit's split from the GPUs' own clocks (events, no waits added): per GPU and
    per sweep, sampling, from the sampling's end to the totals taken from the summed B (the
    sum, waiting for peers included), accumulating, the run's end fetches, and the GPU's time
    between them: short gaps (< 5 ms, between the sweeps of a run) and long ones (between
    runs: prior updates, round trips)."""
    by_gpu = {}
    for label, gpu, t0, t1 in device:
        by_gpu.setdefault(gpu, []).append((t0, t1, label))
    print(f"\n== {name}, GPU clocks (ms a sweep):")
    print(f"{'GPU':>4} {'span':>8} {'sample':>8} {'sum':>8} {'accum':>8} {'fetch':>8} "
          f"{'gap<5':>8} {'gap>=5':>8} {'n gap>=5':>8}")
    for gpu in sorted(by_gpu):
        marks = sorted(by_gpu[gpu])
        span = marks[-1][1] - marks[0][0]
        total = {"sample": 0.0, "sum": 0.0, "accumulate": 0.0, "fetch": 0.0}
        gaps = []
        end = None
        for t0, t1, label in marks:
            if label == "sum":
                continue  # the Dask shard's sum encloses the totals: counted by them
            if label == "totals":
                # From the sampling's end (the sum's start) to the totals' end; the initial
                # topics' sum has no sampling before it.
                total["sum"] += 0.0 if end is None else t1 - end
                end = t1
                continue
            if end is not None:
                gaps.append(t0 - end)
            total[label] += t1 - t0
            end = t1
        gaps = np.asarray(gaps)
        small, large = gaps[gaps < 5.0], gaps[gaps >= 5.0]
        print(f"{gpu:>4} {span / n_sweeps:>8.2f} " + " ".join(
            f"{total[k] / n_sweeps:>8.2f}" for k in ("sample", "sum", "accumulate", "fetch"))
            + f" {small.sum() / n_sweeps:>8.2f} {large.sum() / n_sweeps:>8.2f} "
              f"{large.size:>8d}")


def analyse(name, records, n_sweeps, wall, table=True):
    """Print one fit's split on the host's clock (see the module's docstring): per GPU with
    ``table`` (the GPU waited for after each wrapped call), and the driver's runs and prior
    updates."""
    by_gpu = {}
    shared = {}
    for label, gpu, t0, t1 in records:
        (by_gpu.setdefault(gpu, {}) if gpu >= 0 else shared).setdefault(label, []).append(
            (t0, t1))
    samples = [t for g in by_gpu.values() for t in g.get("sample", [])]
    start = min(t0 for t0, _ in samples)
    end = max(t1 for label, gpu, _, t1 in records if gpu >= 0)
    span = end - start
    print(f"\n== {name}: wall {wall:.2f} s for {n_sweeps} sweeps; sweeps' span {span:.2f} s "
          f"= {span / n_sweeps * 1e3:.2f} ms a sweep")
    labels = ("sample", "sum", "accumulate", "fetch")
    if not table:
        by_gpu = {gpu: {k: v for k, v in g.items() if k == "worker run"}
                  for gpu, g in by_gpu.items()}
    else:
        print(f"{'GPU':>4} " + " ".join(f"{lab:>11}" for lab in labels)
              + f" {'rest':>9} {'gaps<5ms':>9} {'gaps>=5ms':>9}   (ms a sweep; sample's "
              "min-max)")
    shared_sum = sum(t1 - t0 for t0, t1 in shared.get("sum", []))
    for gpu in sorted(by_gpu) if table else ():
        g = by_gpu[gpu]
        totals = {lab: sum(t1 - t0 for t0, t1 in g.get(lab, [])) for lab in labels}
        if "sum" not in g:
            totals["sum"] = shared_sum
        # The GPU's own timeline: the gaps between one activity's end and the next's start.
        spans = sorted(g.get("sample", []) + g.get("sum", []) + shared.get("sum", [])
                       + g.get("accumulate", []) + g.get("fetch", []))
        gaps = np.asarray([spans[i + 1][0] - spans[i][1] for i in range(len(spans) - 1)])
        small, large = gaps[gaps < 5e-3].sum(), gaps[gaps >= 5e-3].sum()
        rest = span - sum(totals.values())
        per = {k: v / n_sweeps * 1e3 for k, v in totals.items()}
        each = np.asarray([t1 - t0 for t0, t1 in g.get("sample", [])]) * 1e3
        print(f"{gpu:>4} " + " ".join(f"{per[lab]:>11.2f}" for lab in labels)
              + f" {rest / n_sweeps * 1e3:>9.2f} {small / n_sweeps * 1e3:>9.2f} "
              f"{large / n_sweeps * 1e3:>9.2f}   ({each.min():.1f}-{each.max():.1f})")
    # The slowest GPU's sampling, sweep by sweep: what a sum waits for.
    ordered = [[t1 - t0 for t0, t1 in sorted(g.get("sample", []))] for g in by_gpu.values()]
    if table and ordered and all(len(o) == len(ordered[0]) for o in ordered):
        slowest = np.max(np.asarray(ordered), axis=0).sum()
        print(f"slowest GPU's sampling, summed over sweeps: {slowest / n_sweeps * 1e3:.2f} ms a "
              "sweep")
    for label in ("prior update", "prior update (worker)", "driver run"):
        if label in shared:
            total = sum(t1 - t0 for t0, t1 in shared[label])
            print(f"driver, {label}: {len(shared[label])} calls, {total:.3f} s "
                  f"({total / n_sweeps * 1e3:.2f} ms a sweep)")
    if "driver run" in shared and any("worker run" in g for g in by_gpu.values()):
        worker = {}
        for gpu, g in by_gpu.items():
            for i, (t0, t1) in enumerate(sorted(g.get("worker run", []))):
                worker.setdefault(i, []).append((t0, t1))
        lag = []
        for i, (d0, d1) in enumerate(sorted(shared["driver run"])):
            if i in worker:
                first = min(t0 for t0, _ in worker[i])
                last = max(t1 for _, t1 in worker[i])
                skew = max(t0 for t0, _ in worker[i]) - first
                lag.append((first - d0, d1 - last, skew))
        lag = np.asarray(lag) * 1e3
        print(f"driver run to first worker's start: median {np.median(lag[:, 0]):.2f} ms, "
              f"max {lag[:, 0].max():.2f}; last worker's end to the driver: median "
              f"{np.median(lag[:, 1]):.2f} ms, max {lag[:, 1].max():.2f}; workers' starts "
              f"spread over a median {np.median(lag[:, 2]):.2f} ms ({len(lag)} runs)")


def _profiled(name, fit, top=30):
    """cProfile of one fit on the driver: the package's functions by cumulative time (a
    shard's thread in the in-process chain is not seen; the driver's prior updates are)."""
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()
    tic = time.perf_counter()
    profile.runcall(fit)
    wall = time.perf_counter() - tic
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats("sklearn_gpulda", top)
    body = text.getvalue()
    print(f"\n-- profile of one fit, {name}: {wall:.2f} s; the package's functions by "
          "cumulative time --")
    print(body[body.find("ncalls"):], flush=True)


def main(argv=None):
    from bench_dask import _scattered, gpu_probe_arguments, stacked_nytimes

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu_probe_arguments(p, sweeps=120)
    p.add_argument("--sync", action="store_true",
                   help="wait for the GPU after each wrapped call (host clock) instead of "
                        "marking the calls with events (GPU clocks)")
    p.add_argument("--plain", action="store_true",
                   help="also time both without the wrappers (fits of --sweeps2 sweeps)")
    p.add_argument("--sweeps2", type=int, nargs=2, default=(20, 120))
    p.add_argument("--profile", action="store_true",
                   help="also profile one fit of each on the driver (cProfile, by own time)")
    p.add_argument("--dask-config", nargs="*", default=[],
                   help="KEY=VALUE Dask settings the workers start with (a second cluster "
                        "each, after the first with none), e.g. "
                        "distributed.worker.profile.enabled=False")
    args = p.parse_args(argv)

    import dask
    from distributed import Client

    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda._runtime.device import describe_device
    from sklearn_gpulda.dask import LatentDirichletAllocation
    from sklearn_gpulda.dask._cluster import local_gpu_cluster

    tic = time.perf_counter()
    X = stacked_nytimes(args.scale, args.stack)
    n = args.workers
    print(f"# {describe_device('cuda:0')}; {n} GPUs; NYTimes shape x{args.scale:g} stacked "
          f"{args.stack}x: {X.sum() / 1e6:.1f} M tokens, V = {X.shape[1]:,}, K = {args.topics}, "
          f"defaults (corpus in {time.perf_counter() - tic:.0f} s)", flush=True)
    params = dict(n_components=args.topics, random_state=0)
    devices = "cuda:" + ",".join(map(str, range(n)))

    def in_process(sweeps):
        return GPULatentDirichletAllocation(**params, max_iter=sweeps, device=devices)

    def timed(make, data, sweeps):
        lda = make(sweeps)
        t = time.perf_counter()
        lda.fit(data)
        return time.perf_counter() - t, lda.components_

    def plain(name, make, data):
        n1, n2 = args.sweeps2
        w1, _ = timed(make, data, n1)
        w2, _ = timed(make, data, n2)
        print(f"{name}, no wrappers: {(w2 - w1) / (n2 - n1) * 1e3:.2f} ms a sweep "
              f"(fits of {n1} and {n2} sweeps)", flush=True)

    def report(label, records, device, wall):
        analyse(label, records, args.sweeps, wall, table=args.sync)
        if not args.sync:
            analyse_device(label, device, args.sweeps)

    install()
    timed(in_process, X, args.sweeps)  # warm-up
    switch(True, args.sync)
    wall, reference = timed(in_process, X, args.sweeps)
    report(f"in-process, {n} GPUs", *switch(False), wall)
    if args.plain:
        plain(f"in-process, {n} GPUs", in_process, X)
    if args.profile:
        _profiled(f"in-process, {n} GPUs", lambda: in_process(args.sweeps).fit(X))
    for gpu in range(n):
        import cupy

        with cupy.cuda.Device(gpu):
            cupy.get_default_memory_pool().free_all_blocks()

    settings = [{}] + [dict([kv.split("=", 1)]) for kv in args.dask_config]
    for extra in settings:
        config = {k: {"False": False, "True": True}.get(v, v) for k, v in extra.items()}
        with dask.config.set(config), local_gpu_cluster(n) as cluster, Client(cluster) as client:
            Xd = _scattered(client, X, n)
            client.run(install, "worker")

            def dask_fit(sweeps):
                return LatentDirichletAllocation(client=client, **params, max_iter=sweeps,
                                                 device="cuda")

            timed(dask_fit, Xd, args.sweeps)  # warm-up
            client.run(switch, True, args.sync)
            switch(True, args.sync)
            wall, components = timed(dask_fit, Xd, args.sweeps)
            records, device = switch(False)
            for worker_records, worker_device in client.run(switch, False).values():
                records += worker_records
                device += worker_device
            label = f"Dask, {n} GPU workers" + (f", {extra}" if extra else "")
            report(label, records, device, wall)
            print(f"same model as in-process: {bool(np.array_equal(components, reference))}",
                  flush=True)
            if args.plain:
                plain(label, dask_fit, Xd)
            if args.profile:
                _profiled(label, lambda: dask_fit(args.sweeps).fit(Xd))


if __name__ == "__main__":
    main()
