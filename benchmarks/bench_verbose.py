"""What ``verbose`` costs a fit: the same fit timed with ``verbose=0`` and ``verbose=1``.

Corpus: ``make_lda_corpus(shape="nytimes", n_topics=100, random_state=0, scale=--scale)``
(about 100 M tokens at scale 1; the CPU engine wants a small scale). Each K of ``--topics`` is
fitted ``--rounds`` times with each setting, alternating which goes first, every other parameter
at the estimator's default except ``max_iter=--sweeps``; a warm-up fit on the first 2,000
documents comes first. The printed lines go to a buffer, not the terminal. Reported per K: the
median wall time of each setting, their ratio, how many iterations printed a likelihood, and
whether the two models are identical (``verbose`` must not change the model); written to
``--json`` (default ``benchmarks/results/bench_verbose/bench_verbose.json``).

Usage::

    python benchmarks/bench_verbose.py --device cuda --topics 1000 --sweeps 100
    python benchmarks/bench_verbose.py --device cpu --scale 0.01 --topics 20 --sweeps 50
"""

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from _bench_common import output_path, save_json  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda._runtime.device import describe_device, resolve_device  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402


def timed(X, k, sweeps, device, verbose):
    """Wall seconds of one fit, the fitted model and what it printed."""
    lda = GPULatentDirichletAllocation(n_components=k, max_iter=sweeps, random_state=0,
                                       device=device, verbose=verbose)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        tic = time.perf_counter()
        lda.fit(X)
        wall = time.perf_counter() - tic
    return wall, lda, out.getvalue()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--topics", type=int, nargs="+", default=[1000])
    ap.add_argument("--sweeps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=output_path("bench_verbose", "bench_verbose.json"))
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    X = make_lda_corpus(shape="nytimes", n_topics=100, random_state=0, scale=args.scale).data
    X = X[:, np.flatnonzero(X.getnnz(axis=0))].tocsr()
    print(f"device: {describe_device(device)}; corpus D={X.shape[0]:,} V={X.shape[1]:,} "
          f"tokens={int(X.sum()):,}", flush=True)
    points = []
    for k in args.topics:
        timed(X[:2000], k, 2, args.device, 0)  # kernels loaded, pool grown
        walls = {0: [], 1: []}
        models, printed = {}, ""
        for r in range(args.rounds):
            for verbose in ((0, 1) if r % 2 == 0 else (1, 0)):
                wall, lda, text = timed(X, k, args.sweeps, args.device, verbose)
                walls[verbose].append(wall)
                models[verbose] = lda.components_
                printed = text if verbose else printed
        quiet, loud = float(np.median(walls[0])), float(np.median(walls[1]))
        scored = printed.count("log-likelihood")
        same = bool(np.array_equal(models[0], models[1]))
        print(f"K={k}: verbose=0 {quiet:.3f} s, verbose=1 {loud:.3f} s (medians of "
              f"{args.rounds}), overhead {loud / quiet - 1:+.1%}; {scored} of {args.sweeps} "
              f"iterations printed a likelihood; same model: {same}", flush=True)
        points.append(dict(k=k, quiet_s=walls[0], verbose_s=walls[1], overhead=loud / quiet - 1,
                           scored=scored, same_model=same))
        save_json(args.json, dict(args=vars(args), points=points))


if __name__ == "__main__":
    main()
