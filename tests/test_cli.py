"""Tests of the command line (``sklearn_gpulda/__main__.py``).

Corpora are cut from the bundled King James Bible chapters, so every file the CLI reads here is
real text or real counts; the engine is forced to the CPU and runs a few iterations only.
"""

import gzip
import re

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import Pipeline

from sklearn_gpulda import __main__ as cli
from sklearn_gpulda.datasets import load_kjv_chapters


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters()


def write_uci(path, X, vocab_path=None, feature_names=None):
    """Write ``X`` as a UCI docword file (1-based ids, sorted by document then word)."""
    X = sp.csr_matrix(X)
    X.sort_indices()
    coo = X.tocoo()
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt") as handle:
        handle.write(f"{X.shape[0]}\n{X.shape[1]}\n{X.nnz}\n")
        for d, w, c in zip(coo.row, coo.col, coo.data):
            handle.write(f"{d + 1} {w + 1} {int(c)}\n")
    if vocab_path is not None:
        vocab_path.write_text("".join(f"{w}\n" for w in feature_names))


def chapters_as_text(kjv, rows):
    """Each chapter as one line: its kept words repeated by their counts."""
    names = np.asarray(kjv.feature_names)
    lines = []
    for d in rows:
        row = kjv.data[d]
        lines.append(" ".join(np.repeat(names[row.indices], row.data.astype(np.int64))))
    return lines


def topic_lines(text):
    return re.findall(r"^\s+topic\s+\d+: (.*)$", text, flags=re.MULTILINE)


# --------------------------------------------------------------------------- parsing

def test_help_lists_the_commands(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("demo", "fit", "bench"):
        assert command in out


def test_no_command_is_a_usage_error(capsys):
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "CUDA:3"])
def test_device_argument_accepts(device):
    args = cli.build_parser().parse_args(["demo", "--device", device])
    assert args.device == device.lower()


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:x", "tpu:0"])
def test_device_argument_rejects(device, capsys):
    assert cli.main(["demo", "--device", device]) == 2
    assert "expected auto, cpu, cuda or cuda:N" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-3", "ten"])
def test_max_iter_must_be_a_positive_integer(value, capsys):
    assert cli.main(["demo", "--max-iter", value]) == 2
    assert "--max-iter" in capsys.readouterr().err


def test_fit_requires_the_number_of_topics(tmp_path, capsys):
    assert cli.main(["fit", str(tmp_path / "docs.txt")]) == 2
    assert "-k" in capsys.readouterr().err


def test_sniff_format_tells_uci_from_text(tmp_path, kjv):
    write_uci(tmp_path / "docword.txt", kjv.data[:3])
    write_uci(tmp_path / "docword.txt.gz", kjv.data[:3])
    (tmp_path / "docs.txt").write_text("\n".join(chapters_as_text(kjv, range(3))) + "\n")
    assert cli.sniff_format(tmp_path / "docword.txt") == "uci"
    assert cli.sniff_format(tmp_path / "docword.txt.gz") == "uci"
    assert cli.sniff_format(tmp_path / "docs.txt") == "text"


def test_describe_device_names_the_engine():
    assert "NumPy" in cli.describe_device("cpu")
    assert "GPU 1" in cli.describe_device("cuda:1")


# --------------------------------------------------------------------------- demo

def test_demo_on_cpu_reports_device_speed_perplexity_and_topics(capsys, kjv):
    assert cli.main(["demo", "--max-iter", "3", "--device", "cpu", "--n-components", "5"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^device:\s+cpu - NumPy", out, flags=re.MULTILINE)
    assert re.search(r"^fit time:\s+[\d.]+ s for 3 iterations", out, flags=re.MULTILINE)
    assert re.search(r"^throughput:\s+[\d.]+ Mtoken/s", out, flags=re.MULTILINE)
    perplexity = float(re.search(r"held-out perplexity: ([\d.]+)", out).group(1))
    # A fitted model must beat guessing uniformly over the vocabulary.
    assert 1.0 < perplexity < kjv.data.shape[1]
    topics = topic_lines(out)
    assert len(topics) == 5
    vocabulary = set(kjv.feature_names)
    for words in topics:
        assert len(words.split()) == 10
        assert set(words.split()) <= vocabulary


def test_demo_reports_an_unusable_gpu_in_one_line(monkeypatch, capsys):
    import sklearn_gpulda._device as device_module

    def no_gpu(device):
        raise RuntimeError(f"device={device!r} needs CuPy and a CUDA GPU")

    monkeypatch.setattr(device_module, "resolve_device", no_gpu)
    assert cli.main(["demo", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "demo: error: device='cuda' needs CuPy and a CUDA GPU" in err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- fit

@pytest.mark.parametrize("compressed", [False, True])
def test_fit_uci_saves_a_model_that_transforms(tmp_path, capsys, kjv, compressed):
    X = kjv.data[:60]
    docword = tmp_path / ("docword.kjv.txt.gz" if compressed else "docword.kjv.txt")
    vocab = tmp_path / "vocab.kjv.txt"
    write_uci(docword, X, vocab, kjv.feature_names)
    output = tmp_path / "model.joblib"
    status = cli.main(["fit", str(docword), "--vocab", str(vocab), "-k", "4", "--max-iter", "3",
                       "--device", "cpu", "--output", str(output), "--top-words", "6"])
    assert status == 0
    out = capsys.readouterr().out
    assert "UCI bag of words" in out
    assert f"60 documents x {X.shape[1]} words" in out
    topics = topic_lines(out)
    assert len(topics) == 4
    assert all(set(t.split()) <= set(kjv.feature_names) and len(t.split()) == 6 for t in topics)

    model = joblib.load(output)
    assert model.components_.shape == (4, X.shape[1])
    theta = model.transform(X)
    assert theta.shape == (60, 4)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-6)


def test_fit_uci_without_vocab_names_words_by_id(tmp_path, capsys, kjv):
    docword = tmp_path / "docword.kjv.txt"
    write_uci(docword, kjv.data[:30])
    status = cli.main(["fit", str(docword), "-k", "3", "--max-iter", "2", "--device", "cpu",
                       "-o", str(tmp_path / "m.joblib"), "--top-words", "4"])
    assert status == 0
    for words in topic_lines(capsys.readouterr().out):
        assert all(re.fullmatch(r"#\d+", w) for w in words.split())


def test_fit_text_saves_a_pipeline_for_raw_text(tmp_path, capsys, kjv):
    lines = chapters_as_text(kjv, range(0, 1189, 40))
    docs = tmp_path / "chapters.txt"
    # Blank lines are not documents.
    docs.write_text("\n\n".join(lines) + "\n")
    output = tmp_path / "sub" / "pipe.joblib"
    status = cli.main(["fit", str(docs), "-k", "3", "--max-iter", "3", "--device", "cpu",
                       "--output", str(output), "--no-progress"])
    assert status == 0
    out = capsys.readouterr().out
    assert "text, one document per line" in out
    assert f"{len(lines)} documents" in out
    assert len(topic_lines(out)) == 3

    pipeline = joblib.load(output)
    assert isinstance(pipeline, Pipeline)
    theta = pipeline.transform(lines[:5])
    assert theta.shape == (5, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-6)


def test_fit_text_rejects_a_vocab_file(tmp_path, capsys, kjv):
    docs = tmp_path / "chapters.txt"
    docs.write_text("\n".join(chapters_as_text(kjv, range(3))))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(kjv.feature_names))
    status = cli.main(["fit", str(docs), "--format", "text", "--vocab", str(vocab), "-k", "2"])
    assert status == 2
    assert "--vocab applies to UCI input only" in capsys.readouterr().err


def test_fit_reports_a_missing_input(tmp_path, capsys):
    assert cli.main(["fit", str(tmp_path / "nowhere.txt"), "-k", "2"]) == 2
    assert "input file not found" in capsys.readouterr().err


# --------------------------------------------------------------------------- bench

def test_bench_lists_and_runs_scripts(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "_helpers.py").write_text('"""Not a benchmark."""\n')
    (folder / "toy.py").write_text(
        '"""Toy benchmark: records its arguments."""\n'
        "import pathlib, sys\n"
        "pathlib.Path(sys.argv[1]).write_text(' '.join(sys.argv[2:]))\n")
    monkeypatch.setattr(cli, "benchmarks_dir", lambda: folder)

    assert cli.main(["bench"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+toy\s+Toy benchmark: records its arguments\.$", out, re.MULTILINE)
    assert "_helpers" not in out

    record = tmp_path / "argv.txt"
    assert cli.main(["bench", "toy", str(record), "--size", "3", "--help"]) == 0
    assert record.read_text() == "--size 3 --help"

    (folder / "bench_tiny.py").write_text(
        '"""Tiny benchmark."""\nimport pathlib, sys\npathlib.Path(sys.argv[1]).write_text("ran")\n')
    assert cli.main(["bench", "tiny", str(record)]) == 0
    assert record.read_text() == "ran"

    assert cli.main(["bench", "nonesuch"]) == 2
    assert "available: bench_tiny, toy" in capsys.readouterr().err


def test_bench_from_an_installed_package_says_where_scripts_are(monkeypatch, capsys):
    monkeypatch.setattr(cli, "benchmarks_dir", lambda: None)
    assert cli.main(["bench"]) == 2
    assert "source repository" in capsys.readouterr().err
