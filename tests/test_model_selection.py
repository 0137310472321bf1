"""Choosing the number of topics (``sklearn_gpulda.model_selection``): the table, its split,
its errors, its chart, its place in the report and the ``choose-k`` command."""

import sys

import numpy as np
import pytest
from sklearn.base import clone

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import make_lda_corpus
from sklearn_gpulda.model_selection import (COLUMNS, choose_n_components, k_chart,
                                            table_rows)
from sklearn_gpulda.report import write_report

from test_cli import run_cli, write_uci


@pytest.fixture(scope="module")
def corpus():
    # Drawn from 6 known topics: too few topics predict held-out words visibly worse.
    return make_lda_corpus(n_docs=300, n_words=240, n_topics=6, doc_length=80, alpha=0.1,
                           random_state=3)


def _base(**params):
    settings = dict(max_iter=60, device="cpu", random_state=0)
    settings.update(params)
    return GPULatentDirichletAllocation(**settings)


@pytest.fixture(scope="module")
def result(corpus):
    return choose_n_components(corpus.data, [2, 6, 12], estimator=_base(), test_size=0.2,
                               random_state=1, keep_models=True)


def test_table_has_a_row_per_k_in_order(result):
    rows = table_rows(result.table)
    assert [row["n_components"] for row in rows] == [2, 6, 12]
    assert list(result.table.columns) == list(COLUMNS)
    for row in rows:
        assert np.isfinite([row[c] for c in COLUMNS]).all(), row
        assert row["held_out_perplexity"] == pytest.approx(np.exp(-row["held_out_per_token"]))
        assert row["n_iter"] == 60 and row["fit_seconds"] > 0
        assert row["doc_topic_prior"] > 0 and row["topic_word_prior"] > 0


def test_too_few_topics_predict_held_out_words_worse(result):
    by_k = {row["n_components"]: row for row in table_rows(result.table)}
    assert by_k[6]["held_out_per_token"] > by_k[2]["held_out_per_token"] + 0.05
    assert result.best_n_components in (6, 12)
    assert result.best_n_components == max(by_k, key=lambda k: by_k[k]["held_out_per_token"])


def test_split_is_disjoint_and_models_are_fitted_on_the_training_part(result, corpus):
    train, test = result.train, result.test
    assert len(test) == 60 and len(train) == 240
    assert np.intersect1d(train, test).size == 0
    assert np.union1d(train, test).size == corpus.data.shape[0]
    for k, model in result.models.items():
        assert model.components_.shape == (k, corpus.data.shape[1])
        again = _base(n_components=k).fit(corpus.data[train])
        np.testing.assert_array_equal(model.components_, again.components_)


def test_same_random_state_gives_the_same_table(corpus, result):
    again = choose_n_components(corpus.data, [2, 6, 12], estimator=_base(), test_size=0.2,
                                random_state=1)
    for got, want in zip(table_rows(again.table), table_rows(result.table)):
        got.pop("fit_seconds"), want.pop("fit_seconds")
        assert got == want


def _without_times(table):
    rows = table_rows(table)
    for row in rows:
        row.pop("fit_seconds")
    return rows


def test_concurrent_fits_give_the_sequential_table(corpus, result):
    # Threads on the CPU engine: the same table (but the times) and the same models.
    again = choose_n_components(corpus.data, [2, 6, 12], estimator=_base(), test_size=0.2,
                                random_state=1, keep_models=True, n_jobs=-1)
    assert _without_times(again.table) == _without_times(result.table)
    assert again.best_n_components == result.best_n_components
    for k, model in result.models.items():
        np.testing.assert_array_equal(again.models[k].components_, model.components_)


@pytest.mark.parametrize("n_jobs", [0, -2, 1.5, True])
def test_bad_n_jobs_is_named(corpus, n_jobs):
    with pytest.raises(ValueError, match="n_jobs must be"):
        choose_n_components(corpus.data, [2, 3], estimator=_base(max_iter=2), n_jobs=n_jobs)


@pytest.mark.gpu
def test_concurrent_fits_on_one_gpu_give_the_sequential_models(corpus):
    # Each fit on a stream of its own, all reading one device copy of the counts: the models
    # must be those of fits one after another from host counts, bit for bit.
    base = _base(device="cuda", max_iter=40)
    ks = [2, 6, 12, 20]
    one = choose_n_components(corpus.data, ks, estimator=base, test_size=0.2, random_state=1,
                              keep_models=True)
    many = choose_n_components(corpus.data, ks, estimator=base, test_size=0.2, random_state=1,
                               keep_models=True, n_jobs=4)
    assert _without_times(many.table) == _without_times(one.table)
    for k in ks:
        np.testing.assert_array_equal(many.models[k].components_, one.models[k].components_)
        np.testing.assert_array_equal(many.models[k].doc_topic_prior_,
                                      one.models[k].doc_topic_prior_)


@pytest.mark.parametrize("device, expected", [("cpu", "cpu"), ("auto", "auto"),
                                              ("cuda", "cuda"), ("cuda:1,2", "cuda:1"),
                                              ([3, 0], "cuda:3")])
def test_completion_runs_on_the_fits_device_by_default(device, expected):
    from sklearn_gpulda.model_selection._choose_k import _first_device

    assert _first_device(device) == expected


def test_completion_device_reaches_document_completion(corpus, monkeypatch):
    from sklearn_gpulda.model_selection import _choose_k

    seen = []
    real = _choose_k.complete_split

    def recording(*args, **kwargs):
        seen.append(kwargs["device"])
        return real(*args, **kwargs)

    monkeypatch.setattr(_choose_k, "complete_split", recording)
    choose_n_components(corpus.data, [2, 3], estimator=_base(max_iter=5), test_size=0.2)
    choose_n_components(corpus.data, [2], estimator=_base(max_iter=5), test_size=0.2,
                        completion_device="cpu")
    assert seen == ["cpu", "cpu", "cpu"]


def test_a_bad_completion_iter_is_refused(corpus):
    with pytest.raises(ValueError, match="n_iter must be a positive integer"):
        choose_n_components(corpus.data, [2], estimator=_base(max_iter=3), test_size=0.2,
                            completion_iter=0)


def test_every_k_is_scored_as_document_completion_scores_it(corpus):
    # One split of the test tokens serves every K: each score is document_completion's with the
    # seed choose_n_components draws.
    from sklearn.utils import check_random_state

    from sklearn_gpulda.metrics import document_completion

    result = choose_n_components(corpus.data, [2, 5], estimator=_base(max_iter=8),
                                 test_size=0.25, random_state=3, keep_models=True)
    seed = check_random_state(3).randint(np.iinfo(np.int32).max)
    X_test = corpus.data[result.test]
    for k, got in zip([2, 5], result.table["held_out_per_token"]):
        model = result.models[k]
        want = document_completion(X_test, model.components_, model.doc_topic_prior_,
                                   random_state=seed)
        assert got == want.per_token


@pytest.mark.gpu
def test_gpu_fits_are_scored_on_the_gpu_like_the_host(corpus):
    # By default a GPU estimator's models are scored by the GPU's fold-in: the same iteration
    # as the host's, so the table agrees with host scoring of the same models to rounding.
    base = _base(device="cuda", max_iter=40)
    on_gpu = choose_n_components(corpus.data, [2, 6, 12], estimator=base, test_size=0.2,
                                 random_state=1)
    on_host = choose_n_components(corpus.data, [2, 6, 12], estimator=base, test_size=0.2,
                                  random_state=1, completion_device="cpu")
    gpu_rows, host_rows = _without_times(on_gpu.table), _without_times(on_host.table)
    for got, want in zip(gpu_rows, host_rows):
        assert got["held_out_per_token"] == pytest.approx(want["held_out_per_token"], abs=1e-4)
        for column in ("umass", "npmi", "n_iter", "doc_topic_prior", "topic_word_prior"):
            assert got[column] == want[column]
    assert on_gpu.best_n_components == on_host.best_n_components


@pytest.mark.gpu
def test_a_fit_on_its_own_stream_is_the_plain_fit(corpus):
    import cupy

    base = _base(n_components=8, device="cuda", max_iter=30)
    plain = clone(base).fit(corpus.data)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        on_stream = clone(base).fit(corpus.data)
    np.testing.assert_array_equal(on_stream.components_, plain.components_)
    assert stream.done


def test_without_pandas_the_table_is_a_dict_of_arrays(corpus, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    out = choose_n_components(corpus.data[:80], 3, estimator=_base(max_iter=5), test_size=10)
    assert isinstance(out.table, dict) and list(out.table) == list(COLUMNS)
    assert out.table["n_components"].tolist() == [3]


@pytest.mark.parametrize("ks,test_size,match", [
    ([5, 5], 0.1, "twice"),
    ([0, 5], 0.1, "positive integer"),
    ([], 0.1, "at least one"),
    ([2.5], 0.1, "positive integer"),
    ([3], 1.5, "test_size"),
    ([3], 300, "held out"),
])
def test_bad_arguments_are_named(corpus, ks, test_size, match):
    with pytest.raises(ValueError, match=match):
        choose_n_components(corpus.data, ks, estimator=_base(), test_size=test_size)


def test_negative_counts_are_refused(corpus):
    X = corpus.data.astype(np.float64).copy()
    X.data[0] = -1
    with pytest.raises(ValueError, match="non-negative"):
        choose_n_components(X, [3], estimator=_base())


def test_chart_and_report_section(result, corpus, tmp_path):
    charts = k_chart(result.table)
    assert len(charts) == 2 and all(c.startswith("<svg") for c in charts)
    one_row = {c: np.asarray(result.table[c])[:1] for c in COLUMNS}
    assert k_chart(one_row) == []
    best = result.models[result.best_n_components]
    page = write_report(best, tmp_path / "k.html", corpus.data[result.train],
                        k_table=result.table).read_text(encoding="utf-8")
    assert "<h2>Choosing K</h2>" in page and page.count("<tr class='best'>") == 1
    with pytest.raises(ValueError, match="held_out_per_token"):
        write_report(best, tmp_path / "bad.html", k_table={"n_components": [2]})
    assert not (tmp_path / "bad.html").exists()


def test_choose_k_command(tmp_path, corpus):
    docword = tmp_path / "docword.toy.txt"
    write_uci(docword, corpus.data[:150])
    done = run_cli("choose-k", docword, "-k", "2", "6", "--max-iter", "20", "--device", "cpu",
                   "--fits-at-once", "2",
                   "-o", tmp_path / "k.csv", "--report", tmp_path / "k.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "<- best held-out" in done.stdout
    lines = (tmp_path / "k.csv").read_text().splitlines()
    assert lines[0].split(",") == list(COLUMNS) and len(lines) == 3
    assert "Choosing K" in (tmp_path / "k.html").read_text(encoding="utf-8")
    bad = run_cli("choose-k", docword, "-k", "3", "--test-size", "1", cwd=tmp_path)
    assert bad.returncode == 2 and "fraction" in bad.stderr
