"""Probe: NCCL's sum of B over the GPUs of one host, in one process against one process per GPU.

The Dask GPU workers sum B with an NCCL communicator that spans processes (one worker each);
the in-process several-GPU chain sums it with one communicator per GPU of one process. This
times the same all-reduce (float32, ``V x K`` cells, in place) both ways, and the
per-process way with each process seeing every GPU (its own first, as the workers are started)
or its own GPU only, so a gap between the Dask fit and the in-process one can be put on the
transport or ruled out. ``--debug`` has NCCL print the transport each pair of ranks uses.

    python benchmarks/probes/nccl_transport.py --gpus 2 --cells 72648000 --repeats 20
"""

import argparse
import multiprocessing as mp
import os
import sys
import time


def _timed(run, repeats, sync):
    run()
    sync()
    tic = time.perf_counter()
    for _ in range(repeats):
        run()
    sync()
    return (time.perf_counter() - tic) / repeats


def in_process(n_gpus, cells, repeats):
    import cupy as cp

    from sklearn_gpulda.backends.cuda.multi_gpu.all_reduce import NcclAllReduce

    reduce = NcclAllReduce(cp, range(n_gpus))
    parts = []
    for gpu in range(n_gpus):
        with cp.cuda.Device(gpu):
            parts.append((gpu, cp.ones(cells, dtype=cp.float32)))

    def sync():
        for gpu in range(n_gpus):
            cp.cuda.Device(gpu).synchronize()

    try:
        return _timed(lambda: reduce.all_reduce(parts), repeats, sync)
    finally:
        reduce.close()
        parts.clear()
        for gpu in range(n_gpus):
            with cp.cuda.Device(gpu):
                cp.get_default_memory_pool().free_all_blocks()


def _rank(rank, n_ranks, unique_id, cells, repeats, visible, queue):
    os.environ["CUDA_VISIBLE_DEVICES"] = visible
    import cupy as cp

    from sklearn_gpulda.backends.cuda.multi_gpu.all_reduce import NcclRank

    nccl_rank = NcclRank(cp, 0, n_ranks, unique_id, rank)
    array = cp.ones(cells, dtype=cp.float32)
    seconds = _timed(lambda: nccl_rank.all_reduce(array), repeats,
                     cp.cuda.Device(0).synchronize)
    queue.put((rank, seconds, float(array[0])))
    nccl_rank.close()


def across_processes(n_gpus, cells, repeats, own_only):
    from cupy.cuda import nccl

    gpus = [str(g) for g in range(n_gpus)]
    unique_id = nccl.get_unique_id()
    context = mp.get_context("spawn")
    queue = context.Queue()
    ranks = []
    for rank in range(n_gpus):
        visible = gpus[rank] if own_only else ",".join(gpus[rank:] + gpus[:rank])
        ranks.append(context.Process(target=_rank, args=(rank, n_gpus, unique_id, cells,
                                                         repeats, visible, queue)))
    for process in ranks:
        process.start()
    try:
        results = [queue.get(timeout=300) for _ in ranks]
    finally:
        for process in ranks:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
    # Every cell started at 1 and was summed (repeats + 1) times in place over the ranks.
    expected = float(n_gpus) ** (repeats + 1)
    if any(value != expected for _, _, value in results):
        raise RuntimeError(f"the sums are wrong: {[v for _, _, v in results]} != {expected}")
    return max(seconds for _, seconds, _ in results)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--cells", type=int, default=72_648_000,
                   help="float32 cells summed (default V x K of the NYTimes shape at K = 1,000)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--debug", action="store_true", help="NCCL_DEBUG=INFO for INIT and P2P")
    args = p.parse_args(argv)
    if args.debug:
        os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,P2P")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    mbytes = 4 * args.cells / 1e6
    ring = 2 * (args.gpus - 1) / args.gpus * mbytes
    print(f"all-reduce of {args.cells:,} float32 cells ({mbytes:.0f} MB) over {args.gpus} GPUs, "
          f"{args.repeats} repeats; a ring sends {ring:.0f} MB per GPU", flush=True)
    for name, run in (("one process", lambda: in_process(args.gpus, args.cells, args.repeats)),
                      ("a process per GPU, all visible",
                       lambda: across_processes(args.gpus, args.cells, args.repeats, False)),
                      ("a process per GPU, own GPU only",
                       lambda: across_processes(args.gpus, args.cells, args.repeats, True))):
        seconds = run()
        print(f"{name:<34} {seconds * 1e3:8.2f} ms per sum, {ring / 1e3 / seconds:7.1f} GB/s "
              f"sent per GPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    sys.exit(main())
