"""Time-to-quality curves (issue 37, item 5): held-out log-likelihood per token against the wall
time of a default fit, with tomotopy's converged model as the reference line.

The curves are the ones ``benchmarks/bench_stopping.py`` records: one long fit per corpus and K
over the check points of ``max_iter=None``'s rule, and at each the seconds of sampling so far
and the held-out score of the model a fit stopped there returns (its averaging window
included). The default fit is the check point where the rule stops at its default tolerance
(``stops.csv``). The reference is tomotopy's converged run of a ``benchmarks/peers.py`` results
folder (``summary.csv``: ``converged_ll`` and ``converged_s``). Both benchmarks split the
corpora with ``_peer_corpora.load_corpus``, so with the same ``--max-test-docs`` and seed they
score the same test documents by the same evaluator (document completion); a reference scored
on other documents is not comparable, and the script cannot tell, so pass it matching runs.

Prints, per corpus and K, the default fit (sweeps, seconds, held-out), the reference (score,
seconds), the first check point at or above the reference (seconds, and how many times sooner
than the reference converged), and the best check point; plots one panel per corpus and K (log
time axis) to ``time_to_quality.png`` in ``--out``.

Usage::

    python benchmarks/bench_stopping.py --corpora kos nips 20news --topics 20 100 1000 \\
        --max-test-docs 2000 --out benchmarks/results/ttq
    python benchmarks/plot_time_to_quality.py benchmarks/results/ttq \\
        --reference benchmarks/results/peers-reference-cpu
"""

import argparse
import csv
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from sklearn_gpulda._fitting import stopping  # noqa: E402

#: The peers.py system whose converged model is the reference line.
REFERENCE_SYSTEM = "tomotopy"


def read_curves(folder):
    """``{(corpus, K): [(sweep, seconds, heldout), ...]}`` from bench_stopping's points.csv,
    the check points that were scored (from the floor on), in order of sweeps."""
    curves = {}
    with open(Path(folder) / "points.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            heldout = float(row["heldout_ll"])
            if math.isnan(heldout):
                continue
            key = (row["corpus"], int(row["n_topics"]))
            curves.setdefault(key, []).append((int(row["sweep"]), float(row["seconds"]), heldout))
    return {key: sorted(points) for key, points in curves.items()}


def read_default_stops(folder, tol=stopping.TOLERANCE):
    """``{(corpus, K): (sweep, reason)}``: where the rule stops at tolerance ``tol``
    (stops.csv); a stop past the long fit's end is left out."""
    stops = {}
    with open(Path(folder) / "stops.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            if not math.isclose(float(row["tol"]), tol) or row["sweep"] in ("", "-", "None"):
                continue
            stops[(row["corpus"], int(row["n_topics"]))] = (int(row["sweep"]), row["reason"])
    return stops


def read_reference(folders, system=REFERENCE_SYSTEM):
    """``{(corpus, K): (converged_ll, converged_s, cores)}`` of ``system``'s converged runs in
    peers.py results folders (a later folder's run replaces an earlier one's); ``cores`` is the
    CPU cores its seconds were measured on (None where the summary does not say), since a
    reference run on another machine than the curves' is the usual case at K = 1,000."""
    reference = {}
    for folder in folders:
        with open(Path(folder) / "summary.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                if row["system"] != system or row.get("converged") not in ("True", "true", "1"):
                    continue
                cores = row.get("cores") or None
                reference[(row["corpus"], int(row["n_topics"]))] = (
                    float(row["converged_ll"]), float(row["converged_s"]),
                    None if cores is None else int(cores))
    return reference


def summarise(curve, stop, reference):
    """One table row for a curve: the default stop, the reference, and when the curve first
    reaches the reference (NaN where it does not)."""
    by_sweep = {sweep: (seconds, heldout) for sweep, seconds, heldout in curve}
    row = dict(stop_sweep=math.nan, stop_s=math.nan, stop_ll=math.nan, ref_ll=math.nan,
               ref_s=math.nan, ref_cores=None, reach_s=math.nan, sooner=math.nan)
    if stop is not None and stop[0] in by_sweep:
        row.update(stop_sweep=stop[0], stop_s=by_sweep[stop[0]][0], stop_ll=by_sweep[stop[0]][1])
    best = max(curve, key=lambda p: p[2])
    row.update(best_sweep=best[0], best_s=best[1], best_ll=best[2])
    if reference is not None:
        row.update(ref_ll=reference[0], ref_s=reference[1], ref_cores=reference[2])
        reached = [seconds for _, seconds, heldout in curve if heldout >= reference[0]]
        if reached:
            row.update(reach_s=reached[0], sooner=reference[1] / reached[0])
    return row


def _fmt(value, spec):
    return "-" if isinstance(value, float) and math.isnan(value) else format(value, spec)


def _on_cores(cores):
    return "" if cores is None else f" ({cores} cores)"


def print_table(rows):
    print("| corpus | K | default stop (sweeps) | its seconds | its held-out | tomotopy converged "
          "| its seconds | ours first at or above it (s) | times sooner | best held-out (sweeps) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (corpus, k), r in rows:
        print(f"| {corpus} | {k:,} | {_fmt(r['stop_sweep'], ',')} | {_fmt(r['stop_s'], '.2f')} "
              f"| {_fmt(r['stop_ll'], '.4f')} | {_fmt(r['ref_ll'], '.4f')} "
              f"| {_fmt(r['ref_s'], '.1f')}{_on_cores(r['ref_cores'])} "
              f"| {_fmt(r['reach_s'], '.2f')} "
              f"| {_fmt(r['sooner'], '.0f')} | {r['best_ll']:.4f} ({r['best_sweep']:,}) |")


def plot(curves, stops, reference, path):
    """One panel per corpus and K: the curve, the default stop, the reference line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    keys = sorted(curves)
    n_cols = min(3, len(keys))
    n_rows = -(-len(keys) // n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(4.2 * n_cols, 3.2 * n_rows),
                             squeeze=False)
    for ax, key in zip(axes.ravel(), keys):
        sweeps, seconds, heldout = zip(*curves[key])
        ax.plot(seconds, heldout, marker=".", label="max_iter=None's check points")
        stop = stops.get(key)
        if stop is not None and stop[0] in sweeps:
            i = sweeps.index(stop[0])
            ax.plot([seconds[i]], [heldout[i]], marker="o", color="black", linestyle="none",
                    label=f"default stop ({stop[0]:,} sweeps)")
        if key in reference:
            ll, s, cores = reference[key]
            ax.axhline(ll, color="tab:red", linestyle="--",
                       label=f"{REFERENCE_SYSTEM} converged ({s:,.0f} s{_on_cores(cores)})")
        ax.set_xscale("log")
        # Minor ticks' labels (2 x 10^-1, 3 x 10^-1, ...) run into each other on short spans.
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{key[0]}, K = {key[1]:,}")
        ax.set_xlabel("seconds of fitting")
        ax.set_ylabel("held-out log-likelihood / token")
        ax.legend(fontsize=7, loc="lower right")
    for ax in axes.ravel()[len(keys):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("curves", type=Path, help="a results folder of bench_stopping.py")
    p.add_argument("--reference", type=Path, nargs="*", default=[],
                   help="results folders of peers.py holding tomotopy's converged runs")
    p.add_argument("--tol", type=float, default=stopping.TOLERANCE,
                   help="the tolerance whose stop is the default fit")
    p.add_argument("--out", type=Path, default=None, help="where the plot goes (default: the "
                                                          "curves' folder)")
    p.add_argument("--no-plot", action="store_true")
    args = p.parse_args(argv)
    curves = read_curves(args.curves)
    if not curves:
        raise SystemExit(f"no scored check point in {args.curves / 'points.csv'}")
    stops = read_default_stops(args.curves, args.tol)
    reference = read_reference(args.reference)
    rows = [(key, summarise(curves[key], stops.get(key), reference.get(key)))
            for key in sorted(curves)]
    print_table(rows)
    if not args.no_plot:
        out = args.out or args.curves
        out.mkdir(parents=True, exist_ok=True)
        plot(curves, stops, reference, out / "time_to_quality.png")
        print(f"plot: {out / 'time_to_quality.png'}")
    return rows


if __name__ == "__main__":
    main()
