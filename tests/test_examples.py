"""Every script in ``examples/`` runs to the end on this machine.

Each example runs in a fresh interpreter (as a user or sphinx-gallery would run it), from a
temporary working directory so that nothing it writes lands in the checkout, with the checkout
first on ``sys.path`` so that an uninstalled source tree is tested. The examples pick the GPU
when there is one; on CI (no GPU) they exercise the CPU engine, at sizes chosen to finish in
seconds there.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_examples_exist():
    assert EXAMPLES, f"no examples found in {ROOT / 'examples'}"


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script, tmp_path):
    # matplotlib and pandas come with the doc extra, not the test one: an example that needs a
    # missing one is skipped here (the docs build runs it again through sphinx-gallery).
    source = script.read_text(encoding="utf-8")
    for module in ("matplotlib", "pandas"):
        if f"import {module}" in source:
            pytest.importorskip(module)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    # An example that writes to the temporary folder (plot_convergence.py saves its figure
    # there, for a user to open) writes under pytest's folder, not the system's.
    temp = tmp_path / "temp"
    temp.mkdir()
    for name in ("TMPDIR", "TEMP", "TMP"):
        env[name] = str(temp)
    before = _own_temp_files()
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"{script.name} exited with {result.returncode}\n"
        f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}"
    )
    assert _own_temp_files() == before, "the example wrote to the system's temporary folder"


def _own_temp_files():
    """This package's files in the system's temporary folder, with their modification times."""
    folder = Path(tempfile.gettempdir())
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("sklearn_gpulda*")}
