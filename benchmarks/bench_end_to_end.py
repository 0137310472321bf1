"""Whole ``fit`` calls as a user sees them: fixed cost, time per sweep, Mtoken/s, device peak.

Corpus: ``datasets.make_lda_corpus(shape="nytimes", n_topics=100, random_state=0,
scale=--scale, alpha=--doc-alpha)`` (300,000 documents and about 100 M tokens at scale 1;
documents of about 30 distinct topics at the default 0.1, about 8 at 0.015, which the printed
expectation says), without the words no document uses (a vectoriser never emits those); with
``--stack 1 7`` also the same documents stacked 7 times (about 700 M tokens), to see what grows
with the corpus. For each corpus and each
K of ``--topics``, ``GPULatentDirichletAllocation(n_components=K, max_iter=n, random_state=0)``
is fitted on host (SciPy) counts and timed from the outside with a wall clock, for the two sweep
counts n1 < n2 of ``--sweeps``, and for the default number of sweeps (the fit a user who sets
only K waits for); every other parameter is the estimator's default. A warm-up fit
at the same K on the first ``--warmup-docs`` documents comes first, so that loading (or NVRTC
compiling) the kernels is not counted: it runs past two prior updates and averages, so that the
kernels CuPy compiles on first use (the prior updates' reductions) are compiled there and not in
the first timed fit. Then::

    time per sweep = (wall(n2) - wall(n1)) / (n2 - n1)
    fixed cost     = wall(n1) - n1 * time per sweep
    Mtoken/s       = tokens / time per sweep

The fixed cost is everything a fit does besides its sweeps: validation and upload, the layout,
the initial topics, the final likelihood, copying the model back. A third fit of n2 sweeps is
timed stage by stage (``sklearn_gpulda._runtime.stages``, the device drained at each boundary),
with the device bytes in use at the end of each stage: that is where the fixed cost and the
memory go.
Also printed: the
part of the longer fit outside ``fit_time_`` (the estimator's own clock around layout, initial
topics and sweeps), and the device peak: the high-water mark of bytes in use in CuPy's memory
pool during the longer fit, seen by a memory hook at every allocation, in GB and in bytes per
token.

Time: no new point starts once ``--budget-s`` (counted from the start, corpora included) is spent,
nor one that the last point's duration says would overrun it; a fit in progress is not
interrupted, so give the process a hard limit a little above the budget. ``--json`` (default
``benchmarks/results/bench_end_to_end/bench_end_to_end.json``) is rewritten after every point,
so a run cut short keeps what it measured.

Usage::

    python benchmarks/bench_end_to_end.py
    python benchmarks/bench_end_to_end.py --topics 1000 --stack 1 7 --budget-s 500
    python benchmarks/bench_end_to_end.py --device cpu --scale 0.002 --topics 5 --sweeps 2 4
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from _bench_common import (  # noqa: E402
    ALPHA_HELP, DevicePeak, alpha_for, output_path, save_json)

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda._runtime.device import describe_device, resolve_device  # noqa: E402
from sklearn_gpulda._runtime.stages import recording  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402

DEFAULT_TOPICS = [100, 1000, 10000, 32768]


def nytimes_counts(scale, doc_alpha=0.1):
    """The NYTimes-shaped counts, without the words no document uses, and the expected number
    of distinct topics per document, ``sum_k 1 - (1 - theta_dk) ** N_d`` averaged over
    documents (what sets the length of a row of A, and so the sampler's cost)."""
    data = make_lda_corpus(shape="nytimes", n_topics=100, random_state=0, scale=scale,
                           alpha=doc_alpha)
    X = data.data.tocsr()
    lengths = np.asarray(X.sum(axis=1), dtype=np.float64)
    topics = 0.0
    for lo in range(0, X.shape[0], 50_000):  # (block, 100) float64 at a time
        theta = np.asarray(data.doc_topic[lo:lo + 50_000], dtype=np.float64)
        topics += float((1.0 - (1.0 - theta) ** lengths[lo:lo + 50_000]).sum())
    return X[:, np.flatnonzero(X.getnnz(axis=0))].tocsr(), topics / max(X.shape[0], 1)


def make_estimator(n_topics, n_sweeps, device, options):
    """An estimator of the benchmark's fits; ``options``: other estimator parameters (the
    prior, ``word_topic_storage``)."""
    return GPULatentDirichletAllocation(n_components=n_topics, max_iter=n_sweeps, random_state=0,
                                        device=device, **options)


def timed_fit(X, n_topics, n_sweeps, device, options, track_peak):
    """Wall seconds of one fit from the outside, its ``fit_time_``, the device peak in bytes and
    the sweeps it ran."""
    lda = make_estimator(n_topics, n_sweeps, device, options)
    with DevicePeak(track_peak) as peak:
        tic = time.perf_counter()
        lda.fit(X)
        wall = time.perf_counter() - tic
    return wall, lda.fit_time_, peak.peak, int(lda.n_iter_)


def stage_log(X, n_topics, n_sweeps, device, options):
    """Seconds of each stage of one fit (``sklearn_gpulda._runtime.stages``), with the device
    drained at every stage boundary so that queued work is charged where it was queued, and the
    bytes in use in CuPy's pool at the end of each; a separate fit, as the draining slows it a
    little.

    Returns
    -------
    seconds, in_use : dict
    """
    sync = in_use = None
    if device.kind == "cuda":
        import cupy

        sync = cupy.cuda.Device(device.index).synchronize
        in_use = cupy.get_default_memory_pool().used_bytes
    lda = make_estimator(n_topics, n_sweeps, str(device), options)
    tic = time.perf_counter()
    with recording(sync, in_use) as log:
        lda.fit(X)
    log.seconds["whole fit"] = time.perf_counter() - tic
    sampling = log.durations.get("sweeps: sampling", [])
    if sampling:
        # Early sweeps cost more (a random start spreads each document over many topics).
        log.seconds["first sweeps (ms)"] = [round(t * 1e3, 2) for t in sampling[:5]]
        log.seconds["median sweep (ms)"] = round(float(np.median(sampling)) * 1e3, 2)
    return log.seconds, log.in_use


def measure_point(X, n_tokens, n_topics, sweeps, device, alpha_spec, warmup_docs, storage,
                  default_fit=True):
    """One (corpus, K) point: a warm-up fit, then fits of the two sweep counts."""
    options = {"word_topic_storage": storage}
    if alpha_spec is not None:
        options["doc_topic_prior"] = alpha_for(alpha_spec, n_topics)
    on_gpu = device.kind == "cuda"
    tic = time.perf_counter()
    warmup_sweeps = 2 * make_estimator(n_topics, None, "cpu", options).prior_update_every + 2
    timed_fit(X[:warmup_docs], n_topics, warmup_sweeps, str(device), options, False)
    warmup = time.perf_counter() - tic
    n1, n2 = sweeps
    wall1, _, _, _ = timed_fit(X, n_topics, n1, str(device), options, False)
    wall2, inside2, peak, _ = timed_fit(X, n_topics, n2, str(device), options, on_gpu)
    # What a user who sets nothing but K waits for: max_iter=None, which stops when converged
    # (the sweeps it ran are kept, not a fixed count).
    wall_default = default_sweeps = None
    if default_fit:
        wall_default, _, _, default_sweeps = timed_fit(X, n_topics, None, str(device), options,
                                                       False)
    per_sweep = (wall2 - wall1) / (n2 - n1)
    stages, in_use = stage_log(X, n_topics, n2, device, options)
    return dict(
        K=n_topics, n_tokens=n_tokens, alpha=alpha_spec or "default", warmup_s=warmup,
        sweeps=[n1, n2],
        wall_s=[wall1, wall2], default_fit_s=wall_default,
        default_sweeps=default_sweeps, fixed_s=wall1 - n1 * per_sweep,
        per_sweep_ms=per_sweep * 1e3,
        mtok_s=n_tokens / per_sweep / 1e6 if per_sweep > 0 else float("nan"),
        outside_fit_time_s=wall2 - inside2,
        peak_gb=peak / 1e9 if on_gpu else None,
        peak_bytes_per_token=peak / n_tokens if on_gpu else None,
        stages_s=stages,
        stage_in_use_bytes=in_use,
    )


def point_line(p):
    peak = "" if p["peak_gb"] is None else (
        f", peak {p['peak_gb']:.2f} GB ({p['peak_bytes_per_token']:.0f} B/token)")
    return (
        f"  K={p['K']:6d}: fixed {p['fixed_s']:6.2f} s, {p['per_sweep_ms']:8.2f} ms/sweep "
        f"({p['mtok_s']:8.1f} Mtoken/s), outside fit_time_ {p['outside_fit_time_s']:5.2f} s"
        f"{peak}; fits of {p['sweeps'][0]}/{p['sweeps'][1]} sweeps "
        f"{p['wall_s'][0]:.2f}/{p['wall_s'][1]:.2f} s, warm-up {p['warmup_s']:.1f} s"
        + ("" if p["default_fit_s"] is None else
           f"; a default fit ({p['default_sweeps']} sweeps) {p['default_fit_s']:.2f} s") + "\n"
        + stage_lines(p["stages_s"], p["sweeps"][1], p["stage_in_use_bytes"], p["n_tokens"])
    )


def stage_lines(seconds, n_sweeps, in_use, n_tokens):
    """The stages of a fit of ``n_sweeps`` sweeps, largest first, with the device bytes in use
    at the end of each (per token too); sub-stages ("load: ...") indented under their stage and
    not added again into "outside the sweeps"."""
    top = {k: v for k, v in seconds.items()
           if ":" not in k and k != "whole fit" and "(ms)" not in k}
    outside = sum(v for k, v in top.items() if k != "sweeps")
    lines = [f"    stages of a {n_sweeps}-sweep fit (device drained between stages): whole fit "
             f"{seconds['whole fit']:.3f} s, outside the sweeps {outside:.3f} s, untimed "
             f"{seconds['whole fit'] - sum(top.values()):.3f} s"]

    def line(indent, name, value, key):
        text = f"{' ' * indent}{name:<{24 - indent}} {value:7.3f} s"
        if key in in_use:
            text += (f"   {in_use[key] / 1e9:6.2f} GB in use after "
                     f"({in_use[key] / n_tokens:5.1f} B/token)")
        return text

    for name, value in sorted(top.items(), key=lambda kv: -kv[1]):
        lines.append(line(6, name, value, name))
        subs = {k: v for k, v in seconds.items() if k.startswith(name + ": ")}
        for sub, sv in sorted(subs.items(), key=lambda kv: -kv[1]):
            lines.append(line(8, sub[len(name) + 2:], sv, sub))
    if "first sweeps (ms)" in seconds:
        lines.append(f"      sampling of the first sweeps {seconds['first sweeps (ms)']} ms, "
                     f"median {seconds['median sweep (ms)']} ms")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, nargs="+", default=DEFAULT_TOPICS)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="fraction of NYTimes' 300,000 documents (default 1)")
    ap.add_argument("--stack", type=int, nargs="+", default=[1],
                    help="corpora of the documents stacked this many times (default 1)")
    ap.add_argument("--sweeps", type=int, nargs=2, default=[10, 110], metavar=("N1", "N2"),
                    help="the two sweep counts (default 10 110)")
    ap.add_argument("--alpha", default=None,
                    help=ALPHA_HELP + " (default: the estimator's, 'auto')")
    ap.add_argument("--doc-alpha", type=float, default=0.1,
                    help="the generator's document-topic concentration per topic (default 0.1: "
                         "about 30 distinct topics per document; 0.015: about 8)")
    ap.add_argument("--device", default="cuda", help="the estimator's device (default cuda)")
    ap.add_argument("--warmup-docs", type=int, default=2000,
                    help="documents of the warm-up fit (default 2000)")
    ap.add_argument("--first-fit", action="store_true",
                    help="one untimed fit of each corpus size before its points")
    ap.add_argument("--budget-s", type=float, default=540.0,
                    help="seconds after which no new point starts (default 540)")
    ap.add_argument("--storage", default="auto", choices=["auto", "dense", "hybrid"],
                    help="the estimator's word_topic_storage (default auto)")
    ap.add_argument("--no-default-fit", action="store_true",
                    help="skip the fit of the default number of sweeps (1,000 on the GPU)")
    ap.add_argument("--json", default=output_path("bench_end_to_end", "bench_end_to_end.json"),
                    help="every point (default benchmarks/results/bench_end_to_end/"
                         "bench_end_to_end.json)")
    args = ap.parse_args(argv)
    n1, n2 = args.sweeps
    if not 0 < n1 < n2:
        ap.error("--sweeps needs 0 < N1 < N2")
    if args.alpha is not None:
        try:
            alpha_for(args.alpha, 1)
        except ValueError as exc:
            ap.error(str(exc))
    t_begin = time.perf_counter()
    device = resolve_device(args.device)
    print(f"device: {describe_device(device)}")
    results = dict(device=describe_device(device), args=vars(args), corpora=[])

    tic = time.perf_counter()
    base, doc_topics = nytimes_counts(args.scale, args.doc_alpha)
    results["expected_topics_per_doc"] = doc_topics
    print(f"corpus: make_lda_corpus(shape='nytimes', n_topics=100, random_state=0, "
          f"scale={args.scale}, alpha={args.doc_alpha}), {time.perf_counter() - tic:.1f} s, "
          f"{doc_topics:.1f} distinct topics per document expected")
    last = 0.0  # duration of the last point: what the next one is expected to take at least
    for copies in args.stack:
        X = base if copies == 1 else sp.vstack([base] * copies, format="csr")
        n_tokens = int(X.sum())
        corpus = dict(stack=copies, n_docs=X.shape[0], n_words=X.shape[1], n_tokens=n_tokens,
                      points=[])
        results["corpora"].append(corpus)
        print(f"\n== {copies} x: D={X.shape[0]:,} V={X.shape[1]:,} tokens={n_tokens:,}")
        if args.first_fit:
            # The process's first fit of this size pays once for what later fits reuse (host
            # pages, memory pool growth, pinned buffers): timed apart, not in the points.
            tic = time.perf_counter()
            timed_fit(X, args.topics[0], n1, str(device), {"word_topic_storage": args.storage},
                      False)
            corpus["first_fit_s"] = time.perf_counter() - tic
            print(f"  first fit of this size (K={args.topics[0]}, {n1} sweeps, not a point): "
                  f"{corpus['first_fit_s']:.2f} s")
        for k in args.topics:
            spent = time.perf_counter() - t_begin
            if spent + last > args.budget_s:
                print(f"  K={k}: not run ({spent:.0f} s of the {args.budget_s:.0f} s budget "
                      f"spent, the last point took {last:.0f} s)")
                continue
            tic = time.perf_counter()
            try:
                point = measure_point(X, n_tokens, k, args.sweeps, device, args.alpha,
                                      args.warmup_docs, args.storage,
                                      default_fit=not args.no_default_fit)
            except (MemoryError, ValueError) as exc:  # too large for this device, or K refused
                print(f"  K={k}: {type(exc).__name__}: {exc}")
                continue
            finally:
                last = time.perf_counter() - tic
            corpus["points"].append(point)
            print(point_line(point), flush=True)
            save_json(args.json, results)
    print(f"total {time.perf_counter() - t_begin:.0f} s")


if __name__ == "__main__":
    main()
