"""Throughput of the sparse CUDA backend on a NYTimes-shaped corpus, and before against after.

Corpus: ``datasets.make_lda_corpus(shape="nytimes", n_topics=100, random_state=0)`` (D = 300k,
V = 102,660, about 100 M tokens; ``--scale`` takes a fraction of the documents). For each prior of
``--alpha`` and each K the script starts a ``CudaSparseSampler`` (``load`` then ``init_topics``),
runs ``--iters`` sweeps and reports the mean over sweeps 2..n of Mtoken/s and of the stage split
the sampler's CUDA events give (sampling, A rebuild, B and topic totals), the achieved bandwidth
of the sampling kernel against a measured device-to-device copy, and the memory pool's peak.
The prior matters: with the token's own count taken out of its document, a larger alpha sends
more draws to the prior branch, so throughput is quoted at both 50 / K and 1 / K.

``--compare-with DIR`` times the same work with two versions of the package on this GPU. DIR is
another checkout of the repository, e.g. the commit before a change::

    mkdir -p .carry/old && git archive HEAD~1 | tar -x -C .carry/old

The corpus is drawn once and saved to ``<out>/bench_cuda_corpus.npz`` (deleted at the end); then
for every prior and K a subprocess that imports DIR's package (``PYTHONPATH=DIR``) and one that
imports this checkout's each load that file and time the sparse sampler of their own version
(``CudaSparseSampler`` from the registry of ``sklearn_gpulda.backends``, which DIR must have).
The two alternate (old first in even rounds of ``--rounds``, new first in odd ones) so that a
drift of the machine falls on both. Printed: K, Mtoken/s old and new, new / old, and each
stage's ms; written: ``<out>/bench_cuda_compare.json``. DIR's kernels are compiled by
NVRTC at its first run unless built beforehand (``tools/build_kernels.py --src DIR/cuda --out
DIR/sklearn_gpulda/_fatbin``; ``tools/gpu_stages.sh bench-compare`` does it).

Time: no new point starts once ``--budget-s`` (counted from the start, corpus included) is
spent; in comparison mode each subprocess is also killed at the budget's end, and its point is
reported as cut.

Usage::

    python benchmarks/bench_cuda.py --topics 100 1000 10000 --iters 51
    python benchmarks/bench_cuda.py --alpha 50/K 1/K --scale 0.1
    python benchmarks/bench_cuda.py --compare-with .carry/old --budget-s 400 --out /tmp/out

Every point goes to ``--json`` (default ``benchmarks/results/bench_cuda/bench_cuda.json``), and
a comparison to ``--out`` (default ``benchmarks/results/bench_cuda``), rewritten after every
point.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _bench_common import (  # noqa: E402
    ALPHA_HELP, after_first, alpha_for, cuda_sampler, describe_device, device_name, output_path,
    run_sweeps, save_json)

#: Stages of a sweep the sparse sampler profiles.
STAGES = ("sample", "rebuild_a", "count_b_totals")
BETA = 0.01
CORPUS_FILE = "bench_cuda_corpus.npz"
#: A comparison run is not started with less time left than this (start-up and corpus loading
#: alone take several seconds at full scale).
MIN_RUN_S = 20.0
#: Prefix of the line that carries a worker's result to the parent.
RESULT = "RESULT "


def copy_bandwidth(cp, n_bytes=2 << 30, reps=10):
    """Device-to-device copy bandwidth in GB/s (bytes read plus bytes written)."""
    src = cp.ones(n_bytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    cp.copyto(dst, src)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        cp.copyto(dst, src)
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    del src, dst
    return 2 * n_bytes / np.median(times) / 1e9


# -- the corpus ---------------------------------------------------------------------------------
def make_corpus(scale):
    """The benchmark's corpus as a TokenCorpus, drawn on the host, and how it was made."""
    from sklearn_gpulda._input.corpus import tokens
    from sklearn_gpulda.datasets import make_lda_corpus

    X = make_lda_corpus(shape="nytimes", n_topics=100, random_state=0, scale=scale).data
    source = ("datasets.make_lda_corpus(shape='nytimes', n_topics=100, random_state=0, "
              f"scale={scale})")
    return tokens(X), source


def save_corpus(corpus, path):
    """Write the canonical counts both versions read. Integer counts: each non-zero's count is
    its number of tokens."""
    np.savez(path, n_docs=corpus.n_docs, n_words=corpus.n_words, indptr=corpus.indptr,
             indices=corpus.indices, counts=np.diff(corpus.nz_ptr))


def load_corpus(path):
    """A TokenCorpus of the imported package's own class from :func:`save_corpus`'s file, so
    that each version lays the same counts out its own way."""
    from sklearn_gpulda._input.corpus import TokenCorpus

    with np.load(path) as f:
        n_docs, n_words = int(f["n_docs"]), int(f["n_words"])
        indptr, indices, counts = f["indptr"], f["indices"], f["counts"]
    return TokenCorpus(n_docs, n_words, indptr, indices, counts)


# -- one point ----------------------------------------------------------------------------------
def sparse_sampler(n_topics, alpha, seed, storage=None):
    """The imported package's sparse CUDA sampler, profiled (with ``word_topic_storage=storage``
    unless None)."""
    options = {} if storage is None else {"word_topic_storage": storage}
    return cuda_sampler("sparse", n_topics, alpha, BETA, seed, **options)


def mean_row_nnz(chunks, n_tokens):
    """Token-weighted mean number of non-zeros of A[d]: the entries the sampler reads per token."""
    total = 0.0
    for ch in chunks:
        nnz = ch.a_row[:, 1].astype(np.float64)
        total += float((nnz * ch.doc_len.astype(np.float64)).sum())
    return total / max(n_tokens, 1)


def bench_one(cp, corpus, n_topics, alpha_spec, iters, seed=0, storage=None):
    """Start a chain at K = ``n_topics``, time ``iters`` sweeps; the per-sweep figures and the
    memory pool's peaks (after initialisation, and during the sweeps)."""
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    sampler = sparse_sampler(n_topics, alpha_for(alpha_spec, n_topics), seed, storage)
    mem = dict(init_peak=None, peak=0)

    def before_sweep(s):
        if mem["init_peak"] is None:
            # What the layout build left cached is the initialisation's peak, not the sweeps'.
            mem["init_peak"] = pool.total_bytes()
            pool.free_all_blocks()
        mem["peak"] = max(mem["peak"], pool.total_bytes())
        return dict(row_nnz=mean_row_nnz(s.chunks, corpus.n_tokens))

    try:
        timed = run_sweeps(cp, sampler, corpus, iters, before_sweep)
        mem["peak"] = max(mem["peak"], pool.total_bytes())
        loglik = sampler.log_likelihood() / corpus.n_tokens
        block = sampler._shape[1]
        entry_bytes = 4 if sampler.chunks[0].packed else 8
    finally:
        sampler.release()
    rows = [
        dict(iteration=i + 1, ms=ms, mtok_s=corpus.n_tokens / ms / 1e3, **extra, **stages)
        for i, (ms, extra, stages) in enumerate(zip(timed["ms"], timed["extra"], timed["stages"]))
    ]
    return dict(
        n_topics=n_topics, alpha=alpha_spec, init_s=timed["init_s"],
        init_peak_gb=(mem["init_peak"] or 0) / 1e9, peak_gb=mem["peak"] / 1e9,
        loglik_per_token=loglik, entry_bytes=entry_bytes, block=block, iterations=rows,
        summary=summarise(rows, entry_bytes, corpus.n_tokens),
    )


def summarise(rows, entry_bytes, n_tokens):
    """Means over sweeps 2..n, and the sampling kernel's achieved bandwidth in GB/s."""
    kept = after_first(rows)

    def mean(key):
        return float(np.mean([r[key] for r in kept]))

    # Sampler bytes per token: place 2 (4 wide) + doc 4 + A row descriptor 8 + topic 2 + one
    # A entry (4 bytes packed, 8 wide) per non-zero of the row.
    bytes_tok = (16 if entry_bytes == 4 else 18) + entry_bytes * mean("row_nnz")
    return dict(
        mtok_s=n_tokens / mean("ms") / 1e3, ms=mean("ms"),
        **{f"{name}_ms": mean(name) for name in STAGES}, row_nnz=mean("row_nnz"),
        sample_gb_s=bytes_tok * n_tokens / (mean("sample") / 1e3) / 1e9,
        iters_averaged=len(kept),
    )


def point_line(res, gbs=None):
    """One line per point, as the benchmark has always printed it."""
    s = res["summary"]
    share = f" ({100 * s['sample_gb_s'] / gbs:.0f}% of copy)" if gbs else ""
    return (
        f"alpha={res['alpha']:>5} K={res['n_topics']:6d} iters 2-{s['iters_averaged'] + 1}: "
        f"{s['mtok_s']:8.1f} Mtoken/s  {s['ms']:7.2f} ms/iter (sample {s['sample_ms']:.2f}, "
        f"rebuild A {s['rebuild_a_ms']:.2f}, B+totals {s['count_b_totals_ms']:.2f}) "
        f"K_d {s['row_nnz']:.1f} sampler {s['sample_gb_s']:.0f} GB/s{share} "
        f"peak {res['peak_gb']:.2f} GB (init {res['init_peak_gb']:.2f} GB, {res['init_s']:.1f} s) "
        f"loglik/token {res['loglik_per_token']:.3f}"
    )


# -- this checkout alone ------------------------------------------------------------------------
def measure(args, t_begin):
    import cupy as cp

    name = describe_device(cp)
    gbs = copy_bandwidth(cp)
    print(f"copy bandwidth {gbs:.0f} GB/s")
    t = time.perf_counter()
    corpus, source = make_corpus(args.scale)
    print(f"corpus: {source}: D={corpus.n_docs} V={corpus.n_words} T={corpus.n_tokens} "
          f"({time.perf_counter() - t:.1f} s)")
    results = dict(device=name, copy_gb_s=gbs, corpus=source, n_docs=corpus.n_docs,
                   n_words=corpus.n_words, n_tokens=corpus.n_tokens, runs=[])
    for spec in args.alpha:
        for k in args.topics:
            if time.perf_counter() - t_begin > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s spent: alpha={spec} K={k} not run")
                continue
            res = bench_one(cp, corpus, k, spec, args.iters, storage=args.storage)
            results["runs"].append(res)
            print(point_line(res, gbs), flush=True)
            save_json(args.json, results)


# -- before against after -----------------------------------------------------------------------
def worker(args):
    """One point with the package of ``--package``; its result on one line of stdout."""
    package = Path(args.package).resolve()
    sys.path.insert(0, str(package))
    import cupy as cp
    import sklearn_gpulda

    where = Path(sklearn_gpulda.__file__).resolve()
    if package not in where.parents:
        raise SystemExit(f"imported {where}, not the package of {package}")
    corpus = load_corpus(args.corpus)
    res = bench_one(cp, corpus, args.topics[0], args.alpha[0], args.iters, storage=args.storage)
    res.update(package=str(where.parent), device=device_name(cp))
    del res["iterations"]  # the parent keeps the summaries
    print(RESULT + json.dumps(res), flush=True)


def run_worker(package, corpus_path, k, spec, iters, timeout, storage=None):
    """Run :func:`worker` in a subprocess importing ``package``; its result, or why none."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package), env.get("PYTHONPATH")]))
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--package",
               str(package), "--corpus", str(corpus_path), "--topics", str(k), "--alpha", spec,
               "--iters", str(iters)] + ([] if storage is None else ["--storage", storage])
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(status=f"cut at the budget's end ({timeout:.0f} s)")
    found = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-6:]
        return dict(status=f"failed (exit {done.returncode}): " + " | ".join(tail))
    return dict(json.loads(found[-1][len(RESULT):]), status="ok")


def median_summary(runs):
    """Per-key median of the summaries of the runs that succeeded (None when none did)."""
    ok = [r["summary"] for r in runs if r["status"] == "ok"]
    if not ok:
        return None
    return {key: float(np.median([s[key] for s in ok])) for key in ok[0]}


def _cell(summary, key, fmt):
    return "-" if summary is None else format(summary[key], fmt)


def compare_table(runs):
    """Rows 'K alpha old new ratio' with each stage's ms old/new, from every round's runs."""
    head = (f"{'K':>6} {'alpha':>5} {'old Mtok/s':>11} {'new Mtok/s':>11} {'new/old':>8}  "
            + "  ".join(f"{name + ' ms old/new':>26}" for name in STAGES))
    lines = [head]
    points = dict.fromkeys((r["alpha"], r["K"]) for r in runs)
    for spec, k in points:
        old, new = (median_summary([r for r in runs if (r["alpha"], r["K"], r["version"]) ==
                                    (spec, k, v)]) for v in ("old", "new"))
        ratio = f"{new['mtok_s'] / old['mtok_s']:.3f}" if old and new else "-"
        stages = "  ".join(
            f"{_cell(old, name + '_ms', '.2f') + ' / ' + _cell(new, name + '_ms', '.2f'):>26}"
            for name in STAGES)
        lines.append(f"{k:>6} {spec:>5} {_cell(old, 'mtok_s', '.1f'):>11} "
                     f"{_cell(new, 'mtok_s', '.1f'):>11} {ratio:>8}  {stages}")
    return "\n".join(lines)


def compare(args, t_begin):
    old = Path(args.compare_with).resolve()
    if not (old / "sklearn_gpulda" / "__init__.py").is_file():
        raise SystemExit(f"--compare-with {old}: no sklearn_gpulda package there")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = t_begin + args.budget_s
    t = time.perf_counter()
    corpus, source = make_corpus(args.scale)
    corpus_path = out / CORPUS_FILE
    save_corpus(corpus, corpus_path)
    print(f"corpus: {source}: D={corpus.n_docs} V={corpus.n_words} T={corpus.n_tokens} "
          f"({time.perf_counter() - t:.1f} s, saved to {corpus_path})")
    results = dict(corpus=source, n_docs=corpus.n_docs, n_words=corpus.n_words,
                   n_tokens=corpus.n_tokens, old=str(old), new=str(ROOT), iters=args.iters,
                   runs=[])
    del corpus
    packages = dict(old=old, new=ROOT)
    try:
        for spec in args.alpha:
            for k in args.topics:
                for rnd in range(args.rounds):
                    for version in ("old", "new") if rnd % 2 == 0 else ("new", "old"):
                        left = deadline - time.perf_counter()
                        if left < MIN_RUN_S:
                            print(f"{version:>3} alpha={spec} K={k} round {rnd}: not run, "
                                  f"{max(left, 0):.0f} s of the budget left")
                            continue
                        res = run_worker(packages[version], corpus_path, k, spec, args.iters,
                                         left, args.storage)
                        res.update(version=version, alpha=spec, K=k, round=rnd)
                        results["runs"].append(res)
                        what = point_line(res) if res["status"] == "ok" else res["status"]
                        print(f"{version:>3} {what}", flush=True)
                        (out / "bench_cuda_compare.json").write_text(
                            json.dumps(results, indent=1))
    finally:
        corpus_path.unlink(missing_ok=True)
    ok = [r for r in results["runs"] if r["status"] == "ok"]
    if ok:
        print(f"\ndevice: {ok[0]['device']}; old: {old}; new: {ROOT}")
        print(f"mean of sweeps 2-{args.iters}, median over rounds\n"
              + compare_table(results["runs"]))
    print(f"wrote {out / 'bench_cuda_compare.json'}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--alpha", nargs="+", default=["50/K"],
                    help=ALPHA_HELP + "; several are timed in turn (default 50/K)")
    ap.add_argument("--iters", type=int, default=51, help="sweeps per point; 2..n averaged")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="fraction of NYTimes' 300,000 documents (default 1)")
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="seconds after which no new point starts (default 480)")
    ap.add_argument("--storage", choices=["dense", "hybrid", "auto"], default=None,
                    help="the sampler's word_topic_storage (default: the sampler's own, dense)")
    ap.add_argument("--json", default=output_path("bench_cuda", "bench_cuda.json"),
                    help="every point of this checkout alone (default benchmarks/results/"
                         "bench_cuda/bench_cuda.json)")
    ap.add_argument("--compare-with", metavar="DIR",
                    help="another checkout of the repository to time against this one")
    ap.add_argument("--rounds", type=int, default=1,
                    help="with --compare-with: old/new pairs per point (default 1)")
    ap.add_argument("--out", default=output_path("bench_cuda"),
                    help="with --compare-with: folder of the corpus file and the JSON "
                         "(default benchmarks/results/bench_cuda)")
    # The comparison's subprocesses: one point with the package of --package.
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--package", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        for spec in args.alpha:
            alpha_for(spec, 1)  # a misspelt prior fails now, not after the corpus is drawn
    except ValueError as exc:
        ap.error(str(exc))
    t_begin = time.perf_counter()
    if args.worker:
        return worker(args)
    sys.path.insert(0, str(ROOT))
    if args.compare_with:
        return compare(args, t_begin)
    return measure(args, t_begin)


if __name__ == "__main__":
    main()
