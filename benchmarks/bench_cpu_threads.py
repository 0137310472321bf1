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

``--auto`` instead checks that ``n_jobs=-1`` never loses to one job: on KJV chapters (bundled)
and KOS and NIPS (where their UCI files are found, as ``_peer_corpora`` looks for them) at each
``--topics`` (default 20 and 100), it alternates fits with ``n_jobs=1`` and ``n_jobs=-1``
(``--repeats`` of each, after one untimed fit of each that starts any workers) and prints the
median time of each, their ratio (-1 over 1; at most 1.0 is the goal), the workers ``-1``
chose and whether the models are equal. Writes ``auto_jobs.csv``::

    python benchmarks/bench_cpu_threads.py --auto --sweeps 20 --repeats 5
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


def _auto_corpora(names):
    """[(name, X)] of ``names``: KJV chapters, then KOS and NIPS where their files are
    found."""
    from _peer_corpora import CorpusUnavailable, _find

    from sklearn_gpulda.datasets import load_kjv_chapters

    out = [("kjv", load_kjv_chapters().data)] if "kjv" in names else []
    for name in [n for n in ("kos", "nips") if n in names]:
        try:
            docword, vocab = _find(name)
        except CorpusUnavailable as exc:
            print(f"note: {name} skipped ({exc})")
            continue
        X = load_uci_bow(docword, vocab).data
        out.append((name, X[np.flatnonzero(X.getnnz(axis=1))]))
    return out


def _chosen_workers(X, k):
    """The workers ``n_jobs=-1`` gets for ``X`` at ``k`` topics now (1: in-process)."""
    from sklearn_gpulda.backends.numpy import processes
    from sklearn_gpulda.backends.numpy.threads import resolve_n_jobs

    work = processes.sweep_work(int(X.sum()), k)
    return processes.worker_count(resolve_n_jobs(-1), work)


def run_auto(args):
    """``n_jobs=-1`` against ``n_jobs=1``, alternated; median ratios (see the docstring)."""
    from sklearn_gpulda.backends.numpy import processes

    topics = args.topics if args.topics_given else [20, 100]
    print(f"{processes.usable_cores()} usable cores, {processes.busy_elsewhere():.1f} busy "
          f"elsewhere; {args.sweeps} sweeps per fit, {args.repeats} alternated fits of each")
    print(f"{'corpus':>7} {'K':>5} {'tokens':>10} {'1 job s':>8} {'-1 s':>8} {'ratio':>6} "
          f"{'workers':>7}  same model")
    rows = []
    for name, X in _auto_corpora(args.corpora):
        for k in topics:
            models = {n: _fit(X, k, n, args.sweeps, args.defaults)[0] for n in (1, -1)}
            times = {1: [], -1: []}
            workers = []
            for r in range(args.repeats):
                # Alternate which goes first, so that drifting load falls on both.
                for n in ((1, -1) if r % 2 == 0 else (-1, 1)):
                    if n == -1:
                        workers.append(_chosen_workers(X, k))
                    times[n].append(_fit(X, k, n, args.sweeps, args.defaults)[1])
            one, auto = float(np.median(times[1])), float(np.median(times[-1]))
            same = bool(np.array_equal(models[1].components_, models[-1].components_))
            chosen = "/".join(str(w) for w in sorted(set(workers)))
            print(f"{name:>7} {k:>5} {int(X.sum()):>10,} {one:>8.3f} {auto:>8.3f} "
                  f"{auto / one:>6.3f} {chosen:>7}  {same}", flush=True)
            rows.append(dict(corpus=name, n_topics=k, tokens=int(X.sum()), sweeps=args.sweeps,
                             repeats=args.repeats, cores=processes.usable_cores(),
                             one_job_s=round(one, 4), auto_s=round(auto, 4),
                             ratio=round(auto / one, 4), workers=chosen, same_model=same,
                             one_job_all=" ".join(f"{t:.3f}" for t in times[1]),
                             auto_all=" ".join(f"{t:.3f}" for t in times[-1])))
    _write_rows(rows, args.out / "auto_jobs.csv")


def _write_rows(rows, path):
    """``rows`` (dicts with the same keys) as a CSV file at ``path``; nothing without rows."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", nargs="+", type=int, default=[1, os.cpu_count() or 1])
    p.add_argument("--topics", nargs="+", type=int, default=None,
                   help="default 100 (20 and 100 with --auto)")
    p.add_argument("--auto", action="store_true",
                   help="n_jobs=-1 against n_jobs=1 on KJV, KOS and NIPS, alternated")
    p.add_argument("--corpora", nargs="+", default=["kjv", "kos", "nips"],
                   choices=["kjv", "kos", "nips"], help="of --auto")
    p.add_argument("--repeats", type=int, default=5, help="alternated fits of each (--auto)")
    p.add_argument("--sweeps", type=int, default=10)
    p.add_argument("--data", help="a UCI docword file (else a synthetic corpus)")
    p.add_argument("--scale", type=float, default=0.01, help="of the NYTimes shape")
    p.add_argument("--defaults", action="store_true",
                   help="the estimator's defaults (learnt priors, averaging) instead of fixed "
                        "priors and no averaging")
    p.add_argument("--out", type=Path, default=output_path("bench_cpu_threads"))
    args = p.parse_args(argv)
    args.topics_given = args.topics is not None
    args.topics = args.topics or [100]
    if args.auto:
        run_auto(args)
        return
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
    _write_rows(rows, args.out / "cpu_threads.csv")


if __name__ == "__main__":
    main()
