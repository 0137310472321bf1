"""What a GPU fit holds on its device beside CuPy's pool: the figures behind the whole-process
``max_device_memory`` (``backends/cuda/process_memory.py``, issue 37 part 4).

One fit of a corpus (KJV chapters, or the NYTimes / PubMed shape at ``--scale``) with
``--budget`` (a string such as '8GB'; default none) in a fresh process. Printed, in MiB:
the GPU's use before CuPy makes a context, after it (the context), after the engine's modules
are loaded (modules), the process_memory reading the chain plans with (outside the pool, local
memory growth, headroom, fixed), then per sweep the GPU's use (total - free) and CuPy's pool
(held, used), and at the end the peaks: pool held, whole GPU (cudaMemGetInfo) and this process
by ``nvidia-smi --query-compute-apps=pid,used_memory`` (sampled after every sweep; on a shared
GPU only this row is the process's own). A last line says whether the whole-GPU peak stayed
within the budget.

Usage::

    python benchmarks/probe_process_memory.py --corpus kjv --topics 20 --algorithm sparse
    python benchmarks/probe_process_memory.py --corpus kjv --topics 20 --algorithm dense
    python benchmarks/probe_process_memory.py --corpus pubmed --scale 0.25 --topics 32768 \\
        --budget 8GB --sweeps 12
"""

import argparse
import os
import subprocess

MIB = 1 << 20


def smi_used(pid):
    """MiB nvidia-smi reports for process ``pid`` (None where it cannot say)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0] == str(pid) and fields[1].isdigit():
            return int(fields[1])
    return None


def corpus(name, scale):
    from sklearn_gpulda.datasets import load_kjv_chapters, make_lda_corpus

    if name == "kjv":
        return load_kjv_chapters().data
    return make_lda_corpus(shape=name, scale=scale, n_topics=50, random_state=0).data


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="kjv", choices=["kjv", "nytimes", "pubmed"])
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--algorithm", default="sparse")
    ap.add_argument("--sweeps", type=int, default=12)
    ap.add_argument("--budget", default=None)
    args = ap.parse_args(argv)

    X = corpus(args.corpus, args.scale)
    pid = os.getpid()
    import cupy

    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda._runtime.device import Device, parse_bytes
    from sklearn_gpulda.backends import choose_backend
    from sklearn_gpulda.backends.cuda import process_memory as pm

    def gpu_used():
        free, total = cupy.cuda.runtime.memGetInfo()
        return (total - free) / MIB

    before = smi_used(pid)  # no context yet: None
    runtime = cupy.cuda.runtime
    with cupy.cuda.Device(0):
        cupy.zeros(1)  # the context
        context = gpu_used()
        cls = choose_backend(args.algorithm, args.topics, Device("cuda", (0,))).sampler_class()
        reading = pm.measure(cupy, cls.budget_kernels)
        modules = gpu_used()
        print(f"corpus {args.corpus}: D={X.shape[0]:,} V={X.shape[1]:,} tokens={X.sum():,.0f}; "
              f"K={args.topics}, {args.algorithm}, budget {args.budget}")
        print(f"GPU use: nvidia-smi before context {before}, after context {context:,.0f}, "
              f"after modules {modules:,.0f} (stack {runtime.deviceGetLimit(0)} B/thread)")
        print(f"reading: outside pool {reading.outside_pool / MIB:,.0f}, local growth "
              f"{reading.local_growth / MIB:,.0f}, headroom {pm.HEADROOM_BYTES / MIB:,.0f}, "
              f"fixed {reading.fixed / MIB:,.0f}")
        pool = cupy.get_default_memory_pool()
        peaks = {"pool": 0.0, "gpu": 0.0, "smi": 0}

        def watch(iteration, info):
            row = (gpu_used(), pool.total_bytes() / MIB, pool.used_bytes() / MIB, smi_used(pid))
            peaks["gpu"] = max(peaks["gpu"], row[0])
            peaks["pool"] = max(peaks["pool"], row[1])
            peaks["smi"] = max(peaks["smi"], row[3] or 0)
            print(f"sweep {iteration:4d}: gpu {row[0]:,.0f} pool held {row[1]:,.0f} used "
                  f"{row[2]:,.0f} nvidia-smi {row[3]}", flush=True)

        GPULatentDirichletAllocation(n_components=args.topics, max_iter=args.sweeps,
                                     random_state=0, device="cuda:0", algorithm=args.algorithm,
                                     max_device_memory=args.budget).fit(X, callback=watch)
    print(f"peaks: pool held {peaks['pool']:,.0f}, GPU {peaks['gpu']:,.0f}, "
          f"nvidia-smi (this process) {peaks['smi']:,}")
    if args.budget is not None:
        limit = parse_bytes(args.budget) / MIB
        print(f"within budget ({limit:,.0f} MiB): {peaks['gpu'] <= limit}")


if __name__ == "__main__":
    main()
