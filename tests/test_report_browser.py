"""The report's explorer in headless Chromium: it loads offline and clean, the lambda slider
reorders the bars, topics and the word search respond, and the map's labels never overlap.

Skipped where Playwright or a Chromium binary is missing (CI installs both: ``.ci/run``).
Playwright drives the system's Chromium; it never downloads a browser.
"""

import os
import pathlib
import shutil

import numpy as np
import pytest
from sklearn.decomposition import LatentDirichletAllocation

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import make_lda_corpus
from sklearn_gpulda.report import write_report

#: Set by CI (.ci/run): a missing browser or Playwright fails these tests instead of skipping.
REQUIRED = bool(os.environ.get("SKLEARN_GPULDA_REQUIRE_BROWSER"))


def _unavailable(reason):
    if REQUIRED:
        pytest.fail(f"{reason}, and SKLEARN_GPULDA_REQUIRE_BROWSER is set", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


try:
    from playwright import sync_api
except ImportError:
    _unavailable("playwright is not installed")

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM = next(filter(None, map(shutil.which, _NAMES)), None)
if CHROMIUM is None:
    _unavailable("no Chromium or Chrome on PATH")

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
NEWSGROUPS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "20newsgroups_bydate"


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        except Exception as exc:  # a binary that cannot start here (no shared libraries, ...)
            _unavailable(f"Chromium does not start: {exc}")
        yield chromium
        chromium.close()


class Opened:
    """A report opened in a fresh page, with every console message and request recorded."""

    def __init__(self, browser, path):
        self.page = browser.new_page(viewport={"width": 1280, "height": 1000})
        self.messages, self.requests = [], []
        self.page.on("console", lambda m: self.messages.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.messages.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = pathlib.Path(path).resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("html[data-explorer-ready]", timeout=20_000)

    def bars(self):
        return self.page.eval_on_selector_all("#bars .term", "els => els.map(e => e.textContent)")

    def label_boxes(self):
        return self.page.eval_on_selector_all(
            "#topic-map text.maplabel",
            "els => els.map(e => { const r = e.getBoundingClientRect();"
            " return [e.textContent, r.left, r.top, r.right, r.bottom]; })")


def clustered_corpus():
    """Ten topics fitted to a corpus of three: several fitted topics are near copies."""
    corpus = make_lda_corpus(n_docs=300, n_words=400, n_topics=3, doc_length=50, beta=0.1,
                             random_state=0)
    model = GPULatentDirichletAllocation(n_components=10, max_iter=20, random_state=0,
                                         device="cpu").fit(corpus.data)
    return model, corpus


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    model, corpus = clustered_corpus()
    texts = [f"document {d} <script>window.injected = 1</script> & more"
             for d in range(corpus.data.shape[0])]
    return write_report(model, tmp_path_factory.mktemp("r") / "r.html", corpus.data,
                        feature_names=corpus.feature_names, texts=texts)


def assert_no_overlap(boxes, pad=0.5):
    for i, (name_a, *a) in enumerate(boxes):
        for name_b, *b in boxes[i + 1:]:
            apart = (a[2] <= b[0] + pad or b[2] <= a[0] + pad or
                     a[3] <= b[1] + pad or b[3] <= a[1] + pad)
            assert apart, f"labels {name_a!r} {a} and {name_b!r} {b} overlap"


def test_page_loads_offline_without_console_messages(browser, report):
    opened = Opened(browser, report)
    assert opened.messages == []
    assert opened.requests == [opened.url]  # the file itself, nothing else
    assert len(opened.bars()) == 30
    # Texts are shown as text: the markup in them is neither parsed nor run.
    docs = opened.page.inner_text("#docs")
    assert "<script>window.injected = 1</script>" in docs
    assert opened.page.evaluate("window.injected") is None


def test_lambda_slider_reorders_the_bars(browser, report):
    opened = Opened(browser, report)
    slider = opened.page.locator("#lambda")
    slider.fill("1")
    by_probability = opened.bars()
    slider.fill("0")
    by_lift = opened.bars()
    assert by_probability != by_lift
    assert opened.page.inner_text("#lambda-value") == "0.00"
    # At lambda = 1 the bars are in order of p(w|t): the model's own top words lead.
    slider.fill("1")
    assert opened.bars() == by_probability
    assert opened.messages == []


def test_clicking_a_topic_changes_the_bars(browser, report):
    opened = Opened(browser, report)
    first = opened.bars()
    selected = opened.page.get_attribute("#topic-list li.sel", "data-topic")
    other = "0" if selected != "0" else "1"
    opened.page.click(f"#topic-list li[data-topic='{other}']")
    assert opened.page.get_attribute("#topic-list li.sel", "data-topic") == other
    assert opened.bars() != first
    assert opened.page.inner_text("#topic-title").startswith(f"Topic {other} ")
    # And from the map: a click on a circle selects its topic.
    opened.page.click(f"#topic-map circle[data-topic='{selected}']", force=True)
    assert opened.bars() == first


def test_word_search_lists_and_highlights_topics(browser, report):
    opened = Opened(browser, report)
    word = opened.bars()[0]
    opened.page.fill("#word-search", word)
    hits = opened.page.eval_on_selector_all("#search-results button",
                                            "els => els.map(e => e.dataset.hitTopic)")
    assert hits and hits[0] is not None
    highlighted = opened.page.eval_on_selector_all("#topic-map circle.hit",
                                                   "els => els.map(e => e.dataset.topic)")
    assert set(highlighted) == set(hits)
    opened.page.click("#search-results button")
    assert opened.page.get_attribute("#topic-list li.sel", "data-topic") == hits[0]
    opened.page.fill("#word-search", "nosuchword")
    assert "among its top" in opened.page.inner_text("#search-results")
    assert opened.messages == []


def test_map_labels_do_not_overlap_on_clustered_topics(browser, report, tmp_path):
    opened = Opened(browser, report)
    boxes = opened.label_boxes()
    assert len(boxes) == 10
    assert_no_overlap(boxes)
    opened.page.locator("#topic-map").screenshot(path=tmp_path / "map.png")
    assert (tmp_path / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_map_labels_move_off_coincident_topics(browser, tmp_path):
    """Twelve topics in three groups of near copies: the map has three points, so labels
    must leave their circles (with leader lines) to stay apart."""
    corpus = make_lda_corpus(n_docs=200, n_words=300, n_topics=3, doc_length=40, beta=0.1,
                             random_state=0)
    model = LatentDirichletAllocation(n_components=12, max_iter=2, random_state=0).fit(
        corpus.data)
    base = corpus.topic_word[np.arange(12) % 3]
    model.components_ = 1000 * base * np.random.default_rng(0).uniform(0.97, 1.03, base.shape)
    path = write_report(model, tmp_path / "dup.html", corpus.data,
                        feature_names=corpus.feature_names)
    opened = Opened(browser, path)
    assert opened.messages == []
    assert_no_overlap(opened.label_boxes())
    assert opened.page.locator("#topic-map g.leaders line").count() >= 9
    # Every label stays inside the drawn map (the viewBox grew to hold them).
    svg = opened.page.eval_on_selector("#topic-map", "e => { const r = e.getBoundingClientRect();"
                                       " return [r.left, r.top, r.right, r.bottom]; }")
    for _, left, top, right, bottom in opened.label_boxes():
        assert svg[0] <= left and right <= svg[2] and svg[1] <= top and bottom <= svg[3]


@pytest.mark.skipif(not (NEWSGROUPS / "docword.20news.txt.gz").exists(),
                    reason="20 Newsgroups is not in ../shared/data")
def test_map_labels_do_not_overlap_on_20_newsgroups(browser, tmp_path):
    from sklearn_gpulda._cli.data import load_uci

    X, names = load_uci(NEWSGROUPS / "docword.20news.txt.gz", NEWSGROUPS / "vocab.20news.txt")
    X = X[::4]
    model = GPULatentDirichletAllocation(n_components=10, max_iter=20, random_state=0,
                                         device="cpu", n_jobs=-1).fit(X)
    path = write_report(model, tmp_path / "ng.html", X, feature_names=names)
    opened = Opened(browser, path)
    assert opened.messages == []
    assert_no_overlap(opened.label_boxes())
