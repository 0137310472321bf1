"""What users run: small corpora at small K, timed from the outside, through the public API.

For each corpus of ``--corpora`` and each K of ``--topics``,
``GPULatentDirichletAllocation(n_components=K, random_state=0)`` with every other parameter at
its default is fitted on host (SciPy) counts after a warm-up fit of the same size (kernels
loaded, CuPy's own kernels compiled), and timed with a wall clock:

    per sweep        = (wall(max_iter=n2) - wall(max_iter=n1)) / (n2 - n1)
    default fit      = wall(fit with max_iter left at its default)

With ``--count`` (it needs PyTorch, whose profiler reads CUPTI) the two fits of n1 and n2 sweeps
run again under ``torch.profiler``, and the differences give per sweep: the kernels the GPU ran
(every library's: ours, CuPy's, cuRAND's), the host synchronisations (``cudaStreamSynchronize``,
``cudaDeviceSynchronize``, ``cudaEventSynchronize`` and the blocking ``cudaMemcpy`` calls CuPy's
``get`` makes) and the GPU time of each kernel.

They also give the host's queueing calls per sweep (``launches``: kernel launches, graph
launches and memsets, each a call the host makes into the CUDA API).

``--algorithm`` fits every point with that engine (default: the estimator's ``'auto'``); each row
names the engine the fit took.

``--graphs on`` or ``off`` replays the sweeps (of either engine) as CUDA graphs for every fit
of the run, or never (``SKLEARN_GPULDA_CUDA_GRAPHS=1`` or ``0``,
``sklearn_gpulda/backends/cuda/sparse/sweep_graph.py``); the default, ``auto``, leaves the
choice to the package (chains of at most each engine's ``AUTO_MAX_TOKENS`` tokens). Each row
reports the graph replays per sweep of its timed fits. Run the same command with each, on the
same machine, to compare.

``--grid`` times ``GridSearchCV`` over 10 values of ``n_components`` with 5 folds on the first
corpus given. ``--first-fit`` runs, in fresh processes with an empty CuPy kernel cache
(``CUPY_CACHE_DIR`` set to a new folder), a first and a second fit of KJV at K = 20 (and of the
NYTimes shape at ``--nytimes-scale`` at K = 1,000), and lists the kernels CuPy compiled; each
twice, once with the CUDA context made (and timed) before the first fit, and
``--profile-first`` prints where the first fit's time goes.

Corpora: ``kjv`` (the bundled chapters, 308 k tokens), ``kjvN`` (its first N chapters, e.g.
``kjv40``), ``kos``, ``nips``, ``20news`` (found as ``benchmarks/_peer_corpora.py`` finds
them: carry ``.carry/data``) and ``nytimes`` (the synthetic shape at ``--nytimes-scale``). A
corpus whose files are missing is skipped with a message.

Usage::

    python benchmarks/bench_users.py
    python benchmarks/bench_users.py --corpora kjv kjv40 --topics 20 --count
    python benchmarks/bench_users.py --corpora kjv kjv40 --topics 20 --count --graphs off
    python benchmarks/bench_users.py --corpora 20news --topics 20 --grid --first-fit
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from _bench_common import output_path, save_json  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.backends.cuda.sparse import sweep_graph  # noqa: E402

SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
              "cudaMemcpy", "cudaMemcpy2D", "cuStreamSynchronize", "cuCtxSynchronize",
              "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2")
#: Host calls that queue work on the GPU: kernel launches (CuPy's RawKernel goes through the
#: driver's cuLaunchKernel), graph launches and memsets.
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "cudaGraphLaunch", "cuGraphLaunch", "cudaMemsetAsync", "cuMemsetD8Async",
                "cuMemsetD32Async")
GRID_K = [5, 10, 15, 20, 25, 30, 35, 40, 45, 50]


def load(name, nytimes_scale):
    """Training counts of a corpus (CSR, int64), or None with a message when it is missing."""
    if name == "kjv" or (name.startswith("kjv") and name[3:].isdigit()):
        from sklearn_gpulda.datasets import load_kjv_chapters

        X = load_kjv_chapters().data
        return X[:int(name[3:])] if name != "kjv" else X
    from _peer_corpora import CorpusUnavailable, load_corpus

    try:
        X, _, _ = load_corpus(name, test_fraction=0.1, nytimes_scale=nytimes_scale)
    except CorpusUnavailable as exc:
        print(f"skipped: {exc}", flush=True)
        return None
    return X


#: Extra estimator parameters of every fit (``--algorithm``); empty: the defaults.
FIT_PARAMS = {}


def fit_seconds(X, k, device, **params):
    lda = GPULatentDirichletAllocation(n_components=k, random_state=0, device=device,
                                       **FIT_PARAMS, **params)
    tic = time.perf_counter()
    lda.fit(X)
    return time.perf_counter() - tic, lda


def profiled(X, k, device, n):
    """(kernels, syncs, GPU ms by kernel name, host launches) of a fit of ``n`` sweeps, from
    torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.init()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fit_seconds(X, k, device, max_iter=n)
    kernels, syncs, by_name, launches = 0, 0, {}, 0
    for ev in prof.events():
        kind = str(getattr(ev, "device_type", ""))
        if kind.endswith("CUDA"):
            if "memcpy" in ev.name.lower() or "memset" in ev.name.lower():
                continue
            kernels += 1
            by_name[ev.name] = by_name.get(ev.name, 0.0) + ev.device_time / 1e3
        elif ev.name in SYNC_CALLS:
            syncs += 1
        elif ev.name in LAUNCH_CALLS:
            launches += 1
    return kernels, syncs, by_name, launches


def point(name, X, k, args):
    n_tokens = int(X.sum())
    fit_seconds(X, k, args.device, max_iter=args.sweeps[0])  # warm-up
    n1, n2 = args.sweeps

    def timed(n):
        # The fastest of the repeats, and the graph replays of one fit (0 without graphs).
        sweep_graph.reset_stats()
        seconds = min(fit_seconds(X, k, args.device, max_iter=n)[0] for _ in range(args.repeats))
        return seconds, sweep_graph.STATS["replays"] / args.repeats

    (t1, r1), (t2, r2) = timed(n1), timed(n2)
    per_sweep = (t2 - t1) / (n2 - n1)
    default_s, lda = fit_seconds(X, k, args.device)
    row = dict(corpus=name, docs=X.shape[0], tokens=n_tokens, k=k, graphs=args.graphs,
               algorithm=lda.algorithm_ if hasattr(lda, "algorithm_") else args.algorithm,
               per_sweep_ms=per_sweep * 1e3,
               mtoken_s=n_tokens / max(per_sweep, 1e-12) / 1e6, default_fit_s=default_s,
               default_sweeps=int(lda.n_iter_), fixed_s=t1 - n1 * per_sweep,
               graph_replays_per_sweep=(r2 - r1) / (n2 - n1))
    if args.count:
        a = profiled(X, k, args.device, n1)
        b = profiled(X, k, args.device, n2)
        row["kernels_per_sweep"] = (b[0] - a[0]) / (n2 - n1)
        row["syncs_per_sweep"] = (b[1] - a[1]) / (n2 - n1)
        row["launches_per_sweep"] = (b[3] - a[3]) / (n2 - n1)
        names = set(a[2]) | set(b[2])
        gpu = {nm: (b[2].get(nm, 0.0) - a[2].get(nm, 0.0)) / (n2 - n1) for nm in names}
        row["gpu_ms_per_sweep"] = sum(gpu.values())
        row["gpu_ms_by_kernel"] = dict(sorted(gpu.items(), key=lambda kv: -kv[1])[:12])
    return row


def grid_search(X, device):
    from sklearn.model_selection import GridSearchCV

    search = GridSearchCV(GPULatentDirichletAllocation(random_state=0, device=device),
                          {"n_components": GRID_K}, cv=5)
    tic = time.perf_counter()
    search.fit(X)
    return dict(grid_s=time.perf_counter() - tic, fits=len(GRID_K) * 5 + 1,
                best_k=int(search.best_params_["n_components"]))


FIRST_FIT = """
import sys, time
sys.path[:0] = [{repo!r}, {bench!r}]
from bench_users import load
from sklearn_gpulda import GPULatentDirichletAllocation
X = load({corpus!r}, {scale!r})
context_s = 0.0
if {context_first!r}:
    import cupy
    tic = time.perf_counter(); cupy.empty(1); cupy.cuda.Device().synchronize()
    context_s = time.perf_counter() - tic
out = []
for i in range(2):
    lda = GPULatentDirichletAllocation(n_components={k}, random_state=0, device={device!r})
    if i == 0 and {profile!r}:
        import cProfile, pstats
        prof = cProfile.Profile()
        tic = time.perf_counter(); prof.runcall(lda.fit, X); out.append(time.perf_counter() - tic)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(15)
    else:
        tic = time.perf_counter(); lda.fit(X); out.append(time.perf_counter() - tic)
print("FIRST_FIT", out[0], out[1], context_s)
"""


def first_fit(corpus, k, args, context_first=False):
    """First and second fit in a fresh process whose CuPy kernel cache starts empty; the
    kernels CuPy compiled (their names, from the sources it saved). With ``context_first``
    the process makes its CUDA context before the first fit (timed apart as ``context_s``):
    a cost of the process, paid once whatever it runs, not of a fit."""
    cache = Path(tempfile.mkdtemp(prefix="cupy_cache_"))
    env = dict(os.environ, CUPY_CACHE_DIR=str(cache), CUPY_CACHE_SAVE_CUDA_SOURCE="1")
    code = FIRST_FIT.format(repo=str(HERE.parent), bench=str(HERE), corpus=corpus,
                            scale=args.nytimes_scale, k=k, device=args.device,
                            context_first=bool(context_first), profile=bool(args.profile_first))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if args.profile_first:
        print(done.stderr[-12000:], flush=True)
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("FIRST_FIT")]
    if not line:
        return dict(corpus=corpus, k=k, error=done.stderr[-2000:])
    first, second, context_s = map(float, line[0].split()[1:])
    names = []
    for src in cache.rglob("*.cu"):
        text = src.read_text(errors="replace")
        for part in text.split("__global__")[1:]:
            head = part.split("(")[0].split()
            names.append(head[-1] if head else "?")
    return dict(corpus=corpus, k=k, context_first=bool(context_first), context_s=context_s,
                first_s=first, second_s=second,
                compiled=len(list(cache.rglob("*.cubin"))) or len(names), kernels=sorted(names))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", nargs="+", default=["kjv", "kjv40", "kos", "nips", "20news"])
    p.add_argument("--topics", nargs="+", type=int, default=[10, 20, 50, 100])
    p.add_argument("--sweeps", nargs=2, type=int, default=[100, 300])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--device", default="cuda")
    p.add_argument("--count", action="store_true")
    p.add_argument("--algorithm", default=None,
                   help="the estimator's algorithm for every fit (default: its own, 'auto')")
    p.add_argument("--graphs", choices=["auto", "on", "off"], default="auto",
                   help="replay the sparse engine's sweeps as CUDA graphs always "
                        f"({sweep_graph.ENV}=1), never (0), or as the package chooses")
    p.add_argument("--grid", action="store_true")
    p.add_argument("--first-fit", action="store_true")
    p.add_argument("--profile-first", action="store_true",
                   help="print cProfile's view of each first fit (with --first-fit)")
    p.add_argument("--nytimes-scale", type=float, default=0.1)
    p.add_argument("--budget-s", type=float, default=float("inf"))
    default_json = str(output_path("bench_users", "bench_users.json"))
    p.add_argument("--json", default=default_json)
    args = p.parse_args(argv)
    if args.algorithm is not None:
        FIT_PARAMS["algorithm"] = args.algorithm
    if args.graphs != "auto" and args.json == default_json:
        # A run with graphs forced beside one without: neither overwrites the other's results.
        args.json = default_json[: -len(".json")] + f"_graphs_{args.graphs}.json"
    # Read at every run of sweeps (sweep_graph.enabled), so set before the first fit; the
    # first-fit subprocesses inherit it.
    if args.graphs == "auto":
        os.environ.pop(sweep_graph.ENV, None)
    else:
        os.environ[sweep_graph.ENV] = "1" if args.graphs == "on" else "0"
    start = time.perf_counter()
    result = dict(points=[], grid=None, first_fit=[])
    for name in args.corpora:
        X = load(name, args.nytimes_scale)
        if X is None:
            continue
        for k in args.topics:
            if time.perf_counter() - start > args.budget_s:
                print("budget spent", flush=True)
                break
            row = point(name, X, k, args)
            result["points"].append(row)
            print(json.dumps({key: (round(v, 4) if isinstance(v, float) else v)
                              for key, v in row.items() if key != "gpu_ms_by_kernel"}),
                  flush=True)
            if "gpu_ms_by_kernel" in row:
                print("   ", {n[:60]: round(v, 4) for n, v in row["gpu_ms_by_kernel"].items()},
                      flush=True)
            save_json(args.json, result)
    if args.grid and time.perf_counter() - start < args.budget_s:
        X = load(args.corpora[0], args.nytimes_scale)
        result["grid"] = grid_search(X, args.device)
        print("grid:", result["grid"], flush=True)
        save_json(args.json, result)
    if args.first_fit:
        for corpus, k in (("kjv", 20), ("nytimes", 1000)):
            if time.perf_counter() - start > args.budget_s:
                break
            for context_first in (False, True):
                row = first_fit(corpus, k, args, context_first)
                result["first_fit"].append(row)
                print("first fit:", json.dumps(row), flush=True)
                save_json(args.json, result)
    table(result)


def table(result):
    print("\n| corpus | tokens | K | graphs | per sweep (ms) | Mtoken/s | kernels/sweep "
          "| launches/sweep | syncs/sweep | default fit (s) |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")

    def cell(value, fmt):
        return "" if value is None else format(value, fmt)

    for r in result["points"]:
        print(f"| {r['corpus']} | {r['tokens']:,} | {r['k']} | {r['graphs']} "
              f"| {r['per_sweep_ms']:.3f} | {r['mtoken_s']:.0f} "
              f"| {cell(r.get('kernels_per_sweep'), '.1f')} "
              f"| {cell(r.get('launches_per_sweep'), '.1f')} "
              f"| {cell(r.get('syncs_per_sweep'), '.2f')} | {r['default_fit_s']:.2f} |")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
