"""Time corpus generation and the host-side token conversion at NYTimes scale.

Draws a NYTimes-shaped corpus (300,000 documents, 102,660 words, about 100 M tokens) with
:func:`sklearn_gpulda.datasets.make_lda_corpus`, then times the host conversions of
:mod:`sklearn_gpulda._input.corpus`: the canonical tokens and the word frequencies with their
relabelling, which every fit on host input runs before its first sweep; the PDOW chunks built on
the host (one chunk, and a 25 M-token budget), the reference the sparse CUDA backend's device
layout is tested against; and the segmented-CSR tiling of the mini-batch backend to come. Prints
tokens, seconds and Mtoken/s per stage.

Run ``python benchmarks/bench_corpus.py --scale 0.1`` for a quick look.
"""

import argparse
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

# Run from a source checkout without installing.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda._input.layouts import (  # noqa: E402
    frequency_relabel, pdow_chunks, segmented_csr)
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402


def _peak_rss_gb():
    # ru_maxrss is in kB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _report(stage, n_tokens, seconds):
    rate = n_tokens / seconds / 1e6 if seconds > 0 else float("inf")
    print(f"{stage:<34s} {n_tokens:>13,d} {seconds:>9.2f} {rate:>10.1f} {_peak_rss_gb():>9.1f}",
          flush=True)


def _timed(repeat, fn, *args):
    """Result of ``fn(*args)`` and its best time over ``repeat`` runs.

    On a fresh virtual machine the first touch of memory is slow, so the first run of a stage can
    be dominated by page faults; later runs show the cost of the stage itself.
    """
    best = float("inf")
    for _ in range(repeat):
        result = None  # release the previous run's arrays before timing the next one
        t0 = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return result, best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="fraction of the 300,000 NYTimes documents to generate (default 1)")
    parser.add_argument("--n-topics", type=int, default=20,
                        help="topics of the generating model (default 20)")
    parser.add_argument("--chunk-tokens", type=int, default=25_000_000,
                        help="token budget of a PDOW chunk (default 25,000,000)")
    parser.add_argument("--docs-per-batch", type=int, default=10_000,
                        help="documents per segmented-CSR mini-batch (default 10,000)")
    parser.add_argument("--panel-width", type=int, default=1024,
                        help="relabelled words per segmented-CSR panel (default 1024)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each conversion stage; the best time is shown (default 1)")
    args = parser.parse_args(argv)

    print(f"python {platform.python_version()}, numpy {np.__version__}, "
          f"{platform.machine()}, scale {args.scale}")
    print(f"{'stage':<34s} {'tokens':>13s} {'seconds':>9s} {'Mtok/s':>10s} {'peak GB':>9s}")

    t0 = time.perf_counter()
    bunch = make_lda_corpus(shape="nytimes", scale=args.scale, n_topics=args.n_topics,
                            random_state=args.seed)
    X = bunch.data
    n_tokens = int(X.sum())
    _report("make_lda_corpus(shape='nytimes')", n_tokens, time.perf_counter() - t0)
    occurring = int(np.count_nonzero(X.getnnz(axis=0)))
    print(f"  {X.shape[0]:,d} docs x {X.shape[1]:,d} words, {X.nnz:,d} non-zeros, "
          f"{occurring:,d} words occur, mean length {n_tokens / X.shape[0]:.1f}")
    del bunch

    def tokenise():
        corpus = tokens(X)
        corpus.doc  # the per-token arrays are made on first use, as the NumPy engine uses them
        return corpus

    corpus, seconds = _timed(args.repeat, tokenise)
    _report("tokens (with token arrays)", corpus.n_tokens, seconds)

    def relabel():
        return frequency_relabel(corpus.word_frequencies())[0]

    new_of_old, seconds = _timed(args.repeat, relabel)
    _report("frequency_relabel (+ frequencies)", corpus.n_tokens, seconds)

    chunks, seconds = _timed(args.repeat, pdow_chunks, corpus, new_of_old, corpus.n_tokens)
    _report(f"pdow_chunks, {len(chunks)} chunk", corpus.n_tokens, seconds)
    del chunks

    chunks, seconds = _timed(args.repeat, pdow_chunks, corpus, new_of_old, args.chunk_tokens)
    _report(f"pdow_chunks, {len(chunks)} chunks of <= {args.chunk_tokens / 1e6:g}M",
            corpus.n_tokens, seconds)
    del chunks

    tiles, seconds = _timed(args.repeat, segmented_csr, corpus, new_of_old, args.docs_per_batch,
                            args.panel_width)
    _report(f"segmented_csr, {tiles.tile_ptr.size - 1} tiles", corpus.n_tokens, seconds)


if __name__ == "__main__":
    main()
