#!/usr/bin/env python3
"""Seconds of one CPU-engine sweep per number of jobs, split into its draws, its M-step and its
uniforms: the per-sweep speed-up of the CPU engine on many cores (doc/performance.md, "The CPU
engine on 16 cores").

The NumPy engine's sweep is the draw of every token (spread over ``n_jobs`` workers: threads for
one job, worker processes for more) followed by the M-step (A and B recounted, the per-word
tables rebuilt: V x K work). For each job count in ``THREADS`` and each K in ``K`` (default
1,000) this prints the best of three sweeps and of each part, on the NYTimes shape at ``SCALE``
(default 0.01, about 1 M tokens, V = 102,660), or on the UCI docword file ``DATA``; with
``PROFILE_AT`` jobs, a profile of one sweep. Fixed priors (alpha = 1 / K, beta = 0.01).

Usage::

    K="20 1000" THREADS="1 16" python benchmarks/probes/cpu_sweep_split.py
    SCALE=0.1 K="20 100" THREADS="1 16" PROFILE_AT=16 python benchmarks/probes/cpu_sweep_split.py
"""

import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

import numpy as np  # noqa: E402

from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda._runtime.device import CPU  # noqa: E402
from sklearn_gpulda.backends.numpy import NumpySampler  # noqa: E402
from sklearn_gpulda.backends.numpy.sparse_rule import draw_topics  # noqa: E402
from sklearn_gpulda.datasets import load_uci_bow, make_lda_corpus  # noqa: E402


def _best(fn, repeats=3):
    """Least wall time of ``repeats`` calls of ``fn``."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    scale = float(os.environ.get("SCALE", "0.01"))
    profile_at = int(os.environ.get("PROFILE_AT", "0"))
    data = os.environ.get("DATA")
    X = load_uci_bow(data).data if data else make_lda_corpus(
        shape="nytimes", n_topics=100, random_state=0, scale=scale).data
    corpus = tokens(X)
    print(f"D={corpus.n_docs:,} V={corpus.n_words:,} N={corpus.n_tokens:,} "
          f"cores={os.cpu_count()}", flush=True)
    for k in [int(x) for x in os.environ.get("K", "1000").split()]:
        for n in [int(x) for x in os.environ.get("THREADS", "1 4 16").split()]:
            s = NumpySampler(k, 1.0 / k, 0.01, 0, CPU, n_jobs=n)
            s.load(corpus)
            s.init_topics()
            s.sweep(1)  # the first sweeps pay for worker start-up and first touches
            s.sweep(2)
            sweep_s = _best(lambda: s.sweep(3))
            z = s.topics()
            u = s._uniforms(3, 1, 0)
            doc, word, weight, _ = s._loaded_tokens()
            out = s.team.empty("z-probe", doc.shape, np.int32)
            draw_s = _best(lambda: draw_topics(doc, word, s._z, weight, u, s._a, s._tables,
                                               team=s.team, sparse_rows=k >= 64, out=out))
            mstep_s = _best(lambda: s.set_topics(z))
            uniform_s = _best(lambda: s._uniforms(3, 1, 0))
            print(f"K {k:>5} jobs {n:>2} ({type(s.team).__name__}): sweep {sweep_s:.3f} s "
                  f"({corpus.n_tokens / sweep_s / 1e6:.2f}"
                  f" Mtoken/s), draws {draw_s:.3f} s, M-step {mstep_s:.3f} s, "
                  f"uniforms {uniform_s:.3f} s", flush=True)
            if n == profile_at:
                prof = cProfile.Profile()
                prof.enable()
                s.sweep(4)
                prof.disable()
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
                print(out.getvalue())
            s.release()


if __name__ == "__main__":
    main()
