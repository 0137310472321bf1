"""Choose ``max_iter=None``'s stopping rule (tolerance, floor, ceiling, averaging) by measurement.

For each corpus and number of topics K, one long fit runs the rule's grid of check points
(``sklearn_gpulda._fitting.stopping``) with a tolerance of ``-inf``, so that it never stops
before the ceiling (``--ceiling``) or the time budget. At every check point it records the
training log-likelihood per token (the chain's own, what the rule reads) and, from the floor
on, scores the model a fit stopped there would return (its ``snapshot``: the averaging window
of the rule included) on held-out documents by document completion
(:func:`sklearn_gpulda.metrics.document_completion`). Scoring time is left out of the clock.

The chain does not depend on the tolerance (evaluations only read it), so the one fit tells,
for every tolerance of ``--tols``, where the rule would stop (:meth:`StoppingRule.replay`) and
how that model compares with one four times as long (the check point two doublings later):
the "within 0.01 nats/token of a fit four times as long" criterion of issue 37.

Corpora: ``kjv`` (bundled chapters, 10% of them held out), and those of
``benchmarks/peers.py``: ``kos``, ``nips``, ``20news`` (from ``.carry/data`` or
``$SKLEARN_GPULDA_DATA``; skipped when missing) and the synthetic NYTimes shape.

Prints, per corpus and K, the curve (sweep, seconds, training LL, gain per doubling, held-out
LL) and a table of tolerances (stop sweep, reason, seconds, held-out at the stop, held-out at
4x, the difference); writes ``points.csv`` and ``stops.csv`` to ``--out``.

Examples::

    python benchmarks/bench_stopping.py --corpora kjv --topics 20 --device cpu --ceiling 800
    python benchmarks/bench_stopping.py --topics 20 100 1000 --budget-s 380
"""

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from _bench_common import output_path  # noqa: E402
from _peer_corpora import CorpusUnavailable, load_corpus  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda._fitting import stopping  # noqa: E402
from sklearn_gpulda.metrics import document_completion  # noqa: E402

CORPORA = ["kjv", "kos", "nips", "20news", "nytimes"]


class _OutOfTime(Exception):
    """Raised from the callback to end a fit whose share of the budget is spent."""


def _parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", nargs="+", choices=CORPORA, default=CORPORA)
    p.add_argument("--topics", nargs="+", type=int, default=[20, 100, 1000])
    p.add_argument("--tols", nargs="+", type=float, default=[0.001, 0.002, 0.005, 0.01, 0.02])
    p.add_argument("--floor", type=int, default=stopping.FLOOR)
    p.add_argument("--ceiling", type=int, default=stopping.CEILING,
                   help="sweeps of the long fit (floor times a power of two)")
    p.add_argument("--rule-ceiling", type=int, default=stopping.CEILING,
                   help="the ceiling of the rules replayed (floor times a power of two): a "
                        "rule that would stop past the long fit's end shows '-'")
    p.add_argument("--device", default="auto")
    p.add_argument("--max-test-docs", type=int, default=1000)
    p.add_argument("--nytimes-scale", type=float, default=0.05)
    p.add_argument("--eval-iter", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-s", type=float, default=float("inf"),
                   help="wall seconds for the whole run, shared among the fits left; a fit "
                        "out of its share ends at its last check point")
    p.add_argument("--out", type=Path, default=output_path("bench_stopping"))
    return p.parse_args(argv)


def _corpus(name, args):
    if name == "kjv":
        import scipy.sparse as sp

        from sklearn_gpulda.datasets import load_kjv_chapters

        X = sp.csr_matrix(load_kjv_chapters().data, dtype=np.int64)
        rng = np.random.default_rng(args.seed)
        test = np.zeros(X.shape[0], dtype=bool)
        test[rng.choice(X.shape[0], X.shape[0] // 10, replace=False)] = True
        X_test = X[test]
        return X[~test], X_test[np.asarray(X_test.sum(axis=1)).ravel() >= 2]
    X_train, X_test, _ = load_corpus(name, max_test_docs=args.max_test_docs,
                                     nytimes_scale=args.nytimes_scale, seed=args.seed)
    return X_train, X_test


def long_fit(X_train, X_test, k, args, deadline):
    """One fit over the rule's grid to the ceiling or ``deadline`` (perf_counter seconds).

    Returns
    -------
    list of dict
        One per check point reached: ``sweep``, ``seconds`` (sampling, scoring left out),
        ``train_ll``, ``heldout_ll`` (NaN below the floor).
    """
    rule = stopping.StoppingRule(tol=-math.inf, floor=args.floor, ceiling=args.ceiling)
    points, spent = [], [0.0]
    grid = set(rule.check_points())

    def callback(iteration, info):
        if iteration not in grid:
            return
        tic = time.perf_counter()
        heldout = float("nan")
        if iteration >= args.floor // 2:
            components, alpha = info["snapshot"]()
            heldout = document_completion(X_test, components, alpha, n_iter=args.eval_iter,
                                          random_state=args.seed,
                                          device=args.device).per_token
        points.append(dict(sweep=iteration, seconds=info["seconds"] - spent[0],
                           train_ll=info["log_likelihood"], heldout_ll=heldout))
        spent[0] += time.perf_counter() - tic
        if time.perf_counter() > deadline:
            raise _OutOfTime

    model = GPULatentDirichletAllocation(n_components=k, max_iter=None, random_state=args.seed,
                                         device=args.device)
    with stopping.using(rule):
        try:
            model.fit(X_train, callback=callback)
        except _OutOfTime:
            pass
    return points


def stops(points, tols, floor, ceiling):
    """For each tolerance: where the rule stops on these points and the fit 4x as long."""
    by_sweep = {p["sweep"]: p for p in points}
    out = []
    for tol in tols:
        rule = stopping.StoppingRule(tol=tol, floor=floor, ceiling=ceiling)
        n, reason = rule.replay({s: p["train_ll"] for s, p in by_sweep.items()})
        row = dict(tol=tol, sweep=n, reason=reason, seconds=math.nan, heldout=math.nan,
                   sweep_4x=None, heldout_4x=math.nan)
        if n is not None:
            row.update(seconds=by_sweep[n]["seconds"], heldout=by_sweep[n]["heldout_ll"])
            # Two doublings later: four steps along the long fit's own check points, which run
            # on past the replayed rule's ceiling where --ceiling asks for a longer fit.
            grid = sorted(by_sweep)
            later = grid.index(n) + 4
            if later < len(grid) and grid[later] in by_sweep:
                row.update(sweep_4x=grid[later], heldout_4x=by_sweep[grid[later]]["heldout_ll"])
        out.append(row)
    return out


def _print_curve(points, rule):
    """The long fit's check points: training LL, its gain and spread over the doubling ending
    there (the spread is what the rule reads), and held-out LL."""
    print(f"  {'sweep':>6s} {'seconds':>9s} {'train LL':>10s} {'gain/2x':>9s} {'spread':>9s} "
          f"{'held-out':>10s}")
    train = {p["sweep"]: p["train_ll"] for p in points}
    grid = [p["sweep"] for p in points]
    # A long fit (--ceiling) goes past the rule's ceiling (--rule-ceiling), where the rule
    # has no doubling to judge.
    judged = set(rule.check_points())
    for i, p in enumerate(points):
        gain = p["train_ll"] - train[grid[i - 2]] if i >= 2 else math.nan
        spread = rule.spread(p["sweep"], train) if p["sweep"] in judged else None
        print(f"  {p['sweep']:>6d} {p['seconds']:>9.2f} {p['train_ll']:>10.4f} {gain:>9.4f} "
              f"{math.nan if spread is None else spread:>9.4f} {p['heldout_ll']:>10.4f}")


def _print_stops(rows):
    print(f"  {'tol':>7s} {'stop':>6s} {'reason':>10s} {'seconds':>9s} {'held-out':>10s} "
          f"{'4x':>6s} {'held-out':>10s} {'4x - stop':>10s}")
    for r in rows:
        stop = "-" if r["sweep"] is None else str(r["sweep"])
        four = "-" if r["sweep_4x"] is None else str(r["sweep_4x"])
        print(f"  {r['tol']:>7g} {stop:>6s} {str(r['reason']):>10s} {r['seconds']:>9.2f} "
              f"{r['heldout']:>10.4f} {four:>6s} {r['heldout_4x']:>10.4f} "
              f"{r['heldout_4x'] - r['heldout']:>10.4f}")


def main(argv=None):
    args = _parse_args(argv)
    for ceiling in (args.ceiling, args.rule_ceiling):
        stopping.StoppingRule(floor=args.floor, ceiling=ceiling)  # checks them
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    jobs = [(c, k) for c in args.corpora for k in args.topics]
    with open(args.out / "points.csv", "w", newline="") as fp, \
            open(args.out / "stops.csv", "w", newline="") as fs:
        points_csv, stops_csv = csv.writer(fp), csv.writer(fs)
        points_csv.writerow(["corpus", "n_topics", "sweep", "seconds", "train_ll",
                             "heldout_ll"])
        stops_csv.writerow(["corpus", "n_topics", "tol", "sweep", "reason", "seconds",
                            "heldout_ll", "sweep_4x", "heldout_ll_4x"])
        loaded = {}
        # Kernels load (and the CPU engine's workers start) before anything is timed.
        GPULatentDirichletAllocation(n_components=4, max_iter=1, device=args.device).fit(
            np.ones((4, 8)))
        for i, (corpus, k) in enumerate(jobs):
            left = args.budget_s - (time.perf_counter() - start)
            if left <= 0:
                print(f"budget spent: {corpus} K={k} and later skipped")
                break
            if corpus not in loaded:
                try:
                    loaded = {corpus: _corpus(corpus, args)}
                except CorpusUnavailable as exc:
                    print(f"skipped: {exc}")
                    loaded = {corpus: None}
            if loaded[corpus] is None:
                continue
            X_train, X_test = loaded[corpus]
            deadline = time.perf_counter() + left / (len(jobs) - i)
            print(f"\n{corpus}, K = {k}: {X_train.shape[0]} documents, "
                  f"{int(X_train.sum()):,} tokens; {X_test.shape[0]} held out", flush=True)
            points = long_fit(X_train, X_test, k, args, deadline)
            _print_curve(points, stopping.StoppingRule(floor=args.floor,
                                                       ceiling=args.rule_ceiling))
            rows = stops(points, args.tols, args.floor, args.rule_ceiling)
            _print_stops(rows)
            for p in points:
                points_csv.writerow([corpus, k, p["sweep"], f"{p['seconds']:.4f}",
                                     f"{p['train_ll']:.6f}", f"{p['heldout_ll']:.6f}"])
            for r in rows:
                stops_csv.writerow([corpus, k, r["tol"], r["sweep"], r["reason"],
                                    f"{r['seconds']:.4f}", f"{r['heldout']:.6f}",
                                    r["sweep_4x"], f"{r['heldout_4x']:.6f}"])
            fp.flush()
            fs.flush()
    print(f"\nresults in {args.out}; {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
