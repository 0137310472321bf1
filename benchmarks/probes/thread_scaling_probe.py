#!/usr/bin/env python3
"""How NumPy calls on plain threads scale on this host, by kind of call and by its size.

The CPU engine spreads a sweep over threads and relies on NumPy releasing the GIL inside its
kernels. Not every kernel does (``bincount`` holds it), and every call takes the GIL to start
and to finish, so calls that are short next to that stop scaling at a few threads. For each
kind of call the engine makes, this runs the same total work at each thread count (each
thread on its own arrays) and prints the speed-up over one thread. It is the measurement behind
the CPU engine's worker processes (``n_jobs`` > 1 runs processes, not threads: see
doc/user_guide.rst, ``n_jobs``); run it on a new host to see where threads stop scaling there.

Usage::

    python benchmarks/probes/thread_scaling_probe.py --threads 1 4 8 16 --elements 16384 262144
"""

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: The kinds of call a draw or an M-step makes, on arrays of ``n`` elements (rows of 256).
KINDS = {
    "multiply": lambda a: np.multiply(a["x"], np.float32(1.0001), out=a["y"]),
    "cumsum rows": lambda a: np.cumsum(a["x2"], axis=1, out=a["y2"]),
    "compare+sum rows": lambda a: (a["x2"] <= np.float32(0.5)).sum(axis=1),
    "take": lambda a: np.take(a["x"], a["idx"], out=a["y"]),
    "gather rows": lambda a: a["x2"][a["rows"]],
    "bincount": lambda a: np.bincount(a["idx"], minlength=a["x"].size),
    "mask select": lambda a: a["x"][a["mask"]],
}


def _arrays(n):
    rng = np.random.default_rng(0)
    x = rng.random(n, dtype=np.float32)
    return dict(x=x, y=np.empty_like(x), x2=x.reshape(-1, 256), y2=np.empty((n // 256, 256),
                np.float32), idx=rng.integers(0, n, n), rows=rng.integers(0, n // 256, n // 256),
                mask=x < 0.5)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 4, 8, 16])
    p.add_argument("--elements", nargs="+", type=int, default=[16384, 262144])
    p.add_argument("--total", type=int, default=1 << 26, help="elements per measurement")
    args = p.parse_args(argv)
    for n_elements in args.elements:
        for kind, call in KINDS.items():
            line, base = [], None
            for n in args.threads:
                arrays = [_arrays(n_elements) for _ in range(n)]
                calls = max(1, args.total // (n_elements * n))

                def work(i, calls=calls, arrays=arrays):
                    for _ in range(calls):
                        call(arrays[i])

                with ThreadPoolExecutor(n) as pool:
                    list(pool.map(lambda i: call(arrays[i]), range(n)))  # start the threads
                    tic = time.perf_counter()
                    list(pool.map(work, range(n)))
                    rate = calls * n / (time.perf_counter() - tic)
                base = base or rate
                line.append(f"{n}: {rate / base:5.2f}")
            print(f"{kind:>17} x {n_elements:>8}: speed-up at " + ", ".join(line), flush=True)


if __name__ == "__main__":
    main()
