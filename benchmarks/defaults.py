"""Which priors should be the estimator's defaults: held-out log-likelihood against sweeps.

For each corpus, number of topics K and named configuration (estimator parameters), one fit runs
to the largest sweep count of ``--sweeps``; at each count of the schedule the fit's ``callback``
takes a snapshot of the model (what a fit stopped there would return) and scores it by document
completion (``sklearn_gpulda.metrics.document_completion``, the peer benchmark's evaluator, with
its fold-in on the fitting device). Scoring time is left out of the clock. Configurations with
averaging (``n_averaged_sweeps``) are refitted at each count instead, since the averaging window
is the last sweeps of a fit.

Corpora are those of ``benchmarks/peers.py`` (same training/test split): 20news, nips, kos and the
synthetic NYTimes shape. Writes ``defaults.csv`` (one row per snapshot) to ``--out`` (default
``benchmarks/results/defaults``) and prints, per corpus
and K, a table of configurations by sweep count, with the best configuration at each count.

Examples::

    python benchmarks/defaults.py --corpora kos --topics 20 --sweeps 50 200 --device cpu
    python benchmarks/defaults.py --topics 20 100 1000 --sweeps 100 200 400 800 1600 3200
"""

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from _bench_common import output_path  # noqa: E402
from _peer_corpora import CORPORA, CorpusUnavailable, load_corpus  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.metrics import document_completion  # noqa: E402

#: Named estimator parameters, each stated in full so that a change of the estimator's
#: defaults does not change what a name measures. 'half' in n_averaged_sweeps means half of
#: each fit's sweeps. "sklearn" is scikit-learn's defaults (None: 1 / K for both priors).
CONFIGS = {
    "sklearn": dict(doc_topic_prior=None, topic_word_prior=None, n_averaged_sweeps=0),
    "fixed-0.1-0.01": dict(doc_topic_prior=0.1, topic_word_prior=0.01, n_averaged_sweeps=0),
    "auto-0.01": dict(doc_topic_prior="auto", topic_word_prior=0.01, n_averaged_sweeps=0),
    "auto-auto": dict(doc_topic_prior="auto", topic_word_prior="auto", n_averaged_sweeps=0),
    "auto-auto-avg": dict(doc_topic_prior="auto", topic_word_prior="auto",
                          n_averaged_sweeps="half"),
}


def _parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", nargs="+", choices=CORPORA, default=CORPORA)
    p.add_argument("--topics", nargs="+", type=int, default=[20, 100, 1000])
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    p.add_argument("--sweeps", nargs="+", type=int, default=[100, 200, 400, 800, 1600, 3200])
    p.add_argument("--device", default="auto")
    p.add_argument("--max-test-docs", type=int, default=2000)
    p.add_argument("--nytimes-scale", type=float, default=0.05)
    p.add_argument("--eval-iter", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-s", type=float, default=float("inf"),
                   help="wall seconds for the whole run; later fits are skipped")
    p.add_argument("--out", type=Path, default=output_path("defaults"))
    return p.parse_args(argv)


def _model(params, k, n_iter, seed, device):
    params = dict(params)
    if params.get("n_averaged_sweeps") == "half":
        params["n_averaged_sweeps"] = n_iter // 2
    return GPULatentDirichletAllocation(n_components=k, max_iter=n_iter, random_state=seed,
                                        device=device, **params)


def _score(X_test, components, alpha, args):
    return document_completion(X_test, components, alpha, n_iter=args.eval_iter,
                               random_state=args.seed, device=args.device).per_token


def _one_chain(X_train, X_test, params, k, args):
    """One fit to max(sweeps), scored at every count of the schedule."""
    points, spent = [], [0.0]
    schedule = set(args.sweeps)

    def callback(iteration, info):
        if iteration in schedule:
            tic = time.perf_counter()
            components, alpha = info["snapshot"]()
            score = _score(X_test, components, alpha, args)
            points.append((iteration, info["seconds"] - spent[0], score, alpha))
            spent[0] += time.perf_counter() - tic

    model = _model(params, k, max(args.sweeps), args.seed, args.device)
    model.fit(X_train, callback=callback)
    return points, model


def _refits(X_train, X_test, params, k, args):
    """A fit per count of the schedule (for averaging, whose window ends each fit)."""
    points, model = [], None
    for n in sorted(args.sweeps):
        model = _model(params, k, n, args.seed, args.device).fit(X_train)
        score = _score(X_test, model.components_, model.doc_topic_prior_, args)
        points.append((n, model.fit_time_, score, model.doc_topic_prior_))
    return points, model


def _table(rows, corpus, k, sweeps):
    lines = [f"\n{corpus}, K = {k} (held-out log-likelihood per token; seconds of sampling)"]
    head = f"  {'config':<16s}" + "".join(f"{n:>18d}" for n in sweeps) + "   final alpha_sum, beta"
    lines.append(head)
    best = {}
    for name, points, model in rows:
        by_n = {n: (s, ll) for n, s, ll, _ in points}
        cells = "".join(f"{by_n[n][1]:>10.4f} {by_n[n][0]:6.1f}s" if n in by_n else f"{'':>18s}"
                        for n in sweeps)
        alpha = np.sum(np.broadcast_to(model.doc_topic_prior_, (k,)))
        lines.append(f"  {name:<16s}{cells}   {alpha:.3f}, {model.topic_word_prior_:.4g}")
        for n, (s, ll) in by_n.items():
            if n not in best or ll > best[n][1]:
                best[n] = (name, ll)
    lines.append("  best: " + ", ".join(f"{n}: {best[n][0]}" for n in sweeps if n in best))
    return "\n".join(lines)


def main(argv=None):
    args = _parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    sweeps = sorted(args.sweeps)
    with open(args.out / "defaults.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["corpus", "n_topics", "config", "sweeps", "seconds", "heldout_ll",
                         "alpha_sum", "beta"])
        for corpus in args.corpora:
            try:
                X_train, X_test, _ = load_corpus(corpus, max_test_docs=args.max_test_docs,
                                                 nytimes_scale=args.nytimes_scale,
                                                 seed=args.seed)
            except CorpusUnavailable as exc:
                print(f"skipped: {exc}")
                continue
            print(f"\n{corpus}: {X_train.shape[0]} documents, {int(X_train.sum()):,} tokens",
                  flush=True)
            _model({}, 4, 1, args.seed, args.device).fit(X_train[:50])  # load the kernels
            for k in args.topics:
                rows = []
                for name in args.configs:
                    if time.perf_counter() - start > args.budget_s:
                        print(f"  budget spent: {corpus} K={k} {name} and later skipped")
                        break
                    params = CONFIGS[name]
                    run = _refits if "n_averaged_sweeps" in params else _one_chain
                    points, model = run(X_train, X_test, params, k, args)
                    rows.append((name, points, model))
                    for n, seconds, ll, alpha in points:
                        writer.writerow([corpus, k, name, n, f"{seconds:.4f}", f"{ll:.6f}",
                                         f"{np.sum(np.broadcast_to(alpha, (k,))):.6g}",
                                         f"{model.topic_word_prior_:.6g}"])
                    fh.flush()
                print(_table(rows, corpus, k, sweeps), flush=True)
    print(f"\nresults in {args.out}; {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
