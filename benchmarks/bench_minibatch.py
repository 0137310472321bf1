"""ESCA ('sparse') against mini-batched sweeps ('minibatch'): held-out likelihood against sweeps
and against seconds, through the estimator, on real corpora (issue 12's measurement).

For each corpus and K, every system fits once with ``max_iter = --sweeps``; a callback scores the
model at sweeps 5, 10, 20, 40, ... by document completion on the held-out documents
(``metrics.document_completion`` on the GPU, one evaluator for every system), with the clock
stopped while it scores. Both systems use the estimator's defaults otherwise (learnt priors), with
no averaging (``n_averaged_sweeps=0``), so each point is the chain's state at that sweep.
The minibatch system runs once per ``--batch-tokens``.

Printed per (corpus, K): each system's held-out log-likelihood per token at each checkpoint and
its seconds, the per-sweep time, and how soon (sweeps, seconds) each system first reaches the
'sparse' system's final (converged) figure less ``--tol`` nats per token. Writes
``bench_minibatch.csv`` and ``.json`` into ``--out`` (default
``benchmarks/results/bench_minibatch``).

Usage (corpora found as ``benchmarks/_peer_corpora.py`` looks for them)::

    python benchmarks/bench_minibatch.py --corpora nips kos 20news --topics 20 100 1000
"""

import argparse
import json
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench_common import output_path  # noqa: E402
from _peer_corpora import CorpusUnavailable, load_corpus  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.metrics import document_completion  # noqa: E402


def checkpoints(last):
    marks, s = [], 5
    while s <= last:
        marks.append(s)
        s *= 2
    if marks[-1] != last:
        marks.append(last)
    return marks


def run_system(X_train, X_test, k, algorithm, sweeps, device, seed, batch_tokens=None):
    import cupy as cp

    marks = set(checkpoints(sweeps))
    points, state = [], {"eval": 0.0}

    def callback(i, info):
        if i not in marks:
            return
        cp.cuda.Device().synchronize()
        tic = time.perf_counter()
        elapsed = tic - state["start"] - state["eval"]
        comps, alpha = info["snapshot"]()
        ll = document_completion(X_test, comps, alpha, random_state=0, device=device).per_token
        points.append({"sweep": i, "seconds": elapsed, "heldout": float(ll)})
        state["eval"] += time.perf_counter() - tic

    model = GPULatentDirichletAllocation(n_components=k, algorithm=algorithm, max_iter=sweeps,
                                         n_averaged_sweeps=0, random_state=seed, device=device,
                                         minibatch_tokens=batch_tokens)
    state["start"] = time.perf_counter()
    model.fit(X_train, callback=callback)
    return points


def reach(points, target):
    for p in points:
        if p["heldout"] >= target:
            return p["sweep"], p["seconds"]
    return None, None


def flush(args, device_name, rows, summary):
    """Write what is measured so far (a run cut by its time box keeps its finished systems)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "bench_minibatch.csv", "w") as f:
        f.write("corpus,n_topics,system,sweep,seconds,heldout\n")
        for r in rows:
            f.write(f"{r['corpus']},{r['n_topics']},{r['system']},{r['sweep']},"
                    f"{r['seconds']:.4f},{r['heldout']:.5f}\n")
    (out / "bench_minibatch.json").write_text(json.dumps(
        {"device": device_name, "args": vars(args), "summary": summary}, indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", default=["nips", "kos", "20news"])
    parser.add_argument("--topics", nargs="+", type=int, default=[20, 100, 1000])
    parser.add_argument("--sweeps", type=int, default=640)
    parser.add_argument("--batch-tokens", nargs="+", type=int, default=[16384, 65536, 262144])
    parser.add_argument("--max-test-docs", type=int, default=1000)
    parser.add_argument("--tol", type=float, default=0.01)
    parser.add_argument("--budget-s", type=float, default=480.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=output_path("bench_minibatch"))
    args = parser.parse_args()
    import cupy as cp

    start = time.perf_counter()
    device = "cuda"
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    print(f"device: {name}")
    # Warm the kernels of both systems.
    from sklearn_gpulda.datasets import load_kjv_chapters

    warm = load_kjv_chapters().data[:50]
    for algorithm in ("sparse", "minibatch"):
        GPULatentDirichletAllocation(n_components=8, algorithm=algorithm, max_iter=2,
                                     device=device).fit(warm)
    rows, summary = [], []
    for corpus in args.corpora:
        try:
            X_train, X_test, _ = load_corpus(corpus, max_test_docs=args.max_test_docs)
        except CorpusUnavailable as exc:
            print(f"{corpus}: skipped ({exc})")
            continue
        n_tokens = int(X_train.sum())
        print(f"\n{corpus}: {X_train.shape[0]} documents, {X_train.shape[1]} words, "
              f"{n_tokens} tokens; {X_test.shape[0]} test documents")
        for k in args.topics:
            systems = [("sparse", "sparse", None)] + [
                (f"minibatch-{bt}", "minibatch", bt) for bt in args.batch_tokens]
            results = {}
            for label, algorithm, bt in systems:
                if time.perf_counter() - start > args.budget_s:
                    print(f"  budget spent: {label} at K={k} not run")
                    continue
                points = run_system(X_train, X_test, k, algorithm, args.sweeps, device,
                                    args.seed, batch_tokens=bt)
                results[label] = points
                flush(args, name, rows + [{"corpus": corpus, "n_topics": k, "system": label, **p}
                                          for p in points], summary)
                for p in points:
                    rows.append({"corpus": corpus, "n_topics": k, "system": label, **p})
                first, last = points[0], points[-1]
                per_sweep = ((last["seconds"] - first["seconds"])
                             / max(1, last["sweep"] - first["sweep"]))
                line = " ".join(f"{p['sweep']}:{p['heldout']:.4f}" for p in points)
                print(f"  K={k} {label:>16}: {per_sweep * 1e3:7.2f} ms/sweep "
                      f"({n_tokens / per_sweep / 1e6:,.0f} Mtoken/s)  {line}", flush=True)
            if "sparse" not in results:
                continue
            target = results["sparse"][-1]["heldout"] - args.tol
            for label, points in results.items():
                sweeps_needed, secs = reach(points, target)
                summary.append({"corpus": corpus, "n_topics": k, "system": label,
                                "target": target, "sweeps": sweeps_needed, "seconds": secs,
                                "final": points[-1]["heldout"],
                                "best": max(p["heldout"] for p in points)})
                when = "not reached" if secs is None else f"sweep {sweeps_needed}, {secs:.3f} s"
                print(f"  K={k} {label:>16} reaches sparse's final - {args.tol} "
                      f"({target:.4f}): {when}; final {points[-1]['heldout']:.4f}")
    flush(args, name, rows, summary)


if __name__ == "__main__":
    main()
