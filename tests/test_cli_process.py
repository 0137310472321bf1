"""The command line as a user meets it, in a separate process: input that is not text, Ctrl-C,
and what ``--help`` imports.

Every test runs ``python -m sklearn_gpulda`` (or a few lines around its ``main``) in a fresh
interpreter that imports this checkout, and checks the exit status and stderr. Fits are tiny and
on the CPU.
"""

import gzip
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]

#: Options that let a handful of short documents keep their words, for fits that must succeed.
TINY_FIT = ["-k", "2", "--max-iter", "2", "--device", "cpu", "--n-jobs", "1",
            "--min-df", "1", "--max-df", "1.0", "--stop-words", "none", "--no-progress"]


def child_env():
    """The environment of a child that imports this checkout, whatever the venv points at."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_cli(*args, cwd, python_options=()):
    return subprocess.run([sys.executable, *python_options, "-m", "sklearn_gpulda",
                           *map(str, args)], cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=300)


def assert_user_error(result, *fragments):
    """Exit status 2 and exactly one line on stderr, holding each of ``fragments``."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


# --------------------------------------------------------------------------- input that is not text

def test_fit_refuses_a_binary_file(tmp_path):
    binary = tmp_path / "program"
    # An executable's opening bytes, then text-looking symbols, as in the ELF file of the issue.
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + b"main printf malloc\n" * 50)
    result = run_cli("fit", binary, *TINY_FIT, cwd=tmp_path)
    assert_user_error(result, f"{binary} is not a text file: NUL byte on line 1")
    assert "fitting:" not in result.stdout
    assert not (tmp_path / "model.joblib").exists()


def test_fit_finds_a_nul_byte_past_the_sniffed_head(tmp_path):
    # The format check reads the first 64 KiB only; the full read must still find this one.
    docs = tmp_path / "docs.txt"
    docs.write_bytes(b"alpha beta gamma\n" * 5000 + b"delta\x00epsilon\n")
    result = run_cli("fit", docs, *TINY_FIT, cwd=tmp_path)
    assert_user_error(result, "is not a text file: NUL byte on line 5001")


def latin1_corpus(path):
    lines = ["the caf\xe9 opens early", "coffee at the caf\xe9", "tea and coffee"]
    path.write_bytes("\n".join(lines).encode("latin-1") + b"\n")
    return path


def test_fit_refuses_bytes_that_are_not_utf8_naming_file_encoding_and_offset(tmp_path):
    docs = latin1_corpus(tmp_path / "latin1.txt")
    result = run_cli("fit", docs, *TINY_FIT, cwd=tmp_path)
    # 'the caf' is 7 bytes: the first byte that is not UTF-8 is at offset 7, on line 1.
    assert_user_error(result, str(docs), "not valid utf-8", "byte 0xe9 at byte offset 7 (line 1)",
                      "--encoding")
    assert "fitting:" not in result.stdout


def test_fit_reports_the_line_of_a_bad_byte_in_a_gzipped_file(tmp_path):
    docs = tmp_path / "docs.txt.gz"
    with gzip.open(docs, "wb") as handle:
        handle.write(b"first line\nsecond line\nbad \xff byte\n")
    result = run_cli("fit", docs, *TINY_FIT, cwd=tmp_path)
    assert_user_error(result, "byte 0xff at byte offset 27 (line 3)")


def test_fit_reads_the_encoding_it_is_given(tmp_path):
    docs = latin1_corpus(tmp_path / "latin1.txt")
    result = run_cli("fit", docs, *TINY_FIT, "--encoding", "latin-1", "-o", "m.joblib",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "café" in result.stdout  # the word survives whole, accent included


def test_fit_reads_utf16_whose_bytes_hold_nul(tmp_path):
    # UTF-16 text is full of zero bytes; the NUL check is on characters, not bytes.
    docs = tmp_path / "utf16.txt"
    docs.write_text("alpha beta\nbeta gamma\ngamma alpha\n", encoding="utf-16")
    result = run_cli("fit", docs, *TINY_FIT, "--encoding", "utf-16", "-o", "m.joblib",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "alpha" in result.stdout


def test_fit_with_encoding_errors_replace_reads_what_it_can(tmp_path):
    docs = latin1_corpus(tmp_path / "latin1.txt")
    result = run_cli("fit", docs, *TINY_FIT, "--encoding-errors", "replace", "-o", "m.joblib",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "m.joblib").is_file()


@pytest.mark.parametrize("option, value, fragment", [
    ("--encoding", "no-such-codec", "not a text encoding Python knows: 'no-such-codec'"),
    ("--encoding", "base64", "not a text encoding Python knows: 'base64'"),
    ("--encoding-errors", "ignore", "invalid choice: 'ignore'"),
])
def test_fit_encoding_options_reject_bad_values(tmp_path, option, value, fragment):
    docs = latin1_corpus(tmp_path / "latin1.txt")
    result = run_cli("fit", docs, "-k", "2", option, value, cwd=tmp_path)
    assert_user_error(result, fragment)


def test_fit_gzipped_uci_input_still_works(tmp_path):
    X = sp.random(30, 40, density=0.3, format="csr", random_state=0)
    X.data = (X.data * 5).astype(int) + 1
    X.sort_indices()
    coo = X.tocoo()
    docword = tmp_path / "docword.toy.txt.gz"
    with gzip.open(docword, "wt") as handle:
        handle.write(f"{X.shape[0]}\n{X.shape[1]}\n{X.nnz}\n")
        handle.writelines(f"{d + 1} {w + 1} {c}\n" for d, w, c in zip(coo.row, coo.col, coo.data))
    result = run_cli("fit", docword, "-k", "2", "--max-iter", "2", "--device", "cpu",
                     "--n-jobs", "1", "-o", "m.joblib", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "(UCI bag of words)" in result.stdout
    assert (tmp_path / "m.joblib").is_file()


def test_fit_reports_a_missing_output_folder_and_creates_nothing(tmp_path):
    docs = latin1_corpus(tmp_path / "latin1.txt")
    output = tmp_path / "no" / "such" / "model.joblib"
    result = run_cli("fit", docs, *TINY_FIT, "--encoding", "latin-1", "-o", output,
                     cwd=tmp_path)
    assert_user_error(result, f"output folder does not exist: {output.parent}")
    assert "fitting:" not in result.stdout
    assert not (tmp_path / "no").exists()


def test_fit_reports_a_directory_given_as_input(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    result = run_cli("fit", folder, "-k", "2", cwd=tmp_path)
    assert_user_error(result, f"input file {folder} is a directory")
    assert "not found" not in result.stderr


def test_fit_still_reports_a_missing_input_as_not_found(tmp_path):
    result = run_cli("fit", tmp_path / "nowhere.txt", "-k", "2", cwd=tmp_path)
    assert_user_error(result, "input file not found:")


# --------------------------------------------------------------------------- Ctrl-C

needs_sigint = pytest.mark.skipif(sys.platform == "win32" or not hasattr(signal, "SIGINT"),
                                  reason="sending SIGINT to a child needs POSIX signals")


@needs_sigint
def test_ctrl_c_while_the_parser_is_built_is_one_line_and_status_130(tmp_path):
    # The signal is raised from inside build_parser, so it lands during start-up every time.
    code = (
        "import os, signal, sys\n"
        "import sklearn_gpulda.__main__ as cli\n"
        "build = cli.build_parser\n"
        "def interrupted(*args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    return build(*args, **kwargs)\n"
        "cli.build_parser = interrupted\n"
        "sys.exit(cli.main(['fit', '--help']))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=child_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 130, result.stderr
    assert result.stderr == "interrupted\n"


@needs_sigint
def test_ctrl_c_during_a_fit_is_one_line_and_status_130(tmp_path):
    docs = tmp_path / "docs.txt"
    words = [f"w{i}" for i in range(200)]
    docs.write_text("".join(" ".join(words[d % 7::3]) + "\n" for d in range(200)))
    # Far more sweeps than can finish: the fit is still running when the signal comes. One job,
    # so that only the main process is interrupted (workers' own output is not checked here).
    command = [sys.executable, "-m", "sklearn_gpulda", "fit", str(docs), "-k", "20",
               "--max-iter", "1000000", "--device", "cpu", "--n-jobs", "1", "--no-progress",
               "--min-df", "1", "--max-df", "1.0", "-o", str(tmp_path / "m.joblib")]
    child = subprocess.Popen(command, cwd=tmp_path, env=child_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        # 'fitting:' is printed, flushed, just before fit() starts: wait for it, not for a time.
        for line in child.stdout:
            if line.startswith("fitting:"):
                break
        else:
            pytest.fail(f"no 'fitting:' line; stderr: {child.stderr.read()}")
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, stderr
    assert stderr == "interrupted\n"
    assert not (tmp_path / "m.joblib").exists()


# --------------------------------------------------------------------------- --help imports

#: Modules --help must not load: the numerical stack takes seconds to import on a slow machine.
HEAVY = re.compile(r"^(sklearn|scipy|numpy|sklearn_gpulda\.estimator)(\.|$)")


@pytest.mark.parametrize("args", [[], ["--help"], ["demo", "--help"], ["fit", "--help"],
                                  ["topics", "--help"], ["report", "--help"], ["bench", "--help"]])
def test_help_imports_neither_scikit_learn_nor_the_estimator(tmp_path, args):
    result = run_cli(*args, cwd=tmp_path, python_options=("-X", "importtime"))
    if args:
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("usage:")
    else:  # no command: the one-line usage error, which points at --help
        assert result.returncode == 2
        assert "required: COMMAND (see python -m sklearn_gpulda --help)" in result.stderr
    imported = re.findall(r"^import time:[^|]*\|[^|]*\|\s*(\S+)", result.stderr, re.MULTILINE)
    assert "sklearn_gpulda._cli.commands" in imported  # the measurement sees the CLI's imports
    heavy = [name for name in imported if HEAVY.match(name)]
    assert heavy == []


def test_the_package_loads_the_estimator_only_when_asked(tmp_path):
    code = (
        "import pickle, sys\n"
        "import sklearn_gpulda\n"
        "assert 'sklearn' not in sys.modules, 'import sklearn_gpulda loaded scikit-learn'\n"
        "assert 'GPULatentDirichletAllocation' in dir(sklearn_gpulda)\n"
        "assert 'GPULatentDirichletAllocation' in sklearn_gpulda.__all__\n"
        "from sklearn_gpulda import GPULatentDirichletAllocation as LDA\n"
        "assert sklearn_gpulda.GPULatentDirichletAllocation is LDA\n"
        "assert LDA.__module__ == 'sklearn_gpulda.estimator'\n"
        "model = pickle.loads(pickle.dumps(LDA(n_components=3)))\n"
        "assert type(model) is LDA and model.n_components == 3\n"
        "try:\n"
        "    sklearn_gpulda.NoSuchThing\n"
        "except AttributeError as exc:\n"
        "    assert 'NoSuchThing' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=child_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
