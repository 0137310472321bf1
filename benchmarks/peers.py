"""Time to convergence and to each other's converged score: this package against scikit-learn,
gensim and tomotopy.

Every system is trained on the same training counts, over the same vocabulary, and scored by one
evaluator: the held-out log-likelihood per token by document completion
(:func:`sklearn_gpulda.metrics.document_completion`), computed from nothing but the system's
topic-word matrix and the document-topic prior its trained model ended with. Each system is
trained through a doubling schedule of iteration counts (ours 25, 50, ... 12,800 sweeps, each a
fit from scratch; tomotopy 25, 50, ... 6,400 iterations; scikit-learn and gensim 1, 2, 4, ...
passes) and scored at every checkpoint; scoring is not timed.

Systems: ``gpulda-cuda`` and ``gpulda-cpu`` (this package's two engines), ``sklearn-batch`` and
``sklearn-online`` (``n_jobs`` = cores), ``gensim`` (``LdaMulticore``, cores - 1 workers, as its
documentation advises) and ``tomotopy`` (``LDAModel``, ``workers`` = cores). A system that
cannot run here (no GPU, library not installed) is skipped with a message; the peers come with
the ``bench`` extra.

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
    python benchmarks/peers.py --merge results/peers-A results/peers-B --out results/all

    # The long reference run of tomotopy alone, on a CPU machine (hours at K = 1,000):
    python benchmarks/peers.py --systems tomotopy --corpora 20news nips kos \\
        --topics 20 100 1000 --converge 0.005 --budget 7200 \\
        --out benchmarks/results_peers_reference_cpu

    # Then on the GPU machine, one device call per corpus (run_peers_on_device.sh passes its
    # arguments on): ours to convergence, tomotopy for a minute, its time to converge estimated
    # from the reference. Scoring options (--max-test-docs, --eval-iter, --seed, --priors,
    # --converge) must be the reference's; --hard-limit and --deadline bound the scoring too.
    bash benchmarks/run_peers_on_device.sh --systems gpulda-cuda tomotopy --corpora nips \\
        --topics 20 100 1000 --converge 0.005 --budget 60 --hard-limit 150 --deadline 560 \\
        --reference benchmarks/results_peers_reference_cpu
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
    DEFAULT_SYSTEMS, OURS, PRIORS, SCHEDULES, SYSTEMS, converged, n_cores, run_system)

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


def converged_point(r):
    """The checkpoint that stands for a run's converged model: the one at which the convergence
    rule stopped the run, or the best one of a run that did not converge."""
    if r.get("converged"):
        return r["points"][-1]
    return max(r["points"], key=lambda p: p["heldout_ll"])


def _last_doubling(points):
    """The checkpoint before the last (or zero iterations at zero seconds), the last, and the
    training seconds per iteration between them."""
    last = points[-1]
    before = points[-2] if len(points) > 1 else dict(iterations=0, train_s=0.0)
    rate = (last["train_s"] - before["train_s"]) / (last["iterations"] - before["iterations"])
    return before, last, rate


def extrapolated_seconds(points, iterations):
    """Training seconds a run would have needed to reach ``iterations``, beyond its last checkpoint.

    The last checkpoint's seconds plus the missing iterations at the run's seconds per
    iteration over its last doubling (from the checkpoint before the last to the last, or from
    zero when there is one checkpoint). The slope of the last doubling leaves out what the first
    checkpoints spend once (a refit's start-up), which an average over the whole run would
    spread over every iteration. It is the same formula for a refitting system, whose points
    each time one fit from scratch: one fit to ``iterations`` costs that fit's fixed part plus
    the same marginal seconds per iteration.

    Parameters
    ----------
    points : list of dict
        The run's checkpoints in training order, at least one, each with ``iterations`` and
        ``train_s`` (seconds of training behind that checkpoint's model).
    iterations : int
        Iterations to reach; more than the last checkpoint's.

    Returns
    -------
    seconds : float
    """
    _, last, rate = _last_doubling(points)
    if iterations <= last["iterations"]:
        raise ValueError(f"{iterations} iterations were reached already ({last['iterations']})")
    return last["train_s"] + (iterations - last["iterations"]) * rate


#: Arguments that change the held-out scores (data, split, test documents, evaluator, priors,
#: rule), with the value an older results folder that does not record them had.
COMPARABLE = dict(priors="sklearn", converge=0.0, max_docs=None, max_test_docs=None,
                  eval_iter=None, nytimes_scale=None, seed=0)


def _read_env(folder):
    path = Path(folder) / "environment.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _differences(args_a, args_b):
    """The scoring-relevant arguments on which two runs' recorded arguments differ."""
    return [f"{key} {args_a.get(key, old)!r} / {args_b.get(key, old)!r}"
            for key, old in COMPARABLE.items() if args_a.get(key, old) != args_b.get(key, old)]


def load_reference(folder, compared_with):
    """The converged runs of an earlier results folder, for the estimates of :func:`_outcome`.

    Parameters
    ----------
    folder : path
        A results folder of ``peers.py`` (``summary.csv``, ``curves.csv``, ``environment.json``).
    compared_with : list of dict
        The arguments of the runs the reference will stand in for (``vars(args)``, or the
        ``args`` of each merged folder's environment.json).

    Returns
    -------
    reference : dict
        ``folder``, ``env`` (its environment.json) and ``runs``: its converged runs by
        (corpus, n_topics, system).

    Raises
    ------
    SystemExit
        When the reference was scored differently (other data, test documents, evaluator
        iterations, priors or convergence rule): its log-likelihoods would not be comparable.
    """
    env = _read_env(folder)
    for args in compared_with:
        differs = _differences(env.get("args", {}), args)
        if differs:
            raise SystemExit(f"--reference {folder} is not comparable with this run (reference / "
                             f"this run): {'; '.join(differs)}")
    runs = {(r["corpus"], r["n_topics"], r["system"]): r for r in load_results(folder)
            if r["converged"] and r["points"]}
    return dict(folder=Path(folder), env=env, runs=runs)


def _reference_run(r, reference):
    """The reference's converged run that may stand in for ``r``: only when ``r`` stopped before
    converging, and the reference converged after more iterations than ``r`` reached."""
    if reference is None or r.get("converged") or not r["points"]:
        return None
    ref = reference["runs"].get((r["corpus"], r["n_topics"], r["system"]))
    if ref is None or ref["points"][-1]["iterations"] <= r["points"][-1]["iterations"]:
        return None
    return ref


def _outcome(r, reference=None):
    """What stands for a run's converged model: ``heldout_ll``, ``iterations``, ``train_s`` and
    ``source``: "here" (it converged), "reference" (LL and iterations of the reference's
    converged run, seconds extrapolated here) or "not converged" (its best checkpoint)."""
    ref = _reference_run(r, reference)
    if ref is None:
        return dict(converged_point(r), source="here" if r.get("converged") else "not converged")
    theirs = ref["points"][-1]
    return dict(heldout_ll=theirs["heldout_ll"], iterations=theirs["iterations"],
                train_s=extrapolated_seconds(r["points"], theirs["iterations"]),
                source="reference")


def _stop_reason(r):
    if r["status"].startswith("stopped"):
        return "hard limit"
    return {"budget": "budget", "schedule": "end of schedule"}.get(r.get("stopped_by"), "")


def _system_row(r, reference):
    o = _outcome(r, reference)
    reason = _stop_reason(r)
    done = "yes" if o["source"] == "here" else f"no ({reason})" if reason else "no"
    ll, iterations, seconds = (f"{o['heldout_ll']:.4f}", str(o["iterations"]),
                               f"{o['train_s']:.2f}")
    if o["source"] == "reference":
        done += "; reference: yes"
        ll, iterations, seconds = f"{ll} (ref.)", f"{iterations} (ref.)", f"est. {seconds}"
    dev = "" if math.isnan(r["device_peak_mb"]) else f"{r['device_peak_mb']:.0f}"
    host = "" if math.isnan(r["host_peak_mb"]) else f"{r['host_peak_mb']:.0f}"
    return (f"| {r['system']} | {ll} | {done} | {iterations} | {seconds} | "
            f"{r.get('doc_topic_prior', '')} | {host} | {dev} | {_transform_cell(r)} |")


def _sooner(theirs, ours):
    ratio = theirs / ours if ours > 0 else math.inf
    return f"{ratio:.1f} times sooner" if ratio >= 1 else f"{1 / ratio:.1f} times later"


def _peer_line(ours, peer, reference):
    """One sentence: when ours reached the peer's converged score, against the peer's time."""
    o, name = _outcome(peer, reference), peer["system"]
    target, seconds = o["heldout_ll"], o["train_s"]
    what, when = {
        "here": (f"{name}'s converged LL ({target:.4f})", f"{name} converged ({seconds:.2f} s)"),
        "reference": (f"{name}'s converged LL ({target:.4f}, from the reference run)",
                      f"{name}'s estimated time to converge here (est. {seconds:.2f} s)"),
        "not converged": (f"{name}'s best LL ({target:.4f}; {name} did not converge)",
                          f"{name} reached it ({seconds:.2f} s)"),
    }[o["source"]]
    t = _time_to(ours["points"], target)
    if t is None:
        return f"- ours did not reach {what}; ours' best was {_best(ours['points']):.4f}."
    return f"- ours reached {what} in {t:.2f} s, {_sooner(seconds, t)} than {when}."


def _estimate_note(r, reference):
    """How one estimated time was made, and from which machine's run."""
    ref, env = _reference_run(r, reference), reference["env"]
    before, last, rate = _last_doubling(r["points"])
    m = ref["points"][-1]["iterations"]
    return (f"- {r['system']}: stopped here after {last['iterations']} iterations "
            f"({last['train_s']:.2f} s; {_stop_reason(r) or 'not converged'}). The reference run "
            f"in {reference['folder']} ({env.get('date', '?')}, {env.get('cpu', '?')}, "
            f"{env.get('cores', '?')} cores; from its environment.json) converged after {m} "
            f"iterations at {ref['points'][-1]['heldout_ll']:.4f}. Estimated seconds here: "
            f"{last['train_s']:.2f} + ({m} - {last['iterations']}) iterations x {rate:.4g} s per "
            f"iteration (this run's last doubling, {before['iterations']} to "
            f"{last['iterations']} iterations) = {extrapolated_seconds(r['points'], m):.2f} s.")


ESTIMATE_NOTE = ("est.: a time to converge estimated on this machine from a reference run that "
                 "converged elsewhere, as detailed below; the held-out LL and iterations marked "
                 "(ref.) are the reference run's. A model's held-out LL does not depend on the "
                 "machine that trained it (up to a sampler's run-to-run variation), so the "
                 "reference's converged LL is used as it is; only the time is estimated.")

TABLE_HEAD = ["| system | held-out LL | converged | iterations | time (s) | final alpha "
              "| host peak (MB) | device peak (MB) | transform (s) |",
              "|---|---:|---|---:|---:|---|---:|---:|---:|"]


def _section(runs, systems, reference):
    """The table of one (corpus, K): a row per system, then ours against each peer."""
    lines = list(TABLE_HEAD)
    ran = [runs[s] for s in systems if s in runs]
    for r in ran:
        lines.append(_system_row(r, reference) if r["points"]
                     else f"| {r['system']} | {r['status']} | | | | | | | |")
    ours = next((runs[s] for s in OURS if s in runs and runs[s]["points"]), None)
    peers = [r for r in ran if r["system"] not in OURS and r["points"]]
    if ours is None:
        lines.append("\nNo run of ours, so no comparison.")
    elif peers:
        lines.append(f"\nOurs: {ours['system']}.")
        lines += [_peer_line(ours, r, reference) for r in peers]
    estimated = [r for r in ran if _reference_run(r, reference) is not None]
    if estimated:
        lines += ["", ESTIMATE_NOTE] + [_estimate_note(r, reference) for r in estimated]
    return lines


def _table(results, systems, reference=None):
    """Markdown: per (corpus, K), every system's converged score and time, and how soon ours
    reached each peer's converged score."""
    lines = []
    keys = sorted({(r["corpus"], r["n_topics"]) for r in results},
                  key=lambda k: (CORPORA.index(k[0]), k[1]))
    for corpus, k in keys:
        runs = {r["system"]: r for r in results if (r["corpus"], r["n_topics"]) == (corpus, k)}
        lines.append(f"\n### {corpus}, K = {k}\n")
        lines += _section(runs, systems, reference)
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
                  "n_train_tokens", "best_ll", "final_iterations", "final_train_s", "converged",
                  "stopped_by", "converged_ll", "converged_iterations", "converged_s",
                  "doc_topic_prior", "prepare_s", "host_peak_mb", "device_peak_mb",
                  "transform_s", "transform_docs", "transform_docs_requested"]


def _summary_row(r):
    """A run's summary.csv row: its own measurements only (never a reference's)."""
    if not r["points"]:
        return r
    last, done = r["points"][-1], converged_point(r)
    return dict(r, best_ll=_best(r["points"]), final_iterations=last["iterations"],
                final_train_s=last["train_s"], converged_ll=done["heldout_ll"],
                converged_iterations=done["iterations"], converged_s=done["train_s"])


def _write_outputs(out, results, systems, header, plot=True, reference=None):
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
        w.writerows(_summary_row(r) for r in results)
    table = _table(results, systems, reference)
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
            # Older runs timed every transform on the full request, and had no convergence rule.
            r["transform_docs_requested"] = r["transform_docs_requested"] or r["transform_docs"]
            r["converged"] = row.get("converged") == "True"
            results.append(r)
    index = {(r["corpus"], r["n_topics"], r["system"]): r for r in results}
    with open(folder / "curves.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            index[(row["corpus"], int(row["n_topics"]), row["system"])]["points"].append(
                dict(iterations=int(row["iterations"]), train_s=float(row["train_s"]),
                     heldout_ll=float(row["heldout_ll"])))
    return results


PRIORS_TEXT = {
    "own": "each library's own defaults (ours as the estimator comes; scikit-learn and gensim "
           "1 / K; tomotopy alpha 0.1, eta 0.01, alpha learnt every 10 iterations)",
    "sklearn": "scikit-learn's alpha = beta = 1 / K for every system, none learnt",
}


def _rules(args):
    """The priors, convergence rule and reference of a run (``args`` as in environment.json),
    as the table's header states them."""
    priors = args.get("priors", COMPARABLE["priors"])
    tol = args.get("converge", COMPARABLE["converge"])
    text = f"Priors: {priors}, {PRIORS_TEXT[priors]}. "
    if tol > 0:
        text += (f"Convergence: a run stops at the first checkpoint that improves the held-out LL "
                 f"by less than {tol:g} nats/token over the checkpoint with half its iterations; "
                 f"LL, iterations and time are that checkpoint's (the best checkpoint's for a run "
                 f"that did not converge).")
    else:
        text += "No convergence rule: LL, iterations and time are the best checkpoint's."
    return text + "\n"


def _reference_line(reference):
    if reference is None:
        return ""
    env = reference["env"]
    return (f"Reference (for times marked est.): {reference['folder']}, measured "
            f"{env.get('date', '?')} on {env.get('cpu', '?')} ({env.get('cores', '?')} cores), "
            f"GPU: {env.get('gpu')}.\n")


def _merge(args):
    """Combine earlier runs' results (later folders win for a repeated triple) into --out."""
    merged, sources, envs = {}, [], []
    for folder in args.merge:
        for r in load_results(folder):
            key = (r["corpus"], r["n_topics"], r["system"])
            # A later run replaces an earlier one, except that a run skipped for want of time
            # does not hide an earlier run that measured something.
            if key in merged and merged[key]["points"] and r["status"].startswith("skipped"):
                continue
            merged[key] = r
        env = _read_env(folder)
        envs.append(env.get("args", {}))
        sources.append(f"{Path(folder).name}: {env.get('date', '?')}, {env.get('cpu', '?')} "
                       f"({env.get('cores', '?')} cores), GPU: {env.get('gpu')}, budget "
                       f"{env.get('args', {}).get('budget', '?')} s")
    rules = {tuple(a.get(key, COMPARABLE[key]) for key in ("priors", "converge")) for a in envs}
    if len(rules) > 1:
        # The header states one choice of priors and one rule for the whole table.
        raise SystemExit(f"--merge: the folders were run with different --priors or --converge "
                         f"({sorted(rules)}); merge only runs made under the same ones")
    reference = args.reference and load_reference(args.reference, envs)
    results = sorted(merged.values(), key=lambda r: (CORPORA.index(r["corpus"]), r["n_topics"],
                                                     SYSTEMS.index(r["system"])))
    header = ("Merged from:\n" + "".join(f"- {line}\n" for line in sources) + _rules(envs[-1])
              + _reference_line(reference))
    table = _write_outputs(args.out, results, SYSTEMS, header, reference=reference)
    print(header + table)
    print(f"results in {args.out}")
    return 0


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
