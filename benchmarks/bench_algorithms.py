"""Whole ESCA iterations of the sparse and dense CUDA backends, and what ``algorithm='auto'`` picks.

For each K the script runs ``--iters`` sweeps of every sampler from its random initialisation --
the sparse backend (``CudaSparseSampler``) and the dense backend (``CudaDenseSampler``) with each
sampling kernel (butterfly, transpose, plain), made through the registry of
``sklearn_gpulda.backends`` as the estimator makes them -- and reports Mtoken/s of a whole
iteration (sampling plus M-step), the mean over iterations 2..n (the first pays for kernel
loading). Corpora: a NYTimes-shaped corpus drawn by ``datasets.make_lda_corpus(shape="nytimes",
scale=...)``, and NIPS when its UCI docword file is found where ``benchmarks/_peer_corpora.py``
looks (``nips_tmt/docword.nips_tmt.txt.gz`` under ``$SKLEARN_GPULDA_DATA``, ``.carry/data`` or
``../shared/data``).

Printed per corpus: the table, the smallest K from which the sparse backend beats every dense
kernel, and for each K the backend 'auto' picks (``backends.choose_backend``; the dense backend
runs its default 'transpose' kernel) and whether it is within 5% of the faster of the two
backends 'auto' chooses between.

The dense kernels run one thread per document, so they need tens of thousands of documents to
fill a large GPU: the default ``--scale 0.25`` (75,000 documents, about 25 M tokens) matches the
kernel-only measurements of ``doc/performance.md``. Points stop once ``--budget-s`` is spent
(K visited coarse to fine, so a cut run still spans the range). Writes ``bench_algorithms.csv``,
``.json`` and ``.png`` (when matplotlib imports) into ``--out`` (default
``benchmarks/results/bench_algorithms``).

The dense backend runs as the estimator runs it (fused M-step, a group of warps per document of
at least ``--long-document`` tokens, by default every document); ``--baseline`` adds
'transpose_bincount', its transpose kernel with a thread per document and the bincount M-step
(the engine before issue 35).

Usage::

    python benchmarks/bench_algorithms.py                      # K = 16 48 80 144 256 512 1024
    python benchmarks/bench_algorithms.py --topics 16 48 80 --iters 6 --scale 0.1
    python benchmarks/bench_algorithms.py --topics 16 32 64 --variants transpose --baseline
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench_common import (  # noqa: E402
    ALPHA_HELP, VARIANTS, after_first, alpha_for, coarse_to_fine, cuda_sampler, describe_device,
    load_corpora, plot_throughput, output_path, run_sweeps, write_rows)

DEFAULT_TOPICS = [16, 48, 80, 144, 256, 512, 1024]
#: 'auto' counts as right where its backend is at least this share of the faster one's speed.
TOLERANCE = 0.95
#: The dense transpose kernel with a thread per document and the bincount M-step.
BASELINE = "transpose_bincount"


def time_sampler(cp, sampler, corpus, iters):
    """Mean ms of sweeps 2..iters (sweep 1 when ``iters`` is 1), and the last stage split."""
    try:
        timed = run_sweeps(cp, sampler, corpus, iters)
    finally:
        sampler.release()
    return float(np.mean(after_first(timed["ms"]))), timed["stages"][-1]


def measure(cp, corpus, k, samplers, iters, alpha, beta, seed, long_document=1):
    """Whole-iteration Mtoken/s of each sampler name at K = k (None where it failed)."""
    row = {}
    for name in samplers:
        try:
            if name == "sparse":
                sampler = cuda_sampler("sparse", k, alpha, beta, seed)
            elif name == BASELINE:
                sampler = cuda_sampler("dense", k, alpha, beta, seed, variant="transpose",
                                       mstep="bincount", long_document=None)
            else:
                sampler = cuda_sampler("dense", k, alpha, beta, seed, variant=name,
                                       long_document=long_document)
            ms, stages = time_sampler(cp, sampler, corpus, iters)
        except Exception as exc:  # a failed point is reported, the sweep goes on
            print(f"   K={k} {name}: {type(exc).__name__}: {exc}")
            cp.get_default_memory_pool().free_all_blocks()
            row[name] = None
            continue
        row[name] = corpus.n_tokens / ms / 1e3
        row[name + "_ms"] = ms
        if "sample" in stages:
            row[name + "_sample_ms"] = stages["sample"]
    return row


def judge(row, k):
    """Fill in the faster backend, what 'auto' picks and whether that is within TOLERANCE."""
    from sklearn_gpulda._runtime.device import resolve_device
    from sklearn_gpulda.backends import choose_backend

    dense = {v: row.get(v) for v in VARIANTS if row.get(v)}
    row["best_dense"] = max(dense, key=dense.get) if dense else None
    pick = choose_backend("auto", k, resolve_device("cuda:0")).algorithm
    row["auto"] = pick
    # 'auto' runs the dense backend's default kernel.
    choices = {"sparse": row.get("sparse"), "dense": row.get("transpose")}
    if all(choices.values()):
        faster = max(choices, key=choices.get)
        row["faster"] = faster
        row["auto_ratio"] = choices[pick] / choices[faster]
        row["auto_ok"] = row["auto_ratio"] >= TOLERANCE
    return row


def sparse_wins_from(rows):
    """Smallest measured K from which the sparse backend beats every dense kernel at every K."""
    ks = sorted(r["K"] for r in rows if r.get("sparse") and r.get("best_dense"))
    by_k = {r["K"]: r for r in rows}
    wins = {k: by_k[k]["sparse"] > by_k[k][by_k[k]["best_dense"]] for k in ks}
    start = None
    for k in reversed(ks):
        if not wins[k]:
            break
        start = k
    return start, wins


def write_outputs(out, device_name, args, corpora, rows):
    dense = [*VARIANTS, BASELINE]
    keys = ["corpus", "K", "n_tokens", "sparse", *dense, "sparse_ms", "sparse_sample_ms"]
    keys += [f"{v}_{s}" for v in dense for s in ("ms", "sample_ms")]
    keys += ["best_dense", "faster", "auto", "auto_ratio", "auto_ok"]
    write_rows(out, "bench_algorithms", keys, rows, device_name, args, corpora)


def plot(rows, path):
    series = [
        ("sparse", "sparse backend"),
        ("transpose", "dense backend, transpose"),
        ("butterfly", "dense backend, butterfly"),
        ("plain", "dense backend, plain"),
    ]
    return plot_throughput(rows, path, series, "Mtoken/s, whole iteration", log_k=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.25, help="fraction of NYTimes' 300k documents")
    ap.add_argument("--topics", type=int, nargs="+", default=DEFAULT_TOPICS)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--no-sparse", action="store_true")
    ap.add_argument("--baseline", action="store_true",
                    help=f"also time '{BASELINE}' (thread per document, bincount M-step)")
    ap.add_argument("--long-document", default="1",
                    help="dense: tokens from which a document gets warps (default 1, the "
                         "engine's: every document; 'none': a thread each)")
    ap.add_argument("--no-nips", action="store_true")
    ap.add_argument("--corpora", nargs="*", default=[], choices=["kos", "20news", "kjv"],
                    help="more corpora to measure besides the NYTimes shape and NIPS")
    ap.add_argument("--iters", type=int, default=4,
                    help="sweeps per sampler; iterations 2..n timed")
    ap.add_argument("--alpha", default="50/K", help=ALPHA_HELP + " (default 50/K)")
    ap.add_argument("--budget-s", type=float, default=150.0, help="time for measurements")
    ap.add_argument("--out", default=output_path("bench_algorithms"),
                    help="folder of the CSV, JSON and plot (default benchmarks/results/"
                         "bench_algorithms)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t_begin = time.perf_counter()

    import cupy as cp

    from sklearn_gpulda.backends import BACKENDS
    from sklearn_gpulda.backends.cuda.dense.sample_dense import MAX_TOPICS

    name = describe_device(cp)
    for b in BACKENDS:
        if b.device_kind == "cuda":
            print(f"backend {b.name}: max_topics={b.max_topics}, 'auto' picks it up to "
                  f"K={b.max_topics if b.auto_max_topics is None else b.auto_max_topics}")
    topics = sorted({k for k in args.topics if 1 <= k <= MAX_TOPICS})
    samplers = ([] if args.no_sparse else ["sparse"]) + list(args.variants)
    samplers += [BASELINE] if args.baseline else []
    long_document = None if args.long_document == "none" else int(args.long_document)
    beta = 0.01

    corpora = load_corpora(args.scale, args.seed, not args.no_nips, args.corpora)
    rows = []
    t_measure = time.perf_counter()
    share = args.budget_s / max(1, len(corpora))
    for i_corpus, (cname, corpus, descr) in enumerate(corpora):
        lengths = np.diff(corpus.doc_ptr)
        mean_len = float(lengths.mean()) if lengths.size else 0.0
        print(
            f"\n== {cname}: {descr}\n   D={corpus.n_docs:,} V={corpus.n_words:,} "
            f"tokens={corpus.n_tokens:,} mean length {mean_len:.0f}, max {lengths.max():,}"
        )
        deadline = t_measure + share * (i_corpus + 1)
        for i in coarse_to_fine(len(topics)):
            if time.perf_counter() > deadline:
                print(f"   budget of {share:.0f} s spent; remaining K skipped")
                break
            k = topics[i]
            row = dict(corpus=cname, K=k, n_tokens=corpus.n_tokens)
            row.update(measure(cp, corpus, k, samplers, args.iters, alpha_for(args.alpha, k),
                               beta, args.seed, long_document))
            judge(row, k)
            rows.append(row)
            write_outputs(args.out, name, args, corpora, rows)
            print(
                f"   K={k:5d}  "
                + "  ".join(
                    f"{e} {row[e]:8.1f}" if row.get(e) else f"{e} {'-':>8}" for e in samplers
                )
                + "  Mtoken/s",
                flush=True,
            )

    print("\nWhole-iteration Mtoken/s (mean of iterations 2..%d)" % args.iters)
    cols = ["corpus", "K", *samplers, "auto", "auto/faster", "ok"]
    print("  ".join(f"{c:>11}" for c in cols))
    for r in sorted(rows, key=lambda r: (r["corpus"], r["K"])):
        cells = [r["corpus"], r["K"]] + [r.get(e) for e in samplers]
        ratio = r.get("auto_ratio")
        cells += [r["auto"], None if ratio is None else f"{ratio:.3f}", r.get("auto_ok")]
        print(
            "  ".join(
                f"{c:>11.1f}" if isinstance(c, float) else f"{'-' if c is None else c!s:>11}"
                for c in cells
            )
        )
    for cname in sorted({r["corpus"] for r in rows}):
        mine = [r for r in rows if r["corpus"] == cname]
        start, wins = sparse_wins_from(mine)
        if wins:
            where = (
                f"from K={start} on" if start is not None else "at none of the largest K measured"
            )
            per_k = ", ".join(f"{k}: {'sparse' if w else 'dense'}" for k, w in wins.items())
            print(f"{cname}: the sparse backend beats every dense kernel {where} ({per_k})")
        judged = [r for r in mine if "auto_ok" in r]
        if judged:
            bad = [r["K"] for r in judged if not r["auto_ok"]]
            print(
                f"{cname}: 'auto' within 5% of the faster backend at "
                f"{len(judged) - len(bad)} of {len(judged)} K"
                + (f"; not at K = {bad}" if bad else "")
            )
    if args.out and rows:
        write_outputs(args.out, name, args, corpora, rows)
        if plot(rows, Path(args.out) / "bench_algorithms.png"):
            print(f"wrote {Path(args.out) / 'bench_algorithms.png'}")
        print(f"wrote {Path(args.out) / 'bench_algorithms.csv'} and bench_algorithms.json")
    print(f"total {time.perf_counter() - t_begin:.0f} s")


if __name__ == "__main__":
    main()
