"""Pictures of a fitted topic model: a one-page HTML report and the inputs of pyLDAvis.

- :func:`write_report` writes one self-contained HTML file (its script and style inline; no
  script, image or font fetched from anywhere): an explorer of the topics (map, relevance-ranked
  term bars with a lambda slider, word search, the documents of each topic), the training
  curve, the topics' sizes and their top words with coherence; ``python -m sklearn_gpulda
  report`` calls it;
- :func:`topic_map` places the topics in two dimensions by multidimensional scaling of the
  distances between their word distributions, as LDAvis does;
- :func:`pyldavis_data` gathers the arguments of :func:`pyLDAvis.prepare`.

Every function takes this package's estimator, scikit-learn's
:class:`~sklearn.decomposition.LatentDirichletAllocation`, or a
:class:`~sklearn.pipeline.Pipeline` ending in either (as the command line saves them); a pipeline
supplies the vocabulary, and its earlier steps turn raw documents into counts.
"""

import datetime
import numbers
from html import escape
from pathlib import Path

import numpy as np

from . import __version__
from ._present import explore_data as _explore_data
from ._present import explore_page as _explore_page
from ._present import svg as _svg
from ._present.topic_layout import spread_map
from .metrics import npmi_coherence, top_words, topic_word_distribution
from .metrics._checks import as_counts
from .model_selection import k_section, table_rows

__all__ = ["topic_map", "pyldavis_data", "write_report"]

#: Top words whose co-occurrence the report's coherence column scores.
COHERENCE_TOP_N = 10

#: Labels of the per-sweep series of ``history_`` the report knows; others keep their key.
HISTORY_LABELS = {
    "train_loglik": "training log-likelihood per token",
    "train_perplexity": "training perplexity",
}


def _unpack(model):
    """``(topic model, preprocessing pipeline or None, vocabulary or None)`` of ``model``."""
    preprocess = None
    if hasattr(model, "steps"):
        preprocess = model[:-1] if len(model.steps) > 1 else None
        model = model.steps[-1][1]
    if not hasattr(model, "components_"):
        raise ValueError(
            f"expected a fitted topic model with components_ (or a Pipeline ending in one), got "
            f"{type(model).__name__}"
        )
    names = getattr(model, "feature_names_in_", None)
    if preprocess is not None:
        try:
            names = preprocess.get_feature_names_out()
        except (AttributeError, ValueError, TypeError):
            names = None  # a step that cannot name its outputs: fall back to column numbers
    return model, preprocess, names


def _vocabulary(lda, names, feature_names):
    if feature_names is not None:
        names = feature_names
    if names is None:
        return None
    names = np.asarray(names, dtype=object)
    if names.shape != (lda.components_.shape[1],):
        raise ValueError(f"the vocabulary has {names.size} words but the model has "
                         f"{lda.components_.shape[1]}")
    return names


def _counts(preprocess, X):
    """``X`` as a count matrix: raw documents go through the pipeline's first steps."""
    if preprocess is not None and not _is_matrix(X):
        X = preprocess.transform(X)
    return as_counts(X)


def _is_matrix(X):
    return hasattr(X, "shape") and len(X.shape) == 2


def topic_map(components):
    """Two-dimensional coordinates of the topics, near for topics that use the same words.

    The distances between the topics' word distributions (Hellinger distance,
    ``sqrt(1 - sum_v sqrt(p_v q_v))``, a metric between distributions computed for all pairs by
    one matrix product) are embedded in the plane by classical multidimensional scaling
    (principal coordinates), the method of LDAvis, which uses the Jensen-Shannon divergence.

    Parameters
    ----------
    components : array-like of shape (n_topics, n_words)
        Non-negative topic-word weights (``components_``); rows are normalised here.

    Returns
    -------
    coordinates : ndarray of shape (n_topics, 2)
        Centred; the first axis explains the most variance. Signs are fixed so that each axis's
        largest absolute coordinate is positive, so the map is the same on every run.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_gpulda.report import topic_map
    >>> xy = topic_map([[5, 5, 0, 0], [4, 6, 0, 0], [0, 0, 5, 5]])
    >>> bool(np.hypot(*(xy[0] - xy[1])) < np.hypot(*(xy[0] - xy[2])))
    True
    """
    roots = np.sqrt(topic_word_distribution(components))
    affinity = np.clip(roots @ roots.T, 0.0, 1.0)
    squared = 1.0 - affinity  # squared Hellinger distances
    n = squared.shape[0]
    centring = np.eye(n) - 1.0 / n
    gram = -0.5 * centring @ squared @ centring
    values, vectors = np.linalg.eigh((gram + gram.T) / 2)
    order = np.argsort(values)[::-1][:2]
    coords = np.zeros((n, 2))
    for axis, j in enumerate(order):
        coords[:, axis] = vectors[:, j] * np.sqrt(max(values[j], 0.0))
        if coords[np.argmax(np.abs(coords[:, axis])), axis] < 0:
            coords[:, axis] *= -1
    return coords


def pyldavis_data(model, X, feature_names=None):
    """The arguments of :func:`pyLDAvis.prepare` for a fitted model and its training corpus.

    ``pyLDAvis.prepare(**pyldavis_data(model, X))`` gives LDAvis's interactive view.
    pyLDAvis is not needed to call this function.

    Parameters
    ----------
    model : estimator or Pipeline
        A fitted topic model (this package's or scikit-learn's), or a pipeline ending in one.
    X : sparse matrix, array-like or iterable of str
        The training corpus as counts of shape (n_docs, n_words), or raw documents when
        ``model`` is a pipeline that vectorises them. Its word frequencies and document lengths
        size LDAvis's bars and circles, so pass the corpus the model was fitted on.
    feature_names : array-like of str of shape (n_words,) or None, default=None
        The vocabulary; None takes it from the pipeline or ``feature_names_in_``, and failing
        those names words by their column number.

    Returns
    -------
    data : dict
        ``topic_term_dists`` (n_topics, n_words), rows sum to 1; ``doc_topic_dists``
        (n_docs, n_topics), rows sum to 1, from ``transform``; ``doc_lengths`` (n_docs,) and
        ``term_frequency`` (n_words,), token counts of ``X``; ``vocab``, a list of n_words str.
        pyLDAvis numbers topics from 1 and sorts them by size; pass ``start_index=0,
        sort_topics=False`` to ``prepare`` as well to keep this package's topic numbers.

    Examples
    --------
    >>> from sklearn_gpulda import GPULatentDirichletAllocation
    >>> from sklearn_gpulda.datasets import load_kjv_chapters
    >>> from sklearn_gpulda.report import pyldavis_data
    >>> kjv = load_kjv_chapters()
    >>> lda = GPULatentDirichletAllocation(n_components=4, max_iter=5, random_state=0,
    ...                                    device="cpu").fit(kjv.data[:100])
    >>> data = pyldavis_data(lda, kjv.data[:100], kjv.feature_names)
    >>> data["topic_term_dists"].shape, data["doc_topic_dists"].shape, data["vocab"][:2]
    ((4, 3117), (100, 4), ['aaron', 'abednego'])
    """
    lda, preprocess, names = _unpack(model)
    names = _vocabulary(lda, names, feature_names)
    counts = _counts(preprocess, X)
    n_words = lda.components_.shape[1]
    if counts.shape[1] != n_words:
        raise ValueError(f"X has {counts.shape[1]} columns (words) but the model has {n_words}")
    doc_topic = np.asarray(lda.transform(counts), dtype=np.float64)
    doc_topic /= doc_topic.sum(axis=1, keepdims=True)  # exact sums in float64 for the check
    vocab = [str(w) for w in names] if names is not None else [str(v) for v in range(n_words)]
    return {
        "topic_term_dists": topic_word_distribution(lda.components_),
        "doc_topic_dists": doc_topic,
        "doc_lengths": np.asarray(counts.sum(axis=1)).ravel(),
        "vocab": vocab,
        "term_frequency": np.asarray(counts.sum(axis=0)).ravel(),
    }


def _topic_shares(lda, counts, theta=None):
    """Each topic's share of the tokens, and how it was measured; ``theta`` is
    ``lda.transform(counts)`` when already computed."""
    if counts is not None:
        if theta is None:
            theta = np.asarray(lda.transform(counts), dtype=np.float64)
        weight = theta.T @ np.asarray(counts.sum(axis=1)).ravel()
        how = "share of the corpus's tokens, from transform weighted by document length"
    else:
        prior = float(getattr(lda, "topic_word_prior_", 0.0))
        weight = np.clip(np.asarray(lda.components_, dtype=np.float64) - prior, 0, None).sum(1)
        how = "share of the training tokens assigned to each topic (components_ less the prior)"
    total = weight.sum()
    return (weight / total if total > 0 else np.full(weight.shape, 1 / weight.size)), how


def _history(model):
    """``(iterations, [(label, values)], caption)`` from ``history_``, or a note why not."""
    history = getattr(model, "history_", None)
    if history is None or (isinstance(history, dict) and "iteration" in history
                           and not np.size(history["iteration"])):
        return None, ("This model carries no per-sweep record (its <code>history_</code> "
                      "attribute is missing or empty: a fit records one when it evaluates, with "
                      "<code>evaluate_every</code> &gt; 0 or <code>verbose</code>), so there is "
                      "no training curve to draw.")
    try:
        iteration = np.asarray(history["iteration"], dtype=float)
        # Text entries (the stop reason) are not series.
        series = [(key, np.asarray(values, dtype=float)) for key, values in history.items()
                  if key not in ("iteration", "seconds") and not isinstance(values, str)]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None, ("<code>history_</code> is not a dict of numeric arrays with an "
                      "'iteration' entry; no training curve drawn.")
    charts = []
    for key, values in series:
        if values.shape != iteration.shape:
            continue
        keep = np.isfinite(values) & np.isfinite(iteration)  # NaN: a sweep not evaluated
        if keep.sum() >= 2:
            label = HISTORY_LABELS.get(key, key)
            charts.append(_svg.line_chart(iteration[keep], values[keep], xlabel="sweep",
                                          ylabel=label))
    if not charts:
        return None, "<code>history_</code> holds fewer than two points of any series."
    caption = f"{int(iteration.size)} recorded sweeps."
    seconds = np.asarray(history.get("seconds", []), dtype=float)
    if seconds.size and np.isfinite(seconds[-1]) and seconds[-1] > 0:
        caption = (f"{int(iteration[-1])} sweeps in {seconds[-1]:.2f} s "
                   f"({iteration[-1] / seconds[-1]:.1f} sweeps/s).")
    return charts, caption


def _facts(lda, counts, n_words):
    rows = [("model", type(lda).__name__), ("topics", lda.components_.shape[0]),
            ("vocabulary", f"{n_words:,} words")]
    for attribute, label, fmt in (
        ("device_", "trained on", "{}"), ("n_iter_", "passes over the data", "{}"),
        ("fit_time_", "fit time", "{:.2f} s"), ("n_tokens_", "training tokens", "{:,.0f}"),
        ("topic_word_prior_", "topic-word prior", "{:.4g}"),
        ("bound_", "training perplexity (bound_)", "{:.1f}"),
    ):
        value = getattr(lda, attribute, None)
        if isinstance(value, (numbers.Number, str)):
            rows.append((label, fmt.format(value)))
    alpha = np.asarray(getattr(lda, "doc_topic_prior_", np.nan), dtype=float)
    rows.append(("document-topic prior", f"{float(alpha):.4g}" if alpha.ndim == 0 else
                 f"per topic, {alpha.min():.3g} to {alpha.max():.3g}"))
    corpus = "none given: sizes from the model, no coherence" if counts is None else (
        f"{counts.shape[0]:,} documents, {counts.sum():,.0f} tokens")
    rows.append(("reference corpus", corpus))
    return "\n".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in rows)


_STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; color: #222;
       max-width: 1180px; margin: 24px auto; padding: 0 16px; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
.note { color: #666; font-size: 0.92em; } .row { display: flex; flex-wrap: wrap; gap: 24px; }
.row > div { flex: 1 1 540px; min-width: 0; max-width: 580px; }
table.facts th { font-weight: 600; padding-right: 24px; }
table { border-collapse: collapse; font-size: 0.92em; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top; }
table.topics td, table.topics th { border-bottom: 1px solid #e6e6e6; padding: 4px 12px 4px 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.best td { font-weight: 600; }
"""


def _explorer(lda, names, counts, theta, shares, texts):
    """The interactive section: its data prepared here, drawn by the page's script."""
    n_topics, vocab_size = lda.components_.shape
    vocab = ([str(w) for w in names] if names is not None
             else [str(v) for v in range(vocab_size)])
    if counts is not None:
        frequency, n_tokens = np.asarray(counts.sum(axis=0)).ravel(), float(counts.sum())
    else:
        frequency = None
        n_tokens = float(getattr(lda, "n_tokens_", 0.0)) or float(
            np.clip(np.asarray(lda.components_) - float(getattr(lda, "topic_word_prior_", 0.0)),
                    0, None).sum())
    xy = spread_map(lda.components_, topic_map(lda.components_))
    data = _explore_data.explorer_data(lda.components_, vocab, shares, xy,
                                       term_frequency=frequency, n_tokens=n_tokens,
                                       doc_topic=theta, texts=texts)
    labels = [" ".join([str(k)] + _explore_data.lead_words(data, k)) for k in range(n_topics)]
    return _explore_page.explorer_html(data, labels)


def _render(lda, names, counts, n_words, title, k_table=None, texts=None):
    n_topics, vocab_size = lda.components_.shape
    words = top_words(lda.components_, names, n_words=min(n_words, vocab_size))
    theta = None if counts is None else np.asarray(lda.transform(counts), dtype=np.float64)
    shares, share_how = _topic_shares(lda, counts, theta)
    coherence = None
    if counts is not None and vocab_size >= 2:
        coherence = npmi_coherence(counts, lda.components_,
                                   top_n=min(COHERENCE_TOP_N, vocab_size))
    labels = [f"topic {k}" for k in range(n_topics)]
    tips = [f"topic {k} ({shares[k]:.1%}): {' '.join(map(str, words[k][:8]))}"
            for k in range(n_topics)]
    explorer = _explorer(lda, names, counts, theta, shares, texts)
    by_size = np.argsort(-shares, kind="stable")
    charts, caption = _history(lda)
    curve = "\n".join(charts or []) + f"<p class='note'>{caption}</p>"

    rows = []
    for k in range(n_topics):
        npmi = "" if coherence is None or np.isnan(coherence[k]) else f"{coherence[k]:.3f}"
        rows.append(f"<tr><td class='num'>{k}</td><td class='num'>{shares[k]:.1%}</td>"
                    f"<td class='num'>{npmi}</td>"
                    f"<td>{escape(' '.join(map(str, words[k])))}</td></tr>")
    coherence_note = (
        f"NPMI coherence of each topic's top {COHERENCE_TOP_N} words in the reference corpus, "
        "from -1 to 1, higher reading more like a theme (Röder et al. 2015)."
        if coherence is not None else "Coherence needs a reference corpus, which was not given.")
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>{_STYLE}{_explore_page.STYLE}</style></head>
<body>
<h1>{escape(title)}</h1>
<p class="note">Written {stamp} by sklearn-gpulda {__version__}. The training perplexity is
the estimator's own (<code>bound_</code>); it is not comparable across libraries.</p>
<table class="facts">
{_facts(lda, counts, vocab_size)}
</table>
{explorer}
<h2>Training curve</h2>
{curve}
{'' if k_table is None else k_section(k_table)}
<h2>Topic sizes</h2>
{_svg.bar_chart([labels[k] for k in by_size], shares[by_size], xlabel=share_how,
                titles=[tips[k] for k in by_size])}
<h2>Top words</h2>
<p class="note">{coherence_note}</p>
<table class="topics">
<tr><th>topic</th><th>size</th><th>NPMI</th><th>top {len(words[0])} words</th></tr>
{chr(10).join(rows)}
</table>
</body></html>
"""


def _check_texts(texts, counts):
    if texts is None:
        return None
    if counts is None:
        raise ValueError("texts= needs X: the documents are ranked by their loadings on X")
    if isinstance(texts, str) or not hasattr(texts, "__len__"):
        raise ValueError("texts must be a sequence of str, one per document of X")
    if len(texts) != counts.shape[0]:
        raise ValueError(f"texts has {len(texts)} entries but X has {counts.shape[0]} documents")
    return texts


def write_report(model, path, X=None, *, feature_names=None, n_words=10, title=None,
                 k_table=None, texts=None):
    """Write a self-contained HTML page describing a fitted topic model.

    The page shows the model's facts; an explorer in which one clicks a topic on a map or in a
    list to see its words as bars ranked by relevance (Sievert and Shirley, 2014) under a
    lambda slider, searches for a word to see the topics where it ranks highest, and reads the
    documents that load most on the topic (with ``texts``); the training curve (from a
    ``history_`` attribute, a dict of per-sweep arrays with an ``'iteration'`` entry, when the
    model has one; otherwise a note says why there is none); the topic sizes; and each topic's
    top words with their NPMI coherence. It loads nothing from the network and needs no
    plotting library: the charts are inline SVG and the script is inline, without libraries.

    The map places the topics by metric multidimensional scaling of the Hellinger distances
    between their word distributions, started from :func:`topic_map`, so that distances on
    the map stay proportional to the fitted distances; the page moves labels off their circles
    (with a leader line) wherever they would overlap. Each topic embeds the union of its top 30
    words at every lambda the slider can take (steps of 0.05), so the page's rankings are exact
    while its size grows with the number of topics, not the vocabulary.

    Parameters
    ----------
    model : estimator or Pipeline
        A fitted topic model (this package's or scikit-learn's), or a pipeline ending in one.
    path : str or path-like
        The HTML file to write; its folder must exist.
    X : sparse matrix, array-like, iterable of str or None, default=None
        Reference corpus: counts, or raw documents for a pipeline that vectorises them. With it,
        topic sizes are measured on it and coherence is computed; without it, sizes come from
        ``components_`` and the coherence column stays empty.
    feature_names : array-like of str of shape (n_words,) or None, default=None
        The vocabulary, when the model does not carry one.
    n_words : int, default=10
        Top words listed per topic.
    title : str or None, default=None
        Page title; None gives "Topic model: K topics".
    k_table : pandas.DataFrame, dict or None, default=None
        The table of :func:`~sklearn_gpulda.model_selection.choose_n_components`: with it, the
        page has a "Choosing K" section (its charts and rows, the best K marked).
    texts : sequence of str or None, default=None
        The raw text of each document of ``X`` (one per row): the explorer lists, for each
        topic, the five documents with the largest share of it, their text shortened to 400
        characters (shown as text, never as markup). Needs ``X``.

    Returns
    -------
    path : pathlib.Path
        The file written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from sklearn_gpulda import GPULatentDirichletAllocation
    >>> from sklearn_gpulda.datasets import load_kjv_chapters
    >>> from sklearn_gpulda.report import write_report
    >>> kjv = load_kjv_chapters()
    >>> lda = GPULatentDirichletAllocation(n_components=4, max_iter=5, random_state=0,
    ...                                    device="cpu").fit(kjv.data[:100])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     page = write_report(lda, pathlib.Path(tmp) / "kjv.html", kjv.data[:100],
    ...                         feature_names=kjv.feature_names)
    ...     "<svg" in page.read_text(encoding="utf-8")
    True
    """
    lda, preprocess, names = _unpack(model)
    names = _vocabulary(lda, names, feature_names)
    if not isinstance(n_words, numbers.Integral) or n_words < 1:
        raise ValueError(f"n_words must be a positive integer, got {n_words!r}")
    counts = None if X is None else _counts(preprocess, X)
    if counts is not None and counts.shape[1] != lda.components_.shape[1]:
        raise ValueError(f"X has {counts.shape[1]} columns (words) but the model has "
                         f"{lda.components_.shape[1]}")
    texts = _check_texts(texts, counts)
    if k_table is not None:
        table_rows(k_table)  # a wrong table is reported before anything is written
    title = title or f"Topic model: {lda.components_.shape[0]} topics"
    path = Path(path)
    path.write_text(_render(lda, names, counts, n_words, title, k_table, texts),
                    encoding="utf-8")
    return path
