"""Choosing K on 20 Newsgroups: a plain loop of default fits against ``choose_n_components``.

Timed with a wall clock on the training counts of ``--corpus`` (20 Newsgroups by default, found
as ``benchmarks/_peer_corpora.py`` finds it: carry ``.carry/data``), every estimator parameter
at its default but ``n_components`` and ``random_state=0``:

    plain loop     GPULatentDirichletAllocation(n_components=K).fit(X) for each K of --topics,
                   in a subprocess whose sys.path starts with --tree (default: this checkout),
                   so that another checkout (an older tree) is timed on the same machine;
    sequential     choose_n_components(X, K list), the fits one after another (it also scores
                   every model: document completion of the held-out tenth, UMass, NPMI);
    concurrent     the same with n_jobs = --jobs (default: one per K): threads, a CUDA stream
                   each, one device copy of the counts; its table must equal the sequential
                   one but for the fit times ("same table" says whether it does);
    grid           GridSearchCV over 10 values of n_components with 5 folds
                   (bench_users.grid_search), skipped with --no-grid.

Every process makes a warm-up fit first (kernels loaded, CuPy's own kernels compiled), so the
times are of fits, not of a first import. Results go to
``benchmarks/results/bench_choose_k/choose_k.json``.

Usage::

    python benchmarks/bench_choose_k.py
    python benchmarks/bench_choose_k.py --tree .carry/old --no-grid
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from _bench_common import output_path, save_json  # noqa: E402

PLAIN_LOOP = """
import json, sys, time
sys.path[:0] = [{tree!r}, {bench!r}]
import numpy as np
np.seterr(all="ignore")
import sklearn_gpulda
from _peer_corpora import load_corpus  # not bench_users, which imports this tree's modules
from sklearn_gpulda import GPULatentDirichletAllocation
X, _, _ = load_corpus({corpus!r}, test_fraction=0.1, nytimes_scale=0.1)
GPULatentDirichletAllocation(n_components=10, max_iter=50, random_state=0,
                             device={device!r}).fit(X)  # warm-up: prior updates, averaging
fits = []
tic = time.perf_counter()
for k in {topics!r}:
    t = time.perf_counter()
    lda = GPULatentDirichletAllocation(n_components=k, random_state=0, device={device!r}).fit(X)
    fits.append(dict(k=k, seconds=time.perf_counter() - t, sweeps=int(lda.n_iter_)))
print("PLAIN_LOOP", json.dumps(dict(wall_s=time.perf_counter() - tic, fits=fits,
                                    package=sklearn_gpulda.__file__)))
"""


def plain_loop(tree, corpus, topics, device):
    """The plain loop's wall time and fits, in a fresh process importing ``tree``'s package."""
    code = PLAIN_LOOP.format(tree=str(Path(tree).resolve()), bench=str(HERE), corpus=corpus,
                             topics=list(topics), device=device)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout, done.stderr, sep="\n", flush=True)
        raise SystemExit(f"the plain loop failed in {tree} (exit {done.returncode})")
    line = next(x for x in done.stdout.splitlines() if x.startswith("PLAIN_LOOP"))
    return json.loads(line.split(" ", 1)[1])


def choose(X, topics, device, n_jobs):
    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda.model_selection import choose_n_components, table_rows

    base = GPULatentDirichletAllocation(random_state=0, device=device)
    tic = time.perf_counter()
    result = choose_n_components(X, topics, estimator=base, random_state=0, n_jobs=n_jobs)
    return time.perf_counter() - tic, table_rows(result.table)


def _without_times(rows):
    return [{c: v for c, v in row.items() if c != "fit_seconds"} for row in rows]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default="20news")
    p.add_argument("--topics", nargs="+", type=int, default=[10, 20, 50, 100, 200])
    p.add_argument("--device", default="auto")
    p.add_argument("--jobs", type=int, default=None, help="concurrent fits (default: one per K)")
    p.add_argument("--tree", default=str(HERE.parent),
                   help="checkout whose package the plain loop imports (default: this one)")
    p.add_argument("--no-grid", action="store_true")
    p.add_argument("--json", default=str(output_path("bench_choose_k", "choose_k.json")))
    args = p.parse_args(argv)

    from bench_users import grid_search, load

    from sklearn_gpulda import GPULatentDirichletAllocation

    X = load(args.corpus, 0.1)
    if X is None:
        raise SystemExit(f"corpus {args.corpus} not found")
    result = dict(corpus=args.corpus, docs=X.shape[0], tokens=int(X.sum()), topics=args.topics,
                  device=args.device, tree=str(Path(args.tree).resolve()))
    print(f"corpus: {args.corpus}, {X.shape[0]:,} documents, {result['tokens']:,} tokens; "
          f"K = {args.topics}", flush=True)

    result["plain_loop"] = plain_loop(args.tree, args.corpus, args.topics, args.device)
    print(f"plain loop ({args.tree}): {result['plain_loop']['wall_s']:.2f} s", flush=True)
    save_json(args.json, result)

    GPULatentDirichletAllocation(n_components=10, max_iter=50, random_state=0,
                                 device=args.device).fit(X)  # warm-up
    seq_s, seq_rows = choose(X, args.topics, args.device, None)
    print(f"choose_n_components sequential: {seq_s:.2f} s", flush=True)
    jobs = args.jobs or len(args.topics)
    con_s, con_rows = choose(X, args.topics, args.device, jobs)
    same = _without_times(con_rows) == _without_times(seq_rows)
    print(f"choose_n_components concurrent (n_jobs={jobs}): {con_s:.2f} s; same table: {same}",
          flush=True)
    result.update(sequential=dict(wall_s=seq_s, table=seq_rows),
                  concurrent=dict(wall_s=con_s, n_jobs=jobs, table=con_rows, same_table=same))
    save_json(args.json, result)

    if not args.no_grid:
        result["grid"] = grid_search(X, args.device)
        print(f"GridSearchCV 10 x 5: {result['grid']['grid_s']:.2f} s "
              f"({result['grid']['fits']} fits, best K {result['grid']['best_k']})", flush=True)
        save_json(args.json, result)

    plain = result["plain_loop"]["wall_s"]
    print("\n| what | wall (s) | / plain loop |")
    print("|---|---:|---:|")
    print(f"| plain loop of default fits | {plain:.2f} | 1.00 |")
    for name, key in (("choose_n_components, sequential", "sequential"),
                      (f"choose_n_components, n_jobs={jobs}", "concurrent")):
        print(f"| {name} | {result[key]['wall_s']:.2f} | {result[key]['wall_s'] / plain:.2f} |")
    if "grid" in result:
        print(f"| GridSearchCV, 10 K x 5 folds | {result['grid']['grid_s']:.2f} | |")
    print("\n| K | held-out/token | UMass | NPMI | fit (s) seq | fit (s) conc | sweeps |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for s, c in zip(seq_rows, con_rows):
        print(f"| {s['n_components']} | {s['held_out_per_token']:.4f} | {s['umass']:.3f} "
              f"| {s['npmi']:.3f} | {s['fit_seconds']:.2f} | {c['fit_seconds']:.2f} "
              f"| {s['n_iter']} |")
    print(f"\nsaved: {args.json}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
