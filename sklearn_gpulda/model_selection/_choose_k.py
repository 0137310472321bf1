"""Choosing the number of topics: one fit per K on a training split, each scored on held-out
documents by document completion, with its coherence, fit time and learned priors."""

import math
import time

import numpy as np
from sklearn.base import clone
from sklearn.utils import Bunch, check_random_state

from ..metrics._completion import complete_split, completion_split
from ..metrics._coherence import coherence_pair
from .._runtime.device import parse_device
from ..metrics._checks import as_counts
from ._concurrent import n_workers, run_fits, shared_counts, single_gpu

#: The table's columns, in order.
COLUMNS = ("n_components", "held_out_per_token", "held_out_perplexity", "umass", "npmi",
           "fit_seconds", "n_iter", "doc_topic_prior", "topic_word_prior")


def split_documents(n_docs, test_size, random_state):
    """Sorted ``(train, test)`` row indices: ``test_size`` of the documents (a fraction in
    (0, 1), or a count) drawn at random for testing, at least one on each side."""
    if n_docs < 2:
        raise ValueError(f"choosing K needs at least 2 documents, one to hold out; got {n_docs}")
    if isinstance(test_size, (int, np.integer)) and not isinstance(test_size, bool):
        n_test = int(test_size)
    elif isinstance(test_size, (float, np.floating)) and 0.0 < test_size < 1.0:
        n_test = math.ceil(float(test_size) * n_docs)
    else:
        raise ValueError("test_size must be a fraction in (0, 1) or a number of documents, "
                         f"got {test_size!r}")
    if not 1 <= n_test <= n_docs - 1:
        raise ValueError(f"test_size={test_size!r} holds out {n_test} of {n_docs} documents; "
                         "at least one must be held out and one kept for training")
    order = check_random_state(random_state).permutation(n_docs)
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def _checked_ks(n_components):
    ks = [n_components] if np.isscalar(n_components) else list(n_components)
    if not ks:
        raise ValueError("n_components must list at least one number of topics")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"every n_components must be a positive integer, got {k!r}")
    if len(set(int(k) for k in ks)) != len(ks):
        raise ValueError(f"n_components lists a number of topics twice: {ks}")
    return [int(k) for k in ks]


def _prior_value(prior):
    """A learned prior as one number: the value, or the mean of per-topic values."""
    return float(np.mean(prior))


def _table(rows):
    """A pandas DataFrame of the rows where pandas is installed, else a dict of arrays."""
    columns = {c: np.array([row[c] for row in rows]) for c in COLUMNS}
    try:
        import pandas as pd
    except ImportError:
        return columns
    return pd.DataFrame(columns, columns=list(COLUMNS))


def choose_n_components(X, n_components=(10, 20, 50, 100), *, estimator=None, test_size=0.1,
                        top_n=10, completion_iter=100, completion_device=None,
                        random_state=0, keep_models=False, n_jobs=None):
    """Fit a topic model for each number of topics and score each on held-out documents.

    The documents of ``X`` are split once at random into a training and a test part. For every
    K, a copy of ``estimator`` with ``n_components=K`` is fitted on the training part and
    scored by what users compare models by:

    - the held-out log-likelihood per token of the test documents by document completion
      (:func:`~sklearn_gpulda.metrics.document_completion`: half of each test document's tokens
      estimate its topic mixture with the topics fixed, the other half are scored; higher is
      better), and its perplexity;
    - the mean UMass and NPMI coherence of the topics' ``top_n`` words, with the training
      documents as reference corpus (:func:`~sklearn_gpulda.metrics.umass_coherence`,
      :func:`~sklearn_gpulda.metrics.npmi_coherence`; higher is better);
    - the fit's wall time and sweeps, and the priors it learned (the mean of per-topic values).

    Held-out likelihood usually keeps rising with K long after the topics stop being useful to
    read, and coherence usually falls: the table shows both so that the choice can weigh them.
    ``best_n_components`` is the K of the highest held-out likelihood.

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_docs, n_words)
        Integer counts (a document-term matrix, e.g. from
        :class:`~sklearn.feature_extraction.text.CountVectorizer`).
    n_components : int or sequence of int, default=(10, 20, 50, 100)
        The numbers of topics to fit, in the order the table lists them.
    estimator : GPULatentDirichletAllocation or None, default=None
        The settings of every fit (cloned; its ``n_components`` is replaced). None means
        ``GPULatentDirichletAllocation(random_state=random_state)``: every default, the GPU
        where there is one.
    test_size : float or int, default=0.1
        The share of documents held out, or their number.
    top_n : int, default=10
        Top words per topic for coherence.
    completion_iter : int, default=100
        Fold-in iterations of document completion.
    completion_device : str or None, default=None
        Where document completion's fold-in runs (see
        :func:`~sklearn_gpulda.metrics.document_completion`). None means where the fits run:
        the estimator's ``device`` (its first GPU when it names several). The GPU's fold-in is
        the host's iteration, equal to it to about 1e-5 per token, and takes a small part of
        the time the host's takes at large K.
    random_state : int, RandomState instance or None, default=0
        Seeds the split and document completion's halves (and the default estimator).
    keep_models : bool, default=False
        Return the fitted models too.
    n_jobs : int or None, default=None
        Fits run at once: None or 1 one after another, -1 all of them. They run in threads;
        on one GPU each has a CUDA stream of its own and all share one copy of the training
        counts on the device, so the GPU runs the kernels of one fit while another does its
        host work. Meant for corpora small enough that a fit leaves the GPU idle part of the
        time and that the fits fit on it together. The table is the same as sequential fits
        give, the models bit for bit, except ``fit_seconds``: each fit's wall time while the
        others ran. Fits over several GPUs run one after another whatever ``n_jobs``.

    Returns
    -------
    result : sklearn.utils.Bunch
        ``table``: a :class:`pandas.DataFrame` with one row per K (a dict of NumPy arrays when
        pandas is not installed) and the columns ``n_components``, ``held_out_per_token``,
        ``held_out_perplexity``, ``umass``, ``npmi``, ``fit_seconds``, ``n_iter``,
        ``doc_topic_prior`` and ``topic_word_prior``; ``best_n_components``; ``train`` and
        ``test``, the row indices of the split; ``models``, K to fitted model, when
        ``keep_models``.

    Raises
    ------
    ValueError
        Counts that are not non-negative, fewer than two documents, a ``test_size`` that leaves
        no document on one side, no test document with two tokens, a K that is not a positive
        integer or is listed twice, or an ``n_jobs`` that is not None, -1 or positive.

    Examples
    --------
    >>> from sklearn_gpulda import GPULatentDirichletAllocation
    >>> from sklearn_gpulda.datasets import load_kjv_chapters
    >>> from sklearn_gpulda.model_selection import choose_n_components
    >>> X = load_kjv_chapters().data[:300]
    >>> base = GPULatentDirichletAllocation(max_iter=30, device="cpu", random_state=0)
    >>> result = choose_n_components(X, [5, 10], estimator=base, test_size=0.2)
    >>> list(result.table["n_components"])
    [5, 10]
    >>> result.best_n_components in (5, 10)
    True
    """
    from ..estimator import GPULatentDirichletAllocation

    ks = _checked_ks(n_components)
    X = as_counts(X)
    train, test = split_documents(X.shape[0], test_size, random_state)
    X_train, X_test = X[train], X[test]
    if estimator is None:
        estimator = GPULatentDirichletAllocation(random_state=random_state)
    seed = check_random_state(random_state).randint(np.iinfo(np.int32).max)
    workers = n_workers(n_jobs, len(ks))
    gpu = single_gpu(estimator) if workers > 1 else None
    X_fit = shared_counts(X_train, estimator, gpu) if workers > 1 else X_train
    n_top = min(top_n, X.shape[1])
    if completion_device is None:
        completion_device = _first_device(estimator.get_params()["device"])
    # One split of the test documents' tokens for every K (document_completion's, seeded).
    split = completion_split(X_test, seed)
    if not split[1].nnz:
        raise ValueError("no test document has a held-out token (every one has < 2 tokens): "
                         "hold out more or longer documents")

    def fit_and_score(k):
        model = clone(estimator).set_params(n_components=k)
        tic = time.perf_counter()
        model.fit(X_fit)
        seconds = time.perf_counter() - tic
        scored = complete_split(split, model.components_, model.doc_topic_prior_,
                                n_iter=completion_iter, device=completion_device)
        umass, npmi = coherence_pair(X_train, model.components_, n_top)
        row = dict(
            n_components=k, held_out_per_token=float(scored.per_token),
            held_out_perplexity=float(scored.perplexity),
            umass=float(np.nanmean(umass)), npmi=float(np.nanmean(npmi)),
            fit_seconds=seconds, n_iter=int(model.n_iter_),
            doc_topic_prior=_prior_value(model.doc_topic_prior_),
            topic_word_prior=_prior_value(model.topic_word_prior_))
        return row, model

    done = run_fits(fit_and_score, ks, workers, gpu)
    rows = [row for row, _ in done]
    models = {k: model for k, (_, model) in zip(ks, done)} if keep_models else {}
    best = best_n_components(rows)
    result = Bunch(table=_table(rows), best_n_components=best, train=train, test=test)
    if keep_models:
        result.models = models
    return result


def _first_device(device):
    """``device`` of a fit as one device: the first GPU of a list of several."""
    kind, indices = parse_device(device)
    return f"cuda:{indices[0]}" if indices else kind


def best_n_components(rows):
    """The K of the highest held-out likelihood among :func:`table_rows`' rows."""
    return max(rows, key=lambda row: row["held_out_per_token"])["n_components"]


def table_rows(table):
    """The rows of a table :func:`choose_n_components` returned (a DataFrame or a dict of
    arrays), as dicts of plain Python numbers."""
    missing = [c for c in COLUMNS if c not in table]
    if missing:
        raise ValueError("expected the table of choose_n_components; it lacks the column(s) "
                         + ", ".join(missing))
    columns = {c: np.asarray(table[c]) for c in COLUMNS}
    n = len(columns[COLUMNS[0]])
    return [{c: columns[c][i].item() for c in COLUMNS} for i in range(n)]
