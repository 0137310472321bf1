"""The results folder of a peers run, and an earlier folder as a reference for a later run.

A folder holds ``curves.csv`` (one row per checkpoint), ``summary.csv`` (one row per run) and
``environment.json`` (machine, versions, arguments); :func:`load_results` rebuilds the runs from
the first two. A run is a dict with ``corpus``, ``n_topics``, ``system``, ``status`` and
``points`` (its checkpoints: ``iterations``, ``train_s``, ``heldout_ll``), among others.

A reference folder is an earlier, longer run that converged: :func:`load_reference` checks that it
was scored like the runs it stands in for, and :func:`_outcome` says what stands for a run's
converged model, the reference's converged score with a time to reach it extrapolated here when
the run stopped before converging.
"""

import csv
import json
import math
from pathlib import Path


def _best(points):
    return max((p["heldout_ll"] for p in points), default=float("nan"))


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


def _write_results(out, results):
    """``curves.csv`` and ``summary.csv`` of ``results`` in the folder ``out``."""
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
