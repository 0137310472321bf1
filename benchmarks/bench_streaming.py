"""A corpus streamed through the GPU against the same corpus held on it: time per sweep, model.

Corpus: the NYTimes shape (``make_lda_corpus(shape='nytimes')``, about 100 M tokens), stacked
``--stack`` times (20: about 2 G tokens). For each K, two fits with the estimator's defaults
(learned priors, averaging) and ``--sweeps`` sweeps: one with no memory budget, held on the
device, and one with ``max_device_memory`` set to ``--fraction`` of what the held fit needs (the
sparse sampler's own estimate), which streams the chunks from pinned host memory. Printed per
fit: the word-topic storage 'auto' chose and the fit's warnings, the wall time, the seconds
before the first sweep, the median time of sweeps 3 onwards
(each timed with the device drained), the chunks streamed, the peak of CuPy's memory pool (the
pinned host memory is not in it); then the
streamed/held throughput ratio and whether ``components_``, the priors and ``bound_`` are
identical (``bound_`` to 12 digits: it is summed chunk by chunk). Every K's figures go to
``--json`` (default ``benchmarks/results/bench_streaming/bench_streaming.json``).

Usage::

    python benchmarks/bench_streaming.py --stack 20 --topics 1000 --sweeps 12 --fraction 0.25
    python benchmarks/bench_streaming.py --stack 1 --topics 1000 --sweeps 6     # a quick look
"""

import argparse
import time

import numpy as np
import scipy.sparse as sp

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import resolve_device
from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler
from sklearn_gpulda.datasets import make_lda_corpus

from _bench_common import budget_fit, output_path, save_json


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stack", type=int, default=20)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--topics", type=int, nargs="+", default=[1000])
    ap.add_argument("--sweeps", type=int, default=12)
    ap.add_argument("--fraction", type=float, default=0.25)
    ap.add_argument("--json", default=output_path("bench_streaming", "bench_streaming.json"))
    args = ap.parse_args(argv)

    tic = time.perf_counter()
    base = make_lda_corpus(shape="nytimes", n_topics=100, random_state=0, scale=args.scale).data
    X = sp.vstack([base] * args.stack, format="csr") if args.stack > 1 else base.tocsr()
    del base
    # Kernels loaded (or compiled) before anything is timed.
    GPULatentDirichletAllocation(n_components=8, max_iter=1, device="cuda").fit(X[:2000])
    n_tokens = float(X.data.sum())
    print(f"corpus: NYTimes shape x {args.stack}: D={X.shape[0]:,} V={X.shape[1]:,} "
          f"tokens={n_tokens:,.0f} nnz={X.nnz:,} ({time.perf_counter() - tic:.1f} s to make)",
          flush=True)
    points = []
    for k in args.topics:
        sampler = CudaSparseSampler(k, 1.0 / k, 1.0 / k, 0, resolve_device("cuda"))
        _, need = sampler.estimate_bytes(tokens(X))
        # The budget is the whole process's: what it holds now, and the fraction beside it.
        import cupy

        from sklearn_gpulda.backends.cuda.process_memory import held_bytes

        budget = held_bytes(cupy, CudaSparseSampler.budget_kernels) + int(need * args.fraction)
        storage = {}

        def seen(name):
            def on_load(sampler):
                storage[name] = "hybrid" if sampler.hybrid else "dense"
            return on_load

        held, h = budget_fit(X, k, args.sweeps, None, on_load=seen("held"))
        print(f"K={k}: held stages (s): {h['stages']}")
        print(f"K={k}: held     {h['sweep_ms']:8.1f} ms/sweep, wall {h['wall_s']:.1f} s, "
              f"{h['setup_s']:.1f} s before sweeping, peak {h['peak_gb']:.1f} "
              f"GB (need {need / 1e9:.1f} GB)", flush=True)
        streamed, s = budget_fit(X, k, args.sweeps, budget, on_load=seen("streamed"))
        print(f"K={k}: word-topic storage held {storage.get('held')}, streamed "
              f"{storage.get('streamed')}; warnings held {h['warnings']}, streamed "
              f"{s['warnings']}", flush=True)
        print(f"K={k}: streamed stages (s): {s['stages']}")
        print(f"K={k}: streamed {s['sweep_ms']:8.1f} ms/sweep, wall {s['wall_s']:.1f} s, "
              f"{s['setup_s']:.1f} s before sweeping, peak {s['peak_gb']:.1f} "
              f"GB (budget {budget / 1e9:.1f} GB), {s['chunks']} chunks", flush=True)
        # bound_ is summed chunk by chunk, so it may differ in its last bits; the model may not.
        same = (np.array_equal(streamed.components_, held.components_)
                and np.array_equal(streamed.doc_topic_prior_, held.doc_topic_prior_)
                and streamed.topic_word_prior_ == held.topic_word_prior_
                and bool(np.isclose(streamed.bound_, held.bound_, rtol=1e-12, atol=0)))
        print(f"K={k}: components_ equal: {np.array_equal(streamed.components_, held.components_)}"
              f", priors equal: {np.array_equal(streamed.doc_topic_prior_, held.doc_topic_prior_)}"
              f"/{streamed.topic_word_prior_ == held.topic_word_prior_}, bound_ "
              f"{streamed.bound_!r} against {held.bound_!r}", flush=True)
        ratio = h["sweep_ms"] / s["sweep_ms"]
        print(f"K={k}: streamed throughput {ratio:.0%} of held; same model: {same}", flush=True)
        points.append(dict(k=k, n_tokens=n_tokens, need_bytes=need, budget_bytes=budget,
                           held=h, streamed=s, ratio=ratio, same_model=bool(same),
                           storage=storage))
        del streamed, held
        save_json(args.json, dict(stack=args.stack, sweeps=args.sweeps, points=points))


if __name__ == "__main__":
    main()
