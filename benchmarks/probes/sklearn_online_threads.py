"""Seconds per pass of scikit-learn's online LDA over 20 Newsgroups, by n_jobs and by the
BLAS/OpenMP threads threadpoolctl allows: which setting the peer benchmark gives it.

``benchmarks/peers.py`` runs scikit-learn's online learning with one job because, with
mini-batches of 128 documents, more jobs split every batch over worker processes; this probe
is how that setting is checked on a new host, and how the host's speed for scikit-learn is
judged when ratios against it are quoted (doc/performance.md, online learning).

    python benchmarks/probes/sklearn_online_threads.py --topics 20 100 --jobs 1 16 --blas 1 0

``--blas 0`` leaves the thread pools as they are. Reads the corpus as benchmarks/peers.py does
(``SKLEARN_GPULDA_DATA``, ``.carry/data`` or ``../shared/data``).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _peer_corpora


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, nargs="+", default=[20])
    ap.add_argument("--jobs", type=int, nargs="+", default=[1])
    ap.add_argument("--blas", type=int, nargs="+", default=[0, 1])
    args = ap.parse_args(argv)

    from sklearn.decomposition import LatentDirichletAllocation
    from threadpoolctl import threadpool_info, threadpool_limits

    import _peer_corpora

    X = _peer_corpora.load_corpus("20news")[0]
    print(f"20news train {X.shape}, {int(X.sum()):,} tokens")
    print("thread pools:", [(p["internal_api"], p["num_threads"]) for p in threadpool_info()])
    for k in args.topics:
        for jobs in args.jobs:
            for blas in args.blas:
                model = LatentDirichletAllocation(n_components=k, learning_method="online",
                                                  total_samples=X.shape[0], n_jobs=jobs,
                                                  random_state=0)
                tic = time.perf_counter()
                if blas:
                    with threadpool_limits(limits=blas):
                        model.partial_fit(X)
                else:
                    model.partial_fit(X)
                print(f"K={k} n_jobs={jobs} blas_threads={blas or 'default'}: "
                      f"{time.perf_counter() - tic:.2f} s per pass", flush=True)


if __name__ == "__main__":
    main()
