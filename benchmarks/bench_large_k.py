"""The large-K sampler's block size: sweep time at K above 32,768 for 256-, 512- and 1,024-thread
blocks.

Above 32,768 topics each resident block of the sparse sampler keeps its word's Bhat row (K
floats, 256 KB at K = 65,536) in a global scratch row of its own (``cuda/sample_sparse.cu``). The
block size sets how many blocks are resident, hence how many rows compete for L1 and L2: one
1,024-thread block per SM leaves one row per SM's L1, six 256-thread blocks leave six. This
script times the same chain with each size (``LARGE_K_BLOCK`` of
``sklearn_gpulda.backends.cuda.sparse.sample_sparse``) and checks that the topics do not depend
on it.

Corpus: ``make_lda_corpus(shape='nytimes', n_topics=100, random_state=0, scale=--scale)``.
Printed per K and block: the grid, the mean of sweeps 2..n of the whole sweep and of its sampling
stage (CUDA events), and the device pool's peak; every point goes to ``--json`` (default
``benchmarks/results/bench_large_k/bench_large_k.json``).

Usage::

    python benchmarks/bench_large_k.py --topics 65536 --blocks 256 512 1024 --iters 6
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _bench_common import (  # noqa: E402
    after_first, cuda_sampler, describe_device, output_path, run_sweeps, save_json)

BETA = 0.01


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, nargs="+", default=[65536])
    ap.add_argument("--blocks", type=int, nargs="+", default=[256, 512, 1024])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--json", default=output_path("bench_large_k", "bench_large_k.json"))
    args = ap.parse_args(argv)

    import cupy as cp

    from sklearn_gpulda._input.corpus import tokens
    from sklearn_gpulda.backends.cuda.sparse import sample_sparse
    from sklearn_gpulda.datasets import make_lda_corpus

    describe_device(cp)
    t = time.perf_counter()
    X = make_lda_corpus(shape="nytimes", n_topics=100, random_state=0, scale=args.scale).data
    corpus = tokens(X)
    print(f"corpus: D={corpus.n_docs:,} V={corpus.n_words:,} tokens={corpus.n_tokens:,} "
          f"({time.perf_counter() - t:.1f} s)")
    points = []
    for k in args.topics:
        topics = None
        for block in args.blocks:
            sample_sparse.LARGE_K_BLOCK = block
            sampler = cuda_sampler("sparse", k, 1.0 / k, BETA, 0)
            pool = cp.get_default_memory_pool()
            run = run_sweeps(cp, sampler, corpus, args.iters)
            z = sampler.topics()
            same = None if topics is None else bool(np.array_equal(z, topics))
            topics = z if topics is None else topics
            sweep_ms = float(np.mean(after_first(run["ms"])))
            sample_ms = float(np.mean(after_first([s["sample"] for s in run["stages"]])))
            point = dict(k=k, block=block, grid=sampler._shape[0], large_k=sampler.large_k,
                         sweep_ms=sweep_ms, sample_ms=sample_ms,
                         pool_gb=pool.total_bytes() / 1e9, same_topics=same)
            points.append(point)
            print(f"K={k:>6} block={block:>5} grid={point['grid']:>5}: sweep {sweep_ms:8.2f} ms, "
                  f"sampling {sample_ms:8.2f} ms, pool {point['pool_gb']:.1f} GB"
                  + ("" if same is None else f", same topics as the first: {same}"))
            sampler.release()
            pool.free_all_blocks()
            save_json(args.json, points)


if __name__ == "__main__":
    main()
