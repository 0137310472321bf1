"""Whole sweeps of small corpora through the public API: the sparse engine against the dense
engine with each threshold of ``long_document`` (documents of at least that many tokens drawn by
a warp or more instead of a thread).

The dense engine's warp path draws every token as the thread path does (same random number,
same rule), so the threshold moves only the time; this probe checks that too: the dense fits of
every threshold must give the same ``components_`` bit for bit.

Per sweep = (wall(fit of n2 sweeps) - wall(fit of n1 sweeps)) / (n2 - n1), best of
``--repeats``, after a warm-up fit; every other parameter at the estimator's default (learned
priors, averaging), ``random_state=0``.

Usage::

    SKLEARN_GPULDA_DATA=.carry/data python benchmarks/probes/dense_small_docs.py \\
        --corpora kjv kos 20news nips --topics 16 32 64 --thresholds 256 32 1
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent)]

from bench_users import load  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.backends.cuda.dense import sampler as dense_sampler  # noqa: E402

_INIT = dense_sampler.CudaDenseSampler.__init__
_THRESHOLD = [256]


def _init(self, *args, **kwargs):
    kwargs.setdefault("long_document", _THRESHOLD[0])
    _INIT(self, *args, **kwargs)


dense_sampler.CudaDenseSampler.__init__ = _init


def fit(X, k, algorithm, n_sweeps):
    lda = GPULatentDirichletAllocation(n_components=k, random_state=0, algorithm=algorithm,
                                       max_iter=n_sweeps)
    tic = time.perf_counter()
    lda.fit(X)
    return time.perf_counter() - tic, lda


def per_sweep(X, k, algorithm, sweeps, repeats):
    n1, n2 = sweeps
    fit(X, k, algorithm, n1)  # warm-up
    best = np.inf
    for _ in range(repeats):
        t1, _ = fit(X, k, algorithm, n1)
        t2, lda = fit(X, k, algorithm, n2)
        best = min(best, (t2 - t1) / (n2 - n1))
    return best * 1e3, lda


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--corpora", nargs="+", default=["kjv", "kos", "20news", "nips"])
    p.add_argument("--topics", nargs="+", type=int, default=[16, 32, 64])
    p.add_argument("--thresholds", nargs="+", type=int, default=[256, 32, 1])
    p.add_argument("--sweeps", nargs=2, type=int, default=[50, 150])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--budget-s", type=float, default=float("inf"))
    p.add_argument("--json", default=None)
    args = p.parse_args()
    start = time.perf_counter()
    rows = []
    for name in args.corpora:
        X = load(name, 0.1)
        if X is None:
            continue
        tokens = int(X.sum())
        for k in args.topics:
            if time.perf_counter() - start > args.budget_s:
                print("budget spent", flush=True)
                break
            row = dict(corpus=name, tokens=tokens, k=k)
            ms, _ = per_sweep(X, k, "sparse", args.sweeps, args.repeats)
            row["sparse"] = ms
            models = []
            for threshold in args.thresholds:
                _THRESHOLD[0] = threshold
                ms, lda = per_sweep(X, k, "dense", args.sweeps, args.repeats)
                row[f"dense_{threshold}"] = ms
                models.append(lda.components_)
            row["same_dense_model"] = all(np.array_equal(models[0], m) for m in models[1:])
            rows.append(row)
            print(json.dumps({key: round(v, 4) if isinstance(v, float) else v
                              for key, v in row.items()}), flush=True)
    names = [f"dense_{t}" for t in args.thresholds]
    print("\n| corpus | tokens | K | sparse (ms/sweep) | "
          + " | ".join(f"dense, long from {t}" for t in args.thresholds)
          + " | best dense / sparse speed-up | dense models equal |")
    print("|---|---:|---:|---:|" + "---:|" * len(names) + "---:|---|")
    for r in rows:
        best = min(r[n] for n in names)
        print(f"| {r['corpus']} | {r['tokens']:,} | {r['k']} | {r['sparse']:.3f} | "
              + " | ".join(f"{r[n]:.3f}" for n in names)
              + f" | {r['sparse'] / best:.2f} | {r['same_dense_model']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
