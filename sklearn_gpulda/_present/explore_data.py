"""The numbers behind the report's interactive explorer, computed once in Python.

The page's script only sorts and draws: everything it shows is prepared here and embedded as
one JSON document, so the page needs no network and no numerical code of its own.

Relevance (Sievert and Shirley, 2014) ranks a topic's words by
``lambda * log p(w|t) + (1 - lambda) * log(p(w|t) / p(w))``. Shipping every word of every topic
would make the page as large as the model, so each topic ships a fixed candidate set: the union
of its top ``n_terms`` words at each lambda of the slider's grid (0, 0.05, ..., 1). The slider
moves on that grid, so the ranking the page computes from the candidates is exactly the ranking
over the whole vocabulary at every position it can take. (The union of the top words at the two
extremes alone would not do: a word that is second-best under both can lead at lambda = 0.5.)
On 20 Newsgroups with 10 topics the union is about 2.5 times ``n_terms`` per topic.
"""

import numpy as np

from ..metrics import topic_word_distribution

#: Positions of the lambda slider; the page's slider uses the same step.
LAMBDA_STEP = 0.05
LAMBDA_GRID = np.round(np.arange(0.0, 1.0 + LAMBDA_STEP / 2, LAMBDA_STEP), 10)
#: Lambda the page opens at; the user study of Sievert and Shirley found 0.6 best.
DEFAULT_LAMBDA = 0.6
#: A word is searchable when it is among the top SEARCH_DEPTH words of some topic.
SEARCH_DEPTH = 200
#: Topics listed per searched word.
SEARCH_TOPICS = 5
#: Characters of a document shown; the rest is cut with an ellipsis.
TEXT_CHARS = 400


def relevance(log_phi, log_lift, lam):
    """Relevance of words: ``lam * log p(w|t) + (1 - lam) * log lift``."""
    return lam * log_phi + (1.0 - lam) * log_lift


def term_candidates(phi_row, log_pw, n_terms):
    """Indices of the words that are among the top ``n_terms`` at some lambda of the grid."""
    n_terms = min(n_terms, phi_row.size)
    with np.errstate(divide="ignore"):
        log_phi = np.log(phi_row)
    log_lift = log_phi - log_pw
    chosen = set()
    for lam in LAMBDA_GRID:
        score = relevance(log_phi, log_lift, lam)
        top = np.argpartition(-score, n_terms - 1)[:n_terms]
        chosen.update(top.tolist())
    return np.array(sorted(chosen), dtype=np.int64)


def _word_ranks(phi):
    """Rank (1 = most probable) of every word in every topic, shape (n_topics, n_words)."""
    order = np.argsort(-phi, axis=1, kind="stable")
    ranks = np.empty_like(order)
    rows = np.arange(phi.shape[0])[:, None]
    ranks[rows, order] = np.arange(1, phi.shape[1] + 1)
    return ranks


def _truncate(text, limit=TEXT_CHARS):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "\u2026"


def explorer_data(components, vocab, shares, xy, *, term_frequency=None, n_tokens=None,
                  doc_topic=None, texts=None, n_terms=30, n_docs=5):
    """The JSON-ready dict the page's script reads.

    Parameters
    ----------
    components : ndarray of shape (n_topics, n_words)
    vocab : list of str of length n_words
    shares : ndarray of shape (n_topics,)
        Each topic's share of the tokens.
    xy : ndarray of shape (n_topics, 2)
        Map coordinates.
    term_frequency : ndarray of shape (n_words,) or None
        Token counts of the reference corpus; None estimates them from the model.
    n_tokens : float or None
        Tokens the frequencies describe (the corpus's, or the training tokens).
    doc_topic : ndarray of shape (n_docs, n_topics) or None
        Document loadings, with ``texts``.
    texts : sequence of str or None
        The documents' raw text, one per row of ``doc_topic``.
    n_terms : int
        Bars per topic.
    n_docs : int
        Documents listed per topic.
    """
    phi = topic_word_distribution(components)
    n_topics, n_words = phi.shape
    total = float(n_tokens) if n_tokens else 1.0
    # Per topic, the estimated count of each word in it (pyLDAvis's red bar): p(w|t) times
    # the topic's tokens. The overall counts are the corpus's when given; otherwise the sum of
    # those estimates, whose ratio is then the model's marginal p(w).
    in_topic = phi * (shares * total)[:, None]
    overall = (np.asarray(term_frequency, dtype=np.float64) if term_frequency is not None
               else in_topic.sum(axis=0))
    pw = overall / max(overall.sum(), 1e-300)
    with np.errstate(divide="ignore"):
        log_pw = np.log(np.where(pw > 0, pw, phi.mean(axis=0)))  # unseen words: the model's
    topics, used = [], set()
    for k in range(n_topics):
        cand = term_candidates(phi[k], log_pw, n_terms)
        used.update(cand.tolist())
        topics.append(cand)
    ranks = _word_ranks(phi)
    best = ranks.min(axis=0)
    searchable = np.flatnonzero(best <= SEARCH_DEPTH)
    used.update(searchable.tolist())
    words = np.array(sorted(used), dtype=np.int64)
    local = {int(w): i for i, w in enumerate(words)}

    out_topics = []
    for k, cand in enumerate(topics):
        out_topics.append({
            "id": k,
            "share": round(float(shares[k]), 6),
            "x": round(float(xy[k, 0]), 6), "y": round(float(xy[k, 1]), 6),
            # Parallel lists over the candidates: word (index into "words"), log p(w|t), and
            # the estimated count of the word in the topic.
            "w": [local[int(w)] for w in cand],
            "lp": [round(float(v), 5) for v in np.log(np.maximum(phi[k, cand], 1e-300))],
            "n": [round(float(v), 2) for v in np.minimum(in_topic[k, cand], overall[cand])],
        })
    search = {}
    for w in searchable:
        order = np.argsort(ranks[:, w], kind="stable")[:SEARCH_TOPICS]
        search[local[int(w)]] = [[int(k), int(ranks[k, w])] for k in order
                                 if ranks[k, w] <= SEARCH_DEPTH]
    data = {
        "words": [str(vocab[w]) for w in words],
        "logpw": [round(float(log_pw[w]), 5) for w in words],
        "freq": [round(float(overall[w]), 2) for w in words],
        "topics": out_topics,
        "search": search,
        "searchDepth": SEARCH_DEPTH,
        "nTerms": int(min(n_terms, n_words)),
        "lambdaStep": LAMBDA_STEP,
        "lambda": DEFAULT_LAMBDA,
        "measured": term_frequency is not None,
        "docs": None,
    }
    if doc_topic is not None and texts is not None:
        data["docs"] = _top_documents(doc_topic, texts, n_docs)
    return data


def _top_documents(doc_topic, texts, n_docs):
    """Per topic, the documents with the largest share of it; texts stored once each."""
    n_docs = min(n_docs, doc_topic.shape[0])
    lists, kept = [], {}
    for k in range(doc_topic.shape[1]):
        top = np.argsort(-doc_topic[:, k], kind="stable")[:n_docs]
        lists.append([[kept.setdefault(int(d), len(kept)), round(float(doc_topic[d, k]), 4)]
                      for d in top])
    order = sorted(kept, key=kept.get)
    return {"rows": order, "texts": [_truncate(texts[d]) for d in order], "top": lists}


def lead_words(data, k, n=2, lam=DEFAULT_LAMBDA):
    """Topic ``k``'s ``n`` most relevant words at ``lam``, from the dict of
    :func:`explorer_data` (the page ranks the same way)."""
    topic = data["topics"][k]
    lp = np.asarray(topic["lp"])
    lpw = np.asarray([data["logpw"][w] for w in topic["w"]])
    order = np.lexsort((topic["w"], -relevance(lp, lp - lpw, lam)))
    return [data["words"][topic["w"][i]] for i in order[:n]]
