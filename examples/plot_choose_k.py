"""
Choosing the number of topics with one call
===========================================

:func:`sklearn_gpulda.model_selection.choose_n_components` holds out a share of the documents,
fits one model per number of topics on the rest with the estimator's settings, and scores each
on what topic-model users compare: the held-out log-likelihood per token by document completion
(half of each held-out document's words estimate its topic mixture, the other half are scored),
the coherence of each topic's top words, the fit time and the priors each fit learned.

The corpus is drawn from the LDA model with 8 topics. Held-out likelihood climbs steeply up to
the true number and flattens after it; coherence tends to drop once topics start to split. The
same table comes from the command line (``python -m sklearn_gpulda choose-k INPUT -k 4 8 16``)
and goes into a model's HTML report with ``write_report(..., k_table=result.table)``.
"""

import matplotlib

matplotlib.use("Agg")  # no display needed: the figure is drawn for the gallery or a file
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402
from sklearn_gpulda.model_selection import choose_n_components  # noqa: E402

corpus = make_lda_corpus(n_docs=600, n_words=800, n_topics=8, doc_length=80, alpha=0.1,
                         random_state=0)
result = choose_n_components(corpus.data, [2, 4, 8, 16],
                             estimator=GPULatentDirichletAllocation(max_iter=40, random_state=0),
                             test_size=0.2, random_state=0)

# %%
# One row per number of topics.
with pd.option_context("display.width", 140, "display.precision", 4):
    print(result.table.to_string(index=False))
print("best held-out likelihood at K =", result.best_n_components)

# %%
# Held-out likelihood and coherence against K.
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
left.plot(result.table["n_components"], result.table["held_out_per_token"], "o-")
left.set(xlabel="number of topics", ylabel="held-out log-likelihood per token")
right.plot(result.table["n_components"], result.table["npmi"], "o-", color="tab:orange")
right.set(xlabel="number of topics", ylabel="mean NPMI coherence")
fig.tight_layout()
plt.show()
