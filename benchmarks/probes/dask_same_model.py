"""Probe: which arrangements of several GPUs give the one-GPU model, and where they part.

Fits the NYTimes shape stacked ``--stack`` times at K = ``--topics`` with defaults for
``--sweeps`` sweeps on one GPU, on ``--workers`` GPUs in one process, and on as many Dask GPU
workers with the prior updates made by the shards (the default) and by the driver; prints, for
each, whether ``components_``, ``doc_topic_prior_`` and ``topic_word_prior_`` equal the one-GPU
fit's, and the largest difference where not.

    python benchmarks/probes/dask_same_model.py --workers 4 --stack 4 --sweeps 30
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def compare(name, model, reference):
    parts = []
    for attr in ("components_", "doc_topic_prior_", "topic_word_prior_"):
        a = np.asarray(getattr(model, attr), dtype=np.float64)
        b = np.asarray(getattr(reference, attr), dtype=np.float64)
        same = a.shape == b.shape and np.array_equal(a, b)
        parts.append(f"{attr} {'same' if same else 'DIFFERS by %.3g' % np.abs(a - b).max()}")
    print(f"{name:<40} " + "; ".join(parts), flush=True)


def main(argv=None):
    from bench_dask import _scattered, gpu_probe_arguments, stacked_nytimes

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu_probe_arguments(p, sweeps=30)
    p.add_argument("--repeat", type=int, default=1,
                   help="fits of each arrangement, one after another (the Dask ones on one "
                        "cluster, as a benchmark's are)")
    args = p.parse_args(argv)

    from distributed import Client

    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda.dask import LatentDirichletAllocation
    from sklearn_gpulda.dask._cluster import local_gpu_cluster
    from sklearn_gpulda.dask._nccl_sampler import NcclDaskSampler

    X = stacked_nytimes(args.scale, args.stack)
    n = args.workers
    params = dict(n_components=args.topics, random_state=0, max_iter=args.sweeps)
    print(f"{X.sum() / 1e6:.1f} M tokens, K = {args.topics}, {args.sweeps} sweeps", flush=True)
    t = time.perf_counter()
    one = GPULatentDirichletAllocation(**params, device="cuda:0").fit(X)
    print(f"one GPU: {time.perf_counter() - t:.1f} s", flush=True)
    devices = "cuda:" + ",".join(map(str, range(n)))
    for r in range(args.repeat):
        compare(f"in-process, {n} GPUs, fit {r + 1}",
                GPULatentDirichletAllocation(**params, device=devices).fit(X), one)
    with local_gpu_cluster(n) as cluster, Client(cluster) as client:
        Xd = _scattered(client, X, n)
        fit = LatentDirichletAllocation(client=client, **params, device="cuda")
        for r in range(args.repeat):
            compare(f"Dask, {n} workers, updates on the shards, fit {r + 1}", fit.fit(Xd), one)
        real = NcclDaskSampler.run_prior_updates
        NcclDaskSampler.run_prior_updates = lambda self, updates: False
        try:
            compare(f"Dask, {n} workers, updates on the driver", fit.fit(Xd), one)
        finally:
            NcclDaskSampler.run_prior_updates = real


if __name__ == "__main__":
    main()
