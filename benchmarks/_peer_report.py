"""What a peers run reports: ``table.md``, ``curves.png``, and ``--merge`` of several runs.

The table gives, per corpus and K, every system's converged score, iterations and seconds, then,
for each peer, when ours reached that peer's converged score; runs that stopped early may lean on
a reference run (``_peer_results``) for their converged figures.
"""

import math
from pathlib import Path

from _peer_corpora import CORPORA
from _peer_results import (COMPARABLE, _best, _last_doubling, _outcome, _read_env,
                           _reference_run, _write_results, extrapolated_seconds, load_reference,
                           load_results)
from _peer_systems import OURS, SYSTEMS


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


def _write_outputs(out, results, systems, header, plot=True, reference=None):
    """curves.csv, summary.csv, table.md and (with ``plot``) curves.png from the results so far."""
    _write_results(out, results)
    table = _table(results, systems, reference)
    (out / "table.md").write_text(header + table)
    if plot:
        _plot(results, out / "curves.png")
    return table


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
