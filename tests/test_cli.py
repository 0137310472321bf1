"""Tests of the command line (``sklearn_gpulda/__main__.py`` and ``sklearn_gpulda/_cli/``).

Corpora are cut from the bundled King James Bible chapters, so every file the CLI reads here is
real text or real counts; the engine is forced to the CPU and runs a few iterations only. What a
user sees (exit status, one-line errors on stderr) is checked by running ``python -m
sklearn_gpulda`` in a subprocess; details of parsing and saving are checked in-process, which is
faster.
"""

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda import __main__ as cli
from sklearn_gpulda._cli import bench, common, data
from sklearn_gpulda.datasets import load_kjv_chapters

ROOT = Path(__file__).resolve().parents[1]


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


def run_cli(*args, cwd):
    """``python -m sklearn_gpulda ARGS`` in a fresh interpreter, importing this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "sklearn_gpulda", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def assert_user_error(result, fragment):
    """Exit status 2 and exactly one line on stderr, holding ``fragment``."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0]


@pytest.fixture(scope="module")
def uci_files(tmp_path_factory, kjv):
    """60 chapters as a UCI docword file and its vocabulary."""
    folder = tmp_path_factory.mktemp("uci")
    docword, vocab = folder / "docword.kjv.txt", folder / "vocab.kjv.txt"
    write_uci(docword, kjv.data[:60], vocab, kjv.feature_names)
    return docword, vocab


@pytest.fixture(scope="module")
def text_file(tmp_path_factory, kjv):
    """Every 20th chapter as a line of text, each with 'said' five times (in every document)."""
    path = tmp_path_factory.mktemp("text") / "chapters.txt"
    lines = ["said said said said said " + line
             for line in chapters_as_text(kjv, range(0, 1189, 20))]
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- parsing

def test_help_lists_the_commands(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("demo", "fit", "topics", "report", "bench"):
        assert command in out


def test_no_command_is_a_one_line_usage_error(capsys):
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "COMMAND" in err and "--help" in err


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_device_argument_accepts(device):
    args = cli.build_parser().parse_args(["demo", "--device", device])
    assert args.device == device


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:x", "tpu:0", "CUDA", "Cpu", " cpu"])
def test_device_argument_rejects(device, capsys):
    assert cli.main(["demo", "--device", device]) == 2
    assert "expected auto, cpu, cuda or cuda:N" in capsys.readouterr().err


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1", "CUDA", "Cuda:0", "gpu",
                                    "cuda:", "cuda:-1", "cpu "])
def test_device_argument_agrees_with_the_estimator(device, kjv):
    try:
        common.parse_device(device)
        cli_accepts = True
    except Exception:
        cli_accepts = False
    model = GPULatentDirichletAllocation(n_components=2, max_iter=1, device=device)
    try:
        model.fit(kjv.data[:5])
        estimator_accepts = True
    except InvalidParameterError:
        estimator_accepts = False
    except RuntimeError:  # a valid GPU device on a machine without a usable GPU
        estimator_accepts = True
    assert cli_accepts == estimator_accepts


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
    assert data.sniff_format(tmp_path / "docword.txt") == "uci"
    assert data.sniff_format(tmp_path / "docword.txt.gz") == "uci"
    assert data.sniff_format(tmp_path / "docs.txt") == "text"


def test_describe_device_names_the_engine():
    assert "NumPy" in common.describe_device("cpu")
    assert "GPU 1" in common.describe_device("cuda:1")


@pytest.mark.parametrize("text, value", [("2", 2), ("0.5", 0.5), ("1.0", 1.0), ("1e-3", 0.001)])
def test_document_frequency_takes_counts_and_fractions(text, value):
    parsed = data.document_frequency(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("option, value", [("--min-df", "0"), ("--max-df", "1.5"),
                                           ("--min-df", "some"), ("--ngram-range", "2,1"),
                                           ("--ngram-range", "1"), ("--max-features", "0")])
def test_text_options_reject_bad_values(option, value, capsys):
    assert cli.main(["fit", "docs.txt", "-k", "2", option, value]) == 2
    assert option in capsys.readouterr().err


# --------------------------------------------------------------------------- demo

def test_demo_on_cpu_reports_device_speed_perplexity_and_topics(capsys, kjv):
    assert cli.main(["demo", "--max-iter", "3", "--device", "cpu", "--n-components", "5"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^device:\s+cpu - NumPy", out, flags=re.MULTILINE)
    assert re.search(r"^fit time:\s+[\d.]+ s for 3 iterations", out, flags=re.MULTILINE)
    assert re.search(r"^throughput:\s+[\d.]+ Mtoken/s", out, flags=re.MULTILINE)
    for label in ("held-out perplexity: ", "document completion: perplexity "):
        perplexity = float(re.search(label + r"([\d.]+)", out).group(1))
        # A fitted model must beat guessing uniformly over the vocabulary.
        assert 1.0 < perplexity < kjv.data.shape[1]
    topics = topic_lines(out)
    assert len(topics) == 5
    vocabulary = set(kjv.feature_names)
    for words in topics:
        assert len(words.split()) == 10
        assert set(words.split()) <= vocabulary


def test_demo_reports_an_unusable_gpu_in_one_line(monkeypatch, capsys):
    import sklearn_gpulda._runtime.device as device_module

    def no_gpu(device):
        raise RuntimeError(f"device={device!r} needs CuPy and a CUDA GPU")

    monkeypatch.setattr(device_module, "resolve_device", no_gpu)
    assert cli.main(["demo", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "demo: error: device='cuda' needs CuPy and a CUDA GPU" in err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- fit

@pytest.mark.parametrize("compressed", [False, True])
def test_fit_uci_saves_a_model_that_transforms_and_names_words(tmp_path, capsys, kjv,
                                                               compressed):
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

    saved = joblib.load(output)
    assert isinstance(saved, Pipeline)
    assert saved[-1].components_.shape == (4, X.shape[1])
    np.testing.assert_array_equal(saved[:-1].get_feature_names_out(), kjv.feature_names)
    theta = saved.transform(X)  # counts pass through the vocabulary step unchanged
    assert theta.shape == (60, 4)
    np.testing.assert_allclose(theta, saved[-1].transform(X))
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-6)


def test_fit_uci_without_vocab_names_words_by_id(tmp_path, capsys, kjv):
    docword = tmp_path / "docword.kjv.txt"
    write_uci(docword, kjv.data[:30])
    status = cli.main(["fit", str(docword), "-k", "3", "--max-iter", "2", "--device", "cpu",
                       "-o", str(tmp_path / "m.joblib"), "--top-words", "4"])
    assert status == 0
    for words in topic_lines(capsys.readouterr().out):
        assert all(re.fullmatch(r"#\d+", w) for w in words.split())
    assert isinstance(joblib.load(tmp_path / "m.joblib"), GPULatentDirichletAllocation)


def test_fit_n_jobs_uses_threads_and_keeps_the_model(tmp_path, capsys, kjv):
    docword = tmp_path / "docword.kjv.txt"
    write_uci(docword, kjv.data[:80])
    models = {}
    for n in ("1", "2", "-1"):
        out = tmp_path / f"m{n}.joblib"
        assert cli.main(["fit", str(docword), "-k", "4", "--max-iter", "3", "--device", "cpu",
                         "--n-jobs", n, "-o", str(out)]) == 0
        models[n] = joblib.load(out)
    assert models["2"].n_jobs == 2 and models["-1"].n_jobs == -1
    for n in ("2", "-1"):
        np.testing.assert_array_equal(models[n].components_, models["1"].components_)
    assert_user_error(run_cli("fit", docword, "-k", "2", "--n-jobs", "0", cwd=tmp_path),
                      "--n-jobs: must not be 0")


def test_fit_text_saves_a_pipeline_for_raw_text(tmp_path, capsys, kjv):
    lines = chapters_as_text(kjv, range(0, 1189, 40))
    docs = tmp_path / "chapters.txt"
    # Blank lines are not documents.
    docs.write_text("\n\n".join(lines) + "\n")
    output = tmp_path / "pipe.joblib"
    status = cli.main(["fit", str(docs), "-k", "3", "--max-iter", "3", "--device", "cpu",
                       "--output", str(output), "--no-progress"])
    assert status == 0
    out = capsys.readouterr().out
    assert "text, one document per line; stop words: English, min_df=2, max_df=0.5" in out
    assert f"{len(lines)} documents" in out
    assert len(topic_lines(out)) == 3

    pipeline = joblib.load(output)
    assert isinstance(pipeline, Pipeline)
    theta = pipeline.transform(lines[:5])
    assert theta.shape == (5, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-6)


def test_fit_without_max_iter_runs_the_estimators_default(tmp_path, text_file, capsys):
    # No --max-iter: the command leaves max_iter=None to the estimator, which sweeps until the
    # training likelihood stops rising (at most the rule's ceiling); the summary line and the
    # saved model say so.
    from sklearn_gpulda._fitting import stopping

    rule = stopping.default_rule()
    assert cli.main(["fit", str(text_file), "-k", "2", "--device", "cpu",
                     "-o", str(tmp_path / "m.joblib"), "--top-words", "0"]) == 0
    out = capsys.readouterr().out
    assert f"2 topics, up to {rule.ceiling} sweeps (stops when converged), device='cpu'" in out
    model = joblib.load(tmp_path / "m.joblib")[-1]
    assert model.max_iter is None and model.n_iter_ in rule.check_points()
    assert model.history_["stopped_by"] in ("tolerance", "ceiling")


def test_fit_text_drops_words_of_most_documents_by_default(tmp_path, text_file):
    common_word = "said"  # in every line of text_file, five times
    assert cli.main(["fit", str(text_file), "-k", "2", "--max-iter", "1", "--device", "cpu",
                     "-o", str(tmp_path / "default.joblib"), "--top-words", "0"]) == 0
    vectorizer = joblib.load(tmp_path / "default.joblib")[0]
    assert common_word not in vectorizer.vocabulary_
    assert (vectorizer.min_df, vectorizer.max_df, vectorizer.stop_words) == (2, 0.5, "english")

    assert cli.main(["fit", str(text_file), "-k", "2", "--max-iter", "1", "--device", "cpu",
                     "-o", str(tmp_path / "kept.joblib"), "--top-words", "0",
                     "--max-df", "1.0"]) == 0
    assert common_word in joblib.load(tmp_path / "kept.joblib")[0].vocabulary_


def test_fit_text_warns_of_documents_left_without_words(tmp_path, text_file, capsys):
    # Two lines whose only words are stop words: after the vectoriser they are empty rows.
    path = tmp_path / "docs.txt"
    path.write_text(text_file.read_text() + "the and of\nit was\n")
    n_lines = len(path.read_text().splitlines())
    assert cli.main(["fit", str(path), "-k", "2", "--max-iter", "2", "--device", "cpu",
                     "-o", str(tmp_path / "m.joblib")]) == 0
    err = capsys.readouterr().err
    assert f"warning: 2 of {n_lines} documents have no word left" in err


def test_fit_text_passes_the_vectoriser_options(tmp_path, text_file, capsys):
    stop = tmp_path / "stop.txt"
    stop.write_text("lord\nunto\n")
    output = tmp_path / "m.joblib"
    assert cli.main(["fit", str(text_file), "-k", "2", "--max-iter", "1", "--device", "cpu",
                     "-o", str(output), "--stop-words", str(stop), "--min-df", "0.1",
                     "--max-df", "50", "--max-features", "300", "--ngram-range", "1,2"]) == 0
    assert "stop words: 2 from " in capsys.readouterr().out
    vectorizer = joblib.load(output)[0]
    assert vectorizer.get_params()["stop_words"] == ["lord", "unto"]
    assert (vectorizer.min_df, vectorizer.max_df, vectorizer.max_features) == (0.1, 50, 300)
    assert vectorizer.ngram_range == (1, 2) and len(vectorizer.vocabulary_) == 300
    assert any(" " in word for word in vectorizer.vocabulary_)  # word pairs were counted
    assert not {"lord", "unto"} & set(vectorizer.vocabulary_)


def test_fit_text_rejects_a_vocab_file(tmp_path, capsys, kjv):
    docs = tmp_path / "chapters.txt"
    docs.write_text("\n".join(chapters_as_text(kjv, range(3))))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(kjv.feature_names))
    status = cli.main(["fit", str(docs), "--format", "text", "--vocab", str(vocab), "-k", "2"])
    assert status == 2
    assert "--vocab applies to UCI input only" in capsys.readouterr().err


def test_fit_uci_rejects_text_options(uci_files, capsys):
    docword, _ = uci_files
    assert cli.main(["fit", str(docword), "-k", "2", "--min-df", "3", "--stop-words", "none"]) == 2
    assert "--stop-words, --min-df apply to text input only" in capsys.readouterr().err


def test_fit_reports_a_missing_input(tmp_path, capsys):
    assert cli.main(["fit", str(tmp_path / "nowhere.txt"), "-k", "2"]) == 2
    assert "input file not found" in capsys.readouterr().err


# --------------------------------------------------------------------------- user errors, as
# a user meets them: a separate process, exit status 2, one line on stderr, nothing fitted.

def test_fit_with_a_vocabulary_of_the_wrong_size(tmp_path, uci_files):
    docword, _ = uci_files
    short = tmp_path / "vocab.txt"
    short.write_text("alpha\nbeta\n")
    result = run_cli("fit", docword, "--vocab", short, "-k", "2", "--device", "cpu", cwd=tmp_path)
    assert_user_error(result, "vocabulary file has 2 words but the docword header says W = ")


def test_fit_uci_format_on_a_text_file(tmp_path, text_file):
    result = run_cli("fit", text_file, "--format", "uci", "-k", "2", "--device", "cpu",
                     cwd=tmp_path)
    assert_user_error(result, "cannot read")
    assert "use --format text" in result.stderr


def test_fit_output_that_is_a_directory_fails_before_fitting(tmp_path, text_file):
    result = run_cli("fit", text_file, "-k", "2", "--device", "cpu", "-o", tmp_path,
                     cwd=tmp_path)
    assert_user_error(result, "is a directory; name a file")
    assert "fitting:" not in result.stdout


def test_fit_output_inside_a_file_fails_before_fitting(tmp_path, text_file):
    result = run_cli("fit", text_file, "-k", "2", "--device", "cpu",
                     "-o", text_file / "model.joblib", cwd=tmp_path)
    assert_user_error(result, "which is a file")
    assert "fitting:" not in result.stdout


def test_fit_device_is_case_sensitive_like_the_estimator(tmp_path, text_file):
    result = run_cli("fit", text_file, "-k", "2", "--device", "CUDA", cwd=tmp_path)
    assert_user_error(result, "expected auto, cpu, cuda or cuda:N (lower case), got 'CUDA'")


def test_fit_text_with_nothing_left_after_the_frequency_limits(tmp_path):
    docs = tmp_path / "docs.txt"
    docs.write_text("alpha beta\ngamma delta\n")  # no word in two documents
    result = run_cli("fit", docs, "-k", "2", "--device", "cpu", cwd=tmp_path)
    assert_user_error(result, "cannot vectorise")
    assert "--min-df 1 --max-df 1.0" in result.stderr


@pytest.mark.parametrize("content, fragment", [
    (b"not a pickle", "cannot load"),
    (None, "holds a list, not a fitted topic model"),
])
def test_topics_of_a_file_that_is_not_a_model(tmp_path, content, fragment):
    path = tmp_path / "model.joblib"
    if content is None:
        joblib.dump([1, 2, 3], path)
    else:
        path.write_bytes(content)
    assert_user_error(run_cli("topics", path, cwd=tmp_path), fragment)


# --------------------------------------------------------------------------- topics, report

def test_text_fit_then_topics_then_report(tmp_path, text_file, kjv):
    model = tmp_path / "chapters.joblib"
    fitted = run_cli("fit", text_file, "-k", "3", "--max-iter", "3", "--device", "cpu",
                     "-o", model, "--top-words", "5", cwd=tmp_path)
    assert fitted.returncode == 0, fitted.stderr
    assert fitted.stderr == ""

    shown = run_cli("topics", model, "--top-words", "5", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "Pipeline(CountVectorizer, GPULatentDirichletAllocation)), 3 topics" in shown.stdout
    # The saved model prints the same topics as the fit did, named by the saved vocabulary.
    assert topic_lines(shown.stdout) == topic_lines(fitted.stdout)
    assert all(set(words.split()) <= set(kjv.feature_names)
               for words in topic_lines(shown.stdout))

    page = tmp_path / "report.html"
    reported = run_cli("report", model, "--data", text_file, "-o", page, cwd=tmp_path)
    assert reported.returncode == 0, reported.stderr
    html = page.read_text(encoding="utf-8")
    assert "NPMI coherence" in html and html.count("<svg") == 2  # map and sizes; no history_
    assert "no training curve" in html


def test_fit_records_a_training_curve_without_changing_the_model(tmp_path, text_file):
    """A command-line fit evaluates every 25 sweeps (curve_every) for the report's curve; the
    model is the estimator's default one, bit for bit, and the page draws the curve."""
    from sklearn_gpulda._cli.commands import curve_every

    assert [curve_every(n) for n in (10, 100, 500, 1000, 4000)] == [25, 25, 25, 50, 200]
    path = tmp_path / "m.joblib"
    assert cli.main(["fit", str(text_file), "-k", "3", "--max-iter", "50", "--device", "cpu",
                     "-o", str(path), "--top-words", "0"]) == 0
    saved = joblib.load(path)
    lda = saved[-1]
    np.testing.assert_array_equal(lda.history_["iteration"], [25, 50])
    assert np.all(np.isfinite(lda.history_["train_loglik"]))
    plain = GPULatentDirichletAllocation(n_components=3, max_iter=50, device="cpu",
                                         random_state=0, n_jobs=-1)
    plain.fit(saved[:-1].transform(text_file.read_text().splitlines()))
    np.testing.assert_array_equal(lda.components_, plain.components_)
    np.testing.assert_array_equal(lda.doc_topic_prior_, plain.doc_topic_prior_)
    assert lda.bound_ == plain.bound_ and lda.n_iter_ == plain.n_iter_ == 50
    page = tmp_path / "r.html"
    assert cli.main(["report", str(path), "--data", str(text_file), "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    # Map, sizes, and a chart per recorded series (log-likelihood, perplexity, priors).
    assert "training log-likelihood per token" in html and html.count("<svg") == 6
    assert '<ol id="docs">' in html  # text --data: the documents of each topic are listed

    assert cli.main(["fit", str(text_file), "-k", "3", "--max-iter", "50", "--device", "cpu",
                     "-o", str(path), "--top-words", "0", "--curve-every", "0"]) == 0
    assert joblib.load(path)[-1].history_["iteration"].size == 0


def test_topics_of_a_model_saved_without_vocabulary(tmp_path, capsys, kjv):
    model = GPULatentDirichletAllocation(n_components=2, max_iter=2, random_state=0,
                                         device="cpu").fit(kjv.data[:40])
    path = tmp_path / "bare.joblib"
    joblib.dump(model, path)
    assert cli.main(["topics", str(path), "--top-words", "3"]) == 0
    out = capsys.readouterr().out
    assert "none saved with the model; words are numbered from 1" in out
    assert all(re.fullmatch(r"#\d+ #\d+ #\d+", words) for words in topic_lines(out))

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(kjv.feature_names) + "\n")
    assert cli.main(["topics", str(path), "--vocab", str(vocab), "--top-words", "3"]) == 0
    words = topic_lines(capsys.readouterr().out)
    assert words and all(set(w.split()) <= set(kjv.feature_names) for w in words)

    vocab.write_text("one\ntwo\n")
    assert cli.main(["topics", str(path), "--vocab", str(vocab)]) == 2
    assert "has 2 words but the model has 3117" in capsys.readouterr().err


def test_topics_of_a_scikit_learn_model(tmp_path, capsys, kjv):
    from sklearn.decomposition import LatentDirichletAllocation

    path = tmp_path / "sk.joblib"
    joblib.dump(LatentDirichletAllocation(n_components=2, max_iter=1).fit(kjv.data[:40]), path)
    assert cli.main(["topics", str(path)]) == 0
    assert len(topic_lines(capsys.readouterr().out)) == 2


def test_uci_model_with_vocabulary_then_topics_and_report(tmp_path, capsys, uci_files, kjv):
    docword, vocab = uci_files
    model = tmp_path / "m.joblib"
    assert cli.main(["fit", str(docword), "--vocab", str(vocab), "-k", "3", "--max-iter", "2",
                     "--device", "cpu", "-o", str(model), "--top-words", "0"]) == 0
    capsys.readouterr()
    assert cli.main(["topics", str(model)]) == 0  # no --vocab: the file carries it
    words = topic_lines(capsys.readouterr().out)
    assert len(words) == 3 and all(set(w.split()) <= set(kjv.feature_names) for w in words)
    page = tmp_path / "r.html"
    assert cli.main(["report", str(model), "--data", str(docword), "-o", str(page),
                     "--title", "KJV <sample>"]) == 0
    html = page.read_text(encoding="utf-8")
    assert "<title>KJV &lt;sample&gt;</title>" in html and "NPMI coherence" in html

    # A text file cannot be turned into this model's counts.
    text = tmp_path / "docs.txt"
    text.write_text("in the beginning\n")
    assert cli.main(["report", str(model), "--data", str(text), "-o", str(page)]) == 2
    assert "not saved with a text vectoriser" in capsys.readouterr().err


def test_report_output_is_checked_before_loading(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "missing.joblib"), "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- progress

def test_fit_shows_progress_through_a_fit_callback(tmp_path, capsys, monkeypatch, text_file):
    original = GPULatentDirichletAllocation.fit

    def fit_with_callback(self, X, y=None, callback=None):
        # Stands in for the per-sweep hook the estimator does not have yet.
        for i in range(1, self.max_iter + 1):
            callback(i, {"seconds": 0.01 * i})
        return original(self, X)

    monkeypatch.setattr(GPULatentDirichletAllocation, "fit", fit_with_callback)
    assert cli.main(["fit", str(text_file), "-k", "2", "--max-iter", "4", "--device", "cpu",
                     "-o", str(tmp_path / "m.joblib"), "--progress"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^sweep 4/4 \[=+\] 100%  100\.00 sweeps/s  [\d.]+ Mtoken/s", err,
                     flags=re.MULTILINE)


def test_fit_progress_draws_from_the_fit_callback(tmp_path, capsys, text_file):
    args = ["fit", str(text_file), "-k", "2", "--max-iter", "2", "--device", "cpu",
            "-o", str(tmp_path / "m.joblib")]
    assert cli.main(args + ["--progress"]) == 0
    captured = capsys.readouterr()
    # The estimator reports each sweep to the display: no verbose evaluation is needed.
    assert "sweep 2/2" in captured.err and "Mtoken/s" in captured.err
    assert "iteration:" not in captured.out
    assert cli.main(args) == 0  # not a terminal: no progress
    captured = capsys.readouterr()
    assert "iteration:" not in captured.out and "sweep" not in captured.err


def test_fit_progress_falls_back_to_verbose_lines_without_a_callback(monkeypatch):
    from sklearn_gpulda._cli import commands

    class NoHook:  # a scikit-learn estimator: fit(X, y=None) only
        max_iter, verbose = 2, 0

        def set_params(self, **params):
            self.__dict__.update(params)

        def fit(self, X, y=None):
            self.fitted_with_verbose = self.verbose
            return self

    model = commands.fit_model(NoHook(), np.ones((2, 2)), progress=True, sweeps=2)
    assert model.fitted_with_verbose == 1


# --------------------------------------------------------------------------- bench

def test_bench_lists_and_runs_scripts(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "_helpers.py").write_text('"""Not a benchmark."""\n')
    (folder / "toy.py").write_text(
        '"""Toy benchmark: records its arguments."""\n'
        "import pathlib, sys\n"
        "pathlib.Path(sys.argv[1]).write_text(' '.join(sys.argv[2:]))\n")
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: folder)

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
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: None)
    assert cli.main(["bench"]) == 2
    assert "source repository" in capsys.readouterr().err
