"""Time to a given held-out log-likelihood: this package against scikit-learn, gensim and tomotopy.

Every system is trained on the same training counts, over the same vocabulary, and scored by one
evaluator: the held-out log-likelihood per token by document completion
(:func:`sklearn_gpulda.metrics.document_completion`), computed from nothing but the system's
topic-word matrix and its document-topic prior. Each system is trained through a schedule of
iteration counts until a time budget runs out, and scored at every checkpoint; scoring is not timed.

Systems: ``gpulda-cuda`` and ``gpulda-cpu`` (this package's two engines), ``sklearn-batch`` and
``sklearn-online`` (``n_jobs`` = cores), ``gensim`` (``LdaMulticore``, cores - 1 workers, as its
documentation advises) and ``tomotopy`` (``LDAModel``, ``workers`` = cores). All get
scikit-learn's default priors, ``alpha = beta = 1 / K``. A system that cannot run here (no GPU,
library not installed) is skipped with a message; the peers come with the ``bench`` extra.

Corpora: ``20news`` (vectorised from the raw posts, by-date split), ``nips``, ``kos`` (UCI
bag-of-words, 10% of documents held out) and ``nytimes`` (synthetic, NYTimes-shaped, from
``make_lda_corpus``). Real corpora are read from ``$SKLEARN_GPULDA_DATA``, ``<repo>/.carry/data``
or ``<repo>/../shared/data``, and skipped when absent.

Writes to ``--out``: ``curves.csv`` (one row per checkpoint), ``summary.csv`` (one row per run:
best score, peak memory, transform latency for ``--transform-docs`` new documents, or why it was
skipped), ``curves.png`` (score against time, one panel per corpus and K), ``table.md`` (time to
reach the best score scikit-learn reaches, and each system's time as a multiple of ours) and
``environment.json`` (date, machine, library versions). The table is printed too. All but the plot
are rewritten after every run, so an invocation cut short leaves what it measured (``--merge``
draws the plot from them).

Time limits: ``--budget`` stops a system's schedule before a checkpoint predicted to overrun it,
but the first checkpoint always runs; ``--hard-limit`` stops a run outright (its worker process
group is killed) and keeps the checkpoints it had reached; ``--deadline`` bounds a whole
invocation. ``--merge`` combines the results of several invocations into one table and plot.

Examples::

    python benchmarks/peers.py --quick                 # a few minutes on a laptop
    python benchmarks/peers.py --corpora kos nips --topics 20 100 --budget 300
    python benchmarks/peers.py --systems gpulda-cuda sklearn-batch tomotopy --topics 1000
    python benchmarks/peers.py --topics 1000 --budget 60 --hard-limit 120 --deadline 560
    python benchmarks/peers.py --merge results/peers-A results/peers-B --out results/all
"""

import argparse
import csv
import datetime
import json
import math
import multiprocessing
import os
import platform
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run from a source checkout without installing; workers inherit this path.
sys.path[:0] = [str(HERE.parent), str(HERE)]

from _peer_corpora import CORPORA, CorpusUnavailable, load_corpus, save_corpus  # noqa: E402
from _peer_systems import (  # noqa: E402
    DEFAULT_SYSTEMS, OURS, SCHEDULES, SKLEARN, SYSTEMS, n_cores, run_system)

QUICK = dict(corpora=["kos"], topics=[20], budget=12.0, max_docs=800, max_test_docs=200,
             nytimes_scale=0.003, transform_docs=10_000, eval_iter=50)


def _parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpora", nargs="+", choices=CORPORA, default=None,
                   help="corpora to run (default: all; --quick: kos, or nytimes without it)")
    p.add_argument("--topics", nargs="+", type=int, default=None,
                   help="numbers of topics K (default: 20 100 1000; --quick: 20)")
    p.add_argument("--systems", nargs="+", choices=SYSTEMS, default=DEFAULT_SYSTEMS,
                   help="default: all but gpulda-cuda-avg (the GPU engine with "
                        "n_averaged_sweeps at three quarters of each fit's sweeps)")
    p.add_argument("--budget", type=float, default=None,
                   help="training seconds per (corpus, K, system) after which no new checkpoint "
                        "starts (default 600; --quick: 12)")
    p.add_argument("--quick", action="store_true",
                   help="small corpus, small K, short budget: checks the harness end to end")
    p.add_argument("--max-docs", type=int, default=None, help="sample this many training docs")
    p.add_argument("--max-test-docs", type=int, default=None,
                   help="held-out documents scored at every checkpoint (default 2000)")
    p.add_argument("--nytimes-scale", type=float, default=None,
                   help="scale of the synthetic NYTimes-shaped corpus (default 0.1: 30,000 docs)")
    p.add_argument("--transform-docs", type=int, default=None,
                   help="new documents in the transform latency measurement (default 10000)")
    p.add_argument("--eval-iter", type=int, default=None,
                   help="fold-in iterations of document completion (default 100)")
    p.add_argument("--transform-budget", type=float, default=30.0,
                   help="seconds the transform of --transform-docs documents may take; a slower "
                        "system is timed on its first 1,000 only (default 30)")
    p.add_argument("--hard-limit", type=float, default=None,
                   help="wall seconds after which a run is stopped, keeping the checkpoints it "
                        "reached (default: none; the first checkpoint always runs otherwise)")
    p.add_argument("--deadline", type=float, default=None,
                   help="wall seconds for the whole invocation: later runs get what is left as "
                        "their budget and hard limit, and runs with under 20 s left are skipped")
    p.add_argument("--merge", nargs="+", type=Path, default=None, metavar="FOLDER",
                   help="do not run anything: combine the results of earlier runs (their "
                        "curves.csv and summary.csv) into one table and plot in --out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (default benchmarks/results/peers-<UTC time>)")
    args = p.parse_args(argv)
    defaults = dict(corpora=CORPORA, topics=[20, 100, 1000], budget=600.0, max_docs=None,
                    max_test_docs=2000, nytimes_scale=0.1, transform_docs=10_000, eval_iter=100)
    for key, value in (QUICK if args.quick else defaults).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.out is None:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        args.out = HERE / "results" / f"peers-{stamp}"
    return args


def _environment(args):
    import numpy
    import scipy
    import sklearn

    import sklearn_gpulda

    env = dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        host=platform.node(), platform=platform.platform(), python=platform.python_version(),
        cpu=_cpu_name(), cores=n_cores(), numpy=numpy.__version__, scipy=scipy.__version__,
        sklearn=sklearn.__version__, sklearn_gpulda=sklearn_gpulda.__version__,
        args={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    )
    for name in ("gensim", "tomotopy", "cupy"):
        try:
            env[name] = __import__(name).__version__
        except Exception as exc:  # missing, or broken (a CuPy without a driver)
            env[name] = f"not importable: {type(exc).__name__}"
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        env["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    except Exception:
        env["gpu"] = None
    return env


def _cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _worker(job, conn):
    # Its own process group, so that a run stopped at its hard limit takes its children with it
    # (joblib's loky workers, gensim's worker processes) instead of leaving them on the cores.
    os.setpgid(0, 0)
    try:
        result = run_system(job, report=lambda point: conn.send(("point", point)))
        conn.send(("result", result))
    except BaseException as exc:
        conn.send(("result", dict(status=f"failed: {type(exc).__name__}: {exc}")))
    finally:
        conn.close()
    # joblib keeps its loky workers alive for reuse, and a normal exit would wait on them
    # forever; they notice their parent's end and leave by themselves.
    try:
        from joblib.externals.loky import get_reusable_executor

        get_reusable_executor().shutdown(wait=True)
    finally:
        os._exit(0)


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.join(timeout=10)


def _run_in_worker(job, hard_limit_s=math.inf):
    """Run one job in a fresh process; stop it, keeping its checkpoints, after ``hard_limit_s``.

    A fresh process per run: its peak memory is the run's own, threads and GPU memory die with
    it, and a library that crashes loses one row. Not a Pool: pool workers are daemons, and
    daemons may not start the processes that joblib (scikit-learn's n_jobs) and gensim need.
    The worker sends each checkpoint as it is scored, so a run stopped at its hard limit (whose
    first checkpoint alone may take many minutes: one variational pass at K = 1000) still
    reports what it reached.
    """
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(job, send))
    tic = time.perf_counter()
    proc.start()
    send.close()
    points, result = [], None
    try:
        while result is None:
            left = hard_limit_s - (time.perf_counter() - tic)
            if left <= 0 or not receive.poll(min(left, 1e6)):
                if left <= 0 or not proc.is_alive():
                    break
                continue
            kind, payload = receive.recv()
            if kind == "point":
                points.append(payload)
            else:
                result = payload
    except EOFError:  # the worker died without answering (a crash in native code)
        pass
    if result is None:
        if proc.is_alive():
            _kill_group(proc)
            result = dict(status=f"stopped at the hard limit of {hard_limit_s:.0f} s")
        else:
            proc.join()
            result = dict(status=f"failed: worker exited with code {proc.exitcode}")
    proc.join(timeout=60)
    if proc.is_alive():
        _kill_group(proc)
    if "points" in result:
        return result
    failed = dict(corpus=job["corpus"], n_topics=job["n_topics"], system=job["system"],
                  points=points, host_peak_mb=float("nan"), device_peak_mb=float("nan"),
                  transform_s=float("nan"))
    return dict(failed, **result)


def _best(points):
    return max((p["heldout_ll"] for p in points), default=float("nan"))


def _time_to(points, target):
    for p in points:
        if p["heldout_ll"] >= target:
            return p["train_s"]
    return None


def _transform_cell(r):
    """Transform seconds, with the number of documents when it is not the full request."""
    t, n = r.get("transform_s", math.nan), r.get("transform_docs")
    if t is None or math.isnan(t):
        return ""
    if n and r.get("transform_docs_requested") and n < r["transform_docs_requested"]:
        return f"{t:.2f} for {n:,} docs"
    return f"{t:.2f}"


def _time_of_best(points):
    best = _best(points)
    return next(p["train_s"] for p in points if p["heldout_ll"] == best)


def _peer_line(runs, ours):
    """One sentence: how soon ours reaches the best score any other system reached."""
    others = [r for s, r in runs.items() if s not in OURS and r["points"]]
    if not others or ours is None:
        return []
    top = max(others, key=lambda r: _best(r["points"]))
    best = _best(top["points"])
    t_ours = _time_to(runs[ours]["points"], best)
    reached = (f"{ours} reached it in {t_ours:.2f} s" if t_ours is not None
               else f"{ours} did not reach it (best {_best(runs[ours]['points']):.4f})")
    return [f"Best score of any other system: {best:.4f} ({top['system']}, after "
            f"{_time_of_best(top['points']):.2f} s); {reached}.\n"]


def _table(results, systems):
    """Markdown: per (corpus, K), time of every system to reach scikit-learn's best score."""
    lines = []
    keys = sorted({(r["corpus"], r["n_topics"]) for r in results},
                  key=lambda k: (CORPORA.index(k[0]), k[1]))
    for corpus, k in keys:
        runs = {r["system"]: r for r in results if (r["corpus"], r["n_topics"]) == (corpus, k)}
        sk_best = [_best(runs[s]["points"]) for s in SKLEARN if s in runs and runs[s]["points"]]
        lines.append(f"\n### {corpus}, K = {k}\n")
        target = max(sk_best) if sk_best else None
        ours = next((s for s in OURS if s in runs and runs[s]["points"]), None)
        ours_t = _time_to(runs[ours]["points"], target) if ours and target is not None else None
        if target is None:
            lines.append("No scikit-learn result, so no target time.\n")
        else:
            lines.append(f"Target: {target:.4f} nats/token, the best held-out log-likelihood "
                         f"scikit-learn reached. Ratio: time / time of "
                         f"{ours or 'ours (not run)'}.\n")
        lines += _peer_line(runs, ours)
        lines.append("| system | best LL | time to target (s) | ratio to ours | host peak (MB) "
                     "| device peak (MB) | transform (s) |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        for s in systems:
            r = runs.get(s)
            if r is None:
                continue
            if not r["points"]:
                lines.append(f"| {s} | {r['status']} | | | | | |")
                continue
            t = None if target is None else _time_to(r["points"], target)
            if target is None:
                reached, ratio = "", ""
            elif t is None:
                reached, ratio = f"not reached in {r['points'][-1]['train_s']:.1f}", ""
                if r["status"].startswith("stopped"):
                    reached += ", then stopped"
            else:
                reached = f"{t:.2f}"
                ratio = f"{t / ours_t:.2f}" if ours_t else ""
            dev = "" if math.isnan(r["device_peak_mb"]) else f"{r['device_peak_mb']:.0f}"
            host = "" if math.isnan(r["host_peak_mb"]) else f"{r['host_peak_mb']:.0f}"
            lines.append(f"| {s} | {_best(r['points']):.4f} | {reached} | {ratio} | "
                         f"{host} | {dev} | {_transform_cell(r)} |")
    return "\n".join(lines) + "\n"


def _plot(results, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not importable: no plot (install the bench extra)")
        return
    keys = sorted({(r["corpus"], r["n_topics"]) for r in results if r["points"]},
                  key=lambda k: (CORPORA.index(k[0]), k[1]))
    if not keys:
        return
    ncols = min(3, len(keys))
    nrows = math.ceil(len(keys) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.8 * nrows), squeeze=False)
    for ax, (corpus, k) in zip(axes.ravel(), keys):
        for r in results:
            if (r["corpus"], r["n_topics"]) == (corpus, k) and r["points"]:
                t = [p["train_s"] for p in r["points"]]
                ll = [p["heldout_ll"] for p in r["points"]]
                style = "o-" if r["system"] in OURS else "s--"
                # One colour per system in every panel.
                colour = f"C{SYSTEMS.index(r['system'])}"
                ax.plot(t, ll, style, color=colour, label=r["system"], markersize=4)
        ax.set_xscale("log")
        ax.set_title(f"{corpus}, K = {k}")
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("held-out log-likelihood / token")
        ax.legend(fontsize=7)
    for ax in axes.ravel()[len(keys):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


SUMMARY_FIELDS = ["corpus", "n_topics", "system", "status", "device", "version", "cores",
                  "n_train_tokens", "best_ll", "final_iterations", "final_train_s", "prepare_s",
                  "host_peak_mb", "device_peak_mb", "transform_s", "transform_docs",
                  "transform_docs_requested"]


def _write_outputs(out, results, systems, header, plot=True):
    """curves.csv, summary.csv, table.md and (with ``plot``) curves.png from the results so far."""
    with open(out / "curves.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["corpus", "n_topics", "system", "iterations", "train_s", "heldout_ll"])
        for r in results:
            for p in r["points"]:
                w.writerow([r["corpus"], r["n_topics"], r["system"], p["iterations"],
                            f"{p['train_s']:.4f}", f"{p['heldout_ll']:.6f}"])
    with open(out / "summary.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=SUMMARY_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in results:
            last = r["points"][-1] if r["points"] else {}
            w.writerow(dict(r, best_ll=_best(r["points"]) if r["points"] else "",
                            final_iterations=last.get("iterations", ""),
                            final_train_s=last.get("train_s", "")))
    table = _table(results, systems)
    (out / "table.md").write_text(header + table)
    if plot:
        _plot(results, out / "curves.png")
    return table


def _float(text):
    return float(text) if text not in ("", None) else math.nan


def load_results(folder):
    """The results of an earlier run, rebuilt from its ``summary.csv`` and ``curves.csv``."""
    folder = Path(folder)
    results = []
    with open(folder / "summary.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            r = dict(row, n_topics=int(row["n_topics"]), points=[])
            for key in ("host_peak_mb", "device_peak_mb", "transform_s", "prepare_s"):
                r[key] = _float(row.get(key))
            for key in ("transform_docs", "transform_docs_requested", "n_train_tokens"):
                r[key] = int(row[key]) if row.get(key) else None
            # Older runs timed every transform on the full request.
            r["transform_docs_requested"] = r["transform_docs_requested"] or r["transform_docs"]
            results.append(r)
    index = {(r["corpus"], r["n_topics"], r["system"]): r for r in results}
    with open(folder / "curves.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            index[(row["corpus"], int(row["n_topics"]), row["system"])]["points"].append(
                dict(iterations=int(row["iterations"]), train_s=float(row["train_s"]),
                     heldout_ll=float(row["heldout_ll"])))
    return results


def _merge(args):
    """Combine earlier runs' results (later folders win for a repeated triple) into --out."""
    merged, sources = {}, []
    for folder in args.merge:
        for r in load_results(folder):
            key = (r["corpus"], r["n_topics"], r["system"])
            # A later run replaces an earlier one, except that a run skipped for want of time
            # does not hide an earlier run that measured something.
            if key in merged and merged[key]["points"] and r["status"].startswith("skipped"):
                continue
            merged[key] = r
        env_path = Path(folder) / "environment.json"
        env = json.loads(env_path.read_text()) if env_path.exists() else {}
        sources.append(f"{Path(folder).name}: {env.get('date', '?')}, {env.get('cpu', '?')} "
                       f"({env.get('cores', '?')} cores), GPU: {env.get('gpu')}, budget "
                       f"{env.get('args', {}).get('budget', '?')} s")
    results = sorted(merged.values(), key=lambda r: (CORPORA.index(r["corpus"]), r["n_topics"],
                                                     SYSTEMS.index(r["system"])))
    header = "Merged from:\n" + "".join(f"- {line}\n" for line in sources)
    table = _write_outputs(args.out, results, SYSTEMS, header)
    print(header + table)
    print(f"results in {args.out}")
    return 0


def main(argv=None):
    args = _parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        return _merge(args)
    start = time.perf_counter()
    env = _environment(args)
    (args.out / "environment.json").write_text(json.dumps(env, indent=2) + "\n")
    print(f"{env['date']}  {env['cpu']}, {env['cores']} cores, GPU: {env['gpu']}")
    print("  " + ", ".join(f"{n} {env[n]}" for n in ("sklearn", "gensim", "tomotopy", "cupy")))
    header = (f"Measured {env['date']} on {env['cpu']} ({env['cores']} cores), GPU: {env['gpu']}; "
              f"budget {args.budget:g} s per run"
              + (f", hard limit {args.hard_limit:g} s" if args.hard_limit else "")
              + f"; transform: {args.transform_docs} documents.\n")
    hard_limit = args.hard_limit or math.inf
    deadline = args.deadline or math.inf

    corpora = list(args.corpora)
    results = []
    for corpus in corpora:
        tic = time.perf_counter()
        try:
            X_train, X_test, vocab = load_corpus(
                corpus, max_docs=args.max_docs, max_test_docs=args.max_test_docs,
                nytimes_scale=args.nytimes_scale, seed=args.seed)
        except CorpusUnavailable as exc:
            print(f"skipped corpus: {exc}")
            if args.quick and corpus == "kos" and "nytimes" not in corpora:
                print("  --quick falls back to the synthetic nytimes-shaped corpus")
                corpora.append("nytimes")
            continue
        corpus_path = args.out / f"corpus-{corpus}.npz"
        save_corpus(corpus_path, X_train, X_test, vocab)
        n_tokens = int(X_train.sum())
        print(f"\n{corpus}: {X_train.shape[0]} training docs, {n_tokens:,} tokens, "
              f"{X_test.shape[0]} test docs, {len(vocab)} words "
              f"(prepared in {time.perf_counter() - tic:.1f} s)")
        for k in args.topics:
            for system in args.systems:
                left = deadline - (time.perf_counter() - start)
                if left < 20:
                    result = dict(corpus=corpus, n_topics=k, system=system, points=[],
                                  status="skipped: the invocation's deadline",
                                  host_peak_mb=math.nan, device_peak_mb=math.nan,
                                  transform_s=math.nan)
                else:
                    job = dict(corpus_path=str(corpus_path), corpus=corpus, n_topics=k,
                               system=system, seed=args.seed,
                               budget_s=min(args.budget, left - 15),
                               schedule=SCHEDULES[system], transform_docs=args.transform_docs,
                               transform_budget_s=args.transform_budget,
                               eval_iter=args.eval_iter)
                    result = _run_in_worker(job, min(hard_limit, left))
                result["n_train_tokens"] = n_tokens
                result["transform_docs_requested"] = args.transform_docs
                if result["status"] != "ok":
                    print(f"  {corpus:>8s} K={k:<5d} {system:<15s} {result['status']}")
                results.append(result)
                # After every run, so that a call cut short still leaves its results (the plot,
                # which takes a second, only at the end; --merge redraws it from the CSVs).
                _write_outputs(args.out, results, args.systems, header, plot=False)
        corpus_path.unlink()  # large, and rebuilt from the sources in seconds

    table = _write_outputs(args.out, results, args.systems, header)
    print("\n" + header + table)
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
