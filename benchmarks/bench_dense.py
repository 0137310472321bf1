"""Dense sampling kernels (cuda/sample_dense.cu) against each other and the sparse backend.

For K = 16, 48, 80, ..., 1,008 and 1,024 (the sweep of Steele and Tristan, PPoPP'17, Sec. 7:
K = 32k + 16) the script times one E-step of each dense kernel -- butterfly (Alg. 7), register
transpose (Alg. 4 + Fig. 2), plain (Alg. 1) -- on a NYTimes-shaped corpus drawn by
``datasets.make_lda_corpus(shape="nytimes", scale=...)``, and on NIPS when a UCI docword file is
found where ``benchmarks/_peer_corpora.py`` looks. The topics, A and Bhat come from a random
topic assignment (the state of a first E-step), and every timed launch starts from those topics
(the kernels read each token's current topic to take its own count out); the dense kernels' speed
does not depend on the state. Reported: sampling-kernel Mtoken/s (median of ``--reps`` launches
timed with CUDA events).

Unless ``--no-sparse`` is given, the sparse backend (``CudaSparseSampler``, from the registry of
``sklearn_gpulda.backends``) is timed at the same K: ``--sparse-iters`` sweeps from its random
initialisation, reporting the last sweep's whole-iteration Mtoken/s and its sampling stage alone
(the number to set against the dense kernels).

Time is bounded by ``--budget-s``, shared equally between the corpora: the dense kernels may use
60% of a corpus' share, the sparse backend the rest; both visit K coarse to fine (ends first, then
halvings), so a cut run still covers the range. The dense kernels run one thread per document,
so the corpus needs tens of thousands of documents to fill a large GPU: ``--scale 0.25`` (75,000
documents, ~25 M tokens) is about one wave on an H100 at the kernels' 128 registers per thread.

Writes ``bench_dense.csv``, ``bench_dense.json`` and ``bench_dense.png`` (when matplotlib imports)
into ``--out`` (default ``benchmarks/results/bench_dense``).

Usage::

    python benchmarks/bench_dense.py --scale 0.25 --reps 3 --budget-s 150
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench_common import (  # noqa: E402
    ALPHA_HELP, VARIANTS, alpha_for, coarse_to_fine, cuda_sampler, describe_device, load_corpora,
    plot_throughput, output_path, run_sweeps, write_rows)


def paper_sweep():
    """K = 16, 48, ..., 1,008 (32 k + 16) and 1,024."""
    return [16 + 32 * k for k in range(32)] + [1024]


def device_state(cp, doc_d, word_d, n_docs, n_words, n_topics, beta, seed):
    """Topics (int32), A (D x K) and Bhat (V x K) float32 on the device from a uniform random
    assignment; A and Bhat count those topics, as a sampler's M-step would."""
    rs = cp.random.RandomState(seed)
    z = rs.randint(0, n_topics, size=doc_d.size, dtype=cp.int64)
    a = cp.bincount(doc_d.astype(cp.int64) * n_topics + z, minlength=n_docs * n_topics)
    A = a.astype(cp.float32).reshape(n_docs, n_topics)
    del a
    b = cp.bincount(word_d.astype(cp.int64) * n_topics + z, minlength=n_words * n_topics)
    b = b.reshape(n_words, n_topics).astype(cp.float64)
    bhat = ((b + beta) / (b.sum(axis=0) + n_words * beta)).astype(cp.float32)
    del b
    return z.astype(cp.int32), A, bhat


def time_dense(cp, variant, order_d, doc_ptr_d, word_d, z0, A, bhat, alpha, z, reps, block):
    """Median ms of ``reps`` launches of one dense kernel, each from the topics ``z0``.

    ``z`` is the kernel's in/out topic array; it is reset from ``z0`` before every launch,
    outside the timed region, so each launch removes the counts A really holds.
    """
    from sklearn_gpulda.backends.cuda.dense.sample_dense import sample_dense

    alpha_d = cp.full(A.shape[1], alpha, dtype=cp.float32)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    ms = []
    for r in range(reps + 1):  # launch 0 is a warm-up (kernel loading)
        z[...] = z0
        start.record()
        sample_dense(variant, order_d, doc_ptr_d, word_d, None, A, bhat, alpha_d, 1, 1 + r, z,
                     block=block)
        stop.record()
        stop.synchronize()
        if r:
            ms.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(ms))


def time_sparse(cp, corpus, n_topics, alpha, beta, iters):
    """(whole-sweep ms, sampling-stage ms) of the last of ``iters`` sweeps, and init s."""
    sampler = cuda_sampler("sparse", n_topics, alpha, beta, 0)
    try:
        timed = run_sweeps(cp, sampler, corpus, iters)
    finally:
        sampler.release()
    return timed["ms"][-1], timed["stages"][-1].get("sample"), timed["init_s"]


def plot(rows, path):
    series = [
        ("butterfly", "butterfly (Alg. 7)"),
        ("transpose", "register transpose (Alg. 4)"),
        ("plain", "plain (Alg. 1)"),
        ("sparse_sample", "sparse backend, sampling"),
        ("sparse_sweep", "sparse backend, whole sweep"),
    ]
    return plot_throughput(rows, path, series, "Mtoken/s")


def write_outputs(args, device_name, corpora, rows):
    keys = (
        ["corpus", "K", "n_tokens"]
        + [c for v in args.variants for c in (v, v + "_ms")]
        + ["sparse_sample", "sparse_sweep"]
    )
    write_rows(args.out, "bench_dense", keys, rows, device_name, args, corpora)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.25, help="fraction of NYTimes' 300k documents")
    ap.add_argument(
        "--topics", type=int, nargs="+", default=None, help="default: the paper's sweep"
    )
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--sparse-iters", type=int, default=3)
    ap.add_argument("--no-sparse", action="store_true")
    ap.add_argument("--alpha", default="50/K", help=ALPHA_HELP + " (default 50/K)")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=200.0,
        help="wall-clock budget; sparse-backend points stop when it is spent",
    )
    ap.add_argument("--out", default=output_path("bench_dense"),
                    help="folder of the CSV, JSON and plot (default benchmarks/results/"
                         "bench_dense)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t_begin = time.perf_counter()

    import cupy as cp

    from sklearn_gpulda.backends.cuda.dense.sample_dense import MAX_TOPICS, document_order

    name = describe_device(cp)
    topics = [k for k in (args.topics or paper_sweep()) if 1 <= k <= MAX_TOPICS]
    beta = 0.01

    rows = []
    corpora = load_corpora(args.scale, args.seed)
    # Each corpus gets an equal share of the budget: the dense kernels up to 60% of it, the
    # sparse backend the rest. Both visit K coarse to fine, so a cut leaves a spread of K.
    share = args.budget_s / max(1, len(corpora))
    for cname, corpus, descr in corpora:
        t_corpus = time.perf_counter()
        lengths = np.diff(corpus.doc_ptr)
        print(
            f"\n== {cname}: {descr}\n   D={corpus.n_docs:,} V={corpus.n_words:,} "
            f"tokens={corpus.n_tokens:,} mean length {lengths.mean():.0f}, max {lengths.max():,}"
        )
        doc_ptr_d = cp.asarray(corpus.doc_ptr)
        word_d = cp.asarray(corpus.word)
        doc_d = cp.asarray(corpus.doc)
        order_d = document_order(doc_ptr_d)
        z = cp.empty(corpus.n_tokens, dtype=cp.int32)
        by_k = {}
        for i in coarse_to_fine(len(topics)):
            if time.perf_counter() - t_corpus > 0.6 * share:
                print(f"   dense kernels: {0.6 * share:.0f} s spent; remaining K skipped")
                break
            k = topics[i]
            z0, A, bhat = device_state(
                cp, doc_d, word_d, corpus.n_docs, corpus.n_words, k, beta, args.seed + k
            )
            row = dict(corpus=cname, K=k, n_tokens=corpus.n_tokens)
            for v in args.variants:
                ms = time_dense(cp, v, order_d, doc_ptr_d, word_d, z0, A, bhat,
                                alpha_for(args.alpha, k), z, args.reps, args.block)
                row[v] = corpus.n_tokens / ms / 1e3
                row[v + "_ms"] = ms
            del z0, A, bhat
            cp.get_default_memory_pool().free_all_blocks()
            by_k[k] = row
            rows.append(row)
            write_outputs(args, name, corpora, rows)
            print(
                "   K=%5d  " % k
                + "  ".join(f"{v} {row[v]:9.1f}" for v in args.variants)
                + "  Mtoken/s",
                flush=True,
            )
        del doc_d
        if not args.no_sparse:
            for k in [topics[i] for i in coarse_to_fine(len(topics)) if topics[i] in by_k]:
                if time.perf_counter() - t_corpus > share:
                    print(f"   sparse backend: {share:.0f} s spent; remaining K skipped")
                    break
                try:
                    ms, sample_ms, init_s = time_sparse(
                        cp, corpus, k, alpha_for(args.alpha, k), beta, args.sparse_iters
                    )
                except Exception as exc:
                    print(f"   sparse backend K={k}: {type(exc).__name__}: {exc}")
                    continue
                by_k[k]["sparse_sweep"] = corpus.n_tokens / ms / 1e3
                if sample_ms:
                    by_k[k]["sparse_sample"] = corpus.n_tokens / sample_ms / 1e3
                write_outputs(args, name, corpora, rows)
                print(
                    f"   sparse K={k:5d}: sweep {by_k[k]['sparse_sweep']:9.1f} Mtoken/s"
                    + (f", sampling {by_k[k]['sparse_sample']:9.1f}" if sample_ms else "")
                    + f" (init {init_s:.1f} s)",
                    flush=True,
                )
                cp.get_default_memory_pool().free_all_blocks()
        del doc_ptr_d, word_d, z
        cp.get_default_memory_pool().free_all_blocks()
    rows.sort(key=lambda r: (r["corpus"], r["K"]))

    cols = ["corpus", "K", *args.variants, "sparse_sample", "sparse_sweep"]
    print("\nMtoken/s (dense: one sampling launch; sparse: sampling stage and whole sweep)")
    print("  ".join(f"{c:>13}" for c in cols))
    for r in rows:
        print(
            "  ".join(
                (
                    f"{r.get(c, ''):>13.1f}"
                    if isinstance(r.get(c), float)
                    else f"{str(r.get(c, '-')):>13}"
                )
                for c in cols
            )
        )
    # The paper's claims (Sec. 7, float32): butterfly 13% faster than transpose at K=1,024
    # (Fig. 7(a)); more than 2x faster than plain for K >= 200 (Fig. 6, whole application).
    for cname in sorted({r["corpus"] for r in rows}):
        mine = {r["K"]: r for r in rows if r["corpus"] == cname}
        if {"butterfly", "transpose"} <= set(args.variants) and 1024 in mine:
            r = mine[1024]
            print(
                f"{cname}: K=1024 butterfly / transpose = {r['butterfly'] / r['transpose']:.3f} "
                "(paper, Fig. 7(a), float32: ~1.13)"
            )
        if {"butterfly", "plain"} <= set(args.variants):
            ratios = [mine[k]["butterfly"] / mine[k]["plain"] for k in mine if k >= 200]
            if ratios:
                print(
                    f"{cname}: K>=200 butterfly / plain = {min(ratios):.2f} .. {max(ratios):.2f} "
                    "(paper, Fig. 6: > 2)"
                )
        cross = [
            k
            for k in sorted(mine)
            if mine[k].get("sparse_sample")
            and max(mine[k][v] for v in args.variants) < mine[k]["sparse_sample"]
        ]
        if cross:
            print(
                f"{cname}: the sparse sampling stage beats every dense kernel from K={cross[0]} "
                f"(measured K: {cross})"
            )

    if args.out:
        write_outputs(args, name, corpora, rows)
        out_dir = Path(args.out)
        if plot(rows, out_dir / "bench_dense.png"):
            print(f"wrote {out_dir / 'bench_dense.png'}")
        print(f"wrote {out_dir / 'bench_dense.csv'} and bench_dense.json")
    print(f"total {time.perf_counter() - t_begin:.0f} s")


if __name__ == "__main__":
    main()
