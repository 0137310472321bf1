#!/usr/bin/env python3
"""Where a GPU ``partial_fit`` mini-batch goes, once kernels are compiled: a profile of one pass.

The first pass loads the package's kernels and compiles CuPy's own (seconds on a fresh
machine), so it runs unprofiled; the second pass over the same mini-batches is profiled and
its calls printed by their own time and by cumulated time.

Usage::

    python tools/profile_partial_fit.py --topics 20 --batch-size 128 --batches 88 --scale 0.04
"""

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--batches", type=int, default=88)
    p.add_argument("--scale", type=float, default=0.04)
    p.add_argument("--lines", type=int, default=35)
    args = p.parse_args(argv)
    import cupy

    X = make_lda_corpus(shape="nytimes", n_topics=100, random_state=0, scale=args.scale).data
    X = X.tocsr()[: args.batch_size * args.batches]
    lda = GPULatentDirichletAllocation(n_components=args.topics, batch_size=args.batch_size,
                                       total_samples=X.shape[0], random_state=0, device="cuda")
    lda.partial_fit(X)
    cupy.cuda.Device().synchronize()
    prof = cProfile.Profile()
    tic = time.perf_counter()
    prof.enable()
    lda.partial_fit(X)
    cupy.cuda.Device().synchronize()
    prof.disable()
    seconds = time.perf_counter() - tic
    print(f"K={args.topics}, V={X.shape[1]:,}, {args.batches} mini-batches of {args.batch_size}: "
          f"{seconds:.3f} s, {1e3 * seconds / args.batches:.2f} ms per batch (profiled)")
    for key in ("tottime", "cumtime"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(args.lines)
        print(out.getvalue())


if __name__ == "__main__":
    main()
