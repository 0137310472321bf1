"""
Choosing the number of topics and the priors with GridSearchCV
==============================================================

:class:`~sklearn.model_selection.GridSearchCV` clones, fits and scores the estimator like any
scikit-learn transformer. The score here is the held-out log-likelihood per token by document
completion (:func:`sklearn_gpulda.metrics.document_completion`): half of each validation document's
words estimate its topic mixture, the other half are scored. Unlike a score that folds in and
scores the same words, it does not reward topics that merely memorise documents.

The corpus is drawn from the LDA model itself with 8 topics. The search need not land exactly
there: with finitely many documents a few spare topics can still sharpen the predictions, while too
few topics cost visibly more.
"""

import pandas as pd
from sklearn.model_selection import GridSearchCV

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import make_lda_corpus
from sklearn_gpulda.metrics import document_completion

corpus = make_lda_corpus(n_docs=600, n_words=800, n_topics=8, doc_length=80, alpha=0.1,
                         random_state=0)
X = corpus.data


def completion_score(estimator, X, y=None):
    """Held-out log-likelihood per token of ``X`` under the fitted topics (higher is better)."""
    result = document_completion(X, estimator.components_, estimator.doc_topic_prior_,
                                 random_state=0)
    return result.per_token


search = GridSearchCV(
    GPULatentDirichletAllocation(max_iter=40, random_state=0),
    param_grid={"n_components": [4, 8, 16], "doc_topic_prior": [0.05, 0.5]},
    scoring=completion_score,
    cv=3,
)
search.fit(X)

# %%
# One row per setting, best first.
results = pd.DataFrame(search.cv_results_)
columns = ["param_n_components", "param_doc_topic_prior", "mean_test_score", "std_test_score",
           "mean_fit_time"]
with pd.option_context("display.width", 120, "display.precision", 4):
    print(results.sort_values("rank_test_score")[columns].to_string(index=False))
print("best:", search.best_params_)
