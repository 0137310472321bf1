"""``GridSearchCV`` over ``n_components`` with 5 folds on one corpus, with the package of another
checkout: the grid search of issue 35 timed for an older tree and this one on the same machine.

The grid is ``bench_users.GRID_K`` (10 values); every other parameter at its default,
``random_state=0``. A warm-up fit comes first (kernels loaded or compiled), so the wall time is
of the search's 51 fits and scores. Run it once per tree, in separate processes.

Usage::

    SKLEARN_GPULDA_DATA=.carry/data python benchmarks/probes/grid_tree.py --tree .carry/old
    SKLEARN_GPULDA_DATA=.carry/data python benchmarks/probes/grid_tree.py --tree .
"""

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GRID_K = [5, 10, 15, 20, 25, 30, 35, 40, 45, 50]  # bench_users.GRID_K, which imports this tree


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tree", default=str(HERE.parents[1]))
    p.add_argument("--corpus", default="20news")
    p.add_argument("--folds", type=int, default=5)
    args = p.parse_args()
    sys.path[:0] = [str(Path(args.tree).resolve()), str(HERE.parent)]
    import sklearn_gpulda
    from _peer_corpora import load_corpus
    from sklearn.model_selection import GridSearchCV

    from sklearn_gpulda import GPULatentDirichletAllocation

    X, _, _ = load_corpus(args.corpus, test_fraction=0.1, nytimes_scale=0.1)
    GPULatentDirichletAllocation(n_components=10, max_iter=50, random_state=0).fit(X)
    search = GridSearchCV(GPULatentDirichletAllocation(random_state=0),
                          {"n_components": GRID_K}, cv=args.folds)
    tic = time.perf_counter()
    search.fit(X)
    wall = time.perf_counter() - tic
    fit_s = search.cv_results_["mean_fit_time"].tolist()
    score_s = search.cv_results_["mean_score_time"].tolist()
    print("GRID", json.dumps(dict(package=sklearn_gpulda.__file__, corpus=args.corpus,
                                  tokens=int(X.sum()), wall_s=wall,
                                  best_k=int(search.best_params_["n_components"]),
                                  mean_fit_s=fit_s, mean_score_s=score_s)), flush=True)


if __name__ == "__main__":
    main()
