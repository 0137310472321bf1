"""Many topics in a few gigabytes: a PubMed-shaped fit within a device memory budget.

Corpus: ``make_lda_corpus(shape='pubmed', scale=--scale)`` (8.2 M documents, V = 141,043,
about 730 M tokens at scale 1); with ``--parts P`` > 1, P corpora of scale / P (seeds 0 .. P - 1,
drawn in parallel processes) stacked, which has the same shape and is drawn P times sooner.
One fit per K of ``--topics`` with the estimator's defaults (learned priors, averaging of the
last half of the sweeps, ``word_topic_storage='auto'``), ``--sweeps`` sweeps and
``max_device_memory=--budget``. Printed per fit: whether B was stored hybrid and the corpus
streamed (chunks), B's device bytes dense and hybrid (the sampler's own plan), the peak of CuPy's
memory pool over the whole fit and where it was reached, the median time of sweeps 3 onwards
(device drained after each), the set-up before the first sweep and the wall time; then whether
the same budget admits the dense storage (the dense sampler's load plan, before any allocation).
Also printed: whether the plan kept room for averaging's sum, and whether the fit went on without
averaging (the estimator's default averaging, given up where its sum does not fit the budget).

Usage::

    python benchmarks/bench_hybrid_pubmed.py --scale 0.25 --topics 32768 --sweeps 8 --budget 8GB
"""

import argparse
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]  # run from anywhere in a checkout

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda._runtime.device import Device, parse_bytes  # noqa: E402
from sklearn_gpulda.backends.cuda.sparse import memory_plan  # noqa: E402
from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402

from _bench_common import budget_fit  # noqa: E402


def fit(X, k, sweeps, budget):
    """A fit with the estimator's defaults within ``budget`` (``_bench_common.budget_fit``), and
    what its sampler chose at load."""
    seen = {}

    def on_load(sampler):
        seen.update(hybrid=sampler.hybrid, n_dense=sampler.words.n_dense,
                    averaging_reserved=sampler.averaging_reserved)

    lda, r = budget_fit(X, k, sweeps, budget, on_load=on_load, site=True)
    r.update(seen, averaging_dropped=any("without averaging" in w for w in r.pop("warnings")),
             bound=float(lda.bound_), finite=bool(np.isfinite(lda.components_).all()))
    return r


class WholeGpuPeak:
    """The most memory the whole GPU held while the block ran: what ``cudaMemGetInfo`` reports
    used (total less free), polled every few milliseconds, and nvidia-smi's ``memory.used``
    polled beside it where nvidia-smi runs. Both count what this process holds outside CuPy's
    pool (its context, loaded modules, kernels' local memory), which is what an 8 GB card has
    to fit; they count other processes on the GPU too, so run it on a GPU of its own."""

    def __init__(self, period_s=0.002):
        self.period_s = period_s
        self.peak_bytes = 0
        self.smi_peak_mib = None
        self._stop = threading.Event()
        self._error = None

    def _poll(self, gpu):
        import cupy

        try:
            with cupy.cuda.Device(gpu):
                while not self._stop.is_set():
                    free, total = cupy.cuda.runtime.memGetInfo()
                    self.peak_bytes = max(self.peak_bytes, total - free)
                    self._stop.wait(self.period_s)
        except Exception as exc:  # noqa: BLE001 -- raised again in __exit__
            self._error = exc

    def __enter__(self):
        import cupy

        gpu = cupy.cuda.Device()
        self._thread = threading.Thread(target=self._poll, args=(gpu.id,), daemon=True)
        self._thread.start()
        try:
            # The PCI bus id names the fit's GPU whatever CUDA_VISIBLE_DEVICES renumbers.
            self._smi = subprocess.Popen(
                ["nvidia-smi", f"--id={gpu.pci_bus_id}", "--query-gpu=memory.used",
                 "--format=csv,noheader,nounits", "-lms", "50"],
                stdout=subprocess.PIPE, text=True)
        except OSError:
            self._smi = None
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise RuntimeError("polling the GPU's memory failed") from self._error
        if self._smi is not None:
            self._smi.terminate()
            out = self._smi.communicate()[0]
            readings = [int(line) for line in out.split() if line.strip().isdigit()]
            self.smi_peak_mib = max(readings) if readings else None
        return False


def table_plans(corpus, k, budget):
    """B's device bytes stored dense and stored hybrid, by the sampler's own plan, and whether
    the dense storage's load plan fits ``budget`` (answered before anything is allocated)."""
    plans = {}
    sizes = memory_plan.corpus_sizes(corpus, corpus.word_frequencies())
    for storage in ("dense", "hybrid"):
        s = CudaSparseSampler(k, 1.0 / k, 1.0 / k, 0, Device("cuda", (0,)),
                              word_topic_storage=storage, max_device_memory=budget)
        settings = s.plan_settings()
        plans[storage] = memory_plan.table_plan(sizes, settings).nbytes
        if storage == "dense":
            try:
                memory_plan.load_plan(sizes, settings)
                plans["dense_refused"] = None
            except MemoryError as exc:
                plans["dense_refused"] = str(exc)
    return plans


def _part(scale, seed):
    return make_lda_corpus(shape="pubmed", n_topics=100, random_state=seed, scale=scale).data


def pubmed_shape(scale, parts):
    """The PubMed-shaped corpus: one draw, or ``parts`` draws of ``scale / parts`` stacked."""
    if parts <= 1:
        return _part(scale, 0).tocsr()
    with ProcessPoolExecutor(parts) as pool:
        blocks = list(pool.map(_part, [scale / parts] * parts, range(parts)))
    return sp.vstack(blocks, format="csr")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--topics", type=int, nargs="+", default=[32768])
    ap.add_argument("--sweeps", type=int, default=8)
    ap.add_argument("--budget", default="8GB")
    ap.add_argument("--parts", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    budget = parse_bytes(args.budget)
    tic = time.perf_counter()
    X = pubmed_shape(args.scale, args.parts)
    print(f"corpus: pubmed x{args.scale} ({args.parts} part(s)): D={X.shape[0]:,} V={X.shape[1]:,} "
          f"tokens={int(X.sum()):,} nnz={X.nnz:,} ({time.perf_counter() - tic:.0f} s)")
    results = dict(args=vars(args), n_docs=X.shape[0], n_words=X.shape[1],
                   n_tokens=int(X.sum()), fits=[])
    corpus = tokens(X)
    # Kernels loaded (or compiled) before anything is timed.
    GPULatentDirichletAllocation(n_components=8, max_iter=1, device="cuda").fit(X[:2000])
    for k in args.topics:
        plans = table_plans(corpus, k, budget)
        print(f"K={k}: B dense {plans['dense'] / 1e9:.2f} GB, "
              f"hybrid {plans['hybrid'] / 1e9:.2f} GB")
        with WholeGpuPeak() as whole:
            r = fit(X, k, args.sweeps, budget)
        r.update(whole_gpu_peak_gb=whole.peak_bytes / 1e9, smi_peak_mib=whole.smi_peak_mib)
        print(f"K={k}: whole GPU peak {whole.peak_bytes / 2**20:,.0f} MiB by cudaMemGetInfo, "
              f"{whole.smi_peak_mib} MiB by nvidia-smi; budget {budget / 2**20:,.0f} MiB")
        r.update(K=k, table_dense_gb=plans["dense"] / 1e9, table_hybrid_gb=plans["hybrid"] / 1e9,
                 dense_within_budget=plans["dense_refused"] is None)
        print(f"K={k}: hybrid={r['hybrid']} (dense rows {r['n_dense']:,}), chunks {r['chunks']}, "
              f"peak {r['peak_gb']:.2f} GB of a {budget / 1e9:.1f} GB budget, "
              f"{r['sweep_ms']:.1f} ms/sweep "
              f"({results['n_tokens'] / r['sweep_ms'] / 1e3:.0f} Mtoken/s), "
              f"set-up {r['setup_s']:.1f} s, wall {r['wall_s']:.1f} s, bound {r['bound']:.4f}, "
              f"finite {r['finite']}, averaging reserved {r['averaging_reserved']}, "
              f"dropped {r['averaging_dropped']}; peak at {r['peak_site']}")
        if plans["dense_refused"] is not None:
            print(f"K={k}: dense storage within {args.budget}: MemoryError: "
                  f"{plans['dense_refused']}")
        results["fits"].append(r)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
