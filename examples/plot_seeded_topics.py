"""
Seeded topics: guiding topics with seed words
=============================================

A seed word is a prior, not a start: :func:`sklearn_gpulda.seeded_topic_prior` builds a matrix
``topic_word_prior`` (gensim's ``eta``) that gives each seed word extra pseudo-counts in its
topic, on top of a base prior that is still learned ('auto'). The seeds hold at every sweep, so
a seeded topic keeps its words at convergence, and the topic lands at the index you chose.

The corpus is drawn from the LDA model with 5 known topics. We seed model topic ``k`` with three
distinctive words of true topic ``(k + 3) % 5``, fit with and without the seeds, and show where
the seed words end up. (A matrix prior runs on the CPU engines and the sparse and mini-batched
GPU engines, in batch fits, online learning and on Dask; this example runs on the CPU so that it
runs anywhere.)
"""

import matplotlib

matplotlib.use("Agg")  # no display needed: the figure is drawn for the gallery or a file
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation, seeded_topic_prior  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402

K = 5
corpus = make_lda_corpus(n_docs=300, n_words=500, n_topics=K, doc_length=60, random_state=0)
words = np.asarray(corpus.feature_names)
phi = corpus.topic_word

# %%
# Three distinctive, frequent words of each true topic, seeded into another topic.
seeds = {}
for k in range(K):
    true = (k + 3) % K
    score = phi[true] / phi.sum(axis=0) * (phi[true] > 0.02)
    seeds[k] = words[np.argsort(-score)[:3]].tolist()
print("seeds:", seeds)

prior = seeded_topic_prior(corpus.feature_names, seeds, n_components=K, strength=50.0)
params = dict(n_components=K, max_iter=200, random_state=0, device="cpu")
seeded = GPULatentDirichletAllocation(topic_word_prior=prior, **params).fit(corpus.data)
plain = GPULatentDirichletAllocation(**params).fit(corpus.data)
print(f"learned base prior: {seeded.topic_word_prior_:.4g} "
      f"(+50 on {seeded.topic_word_prior_cells_.nnz} seeded cells)")

# %%
# Each topic's ten top words, seed words in capitals.
for name, model in (("seeded", seeded), ("unseeded", plain)):
    print(name)
    for k, row in enumerate(np.argsort(-model.components_, axis=1)[:, :10]):
        shown = [w.upper() if w in seeds[k] else w for w in words[row]]
        print(f"  topic {k}: {' '.join(shown)}")

# %%
# The rank of each seed word in its seeded topic, with and without the seeds (0 is the top).


def ranks(model):
    order = np.argsort(np.argsort(-model.components_, axis=1), axis=1)
    index = {w: i for i, w in enumerate(words)}
    return [[order[k, index[w]] for w in seeds[k]] for k in range(K)]


fig, ax = plt.subplots(figsize=(6, 3.5))
for label, model, marker in (("seeded", seeded, "o"), ("unseeded", plain, "x")):
    r = ranks(model)
    xs = [k + 0.1 * (j - 1) for k in range(K) for j in range(3)]
    ax.scatter(xs, [v for row in r for v in row], marker=marker, label=label)
ax.set_yscale("symlog")
ax.set_xticks(range(K))
ax.set_xlabel("seeded topic")
ax.set_ylabel("rank of its seed words")
ax.legend()
fig.tight_layout()
plt.show()
