"""The peer benchmark harness (``benchmarks/peers.py``) on a tiny synthetic corpus.

These runs use the CPU engine and scikit-learn only, so they work on CI without a GPU, gensim,
tomotopy or ``../shared`` (the one tomotopy test is skipped without it). They check what the
device runs rely on: a run stopped at its hard limit keeps the checkpoints it reached and leaves
no worker processes behind, results are on disk after every run, results of separate runs merge
into one table, the convergence rule stops runs, every model is scored with the prior it ended
with, and times estimated from a reference run are computed and labelled as such.
"""

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers.py"
sys.path.insert(0, str(PEERS.parent))
import _peer_report  # noqa: E402
import _peer_results  # noqa: E402
import _peer_systems  # noqa: E402
import peers  # noqa: E402

sys.path.remove(str(PEERS.parent))
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
    # Both runs end by the convergence rule long before this budget (ours at its second
    # checkpoint, about 3.5 s on a 2-core machine); a tight budget made the test depend on how
    # busy the machine was, and a loaded CI runner reached only the first checkpoint.
    stdout = _run("--systems", "gpulda-cpu", "sklearn-batch", "--budget", "30", "--out", str(out))
    for name in ("curves.csv", "summary.csv", "table.md", "environment.json"):
        assert (out / name).is_file(), name
    summary = _summary(out)
    assert summary["gpulda-cpu"]["status"] == "ok"
    assert summary["sklearn-batch"]["status"] == "ok"
    assert int(summary["gpulda-cpu"]["transform_docs"]) == 300
    curves = _curves(out)
    ours = [r for r in curves if r["system"] == "gpulda-cpu"]
    assert len(ours) >= 2
    assert [int(r["iterations"]) for r in ours] == peers.SCHEDULES["gpulda-cpu"][:len(ours)]
    # Every checkpoint's model predicts held-out words far better than a uniform distribution
    # over the vocabulary does (the corpus is planted; its score settles within 5 iterations).
    n_words = int(re.search(r"test docs, (\d+) words", stdout).group(1))
    assert min(float(r["heldout_ll"]) for r in ours) > -np.log(n_words) + 0.5
    table = (out / "table.md").read_text()
    assert "Priors: own" in table and "| gpulda-cpu |" in table
    assert "nytimes, K = 5" in stdout
    assert not list(out.glob("corpus-*.npz")), "the temporary corpus file was left behind"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_hard_limit_keeps_checkpoints_and_kills_workers(tmp_path):
    out = tmp_path / "stopped"
    # Helpers this test process already has (multiprocessing's resource tracker, started by
    # earlier tests that made worker processes) live as long as it does: only new ones count.
    before = set(_children_of(os.getpid()))
    # A budget far beyond the hard limit: only the hard limit can end the online run, which
    # uses joblib worker processes (n_jobs = cores) that must go with it.
    # No convergence rule either, which might otherwise end it first.
    _run("--systems", "sklearn-online", "--budget", "1000", "--hard-limit", "8",
         "--converge", "0", "--out", str(out))
    row = _summary(out)["sklearn-online"]
    assert row["status"].startswith("stopped at the hard limit of 8 s")
    assert [r for r in _curves(out) if r["system"] == "sklearn-online"], \
        "the checkpoints reached before the stop were lost"
    assert set(_children_of(os.getpid())) - before == set(), "a stopped run left processes behind"


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
    # With scikit-learn's run merged in, the table compares ours with it.
    assert "Ours: gpulda-cpu." in table and "sklearn-batch's" in table
    assert "| gpulda-cpu |" in table and "| sklearn-batch |" in table
    assert "a: " in table and "b: " in table


def test_converge_rule_stops_runs_and_fills_summary(tmp_path):
    out = tmp_path / "converged"
    # A tolerance no doubling meets: each run stops at its second checkpoint.
    _run("--systems", "gpulda-cpu", "sklearn-batch", "--budget", "60", "--converge", "0.5",
         "--out", str(out))
    summary, curves = _summary(out), _curves(out)
    for system in ("gpulda-cpu", "sklearn-batch"):
        row = summary[system]
        points = [r for r in curves if r["system"] == system]
        assert [int(r["iterations"]) for r in points] == peers.SCHEDULES[system][:2]
        assert row["converged"] == "True" and row["stopped_by"] == "converged"
        assert int(row["converged_iterations"]) == int(points[-1]["iterations"])
        assert float(row["converged_ll"]) == pytest.approx(float(points[-1]["heldout_ll"]),
                                                           abs=1e-6)
        assert float(row["converged_s"]) == pytest.approx(float(points[-1]["train_s"]),
                                                          abs=1e-4)
    assert "| gpulda-cpu | " in (out / "table.md").read_text()


def _points(*pairs):
    """Checkpoints from (iterations, seconds, held-out LL) triples."""
    return [dict(iterations=n, train_s=float(t), heldout_ll=ll) for n, t, ll in pairs]


def test_converged_compares_with_half_the_iterations():
    points = _points((25, 1, -8.0), (50, 2, -7.5), (100, 4, -7.497))
    assert not _peer_systems.converged(points[:1], 0.005)
    assert not _peer_systems.converged(points[:2], 0.005)
    assert _peer_systems.converged(points, 0.005)
    assert not _peer_systems.converged(points, 0.0), "tol 0 switches the rule off"
    # A fall counts as converged; without the point of half the iterations nothing does.
    assert _peer_systems.converged(_points((1, 1, -7.0), (2, 2, -7.1)), 0.005)
    assert not _peer_systems.converged(_points((25, 1, -8.0), (75, 2, -8.0)), 0.005)


def _tiny_counts(n_docs=120):
    from sklearn_gpulda.datasets import make_lda_corpus

    return make_lda_corpus(n_docs=n_docs, n_words=200, n_topics=5, random_state=0).data.tocsr()


@pytest.mark.parametrize("priors", ["own", "sklearn"])
def test_evaluator_gets_the_prior_the_model_ended_with(tmp_path, monkeypatch, priors):
    from _peer_corpora import save_corpus

    from sklearn_gpulda import GPULatentDirichletAllocation

    X = _tiny_counts()
    save_corpus(tmp_path / "c.npz", X[:100], X[100:], np.arange(X.shape[1]).astype(str))
    seen, systems = [], []
    scorer, maker = _peer_systems.document_completion, _peer_systems.make_system

    def recording_scorer(X, topic_word, alpha, **kwargs):
        seen.append(alpha)
        return scorer(X, topic_word, alpha, **kwargs)

    def recording_maker(*args):
        systems.append(maker(*args))
        return systems[-1]

    monkeypatch.setattr(_peer_systems, "document_completion", recording_scorer)
    monkeypatch.setattr(_peer_systems, "make_system", recording_maker)
    job = dict(corpus_path=str(tmp_path / "c.npz"), corpus="tiny", n_topics=5,
               system="gpulda-cpu", seed=0, budget_s=60.0, schedule=[2, 4],
               transform_docs=20, eval_iter=10, priors=priors, converge_tol=0.0)
    result = _peer_systems.run_system(job)
    model = systems[0].model
    assert len(seen) == 2
    np.testing.assert_array_equal(seen[-1], model.doc_topic_prior_)
    assert result["doc_topic_prior"] == _peer_systems.describe_prior(model.doc_topic_prior_)
    # "own" leaves the estimator's default priors alone; "sklearn" sets 1 / K.
    defaults = GPULatentDirichletAllocation().get_params()
    expected = {"own": defaults["doc_topic_prior"], "sklearn": 0.2}[priors]
    assert model.get_params()["doc_topic_prior"] == expected
    assert model.get_params()["topic_word_prior"] == {
        "own": defaults["topic_word_prior"], "sklearn": 0.2}[priors]


def test_tomotopy_own_priors_learn_alpha_and_report_it():
    pytest.importorskip("tomotopy")
    X = _tiny_counts()
    own = _peer_systems.make_system("tomotopy", 5, 0, 1, "own")
    fixed = _peer_systems.make_system("tomotopy", 5, 0, 1, "sklearn")
    for system in (own, fixed):
        system.prepare(X)
        system.train_to(25)
    np.testing.assert_array_equal(own.doc_topic_prior(), np.asarray(own.model.alpha))
    # tomotopy's default alpha (0.1) is learnt every 10 iterations, into an asymmetric vector.
    assert own.doc_topic_prior().shape == (5,)
    assert np.ptp(own.doc_topic_prior()) > 0
    np.testing.assert_allclose(fixed.doc_topic_prior(), np.full(5, 0.2), rtol=1e-6)


def test_extrapolated_seconds_follow_the_last_doubling():
    points = _points((25, 10, -8.0), (50, 30, -7.8))
    # 30 s + (200 - 50) iterations x (30 - 10) s / (50 - 25) iterations.
    assert _peer_results.extrapolated_seconds(points, 200) == pytest.approx(30 + 150 * 0.8)
    # One checkpoint: its own average rate, from zero.
    assert _peer_results.extrapolated_seconds(points[:1], 100) == pytest.approx(10 + 75 * 0.4)
    with pytest.raises(ValueError, match="reached already"):
        _peer_results.extrapolated_seconds(points, 50)


def _run_result(system, points, converged=False, **extra):
    nan = float("nan")
    return dict(dict(corpus="kos", n_topics=20, system=system, status="ok", points=points,
                     converged=converged, stopped_by="converged" if converged else "budget",
                     host_peak_mb=10.0, device_peak_mb=nan, transform_s=1.5,
                     transform_docs=10_000, transform_docs_requested=10_000), **extra)


def _reference_folder(folder, args):
    """A results folder holding one converged tomotopy run, as a long CPU run leaves it."""
    folder.mkdir()
    ref = _run_result("tomotopy", _points((25, 5, -8.0), (50, 10, -7.7), (100, 20, -7.6),
                                          (200, 40, -7.598)), converged=True)
    _peer_report._write_outputs(folder, [ref], _peer_systems.SYSTEMS, "", plot=False)
    env = dict(date="2026-11-20T00:00:00+00:00", cpu="Reference CPU", cores=2, gpu=None,
               args=args)
    (folder / "environment.json").write_text(json.dumps(env))
    return folder


SCORING = dict(priors="own", converge=0.005, max_docs=None, max_test_docs=500, eval_iter=50,
               nytimes_scale=0.1, seed=0)


def test_reference_stands_in_for_a_run_stopped_early(tmp_path):
    folder = _reference_folder(tmp_path / "ref", SCORING)
    reference = _peer_results.load_reference(folder, [SCORING])
    results = [_run_result("gpulda-cuda", _points((25, 0.5, -7.7), (50, 0.8, -7.59),
                                                  (100, 1.4, -7.589)), converged=True),
               _run_result("tomotopy", _points((25, 2, -8.0), (50, 3, -7.7)))]
    table = _peer_report._table(results, _peer_systems.SYSTEMS, reference)
    row = next(line for line in table.splitlines() if line.startswith("| tomotopy |"))
    # 3 s + (200 - 50) iterations x 1 s / 25 iterations = 9 s.
    assert "| -7.5980 (ref.) | no (budget); reference: yes | 200 (ref.) | est. 9.00 |" in row
    assert ("ours reached tomotopy's converged LL (-7.5980, from the reference run) in 0.80 s, "
            "11.2 times sooner than tomotopy's estimated time to converge here (est. 9.00 s)"
            in table)
    assert "3.00 + (200 - 50) iterations x 0.04 s per iteration" in table
    assert "Reference CPU" in table and "does not depend on the machine" in table


def test_reference_scored_differently_is_refused(tmp_path):
    folder = _reference_folder(tmp_path / "ref", SCORING)
    with pytest.raises(SystemExit, match="max_test_docs 500 / 2000"):
        _peer_results.load_reference(folder, [dict(SCORING, max_test_docs=2000)])


def test_table_has_a_line_per_peer():
    results = [_run_result("gpulda-cpu", _points((25, 1, -8.0), (50, 2, -7.5), (100, 4, -7.49)),
                           converged=True),
               _run_result("sklearn-batch", _points((1, 2, -8.2), (2, 4, -7.8), (4, 8, -7.79)),
                           converged=True),
               _run_result("gensim", _points((1, 5, -8.5)),
                           status="stopped at the hard limit of 60 s", host_peak_mb=float("nan"),
                           transform_s=float("nan"), transform_docs=None),
               _run_result("tomotopy", _points((25, 3, -7.6), (50, 6, -7.3)), converged=True,
                           transform_docs=1_000)]
    table = _peer_report._table(results, _peer_systems.SYSTEMS)
    assert "Ours: gpulda-cpu." in table
    assert ("- ours reached sklearn-batch's converged LL (-7.7900) in 2.00 s, 4.0 times sooner "
            "than sklearn-batch converged (8.00 s)." in table)
    assert ("- ours reached gensim's best LL (-8.5000; gensim did not converge) in 1.00 s, "
            "5.0 times sooner than gensim reached it (5.00 s)." in table)
    assert ("- ours did not reach tomotopy's converged LL (-7.3000); ours' best was -7.4900."
            in table)
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| system")}
    assert "| no (hard limit) |" in rows["gensim"]
    assert "1.50 for 1,000 docs" in rows["tomotopy"]
    assert rows["gpulda-cpu"].startswith("| gpulda-cpu | -7.4900 | yes | 100 | 4.00 |")
