"""The sparse sampler's block size and work-item size against its sweep time.

A block of the sparse sampler walks one work item (a word's tokens, or a piece of a frequent
word's) at a time, its warps sharing the item's 32-token batches and meeting at a barrier before
the next item. A word of a few dozen tokens keeps one warp of an eight-warp block busy while the
other seven wait; on corpora with large vocabularies most items are such words. This probe times
sweeps of the sparse CUDA sampler with the smallest block its launch may take
(``sample_sparse.FIRST_BLOCK``) and the largest work item (``layout.PIECE``) set per run, and
checks that every setting gives the same chain: the draws do not depend on the schedule, so the
log-likelihood after the sweeps must agree bit for bit.

Per point: mean of sweeps 2..n of the whole sweep and of the sampling stage (CUDA events of the
profiled sampler), fixed priors (alpha = 50 / K, beta = 0.01), seed 0.

Usage::

    SKLEARN_GPULDA_DATA=.carry/data python benchmarks/probes/sampler_block.py \\
        --points nytimes:1000 20news:200 nips:100 kos:100 --blocks 256 128 64 --pieces 4096 1024
"""

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent)]

from _bench_common import after_first, cuda_sampler, run_sweeps  # noqa: E402


def corpus_tokens(name, scale):
    """The training tokens of a corpus of ``_peer_corpora`` (or the NYTimes shape at ``scale``)."""
    from sklearn_gpulda._input.corpus import tokens

    if name == "nytimes":
        from sklearn_gpulda.datasets import make_lda_corpus

        return tokens(make_lda_corpus(shape="nytimes", n_topics=100, random_state=0,
                                      scale=scale).data)
    from _peer_corpora import load_corpus

    X_train, _, _ = load_corpus(name, max_test_docs=2000)
    return tokens(X_train)


def one_point(cp, corpus, n_topics, block, piece, iters, exact=False, storage=None):
    """Sweeps of one setting (B stored as ``storage`` says, the sampler's choice where None):
    mean ms of the sweep and of sampling, the block the launch took, and the chain's
    log-likelihood (its fingerprint). ``exact``: the launch takes ``block``
    itself, not the smallest block from it on that holds the most warps."""
    from sklearn_gpulda.backends.cuda.sparse import layout, sample_sparse

    saved = sample_sparse.FIRST_BLOCK, sample_sparse.SAMPLE_BLOCK_MAX, layout.PIECE
    sample_sparse.FIRST_BLOCK, layout.PIECE = block, piece
    if exact:
        sample_sparse.SAMPLE_BLOCK_MAX = block
    try:
        options = {} if storage is None else {"word_topic_storage": storage}
        sampler = cuda_sampler("sparse", n_topics, 50.0 / n_topics, 0.01, 0, **options)
        try:
            timed = run_sweeps(cp, sampler, corpus, iters)
            loglik = float(sampler.log_likelihood())
            shape = tuple(int(v) for v in sampler._shape)
        finally:
            sampler.release()
    finally:
        sample_sparse.FIRST_BLOCK, sample_sparse.SAMPLE_BLOCK_MAX, layout.PIECE = saved
    ms = after_first(timed["ms"])
    sample = after_first([s.get("sample", float("nan")) for s in timed["stages"]])
    return dict(ms=sum(ms) / len(ms), sample_ms=sum(sample) / len(sample), grid=shape[0],
                block=shape[1], loglik=loglik)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--points", nargs="+", default=["nytimes:1000", "20news:200"],
                   help="corpus:K pairs (corpora: nytimes, kos, nips, 20news)")
    p.add_argument("--scale", type=float, default=0.25, help="the NYTimes shape's scale")
    p.add_argument("--blocks", type=int, nargs="+", default=[256, 128, 64])
    p.add_argument("--pieces", type=int, nargs="+", default=[4096, 1024])
    p.add_argument("--exact", action="store_true",
                   help="launch exactly each block of --blocks (default: the smallest block from "
                        "it on that holds the most warps, as the sampler chooses)")
    p.add_argument("--storage", choices=["dense", "hybrid", "auto"], default=None)
    p.add_argument("--iters", type=int, default=11)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    import cupy as cp

    rows = []
    corpora = {}
    for point in args.points:
        name, k = point.split(":")
        if name not in corpora:
            corpora[name] = corpus_tokens(name, args.scale)
        corpus = corpora[name]
        base = None
        for piece in args.pieces:
            for block in args.blocks:
                r = one_point(cp, corpus, int(k), block, piece, args.iters, args.exact,
                              args.storage)
                r.update(corpus=name, n_topics=int(k), first_block=block, piece=piece,
                         tokens=int(corpus.n_tokens))
                base = base or r
                r["same_chain"] = r["loglik"] == base["loglik"]
                r["speedup"] = base["sample_ms"] / r["sample_ms"]
                rows.append(r)
                print(f"{name:8s} K={k:>5s} block>={block:4d} piece {piece:5d}: launch "
                      f"{r['grid']}x{r['block']}  sweep {r['ms']:7.3f} ms  sample "
                      f"{r['sample_ms']:7.3f} ms  x{r['speedup']:.2f}  "
                      f"{r['tokens'] / r['ms'] / 1e3:7.0f} Mtoken/s  same chain "
                      f"{r['same_chain']}", flush=True)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
