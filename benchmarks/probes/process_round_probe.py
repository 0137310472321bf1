#!/usr/bin/env python3
"""Where a CPU-engine sweep on worker processes loses time: per round of tasks, its wall time
against the same tasks' compute run one after another in this process.

For each K in ``K`` (default "20 100") on the NYTimes shape at ``SCALE`` (default 0.01, about
1 M tokens) with ``JOBS`` worker processes (default 16), one sweep is run with every
:meth:`ProcessTeam.run` call timed; then each call's items are run again here, one by one, to
time their compute. A round's ideal is its compute divided by the jobs; what it takes beyond
the larger of that and its slowest item is the round's overhead (submission, pickling, the
result queue, workers waiting). An empty round (tasks that do nothing) gives the bare latency.
It backs the CPU engine's choice of its own round pool over an executor, and the K = 20 row of
doc/performance.md's CPU table, where a sweep is short enough for round trips to matter.

Usage::

    JOBS=16 K="20 100" python benchmarks/probes/process_round_probe.py
    CHUNKS=8 JOBS=16 K=20 python benchmarks/probes/process_round_probe.py   # 8 ranges per worker
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda._runtime.device import CPU  # noqa: E402
from sklearn_gpulda.backends.numpy import NumpySampler  # noqa: E402
from sklearn_gpulda.backends.numpy import processes, threads  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402


def nothing(item):
    return item


def clocked(item, _task, **arguments):
    """``_task(item, **arguments)`` in a worker, with when it ran there (perf_counter reads a
    clock every process shares on Linux) and the worker's pid."""
    tic = time.perf_counter()
    out = _task(item, **arguments)
    return out, tic, time.perf_counter(), os.getpid()


def main():
    jobs = int(os.environ.get("JOBS", "16"))
    if "CHUNKS" in os.environ:
        threads.CHUNKS_PER_THREAD = int(os.environ["CHUNKS"])
    scale = float(os.environ.get("SCALE", "0.01"))
    corpus = tokens(make_lda_corpus(shape="nytimes", n_topics=100, random_state=0,
                                    scale=scale).data)
    print(f"N={corpus.n_tokens:,} V={corpus.n_words:,} jobs={jobs} cores={os.cpu_count()}",
          flush=True)
    rounds = []
    plain_run = processes.ProcessTeam.run

    def timed_run(self, task, items, **arguments):
        items = list(items)
        tic = time.perf_counter()
        out = plain_run(self, clocked, items, _task=task, **arguments)
        toc = time.perf_counter()
        rounds.append((task, items, arguments, toc - tic, [(a - tic, b - tic, pid)
                                                           for _, a, b, pid in out]))
        return [r for r, _, _, _ in out]

    processes.ProcessTeam.run = timed_run
    for k in [int(x) for x in os.environ.get("K", "20 100").split()]:
        one = NumpySampler(k, 1.0 / k, 0.01, 0, CPU, n_jobs=1)
        one.load(corpus)
        one.init_topics()
        one.sweep(1)
        tic = time.perf_counter()
        one.sweep(2)
        one_s = time.perf_counter() - tic
        s = NumpySampler(k, 1.0 / k, 0.01, 0, CPU, n_jobs=jobs)
        s.load(corpus)
        s.init_topics()
        s.sweep(1)
        s.sweep(2)
        team = s.team
        for _ in range(3):
            tic = time.perf_counter()
            team.run(nothing, range(2 * jobs))
            empty = time.perf_counter() - tic
        rounds.clear()
        tic = time.perf_counter()
        s.sweep(3)
        sweep_s = time.perf_counter() - tic
        recorded = list(rounds)
        print(f"\nK={k}: one job {one_s * 1e3:.1f} ms a sweep; {jobs} jobs {sweep_s * 1e3:.1f} "
              f"ms ({one_s / sweep_s:.2f}x); an empty round of {2 * jobs} tasks "
              f"{empty * 1e3:.2f} ms", flush=True)
        in_rounds = 0.0
        for task, items, arguments, wall, spans in recorded:
            resolved = {n: processes._resolve(team.store.handle(v) or v)
                        if hasattr(v, "dtype") else v for n, v in arguments.items()}
            times = []
            for item in items:
                t = time.perf_counter()
                task(item, **resolved)
                times.append(time.perf_counter() - t)
            ideal = max(sum(times) / jobs, max(times))
            in_rounds += wall
            print(f"  {task.__name__:28s} {len(items):3d} items: wall {wall * 1e3:7.2f} ms, "
                  f"compute {sum(times) * 1e3:7.2f} ms (/{jobs} = {sum(times) / jobs * 1e3:6.2f},"
                  f" slowest item {max(times) * 1e3:6.2f}), beyond ideal "
                  f"{(wall - ideal) * 1e3:6.2f} ms", flush=True)
            busy = sum(b - a for a, b, _ in spans)
            first = min(a for a, _, _ in spans)
            last = max(b for _, b, _ in spans)
            print(f"    in the workers: items take {busy * 1e3:7.2f} ms in all "
                  f"({busy / sum(times):.2f}x their time here), the first starts at "
                  f"{first * 1e3:.2f} ms, the last ends at {last * 1e3:.2f} ms, "
                  f"{len({pid for _, _, pid in spans})} workers", flush=True)
        print(f"  rounds {in_rounds * 1e3:.1f} ms of the sweep's {sweep_s * 1e3:.1f} ms; the "
              f"rest runs in this process", flush=True)
        s.release()
        one.release()


if __name__ == "__main__":
    main()
