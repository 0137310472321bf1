"""Throughput of the CPU engine against its number of threads, and proof the model is the same.

For each ``--threads`` value the script fits ``GPULatentDirichletAllocation(device='cpu',
n_jobs=n)`` on one corpus for ``--sweeps`` sweeps (fixed priors and no averaging, so that every
sweep does the same work; ``--defaults`` keeps the estimator's learnt priors and averaging) and
reports whole-fit Mtoken/s, the speed-up over the first thread count, the time of a first
tiny fit with that many jobs (worker processes start then, once per Python process), and
whether ``components_`` equals the first fit's bit for bit. The corpus is KOS or NIPS from
``--data`` when given, else a synthetic NYTimes-shaped sample (``make_lda_corpus(shape='nytimes',
scale=--scale)``).

Usage::

    python benchmarks/bench_cpu_threads.py --threads 1 2 --topics 100
    python benchmarks/bench_cpu_threads.py --threads 1 2 4 8 16 --topics 20 100 1000 --out DIR

Writes ``cpu_threads.csv`` to ``--out`` (default ``benchmarks/results/bench_cpu_threads``).
"""

import argparse
import csv
import os
import time
from pathlib import Path

import numpy as np

from _bench_common import output_path

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.backends.numpy.sampler import PROCESS_MIN_TOKENS
from sklearn_gpulda.datasets import load_uci_bow, make_lda_corpus


def _corpus(args):
    if args.data:
        return load_uci_bow(args.data).data, Path(args.data).name
    X = make_lda_corpus(shape="nytimes", scale=args.scale, random_state=0).data
    return X, f"nytimes-shaped x{args.scale}"


def _fit(X, k, n_jobs, sweeps, defaults=False):
    fixed = {} if defaults else dict(doc_topic_prior=1.0 / k, topic_word_prior=0.01,
                                     n_averaged_sweeps=0)
    model = GPULatentDirichletAllocation(
        n_components=k, max_iter=sweeps, device="cpu", n_jobs=n_jobs, random_state=0, **fixed)
    tic = time.perf_counter()
    model.fit(X)
    return model, time.perf_counter() - tic


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", nargs="+", type=int, default=[1, os.cpu_count() or 1])
    p.add_argument("--topics", nargs="+", type=int, default=[100])
    p.add_argument("--sweeps", type=int, default=10)
    p.add_argument("--data", help="a UCI docword file (else a synthetic corpus)")
    p.add_argument("--scale", type=float, default=0.01, help="of the NYTimes shape")
    p.add_argument("--defaults", action="store_true",
                   help="the estimator's defaults (learnt priors, averaging) instead of fixed "
                        "priors and no averaging")
    p.add_argument("--out", type=Path, default=output_path("bench_cpu_threads"))
    args = p.parse_args(argv)
    X, name = _corpus(args)
    n_tokens = float(X.sum())
    print(f"{name}: {X.shape[0]} documents, {X.shape[1]} words, {n_tokens:,.0f} tokens; "
          f"{os.cpu_count()} cores; {args.sweeps} sweeps per fit; "
          f"{'estimator defaults' if args.defaults else 'fixed priors, no averaging'}")
    print(f"{'K':>6} {'jobs':>7} {'fit s':>8} {'Mtoken/s':>9} {'speed-up':>8} {'first s':>8}"
          "  same model")
    lengths = np.cumsum(np.asarray(X.sum(axis=1)).ravel())
    warm_docs = int(min(X.shape[0], np.searchsorted(lengths, PROCESS_MIN_TOKENS) + 1))
    rows = []
    for k in args.topics:
        first = None
        for n in args.threads:
            # Worker processes start at a process's first fit with n jobs and stay: timed apart,
            # on enough documents that the fit runs on processes (PROCESS_MIN_TOKENS).
            _, start_up = _fit(X[:warm_docs], k, n, 1, args.defaults)
            model, seconds = _fit(X, k, n, args.sweeps, args.defaults)
            rate = n_tokens * args.sweeps / seconds / 1e6
            if first is None:
                first = (model.components_, rate)
            same = bool(np.array_equal(model.components_, first[0]))
            print(f"{k:>6} {n:>7} {seconds:>8.2f} {rate:>9.2f} {rate / first[1]:>8.2f} "
                  f"{start_up:>8.2f}  {same}", flush=True)
            rows.append(dict(corpus=name, n_topics=k, threads=n, sweeps=args.sweeps,
                             defaults=args.defaults,
                             seconds=round(seconds, 3), first_fit_s=round(start_up, 3),
                             mtoken_s=round(rate, 3),
                             speedup=round(rate / first[1], 3), same_model=same))
    if rows:
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "cpu_threads.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
