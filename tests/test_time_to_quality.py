"""``benchmarks/plot_time_to_quality.py`` on the curves of a short CPU run of
``benchmarks/bench_stopping.py`` (bundled KJV chapters), with a tomotopy reference written as
``benchmarks/peers.py`` writes its summary."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _peer_results  # noqa: E402
import plot_time_to_quality as ttq  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def curves(tmp_path_factory):
    out = tmp_path_factory.mktemp("stopping")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_stopping.py"), "--corpora", "kjv",
         "--topics", "5", "--device", "cpu", "--floor", "24", "--ceiling", "96",
         "--rule-ceiling", "96", "--eval-iter", "20", "--tols", "0.005", "0.5",
         "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _reference(folder, rows):
    folder.mkdir()
    with open(folder / "summary.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=_peer_results.SUMMARY_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return folder


def test_the_table_reads_the_curve_the_stop_and_the_reference(curves, tmp_path, capsys):
    curve = ttq.read_curves(curves)[("kjv", 5)]
    assert [s for s, _, _ in curve] == sorted(s for s, _, _ in curve) and len(curve) >= 3
    seconds = [s for _, s, _ in curve]
    assert seconds == sorted(seconds) and seconds[0] > 0
    # A reference the curve reaches at its second scored check point, not before.
    second = curve[1][2]
    level = second if second > curve[0][2] else curve[0][2]
    reached_at = next(s for _, s, ll in curve if ll >= level)
    reference = _reference(tmp_path / "peers", [
        dict(corpus="kjv", n_topics=5, system="tomotopy", converged="True",
             converged_ll=level, converged_s=12.5, cores=2),
        dict(corpus="kjv", n_topics=5, system="sklearn", converged="True",
             converged_ll=0.0, converged_s=1.0),  # another system: not the reference
    ])
    rows = ttq.main([str(curves), "--reference", str(reference), "--out", str(tmp_path)])
    (key, row), = rows
    assert key == ("kjv", 5)
    assert row["ref_ll"] == level and row["ref_s"] == 12.5 and row["ref_cores"] == 2
    assert row["reach_s"] == reached_at and row["sooner"] == pytest.approx(12.5 / reached_at)
    stops = ttq.read_default_stops(curves)
    assert row["stop_sweep"] == stops[("kjv", 5)][0]
    assert row["stop_ll"] == dict((s, ll) for s, _, ll in curve)[row["stop_sweep"]]
    assert (tmp_path / "time_to_quality.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert f"| {row['reach_s']:.2f} |" in printed and "| kjv | 5 |" in printed
    assert "| 12.5 (2 cores) |" in printed


def test_a_reference_above_the_curve_is_never_reached(curves, tmp_path):
    best = max(ll for _, _, ll in ttq.read_curves(curves)[("kjv", 5)])
    reference = _reference(tmp_path / "peers", [
        dict(corpus="kjv", n_topics=5, system="tomotopy", converged="True",
             converged_ll=best + 0.5, converged_s=3.0)])
    (_, row), = ttq.main([str(curves), "--reference", str(reference), "--no-plot"])
    assert row["ref_ll"] == best + 0.5 and row["reach_s"] != row["reach_s"]  # NaN
    assert row["ref_cores"] is None  # the summary does not say
    assert row["best_ll"] == best
