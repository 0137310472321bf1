"""Time per mini-batch of ``partial_fit`` on a GPU: what online learning costs a user.

Corpus: the NYTimes shape (``make_lda_corpus(shape='nytimes')``, ``--scale`` of its 300,000
documents). One ``partial_fit`` call on the first batch loads the kernels and starts the model;
the next call passes ``--batches`` mini-batches of ``--batch-size`` documents, and its wall time
(device drained before and after) divided by the batches is printed, with the final perplexity.
Run it under two checkouts to compare them (``PYTHONPATH=OLD python benchmarks/...``).

Usage::

    python benchmarks/bench_partial_fit.py --topics 1000 --batch-size 3000 --batches 9 --label new
    python benchmarks/bench_partial_fit.py --topics 20 --batch-size 128 --batches 88 \
        --scale 0.04 --profile 35    # where a warm mini-batch's time goes
"""

import argparse
import cProfile
import io
import pstats
import time

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import make_lda_corpus


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=3000)
    ap.add_argument("--batches", type=int, default=9)
    ap.add_argument("--label", default="")
    ap.add_argument("--profile", type=int, default=0, metavar="LINES",
                    help="also profile the timed call and print its LINES costliest functions, "
                         "by own and by cumulated time (the timing then includes the profiler)")
    args = ap.parse_args(argv)

    import cupy

    X = make_lda_corpus(shape="nytimes", n_topics=100, random_state=0, scale=args.scale).data
    X = X.tocsr()
    b = args.batch_size
    lda = GPULatentDirichletAllocation(n_components=args.topics, batch_size=b,
                                       total_samples=X.shape[0], random_state=0, device="cuda")
    lda.partial_fit(X[:b])
    cupy.cuda.Device().synchronize()
    prof = cProfile.Profile() if args.profile else None
    tic = time.perf_counter()
    if prof:
        prof.enable()
    lda.partial_fit(X[b : b * (1 + args.batches)])
    cupy.cuda.Device().synchronize()
    if prof:
        prof.disable()
    seconds = time.perf_counter() - tic
    print(f"{args.label}: partial_fit of {args.batches} mini-batches of {b:,} documents, "
          f"K={args.topics}, V={X.shape[1]:,}: {seconds:.2f} s "
          f"({seconds / args.batches * 1e3:.1f} ms per batch); perplexity {lda.bound_:.2f}")
    for key in ("tottime", "cumtime") if prof else ():
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(args.profile)
        print(out.getvalue())


if __name__ == "__main__":
    main()
