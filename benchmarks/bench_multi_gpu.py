"""One fit on several GPUs of one host against the same fit on one: time per sweep, fixed cost,
whether the model is the same, and what the all-reduce of the word-topic counts costs.

Corpus: the NYTimes shape of ``bench_end_to_end.py`` (about 100 M tokens), and with ``--stack 1
7`` the same documents stacked 7 times (about 700 M). For each corpus and K, and for each device
(one GPU, then ``--gpus``)
``GPULatentDirichletAllocation(n_components=K, max_iter=n, random_state=0)`` is fitted from the
outside for the two sweep counts of ``--sweeps`` after a warm-up fit of the whole corpus, so
that::

    time per sweep = (wall(n2) - wall(n1)) / (n2 - n1),  fixed cost = wall(n1) - n1 * that

and the n2-sweep models of one GPU and several are compared element by element. A third fit of
n2 sweeps runs with its stages timed (every GPU drained at each stage's ends): its sweeps n1 + 1
to n2 (sampling, prior updates, averaging) give the stage-timed time per sweep. Both are
reported: the differenced figure carries whatever host work of the fixed cost varies between
fits (memory first touched, pools grown), the stage-timed one only the sweeps.

Then, on a multi-GPU chain loaded with the same corpus (``MultiGpuSampler``), the all-reduce
alone is timed (the chain's own call, repeated, the GPUs drained around it), as is the work of
size V x K that every GPU repeats each sweep (clearing B, the topic totals). From these and
the stage-timed sweep T(2) of the fit on 2 GPUs, the time per sweep on n GPUs is projected as::

    T(n) = (T(2) - R(2) - F) * 2 / n + F + R(2) * 2 (n - 1) / n

R is the all-reduce (a ring moves 2 (n - 1) / n of the array per GPU; 1 at n = 2), F the
repeated V x K work; the sampling and the document-side counts split evenly. A model, printed as
one: it assumes each GPU of a 4- or 8-GPU host has the 2-GPU link bandwidth (NVSwitch).

NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``, set here unless already set).

On a machine with one GPU, ``--shards-on-one-gpu 2`` measures what the multi-GPU chain costs
besides the link: two shards on GPU 0 (B summed by copies there) against the one-GPU chain.

Usage::

    python benchmarks/bench_multi_gpu.py --gpus 0,1 --stack 1 7
    python benchmarks/bench_multi_gpu.py --shards-on-one-gpu 2 --stack 1 --json same_gpu.json

Every point goes to ``--json`` (default ``benchmarks/results/bench_multi_gpu/
bench_multi_gpu.json``), rewritten after each.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from _bench_common import output_path, save_json  # noqa: E402
from bench_end_to_end import nytimes_counts  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda._runtime.device import describe_device, resolve_device  # noqa: E402
from sklearn_gpulda._runtime.stages import recording  # noqa: E402


def fit(X, k, n_sweeps, device):
    lda = GPULatentDirichletAllocation(n_components=k, max_iter=n_sweeps, random_state=0,
                                       device=device)
    tic = time.perf_counter()
    lda.fit(X)
    return time.perf_counter() - tic, lda


def _sync_all(device):
    """Drain the queue of every GPU of ``device`` (stage timings charge GPU work to the stage
    that queued it)."""
    import cupy

    indices = sorted(set(resolve_device(device).indices))
    return lambda: [cupy.cuda.Device(i).synchronize() for i in indices]


def device_point(X, k, sweeps, device):
    """Whole fits on ``device``: time per sweep and fixed cost by differencing two fits, and a
    third fit's stages (queues drained at each stage's ends) for where a sweep's time goes."""
    # The warm-up is the whole corpus, so that the memory pool and the communicator are grown
    # and made before the timed fits (a smaller warm-up left part of that in the first one).
    fit(X, k, 2, device)
    n1, n2 = sweeps
    wall1, _ = fit(X, k, n1, device)
    wall2, lda = fit(X, k, n2, device)
    per_sweep = (wall2 - wall1) / (n2 - n1)
    with recording(sync=_sync_all(device)) as log:
        fit(X, k, n2, device)
    sampling = log.durations.get("sweeps: sampling", [])[n1:]
    stages = {name: sum(runs) for name, runs in log.durations.items()}
    # Sweeps n1 + 1 to n2 of the fit loop as the differencing counts them: sampling, and the
    # prior updates and averaging that fall there (none before sweep n1 with the defaults).
    loop = sum(sampling) + sum(stages.get(name, 0.0) for name in
                               ("sweeps: prior updates", "sweeps: averaging"))
    return dict(device=device, wall_s=[wall1, wall2], per_sweep_ms=per_sweep * 1e3,
                fixed_s=wall1 - n1 * per_sweep,
                sampling_ms_median=float(np.median(sampling)) * 1e3 if sampling else None,
                staged_per_sweep_ms=loop / (n2 - n1) * 1e3,
                stages_s=stages), lda.components_


def _drained(shards):
    for shard in shards:
        shard.synchronize()


def _timed(shards, step, repeats):
    _drained(shards)
    tic = time.perf_counter()
    for _ in range(repeats):
        step()
    _drained(shards)
    return (time.perf_counter() - tic) / repeats * 1e3


def _burnt_in(sampler, X, burn_in):
    sampler.load(tokens(X))
    sampler.init_topics()
    # Early sweeps cost more (a random start spreads each document over many topics).
    for it in range(1, burn_in + 1):
        sampler.sweep(it)
    return sampler


def reduce_costs(X, k, device, repeats, burn_in):
    """Milliseconds of one all-reduce of B, of the V x K work every GPU repeats per sweep, and
    of a whole sweep, on a multi-GPU chain on ``device`` holding ``X``; and which all-reduce
    it used."""
    from sklearn_gpulda.backends.cuda.multi_gpu.sampler import MultiGpuSampler

    sampler = _burnt_in(MultiGpuSampler(k, 1.0 / k, 1.0 / k, 0, device), X, burn_in)
    shards = sampler._active
    parts = [(s.gpu, s.words.B) for s in shards]

    def timed(step):
        return _timed(shards, step, repeats)

    sweep_ms = timed(lambda: sampler.sweep(burn_in + 1))
    reduce_ms = timed(lambda: sampler._reducer.all_reduce(parts))
    lead = shards[0]

    def repeated():
        with lead.device_context():
            lead.words.B.fill(0)
            lead.finish_reduction()

    repeated_ms = timed(repeated)
    name = sampler._reducer.name
    nbytes = int(shards[0].words.B.nbytes)
    sampler.release()
    return dict(all_reduce=name, all_reduce_ms=reduce_ms, repeated_vxk_ms=repeated_ms,
                sweep_ms=sweep_ms, b_bytes=nbytes,
                all_reduce_gb_s=nbytes / reduce_ms / 1e6)


def one_gpu_chain_ms(X, k, repeats, burn_in):
    """Milliseconds of a sweep of the one-GPU chain, timed as :func:`reduce_costs` times the
    multi-GPU one."""
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    sampler = _burnt_in(CudaSparseSampler(k, 1.0 / k, 1.0 / k, 0, resolve_device("cuda:0")), X,
                        burn_in)
    ms = _timed([sampler], lambda: sampler.sweep(burn_in + 1), repeats)
    sampler.release()
    return ms


def same_gpu_overhead(X, k, n_shards, repeats, burn_in):
    """What the multi-GPU chain costs besides the link between GPUs: ``n_shards`` shards on GPU
    0 (their parts of B summed by copies on that GPU) against the one-GPU chain."""
    from sklearn_gpulda._runtime.device import Device

    single = one_gpu_chain_ms(X, k, repeats, burn_in)
    costs = reduce_costs(X, k, Device("cuda", (0,) * n_shards), repeats, burn_in)
    print(f"  K={k}: one-GPU chain {single:.2f} ms/sweep; {n_shards} shards on GPU 0 "
          f"{costs['sweep_ms']:.2f} ms/sweep, of which summing B ({costs['all_reduce']}) "
          f"{costs['all_reduce_ms']:.2f} ms; repeated V x K work {costs['repeated_vxk_ms']:.2f} "
          f"ms per shard", flush=True)
    return dict(K=k, n_shards=n_shards, one_gpu_chain_ms=single, **costs)


def projection(t2, r2, f, n):
    """The module docstring's model of the time per sweep on ``n`` GPUs."""
    return (t2 - r2 - f) * 2 / n + f + r2 * 2 * (n - 1) / n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="0,1", help="the GPUs of the multi-GPU fit (default 0,1)")
    ap.add_argument("--topics", type=int, nargs="+", default=[1000])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--stack", type=int, nargs="+", default=[1, 7])
    ap.add_argument("--sweeps", type=int, nargs=2, default=[5, 45], metavar=("N1", "N2"))
    ap.add_argument("--repeats", type=int, default=10,
                    help="all-reduces and sweeps timed on the chain (default 10)")
    ap.add_argument("--burn-in", type=int, default=10,
                    help="sweeps of the chain before its sweeps are timed (default 10)")
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--shards-on-one-gpu", type=int, default=0, metavar="N",
                    help="instead: N shards on GPU 0 against the one-GPU chain (what the "
                         "multi-GPU chain costs besides the link; runs on a one-GPU machine)")
    ap.add_argument("--json", default=output_path("bench_multi_gpu", "bench_multi_gpu.json"))
    args = ap.parse_args(argv)
    start = time.perf_counter()
    if args.shards_on_one_gpu:
        print(f"# {describe_device('cuda:0')}", flush=True)
        base = nytimes_counts(args.scale)[0]
        results = []
        for stack in args.stack:
            X = sp.vstack([base] * stack).tocsr() if stack > 1 else base
            print(f"\n## NYTimes shape x{args.scale:g} stacked {stack}x: "
                  f"{int(X.sum()) / 1e6:.1f} M tokens", flush=True)
            for k in args.topics:
                results.append(dict(stack=stack, **same_gpu_overhead(
                    X, k, args.shards_on_one_gpu, args.repeats, args.burn_in)))
                save_json(args.json, results)
        return results
    multi = "cuda:" + args.gpus
    n_gpus = len(resolve_device(multi).indices)
    print(f"# {describe_device(multi)}; NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}",
          flush=True)
    base = nytimes_counts(args.scale)[0]
    results = []
    for stack in args.stack:
        X = sp.vstack([base] * stack).tocsr() if stack > 1 else base
        n_tokens = int(X.sum())
        print(f"\n## corpus: NYTimes shape x{args.scale:g}, stacked {stack}x: {X.shape[0]:,} "
              f"documents, V={X.shape[1]:,}, {n_tokens / 1e6:.1f} M tokens", flush=True)
        for k in args.topics:
            if time.perf_counter() - start > args.budget_s:
                print("  budget spent: stopping")
                break
            one, model_one = device_point(X, k, args.sweeps, "cuda:" + args.gpus.split(",")[0])
            several, model_several = device_point(X, k, args.sweeps, multi)
            same = bool(np.array_equal(model_one, model_several))
            del model_one, model_several
            costs = reduce_costs(X, k, resolve_device(multi), args.repeats, args.burn_in)
            # The fit's own sweep (its priors, its sweeps 6-45), not the chain's timed sweep
            # (alpha = beta = 1/K, early sweeps): the projection and the share are then in the
            # units of the one-GPU fit they are compared with.
            t2 = several["staged_per_sweep_ms"]
            point = dict(stack=stack, n_tokens=n_tokens, K=k, n_gpus=n_gpus, one=one,
                         several=several, ratio=several["per_sweep_ms"] / one["per_sweep_ms"],
                         staged_ratio=(several["staged_per_sweep_ms"]
                                       / one["staged_per_sweep_ms"]),
                         same_model=same, **costs,
                         all_reduce_share=costs["all_reduce_ms"] / t2)
            if n_gpus == 2:
                point["projected_ms"] = {n: projection(t2, costs["all_reduce_ms"],
                                                       costs["repeated_vxk_ms"], n)
                                         for n in (2, 4, 8)}
                point["projected_ratio"] = {n: v / one["staged_per_sweep_ms"]
                                            for n, v in point["projected_ms"].items()}
            results.append(point)
            print(f"  K={k}: one GPU {one['per_sweep_ms']:.2f} ms/sweep (fixed "
                  f"{one['fixed_s']:.2f} s); {n_gpus} GPUs {several['per_sweep_ms']:.2f} "
                  f"ms/sweep (fixed {several['fixed_s']:.2f} s): ratio {point['ratio']:.3f} "
                  f"(of the stage-timed fits: {point['staged_ratio']:.3f}), "
                  f"same model: {same}", flush=True)
            for name, point_ in (("one GPU", one), (f"{n_gpus} GPUs", several)):
                print(f"    {name}, a fit of {args.sweeps[1]} sweeps with stages timed: "
                      f"{point_['staged_per_sweep_ms']:.2f} ms/sweep after sweep "
                      f"{args.sweeps[0]} (median sampling {point_['sampling_ms_median']:.2f} "
                      "ms); "
                      + ", ".join(f"{name_} {sec:.2f} s" for name_, sec
                                  in point_["stages_s"].items() if sec >= 0.05), flush=True)
            print(f"    all-reduce ({costs['all_reduce']}) {costs['all_reduce_ms']:.2f} ms = "
                  f"{point['all_reduce_share']:.1%} of the fit's sweep (the chain alone, "
                  f"alpha = beta = 1/K: {costs['sweep_ms']:.2f} ms), "
                  f"{costs['all_reduce_gb_s']:.0f} GB/s of B ({costs['b_bytes'] / 1e6:.0f} MB); "
                  f"repeated V x K work {costs['repeated_vxk_ms']:.2f} ms", flush=True)
            if "projected_ms" in point:
                print("    projected: " + ", ".join(
                    f"{n} GPUs {v:.2f} ms ({point['projected_ratio'][n]:.3f} of one)"
                    for n, v in point["projected_ms"].items()), flush=True)
            save_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
