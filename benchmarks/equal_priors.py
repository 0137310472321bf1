"""The sampler alone against tomotopy's: equal fixed priors, equal sweeps, one evaluator.

Issue 9 asks that, with nothing learnt and nothing averaged, this package's collapsed Gibbs
sampler be at least as good as tomotopy's at the same number of sweeps. Both start from
``alpha = 0.1`` and ``beta = 0.01`` (tomotopy's defaults), tomotopy with its hyper-parameter
optimisation switched off (``optim_interval = 0``) and ours with fixed priors and
``n_averaged_sweeps=0``; every checkpoint is scored by
:func:`sklearn_gpulda.metrics.document_completion` with the prior both share. Ours is refitted
from scratch for each number of sweeps (a fit cannot be continued); tomotopy trains on from one
checkpoint to the next, which is the same chain.

Examples
--------
::

    python benchmarks/equal_priors.py                           # KOS and NIPS, K = 20 and 100
    python benchmarks/equal_priors.py --corpora kos --topics 20 --sweeps 50 100 --device cpu

Writes ``equal_priors.csv`` (one row per corpus, K, system and sweeps) to ``--out`` (default
``benchmarks/results/equal_priors``) and prints
the table with the difference ours minus tomotopy's.
"""

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_common import output_path  # noqa: E402
from _peer_corpora import CorpusUnavailable, load_corpus  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.metrics import document_completion  # noqa: E402

ALPHA, BETA = 0.1, 0.01


def _tomotopy_topics(model, n_words, n_topics):
    """tomotopy's topic-word matrix over our columns (its vocabulary lists words in its order)."""
    used = np.array([int(w) for w in model.used_vocabs])
    phi = np.zeros((n_topics, n_words))
    for k in range(n_topics):
        phi[k, used] = model.get_topic_word_dist(k)
    return phi


def _tomotopy(X, n_topics, seed, workers):
    import tomotopy as tp

    model = tp.LDAModel(k=n_topics, alpha=ALPHA, eta=BETA, seed=seed, min_cf=0, rm_top=0)
    model.optim_interval = 0  # the prior stays at its starting value, as ours does here
    words = np.char.mod("%d", np.arange(X.shape[1]))
    for d in range(X.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        model.add_doc(np.repeat(words[X.indices[lo:hi]], X.data[lo:hi]).tolist())
    return model


def run(corpus, n_topics, sweeps, args, writer):
    try:
        X_train, X_test, _ = load_corpus(corpus, max_docs=args.max_docs,
                                         max_test_docs=args.max_test_docs, seed=args.seed)
    except CorpusUnavailable as exc:
        print(f"skipped: {exc}")
        return []

    def score(phi):
        return document_completion(X_test, phi, ALPHA, n_iter=args.eval_iter,
                                   random_state=args.seed).per_token

    rows = []
    tomo = _tomotopy(X_train, n_topics, args.seed, args.workers)
    done = 0
    for n in sweeps:
        tic = time.perf_counter()
        tomo.train(iterations=n - done, workers=args.workers)
        done = n
        tomo_ll = score(_tomotopy_topics(tomo, X_train.shape[1], n_topics))
        rows.append(("tomotopy", n, tomo_ll, time.perf_counter() - tic))

        tic = time.perf_counter()
        ours = GPULatentDirichletAllocation(
            n_components=n_topics, doc_topic_prior=ALPHA, topic_word_prior=BETA,
            n_averaged_sweeps=0, max_iter=n, device=args.device, random_state=args.seed,
        ).fit(X_train)
        ours_ll = score(ours.components_)
        rows.append(("gpulda", n, ours_ll, time.perf_counter() - tic))
        print(f"{corpus:>7} K={n_topics:<5} sweeps={n:<5} ours {ours_ll:.4f}  "
              f"tomotopy {tomo_ll:.4f}  ours - tomotopy {ours_ll - tomo_ll:+.4f}", flush=True)
    for system, n, ll, seconds in rows:
        writer.writerow([corpus, n_topics, system, n, f"{ll:.6f}", f"{seconds:.2f}",
                         X_train.sum(), X_test.shape[0], args.device])
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", nargs="+", default=["kos", "nips"])
    p.add_argument("--topics", nargs="+", type=int, default=[20, 100])
    p.add_argument("--sweeps", nargs="+", type=int, default=[100, 200, 400])
    p.add_argument("--device", default="cpu", help="our engine: cpu (NumPy) or cuda")
    p.add_argument("--workers", type=int, default=0, help="tomotopy threads (0: all cores)")
    p.add_argument("--max-docs", type=int, default=None)
    p.add_argument("--max-test-docs", type=int, default=500)
    p.add_argument("--eval-iter", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=output_path("equal_priors"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sweeps = sorted(set(args.sweeps))
    with open(args.out / "equal_priors.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["corpus", "n_topics", "system", "sweeps", "heldout_ll", "seconds",
                         "n_train_tokens", "n_test_docs", "our_device"])
        for corpus in args.corpora:
            for n_topics in args.topics:
                run(corpus, n_topics, sweeps, args, writer)
                f.flush()
    print(f"wrote {args.out / 'equal_priors.csv'}")


if __name__ == "__main__":
    main()
