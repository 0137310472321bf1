"""Does the GPU Metropolis-Hastings chain win time to quality at large K (issue 37, item 3)?

Milliseconds per sweep of the MH prototype (``backends/cuda/mh``, ``cuda/sample_mh.cu``)
against the sparse engine's sampler (``CudaSparseSampler``, what ``algorithm='sparse'`` runs) on
the NYTimes shape, and the training log-likelihood per token against training wall time for both,
every chain from the same initial topics with fixed priors. Each sweep is timed alone (a device
synchronisation after it); evaluations are not counted in the wall time. Prints a table and
writes JSON to ``benchmarks/results/mh_gpu/`` (ignored by git).

    PYTHONPATH=. python benchmarks/probes/mh_gpu.py --scale 0.1 --topics 1000 10000 \\
        --sweeps 40 --every 10

Memory: the MH chain holds dense A (D x K) and B (V x K): at scale 0.1 and K = 10,000 about
1.2 + 4.1 GB; at scale 1, 12 + 4.1 GB. The likelihood costs (non-zeros x K) float64 work per
evaluation (seconds at scale 0.1 and K = 10,000), so keep --every coarse.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench_common import alpha_for, output_path, save_json  # noqa: E402

from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda._runtime.device import resolve_device  # noqa: E402
from sklearn_gpulda.backends.cuda.mh import MhChain  # noqa: E402
from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402


def make_chain(engine, k, alpha, beta, seed, cycles):
    if engine == "sparse":
        return CudaSparseSampler(k, alpha, beta, seed, resolve_device("cuda:0"))
    return MhChain(k, alpha, beta, seed, n_cycles=cycles)


def run(engine, corpus, n_tokens, k, alpha, beta, sweeps, every, cycles, seed=0):
    """Per-sweep milliseconds and (sweep, training seconds, log-likelihood per token) points."""
    import cupy

    device = cupy.cuda.Device()
    chain = make_chain(engine, k, alpha, beta, seed, cycles)
    chain.load(corpus)
    chain.init_topics()
    device.synchronize()
    points = [(0, 0.0, chain.log_likelihood() / n_tokens)]
    times, trained = [], 0.0
    for iteration in range(1, sweeps + 1):
        tic = time.perf_counter()
        chain.sweep(iteration)
        device.synchronize()
        seconds = time.perf_counter() - tic
        times.append(seconds * 1e3)
        trained += seconds
        if iteration % every == 0 or iteration == sweeps:
            points.append((iteration, trained, chain.log_likelihood() / n_tokens))
    chain.release()
    cupy.get_default_memory_pool().free_all_blocks()
    return times, points


def warm_up(cycles):
    """Load every kernel both engines run (fatbins, or NVRTC) before anything is timed."""
    X = make_lda_corpus(n_docs=50, n_words=200, n_topics=4, doc_length=30, random_state=0).data
    corpus = tokens(X)
    for engine in ("sparse", "mh"):
        run(engine, corpus, float(X.sum()), 8, 0.1, 0.01, 2, 1, cycles)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.1,
                   help="of the NYTimes shape (1: 100 M tokens)")
    p.add_argument("--topics", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--sweeps", type=int, default=40)
    p.add_argument("--every", type=int, default=10, help="sweeps between likelihoods")
    p.add_argument("--cycles", type=int, default=2, help="MH cycles per token and sweep")
    p.add_argument("--alpha", default="50/K")
    p.add_argument("--beta", type=float, default=0.01)
    p.add_argument("--engines", nargs="+", default=["sparse", "mh"], choices=["sparse", "mh"])
    p.add_argument("--out", type=Path, default=output_path("mh_gpu", "mh_gpu.json"))
    args = p.parse_args(argv)

    tic = time.perf_counter()
    X = make_lda_corpus(shape="nytimes", scale=args.scale, random_state=0).data
    corpus = tokens(X)
    n_tokens = float(corpus.n_tokens)
    print(f"NYTimes shape x {args.scale}: D={X.shape[0]:,} V={X.shape[1]:,} "
          f"tokens={corpus.n_tokens:,} nnz={X.nnz:,} ({time.perf_counter() - tic:.1f} s to make)",
          flush=True)
    warm_up(args.cycles)
    results = []
    print("| K | engine | median ms/sweep | Mtoken/s | log-lik/token at (sweep, train s) |")
    print("|---:|---|---:|---:|---|")
    for k in args.topics:
        alpha = alpha_for(args.alpha, k)
        for engine in args.engines:
            times, points = run(engine, corpus, n_tokens, k, alpha, args.beta, args.sweeps,
                                args.every, args.cycles)
            median = statistics.median(times)
            curve = ", ".join(f"{ll:.4f} ({s}, {t:.2f} s)" for s, t, ll in points)
            print(f"| {k:,} | {engine} | {median:.2f} | {n_tokens / median / 1e3:,.0f} | "
                  f"{curve} |", flush=True)
            results.append(dict(n_topics=k, engine=engine, alpha=alpha, beta=args.beta,
                                cycles=args.cycles if engine == "mh" else None,
                                sweep_ms=times, median_ms=median,
                                curve=[dict(sweep=s, train_s=t, loglik_per_token=ll)
                                       for s, t, ll in points]))
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    save_json(args.out, dict(scale=args.scale, n_docs=X.shape[0], n_words=X.shape[1],
                             n_tokens=corpus.n_tokens, nnz=X.nnz, sweeps=args.sweeps,
                             gpu=props["name"].decode(), results=results))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
