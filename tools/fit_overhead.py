"""Wall time of a GPU fit against its sampling time: the fixed cost around the sweeps.

At K = 1,000 the peer benchmark's fits took about 3 s on a 4.5 M-token NYTimes-shaped corpus
whatever the number of iterations; this prints, per K and iteration count, the fit's wall time,
``fit_time_`` (initialisation and sweeps) and the remainder (validation, host token lists,
copying the topic-word table back, the final likelihood).

Usage: python tools/fit_overhead.py [--scale 0.05] [--topics 100 1000]
"""

import argparse
import time

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import make_lda_corpus


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.05)
    p.add_argument("--topics", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--iters", type=int, nargs="+", default=[5, 160])
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    X = make_lda_corpus(shape="nytimes", scale=args.scale, n_topics=100, random_state=0).data
    X = X[:, X.getnnz(axis=0) > 0].tocsr()  # as the peer benchmark drops unused words
    print(f"corpus: {X.shape[0]} docs, {X.shape[1]} words, {int(X.sum()):,} tokens")
    GPULatentDirichletAllocation(n_components=8, max_iter=1, device=args.device).fit(X[:50])
    for k in args.topics:
        for n_iter in args.iters:
            lda = GPULatentDirichletAllocation(n_components=k, max_iter=n_iter, random_state=0,
                                               device=args.device)
            tic = time.perf_counter()
            lda.fit(X)
            wall = time.perf_counter() - tic
            print(f"K={k:5d} iters={n_iter:4d} fit {wall:6.3f} s, of which init+sweeps "
                  f"{lda.fit_time_:6.3f} s, rest {wall - lda.fit_time_:6.3f} s")


if __name__ == "__main__":
    main()
