#!/usr/bin/env python3
"""Where a CPU-engine sweep goes, per thread count: the whole sweep, its M-step and its uniforms.

The NumPy engine's sweep is the draw of every token (spread over ``n_jobs`` threads) followed by
the M-step (A and B recounted, the per-word tables rebuilt: V x K work). This prints the three
for each thread count, on the NYTimes shape at ``SCALE`` (default 0.01, about 1 M tokens, V =
102,660), K = ``K`` (default 1,000), and with ``PROFILE_AT`` threads a profile of one M-step.

Usage::

    K=1000 THREADS="1 4 16" PROFILE_AT=16 python tools/cpu_sweep_split.py
"""

import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sklearn_gpulda._corpus import tokens  # noqa: E402
from sklearn_gpulda._device import CPU  # noqa: E402
from sklearn_gpulda.backends.numpy import NumpySampler  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402


def main():
    k = int(os.environ.get("K", "1000"))
    scale = float(os.environ.get("SCALE", "0.01"))
    profile_at = int(os.environ.get("PROFILE_AT", "0"))
    corpus = tokens(make_lda_corpus(shape="nytimes", n_topics=100, random_state=0,
                                    scale=scale).data)
    print(f"D={corpus.n_docs:,} V={corpus.n_words:,} N={corpus.n_tokens:,} K={k}", flush=True)
    for n in [int(x) for x in os.environ.get("THREADS", "1 4 16").split()]:
        s = NumpySampler(k, 1.0 / k, 0.01, 0, CPU, n_jobs=n)
        s.load(corpus)
        s.init_topics()
        s.sweep(1)  # the first sweep pays for thread start-up and first touches
        t = time.perf_counter()
        s.sweep(2)
        sweep_s = time.perf_counter() - t
        z = s.topics()
        t = time.perf_counter()
        s.set_topics(z)
        mstep_s = time.perf_counter() - t
        t = time.perf_counter()
        s._uniforms(3, 1, 0)
        uniform_s = time.perf_counter() - t
        print(f"threads {n:>2}: sweep {sweep_s:.3f} s, M-step {mstep_s:.3f} s, "
              f"uniforms {uniform_s:.3f} s", flush=True)
        if n == profile_at:
            prof = cProfile.Profile()
            prof.enable()
            s.set_topics(z)
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
            print(out.getvalue())
        s.release()


if __name__ == "__main__":
    main()
