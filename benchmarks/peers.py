"""Time to convergence and to each other's converged score: this package against scikit-learn,
gensim and tomotopy.

Every system is trained on the same training counts, over the same vocabulary, and scored by one
evaluator: the held-out log-likelihood per token by document completion
(:func:`sklearn_gpulda.metrics.document_completion`), computed from nothing but the system's
topic-word matrix and the document-topic prior its trained model ended with. Each system is
trained through a doubling schedule of iteration counts (ours 25, 50, ... 12,800 sweeps, each a
fit from scratch; tomotopy 25, 50, ... 6,400 iterations; scikit-learn and gensim 1, 2, 4, ...
passes) and scored at every checkpoint; scoring is not timed.

Systems: ``gpulda-cuda`` and ``gpulda-cpu`` (this package's two engines; ``gpulda-cuda-online``,
its online learning on the GPU, runs when named), ``sklearn-batch`` (``n_jobs`` = cores) and
``sklearn-online`` (one job, its faster setting for mini-batches), ``gensim``
(``LdaMulticore``, cores - 1 workers, as its documentation advises) and ``tomotopy``
(``LDAModel``, ``workers`` = cores). A system that cannot run here (no GPU, library not
installed) is skipped with a message; the peers come with the ``bench`` extra.

Priors (``--priors``): ``own`` (the default) runs every system as a new user gets it: our
estimator with no prior arguments, scikit-learn's and gensim's defaults (1 / K), tomotopy's
(alpha 0.1, eta 0.01, alpha learnt every 10 iterations). ``sklearn`` gives every system
``alpha = beta = 1 / K`` and switches tomotopy's optimisation off, as runs before this option did.
Either way the evaluator gets the prior each model ended with (a learnt one is a vector).

Convergence (``--converge TOL``, 0.005 nats/token by default, 0 switches it off): a run stops at
the first checkpoint that improves the held-out log-likelihood by less than TOL over the
checkpoint with half its iterations, i.e. once doubling the training no longer pays. That
checkpoint's score, iterations and seconds are the run's converged figures; a run stopped by its
budget or hard limit first is marked "not converged" and reported at its best checkpoint.

Reference runs (``--reference FOLDER``): at K = 1,000 tomotopy may need an hour to converge,
longer than a lent GPU machine is held. Given the folder of an earlier, longer run (on any
machine) that converged, a run here that stopped before converging is reported with the
reference's converged score and iterations, and a time to converge on this machine estimated
from its own last doubling: seconds at its last checkpoint + (reference iterations - iterations
done here) x seconds per iteration between its last two checkpoints. Such times are marked
"est." and the table says how each was derived and where the reference ran. The reference must
have been scored like this run (same corpora options, test documents, evaluator, seed, priors and
tolerance); it is refused otherwise.

Corpora: ``20news`` (vectorised from the raw posts, by-date split), ``nips``, ``kos`` (UCI
bag-of-words, 10% of documents held out) and ``nytimes`` (synthetic, NYTimes-shaped, from
``make_lda_corpus``). Real corpora are read from ``$SKLEARN_GPULDA_DATA``, ``<repo>/.carry/data``
or ``<repo>/../shared/data``, and skipped when absent.

Writes to ``--out``: ``curves.csv`` (one row per checkpoint), ``summary.csv`` (one row per run:
best score, whether and where it converged, the final document-topic prior, peak memory,
transform latency for ``--transform-docs`` new documents, or why it was skipped; this run's own
measurements only), ``curves.png`` (score against time, one panel per corpus and K),
``table.md`` (per corpus and K: every system's converged score, iterations and seconds, then,
for each peer, when ours reached that peer's converged score and how many times sooner that was)
and ``environment.json`` (date, machine, library versions, arguments, priors). The table is
printed too. All but the plot are rewritten after every run, so an invocation cut short leaves
what it measured (``--merge`` draws the plot from them).

Time limits: ``--budget`` stops a system's schedule before a checkpoint predicted to overrun it,
but the first checkpoint always runs; ``--hard-limit`` stops a run outright (its worker process
group is killed) and keeps the checkpoints it had reached; ``--deadline`` bounds a whole
invocation. ``--merge`` combines the results of several invocations into one table and plot
(with ``--reference`` too, if every merged folder was scored like the reference).

Examples::

    python benchmarks/peers.py --quick                 # a few minutes on a laptop
    python benchmarks/peers.py --corpora kos nips --topics 20 100 --budget 300
    python benchmarks/peers.py --priors sklearn --systems gpulda-cuda sklearn-batch tomotopy
    python benchmarks/peers.py --merge benchmarks/results/peers-A benchmarks/results/peers-B \\
        --out benchmarks/results/all

    # The long reference run of tomotopy alone, on a CPU machine (hours at K = 1,000):
    python benchmarks/peers.py --systems tomotopy --corpora 20news nips kos \\
        --topics 20 100 1000 --converge 0.005 --budget 7200 \\
        --out benchmarks/results/peers-reference-cpu

    # Then on the GPU machine, one device call per corpus (run_peers_on_device.sh passes its
    # arguments on): ours to convergence, tomotopy for a minute, its time to converge estimated
    # from the reference. Scoring options (--max-test-docs, --eval-iter, --seed, --priors,
    # --converge) must be the reference's; --hard-limit and --deadline bound the scoring too.
    # benchmarks/results/ is ignored by git, so name the reference folder in the call's carry.
    bash benchmarks/run_peers_on_device.sh --systems gpulda-cuda tomotopy --corpora nips \\
        --topics 20 100 1000 --converge 0.005 --budget 60 --hard-limit 150 --deadline 560 \\
        --reference benchmarks/results/peers-reference-cpu
"""

import argparse
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

# This file runs the benchmark; the data and systems, the results folders (and reference runs)
# and what a run reports (table, plot, --merge) live in the _peer_*.py modules beside it.
from _peer_corpora import CORPORA, CorpusUnavailable, load_corpus, save_corpus  # noqa: E402
from _peer_report import _merge, _reference_line, _rules, _write_outputs  # noqa: E402
from _peer_results import load_reference  # noqa: E402
from _peer_systems import (  # noqa: E402
    DEFAULT_SYSTEMS, PRIORS, SCHEDULES, SYSTEMS, converged, n_cores, run_system)

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
                        "n_averaged_sweeps at three quarters of each fit's sweeps) and "
                        "gpulda-cuda-online (our online learning, a partial_fit per pass)")
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
    p.add_argument("--eval-device", default="cpu",
                   help="where document completion's fold-in runs: cpu (default) or a GPU "
                        "('auto', 'cuda'); the same iteration, equal to the host's to ~1e-5")
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
    p.add_argument("--priors", choices=PRIORS, default="own",
                   help="own: every library's default priors (ours, tomotopy and gensim as they "
                        "come, tomotopy learning alpha); sklearn: alpha = beta = 1 / K for every "
                        "system and no prior learnt (default: own)")
    p.add_argument("--converge", type=float, default=0.005, metavar="TOL",
                   help="stop a run at the first checkpoint that improves the held-out "
                        "log-likelihood by less than TOL nats/token over the checkpoint with "
                        "half its iterations (default 0.005; 0: train until the budget)")
    p.add_argument("--reference", type=Path, default=None, metavar="FOLDER",
                   help="an earlier results folder with converged runs (of the same corpora, "
                        "test documents, priors and rule) that the table may use to estimate "
                        "the time to converge of runs stopped here before converging")
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
        priors=args.priors, converge_tol=args.converge,
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
    return _no_run(job["corpus"], job["n_topics"], job["system"], result["status"], points,
                   job.get("converge_tol", 0.0))


def _no_run(corpus, n_topics, system, status, points=(), tol=0.0):
    """The result of a run that did not finish: skipped, failed or stopped at its hard limit
    (with the checkpoints it had sent, which may have met the convergence rule)."""
    points = list(points)
    done = converged(points, tol)
    return dict(corpus=corpus, n_topics=n_topics, system=system, points=points, status=status,
                converged=done, stopped_by="converged" if done else "",
                host_peak_mb=math.nan, device_peak_mb=math.nan, transform_s=math.nan)


def _run_one(args, corpus_path, corpus, k, system, left):
    """One (corpus, K, system) run in a worker, within the budget and the time ``left``."""
    if left < 20:
        return _no_run(corpus, k, system, "skipped: the invocation's deadline")
    job = dict(corpus_path=str(corpus_path), corpus=corpus, n_topics=k, system=system,
               seed=args.seed, budget_s=min(args.budget, left - 15), schedule=SCHEDULES[system],
               transform_docs=args.transform_docs, transform_budget_s=args.transform_budget,
               eval_iter=args.eval_iter, eval_device=args.eval_device, priors=args.priors,
               converge_tol=args.converge)
    return _run_in_worker(job, min(args.hard_limit or math.inf, left))


def main(argv=None):
    args = _parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        return _merge(args)
    start = time.perf_counter()
    env = _environment(args)
    # Checked before anything runs: an incomparable reference would waste the whole run.
    reference = args.reference and load_reference(args.reference, [env["args"]])
    (args.out / "environment.json").write_text(json.dumps(env, indent=2) + "\n")
    print(f"{env['date']}  {env['cpu']}, {env['cores']} cores, GPU: {env['gpu']}")
    print("  " + ", ".join(f"{n} {env[n]}" for n in ("sklearn", "gensim", "tomotopy", "cupy")))
    header = (f"Measured {env['date']} on {env['cpu']} ({env['cores']} cores), GPU: {env['gpu']}; "
              f"budget {args.budget:g} s per run"
              + (f", hard limit {args.hard_limit:g} s" if args.hard_limit else "")
              + f"; transform: {args.transform_docs} documents.\n" + _rules(env["args"])
              + _reference_line(reference))
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
                result = _run_one(args, corpus_path, corpus, k, system, left)
                result["n_train_tokens"] = n_tokens
                result["transform_docs_requested"] = args.transform_docs
                if result["status"] != "ok":
                    print(f"  {corpus:>8s} K={k:<5d} {system:<15s} {result['status']}")
                results.append(result)
                # After every run, so that a call cut short still leaves its results (the plot,
                # which takes a second, only at the end; --merge redraws it from the CSVs).
                _write_outputs(args.out, results, args.systems, header, plot=False,
                               reference=reference)
        corpus_path.unlink()  # large, and rebuilt from the sources in seconds

    table = _write_outputs(args.out, results, args.systems, header, reference=reference)
    print("\n" + header + table)
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
