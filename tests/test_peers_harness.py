"""The peer benchmark harness (``benchmarks/peers.py``) on a tiny synthetic corpus.

These runs use the CPU engine and scikit-learn only, so they work on CI without a GPU, gensim,
tomotopy or ``../shared``. They check what the device runs rely on: a run stopped at its hard
limit keeps the checkpoints it reached and leaves no worker processes behind, results are on disk
after every run, and results of separate runs merge into one table.
"""

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers.py"
TINY = ["--corpora", "nytimes", "--nytimes-scale", "0.002", "--topics", "5",
        "--max-test-docs", "60", "--eval-iter", "20", "--transform-docs", "300"]

pytest.importorskip("sklearn")


def _run(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(PEERS), *TINY, *args], capture_output=True,
                          text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _summary(folder):
    with open(folder / "summary.csv", newline="") as fh:
        return {row["system"]: row for row in csv.DictReader(fh)}


def _curves(folder):
    with open(folder / "curves.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _children_of(pid):
    found, stack = [], [pid]
    while stack:
        p = stack.pop()
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                kids = [int(c) for c in (task / "children").read_text().split()]
                found += kids
                stack += kids
        except OSError:
            continue
    return found


def test_budget_run_writes_every_output(tmp_path):
    out = tmp_path / "run"
    stdout = _run("--systems", "gpulda-cpu", "sklearn-batch", "--budget", "3", "--out", str(out))
    for name in ("curves.csv", "summary.csv", "table.md", "environment.json"):
        assert (out / name).is_file(), name
    summary = _summary(out)
    assert summary["gpulda-cpu"]["status"] == "ok"
    assert summary["sklearn-batch"]["status"] == "ok"
    assert int(summary["gpulda-cpu"]["transform_docs"]) == 300
    curves = _curves(out)
    ours = [r for r in curves if r["system"] == "gpulda-cpu"]
    assert len(ours) >= 2
    assert [int(r["iterations"]) for r in ours] == [5, 10, 20, 40, 80, 160, 320][:len(ours)]
    # Every checkpoint's model predicts held-out words far better than a uniform distribution
    # over the vocabulary does (the corpus is planted; its score settles within 5 iterations).
    n_words = int(re.search(r"test docs, (\d+) words", stdout).group(1))
    assert min(float(r["heldout_ll"]) for r in ours) > -np.log(n_words) + 0.5
    table = (out / "table.md").read_text()
    assert "Target:" in table and "| gpulda-cpu |" in table
    assert "nytimes, K = 5" in stdout
    assert not list(out.glob("corpus-*.npz")), "the temporary corpus file was left behind"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_hard_limit_keeps_checkpoints_and_kills_workers(tmp_path):
    out = tmp_path / "stopped"
    # A budget far beyond the hard limit: only the hard limit can end the online run, which
    # uses joblib worker processes (n_jobs = cores) that must go with it.
    _run("--systems", "sklearn-online", "--budget", "1000", "--hard-limit", "8",
         "--out", str(out))
    row = _summary(out)["sklearn-online"]
    assert row["status"].startswith("stopped at the hard limit of 8 s")
    assert [r for r in _curves(out) if r["system"] == "sklearn-online"], \
        "the checkpoints reached before the stop were lost"
    assert _children_of(os.getpid()) == [], "a stopped run left processes behind"


def test_deadline_skips_what_does_not_fit(tmp_path):
    out = tmp_path / "deadline"
    _run("--systems", "gpulda-cpu", "sklearn-batch", "--budget", "2", "--deadline", "1",
         "--out", str(out))
    summary = _summary(out)
    assert summary["gpulda-cpu"]["status"] == "skipped: the invocation's deadline"
    assert summary["sklearn-batch"]["status"] == "skipped: the invocation's deadline"


def test_merge_combines_runs(tmp_path):
    a, b, merged = tmp_path / "a", tmp_path / "b", tmp_path / "merged"
    _run("--systems", "gpulda-cpu", "--budget", "1", "--out", str(a))
    _run("--systems", "sklearn-batch", "--budget", "1", "--out", str(b))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(PEERS), "--merge", str(a), str(b),
                           "--out", str(merged)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = _summary(merged)
    assert set(summary) == {"gpulda-cpu", "sklearn-batch"}
    assert len(_curves(merged)) == len(_curves(a)) + len(_curves(b))
    table = (merged / "table.md").read_text()
    # With scikit-learn's run merged in, the table has a target and a ratio for ours.
    assert "Target:" in table
    assert "| gpulda-cpu |" in table and "| sklearn-batch |" in table
    assert "a: " in table and "b: " in table


def test_table_marks_stopped_runs_and_partial_transforms():
    sys.path.insert(0, str(PEERS.parent))
    try:
        import peers
    finally:
        sys.path.remove(str(PEERS.parent))
    nan = float("nan")

    def run(system, lls, **extra):
        points = [dict(iterations=2 ** i, train_s=float(2 ** i), heldout_ll=ll)
                  for i, ll in enumerate(lls)]
        return dict(dict(corpus="kos", n_topics=20, system=system, status="ok", points=points,
                         host_peak_mb=10.0, device_peak_mb=nan, transform_s=1.5,
                         transform_docs=10_000, transform_docs_requested=10_000), **extra)

    results = [run("gpulda-cpu", [-8.0, -7.5]),
               run("sklearn-batch", [-8.2, -7.8]),
               run("gensim", [-8.5], status="stopped at the hard limit of 60 s",
                   host_peak_mb=nan, transform_s=nan, transform_docs=None),
               run("tomotopy", [-7.9, -7.6], transform_docs=1_000)]
    table = peers._table(results, peers.SYSTEMS)
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| system")}
    assert "Target: -7.8000" in table
    assert "| 2.00 | 1.00 |" in rows["gpulda-cpu"]       # ours reaches -7.8 at 2 s
    assert "| 2.00 | 1.00 |" in rows["sklearn-batch"]
    assert "not reached in 1.0, then stopped" in rows["gensim"]
    assert "1.50 for 1,000 docs" in rows["tomotopy"]
    assert rows["gpulda-cpu"].rstrip().endswith("| 1.50 |")
