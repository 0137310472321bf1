"""Throughput of the CUDA engine on a NYTimes-shaped corpus (D=300k, V=102,660, ~100 M tokens).

The corpus is generated on the GPU (documents mixing a few of 200 Zipfian topics with a Zipfian
background, lengths log-normal around NYTimes' 332 tokens) unless
``sklearn_gpulda.datasets.make_lda_corpus(shape="nytimes")`` exists. For each K the script
initialises the engine, runs ``--iters`` sweeps and reports, per iteration, Mtoken/s and the
stage split from CUDA events, the achieved bandwidth of the sampler against a measured
device-to-device copy, and the memory pool's peak.

Usage::

    python benchmarks/bench_cuda.py --topics 100 1000 10000 --iters 51 --json out.json
"""

import argparse
import json
import time

import numpy as np


def copy_bandwidth(cp, n_bytes=2 << 30, reps=10):
    """Device-to-device copy bandwidth in GB/s (bytes read plus bytes written)."""
    src = cp.ones(n_bytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    cp.copyto(dst, src)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        cp.copyto(dst, src)
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    del src, dst
    return 2 * n_bytes / np.median(times) / 1e9


def nytimes_corpus(cp, n_docs=300_000, n_words=102_660, mean_len=332, n_true=200, seed=0):
    """A TokenCorpus of NYTimes' shape, drawn on the device (see the module docstring)."""
    from sklearn_gpulda._corpus import TokenCorpus

    rs = cp.random.RandomState(seed)
    lengths = cp.maximum(1, cp.rint(rs.lognormal(np.log(mean_len) - 0.5, 1.0, size=n_docs))).astype(
        cp.int64
    )
    lengths = cp.maximum(1, cp.rint(lengths * (mean_len * n_docs / float(lengths.sum())))).astype(
        cp.int64
    )
    n = int(lengths.sum())
    doc_ptr = cp.zeros(n_docs + 1, dtype=cp.int64)
    cp.cumsum(lengths, out=doc_ptr[1:])
    # Document of each token without a host loop: mark document starts and scan.
    mark = cp.zeros(n, dtype=cp.int32)
    mark[doc_ptr[1:-1]] = 1
    doc = cp.cumsum(mark, dtype=cp.int32)
    del mark
    # Each document mixes 4 topics with Dirichlet(0.5) weights; 25% of tokens from the background.
    mix = 4
    doc_topics = rs.randint(0, n_true, size=(n_docs, mix)).astype(cp.int32)
    w = rs.gamma(0.5, size=(n_docs, mix))
    cum = cp.cumsum(w / w.sum(axis=1, keepdims=True), axis=1)
    u = rs.random_sample(n, dtype=cp.float32)
    which = (u[:, None] > cum[doc].astype(cp.float32)).sum(axis=1).clip(0, mix - 1)
    topic = doc_topics[doc, which]
    del which, u
    ranks = cp.arange(1, n_words + 1, dtype=cp.float64)
    zipf_cdf = cp.cumsum(ranks**-1.05)
    zipf_cdf /= zipf_cdf[-1]
    rank = cp.searchsorted(zipf_cdf, rs.random_sample(n)).clip(0, n_words - 1).astype(cp.int32)
    # Topic t's r-th word is a topic-specific permutation of the vocabulary; background keeps r.
    perm = cp.argsort(rs.random_sample((n_true, n_words)), axis=1).astype(cp.int32)
    background = rs.random_sample(n, dtype=cp.float32) < 0.25
    word = cp.where(background, rank, perm[topic, rank])
    del perm, rank, topic, background
    # Canonical order: by document, then word.
    order = cp.argsort(doc.astype(cp.int64) * n_words + word)
    word = word[order]
    del order
    corpus = TokenCorpus(n_docs, n_words, doc_ptr.get(), doc.get(), word.get(), None)
    return corpus


def load_corpus(cp):
    try:
        from sklearn_gpulda.datasets import make_lda_corpus
        from sklearn_gpulda._corpus import tokens_from_counts

        X = make_lda_corpus(shape="nytimes", n_topics=100, random_state=0).data
        return (
            tokens_from_counts(X),
            "datasets.make_lda_corpus(shape='nytimes', n_topics=100, random_state=0)",
        )
    except Exception:
        return nytimes_corpus(cp), "benchmarks/bench_cuda.py nytimes_corpus (generated on the GPU)"


def mean_row_nnz(eng):
    """Token-weighted mean number of non-zeros of A[d]: the entries the sampler reads per token."""
    st = eng._state
    total = 0.0
    for ch in st.chunks:
        nnz = ch.a_row[:, 1].astype(np.float64)
        total += float((nnz * ch.doc_len.astype(np.float64)).sum())
    return total / st.corpus.n_tokens


def bench_one(cp, corpus, n_topics, iters, seed=0):
    from sklearn_gpulda._engines.cuda_engine import CudaEngine

    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    eng = CudaEngine(n_topics, 50.0 / n_topics, 0.01, seed, profile=True)
    t = time.perf_counter()
    eng.initialize(corpus)
    cp.cuda.Device().synchronize()
    init_s = time.perf_counter() - t
    init_peak = pool.total_bytes()
    pool.free_all_blocks()
    rows = []
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    peak = pool.total_bytes()
    for it in range(1, iters + 1):
        kd = mean_row_nnz(eng)
        start.record()
        eng.sweep(it)
        stop.record()
        stop.synchronize()
        ms = cp.cuda.get_elapsed_time(start, stop)
        peak = max(peak, pool.total_bytes())
        rows.append(
            dict(iteration=it, ms=ms, mtok_s=corpus.n_tokens / ms / 1e3, row_nnz=kd, **eng.stage_ms)
        )
    ll = eng.log_likelihood() / corpus.n_tokens
    entry_bytes = 4 if eng._state.chunks[0].packed else 8
    eng.release()
    return dict(
        n_topics=n_topics,
        init_s=init_s,
        init_peak_gb=init_peak / 1e9,
        peak_gb=peak / 1e9,
        loglik_per_token=ll,
        entry_bytes=entry_bytes,
        block=eng._sample_block,
        iterations=rows,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--iters", type=int, default=51)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import cupy as cp

    from sklearn_gpulda._engines.cuda_engine import describe_device

    gbs = copy_bandwidth(cp)
    t = time.perf_counter()
    corpus, source = load_corpus(cp)
    gen_s = time.perf_counter() - t
    print(f"device: {describe_device()}; copy bandwidth {gbs:.0f} GB/s")
    print(
        f"corpus: {source}: D={corpus.n_docs} V={corpus.n_words} T={corpus.n_tokens} "
        f"({gen_s:.1f} s)"
    )
    results = dict(
        device=describe_device(),
        copy_gb_s=gbs,
        corpus=source,
        n_docs=corpus.n_docs,
        n_words=corpus.n_words,
        n_tokens=corpus.n_tokens,
        runs=[],
    )
    for k in args.topics:
        res = bench_one(cp, corpus, k, args.iters)
        results["runs"].append(res)
        rows = res["iterations"][1:] or res["iterations"]

        def mean(key, rows=rows):
            return float(np.mean([r[key] for r in rows]))

        # Sampler bytes per token: tok 4 + doc 4 + A row descriptor 8 + topic 2 + one A entry
        # (4 bytes packed, 8 wide) per non-zero of the row.
        bytes_tok = 18 + res["entry_bytes"] * mean("row_nnz")
        sample_gbs = bytes_tok * corpus.n_tokens / (mean("sample") / 1e3) / 1e9
        res["summary"] = dict(
            mtok_s=corpus.n_tokens / mean("ms") / 1e3,
            ms=mean("ms"),
            sample_ms=mean("sample"),
            rebuild_a_ms=mean("rebuild_a"),
            count_b_ms=mean("count_b_totals"),
            row_nnz=mean("row_nnz"),
            sample_gb_s=sample_gbs,
            iters_averaged=len(rows),
        )
        s = res["summary"]
        print(
            f"K={k:6d} iters 2-{len(rows) + 1}: {s['mtok_s']:8.1f} Mtoken/s  "
            f"{s['ms']:7.2f} ms/iter (sample {s['sample_ms']:.2f}, "
            f"rebuild A {s['rebuild_a_ms']:.2f}, B+totals {s['count_b_ms']:.2f}) "
            f"K_d {s['row_nnz']:.1f} sampler {s['sample_gb_s']:.0f} GB/s "
            f"({100 * s['sample_gb_s'] / gbs:.0f}% of copy) peak {res['peak_gb']:.2f} GB "
            f"(init {res['init_peak_gb']:.2f} GB, {res['init_s']:.1f} s) "
            f"loglik/token {res['loglik_per_token']:.3f}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
