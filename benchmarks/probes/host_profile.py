"""Where the host's time goes in a fit: cProfile of fits of KJV chapters at K = 20 with
defaults (``--max-iter`` sweeps), after a warm-up; the functions by own time, and by time
including callees.

Usage::

    python benchmarks/probes/host_profile.py --max-iter 300 --device cuda
"""

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-iter", type=int, default=300)
    p.add_argument("--device", default="cuda")
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--docs", type=int, default=None)
    p.add_argument("--lines", type=int, default=35)
    args = p.parse_args()
    X = load_kjv_chapters().data[:args.docs]
    make = lambda: GPULatentDirichletAllocation(n_components=args.topics, random_state=0,  # noqa
                                                max_iter=args.max_iter, device=args.device)
    make().fit(X)
    prof = cProfile.Profile()
    prof.enable()
    make().fit(X)
    prof.disable()
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(args.lines)
        print(out.getvalue())


if __name__ == "__main__":
    main()
