"""The HTML report and the pyLDAvis export of ``sklearn_gpulda/report.py``."""

import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from sklearn.decomposition import LatentDirichletAllocation
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.pipeline import make_pipeline

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import load_kjv_chapters
from sklearn_gpulda.metrics import npmi_coherence
from sklearn_gpulda.report import pyldavis_data, topic_map, write_report

N_TOPICS = 6


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters()


@pytest.fixture(scope="module")
def model(kjv):
    return GPULatentDirichletAllocation(n_components=N_TOPICS, max_iter=15, random_state=0,
                                        device="cpu").fit(kjv.data[:300])


class Page(HTMLParser):
    """Tags, attribute values and table rows of an HTML page."""

    def __init__(self, html):
        super().__init__()
        self.tags, self.urls, self.rows, self._row = [], [], [], None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        if tag == "tr":
            self._row = []

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._row is not None and data.strip():
            self._row.append(data.strip())


def with_history(model, history):
    """A copy of ``model`` with a ``history_`` attribute, as the fit loop will record it."""
    import copy

    clone = copy.deepcopy(model)
    clone.history_ = history
    return clone


# --------------------------------------------------------------------------------------------------
# topic map
# --------------------------------------------------------------------------------------------------


def test_topic_map_puts_similar_topics_together():
    rng = np.random.default_rng(0)
    base = rng.dirichlet(np.full(50, 0.1), size=3)
    near = base[0] * 0.9 + base[1] * 0.1
    xy = topic_map(np.vstack([base, near]) * 100)
    assert xy.shape == (4, 2)
    np.testing.assert_allclose(xy.mean(axis=0), 0.0, atol=1e-12)
    d = np.linalg.norm(xy[:, None] - xy[None], axis=2)
    assert d[0, 3] < min(d[0, 1], d[0, 2], d[3, 1], d[3, 2])


def test_topic_map_is_deterministic_and_handles_few_topics():
    phi = np.random.default_rng(1).dirichlet(np.full(30, 0.2), size=5)
    np.testing.assert_array_equal(topic_map(phi), topic_map(phi.copy()))
    for axis in range(2):
        column = topic_map(phi)[:, axis]
        assert column[np.argmax(np.abs(column))] > 0
    np.testing.assert_array_equal(topic_map(phi[:1]), [[0.0, 0.0]])
    two = topic_map(phi[:2])
    assert two[0, 0] == -two[1, 0] and np.all(two[:, 1] == 0)


# --------------------------------------------------------------------------------------------------
# pyLDAvis export
# --------------------------------------------------------------------------------------------------


def test_pyldavis_data_meets_prepare_input_checks(model, kjv):
    X = kjv.data[:300]
    data = pyldavis_data(model, X, kjv.feature_names)
    assert set(data) == {"topic_term_dists", "doc_topic_dists", "doc_lengths", "vocab",
                         "term_frequency"}
    ttd, dtd = data["topic_term_dists"], data["doc_topic_dists"]
    # The checks pyLDAvis.prepare makes before drawing (pyLDAvis/_prepare.py, _input_check).
    assert dtd.shape == (300, N_TOPICS) and ttd.shape == (N_TOPICS, X.shape[1])
    assert len(data["doc_lengths"]) == dtd.shape[0]
    assert len(data["vocab"]) == ttd.shape[1] == len(data["term_frequency"])
    np.testing.assert_allclose(ttd.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(dtd.sum(axis=1), 1.0, atol=1e-12)
    # Values: the model's own distributions and the corpus's counts.
    np.testing.assert_allclose(dtd, model.transform(X), rtol=1e-12)
    np.testing.assert_allclose(ttd, model.components_ / model.components_.sum(1, keepdims=True))
    np.testing.assert_array_equal(data["doc_lengths"], X.sum(axis=1).A1)
    np.testing.assert_array_equal(data["term_frequency"], X.sum(axis=0).A1)
    assert data["vocab"] == list(kjv.feature_names)
    assert all(type(word) is str for word in data["vocab"])


def test_pyldavis_data_of_a_text_pipeline_takes_raw_documents():
    docs = ["apple banana apple", "banana cherry", "cherry apple date", "date date banana"]
    pipeline = make_pipeline(
        CountVectorizer(),
        GPULatentDirichletAllocation(n_components=2, max_iter=5, random_state=0, device="cpu"))
    pipeline.fit(docs)
    data = pyldavis_data(pipeline, docs)
    assert data["vocab"] == ["apple", "banana", "cherry", "date"]
    np.testing.assert_array_equal(data["term_frequency"], [3, 3, 2, 3])
    np.testing.assert_array_equal(data["doc_lengths"], [3, 2, 3, 3])


def test_pyldavis_data_errors(model, kjv):
    with pytest.raises(ValueError, match="X has 100 columns"):
        pyldavis_data(model, kjv.data[:10, :100])
    with pytest.raises(ValueError, match="vocabulary has 2 words but the model has 3117"):
        pyldavis_data(model, kjv.data[:10], ["a", "b"])
    with pytest.raises(ValueError, match="expected a fitted topic model"):
        pyldavis_data(CountVectorizer(), kjv.data[:10])


# --------------------------------------------------------------------------------------------------
# HTML report
# --------------------------------------------------------------------------------------------------


def test_report_with_history_and_corpus(tmp_path, model, kjv):
    iterations = np.arange(1, 16)
    history = {"iteration": iterations, "train_loglik": -8 + np.log(iterations) / 10,
               "seconds": iterations * 0.2}
    path = write_report(with_history(model, history), tmp_path / "r.html", kjv.data[:300],
                        feature_names=kjv.feature_names, n_words=7)
    html = path.read_text(encoding="utf-8")
    page = Page(html)
    assert page.tags.count("svg") == 3  # curve, map, sizes
    assert "15 sweeps in 3.00 s (5.0 sweeps/s)" in html
    assert "training log-likelihood per token" in html
    assert page.urls == []  # self-contained: nothing to fetch
    topic_rows = [row for row in page.rows if row and row[0].isdigit()]
    assert [int(row[0]) for row in topic_rows] == list(range(N_TOPICS))
    npmi = npmi_coherence(kjv.data[:300], model.components_, top_n=10)
    for row, expected in zip(topic_rows, npmi):
        assert float(row[2]) == pytest.approx(expected, abs=5e-4)
        assert len(row[3].split()) == 7
    shares = [float(row[1].rstrip("%")) for row in topic_rows]
    assert sum(shares) == pytest.approx(100, abs=0.1 * N_TOPICS)


def test_report_without_history_or_corpus(tmp_path, model):
    html = write_report(model, tmp_path / "r.html").read_text(encoding="utf-8")
    assert Page(html).tags.count("svg") == 2
    assert "no per-sweep record" in html and "history_" in html
    assert "Coherence needs a reference corpus" in html
    assert "components_ less the prior" in html


@pytest.mark.parametrize("history", [
    {"train_loglik": [1.0, 2.0]},                        # no iteration entry
    {"iteration": [1, 2, 3], "train_loglik": [1.0, 2.0]},  # lengths differ
    {"iteration": [1], "train_loglik": [1.0]},           # a single point
    [1, 2, 3],                                           # not a dict
])
def test_report_explains_an_unusable_history(tmp_path, model, history):
    html = write_report(with_history(model, history), tmp_path / "r.html").read_text()
    assert Page(html).tags.count("svg") == 2
    assert re.search(r"history_</code> (is not a dict|holds fewer than two)", html)


def test_report_skips_unevaluated_sweeps(tmp_path, model):
    history = {"iteration": [1, 2, 3, 4], "train_loglik": [np.nan, -8.0, np.nan, -7.5]}
    html = write_report(with_history(model, history), tmp_path / "r.html").read_text()
    assert html.count("<polyline") == 1
    assert re.search(r'<polyline points="[\d.,]+ [\d.,]+"', html)  # two points drawn


def test_report_escapes_words_and_takes_scikit_learn_models(tmp_path, kjv):
    X = kjv.data[:100, :40]
    names = [f"<w{i}>" for i in range(40)]
    sk = LatentDirichletAllocation(n_components=3, max_iter=2, random_state=0).fit(X)
    html = write_report(sk, tmp_path / "sk.html", X, feature_names=names).read_text()
    assert not re.search(r"<w\d+>", html) and re.search(r"&lt;w\d+&gt;", html)
    assert "LatentDirichletAllocation" in html


def test_report_checks_its_arguments(tmp_path, model, kjv):
    with pytest.raises(ValueError, match="X has 5 columns"):
        write_report(model, tmp_path / "r.html", kjv.data[:10, :5])
    with pytest.raises(ValueError, match="n_words"):
        write_report(model, tmp_path / "r.html", n_words=0)


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.skipif(_browser() is None, reason="no Chromium or Chrome on PATH")
def test_report_renders_in_a_headless_browser(tmp_path, model, kjv):
    history = {"iteration": np.arange(1, 16), "train_loglik": -8 + np.arange(15) / 30}
    page = write_report(with_history(model, history), tmp_path / "r.html", kjv.data[:300],
                        feature_names=kjv.feature_names)
    shot = tmp_path / "shot.png"
    command = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,3000"]
    dom = subprocess.run(command + ["--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120).stdout
    # What the browser built: the three charts, a circle per topic on the map (the page is
    # tall: the explorer comes first, the curve and the sizes below it).
    assert dom.count("<svg") == 3 and dom.count("<circle") >= N_TOPICS
    subprocess.run(command + [f"--screenshot={shot}", page.as_uri()], capture_output=True,
                   timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plt_image = pytest.importorskip("matplotlib.image")
    pixels = plt_image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (3000, 1280)
    # The charts' blue (#2f6db5) is on screen, so the SVG was drawn, not just parsed.
    blue = np.all(np.abs(pixels - np.array([0x2F, 0x6D, 0xB5]) / 255) < 0.02, axis=2)
    assert blue.sum() > 2000


# --------------------------------------------------------------------------------------------------
# explorer
# --------------------------------------------------------------------------------------------------


def test_explorer_candidates_hold_the_exact_top_words_at_every_slider_position(model, kjv):
    from sklearn_gpulda._present import explore_data as ed

    X = kjv.data[:300]
    phi = model.components_ / model.components_.sum(1, keepdims=True)
    freq = X.sum(axis=0).A1
    data = ed.explorer_data(model.components_, list(kjv.feature_names), np.full(N_TOPICS, 1 / 6),
                            np.zeros((N_TOPICS, 2)), term_frequency=freq, n_tokens=X.sum())
    log_pw = np.log(np.where(freq > 0, freq / freq.sum(), phi.mean(axis=0)))
    for k, topic in enumerate(data["topics"]):
        words = np.array(topic["w"])
        assert len(words) < 5 * data["nTerms"]  # a candidate set, not the vocabulary
        for lam in ed.LAMBDA_GRID:
            score = lam * np.log(phi[k]) + (1 - lam) * (np.log(phi[k]) - log_pw)
            full = set(np.argsort(-score, kind="stable")[:30])
            local = {int(np.flatnonzero(np.array(kjv.feature_names) == data["words"][w])[0])
                     for w in words}
            assert full <= local, (k, lam)


def test_report_embeds_texts_as_inert_json(tmp_path, model, kjv):
    texts = [f"chapter {d} </script><b>bold</b>" for d in range(300)]
    html = write_report(model, tmp_path / "r.html", kjv.data[:300],
                        feature_names=kjv.feature_names, texts=texts).read_text()
    block = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', html,
                      flags=re.S).group(1)
    assert "<" not in block and "\\u003c/script\\u003e" in block
    import json

    data = json.loads(block)
    assert len(data["docs"]["top"]) == N_TOPICS
    assert all(len(top) == 5 for top in data["docs"]["top"])
    assert data["docs"]["texts"][0].endswith("</script><b>bold</b>")
    assert Page(html).urls == []


def test_report_checks_texts(tmp_path, model, kjv):
    with pytest.raises(ValueError, match="texts= needs X"):
        write_report(model, tmp_path / "r.html", texts=["a"])
    with pytest.raises(ValueError, match="texts has 2 entries but X has 300"):
        write_report(model, tmp_path / "r.html", kjv.data[:300], texts=["a", "b"])


def test_spread_map_fits_distances_better_than_classical_scaling(model):
    from sklearn_gpulda._present.topic_layout import hellinger_distances, spread_map

    start = topic_map(model.components_)
    xy = spread_map(model.components_, start)
    target = hellinger_distances(model.components_)

    def stress(points):
        d = np.hypot(*(points[:, None, :] - points[None, :, :]).transpose(2, 0, 1))
        return ((d - target) ** 2).sum()

    assert stress(xy) < stress(start)
    np.testing.assert_allclose(xy.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_array_equal(xy, spread_map(model.components_, start))
