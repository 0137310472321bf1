"""
Coherence as gensim computes it: c_v, c_npmi, c_uci and u_mass
==============================================================

:func:`sklearn_gpulda.metrics.gensim_coherence` gives the numbers of gensim's
``CoherenceModel`` without gensim: u_mass from documents, and c_v, c_npmi and c_uci from
sliding windows over tokenised texts (110 tokens for c_v, 10 for the other two), so topics of
this package can be compared with figures reported by gensim users.

Windows need word order, which a count matrix has lost, so the corpus here is text drawn from
the LDA model with 6 topics, written as short "sentences" of 8 words from one topic each, as
prose tends to stay on one subject for a while. Models with 3, 6 and 12 topics are scored on
it, and so are the true topics, beside the document-based
:func:`~sklearn_gpulda.metrics.npmi_coherence` of the package. The measures need not agree:
u_mass conditions each word on the documents of the words above it and tends to favour topics
of frequent words, which coarse models have; c_npmi and c_uci score pairs by how often they
occur within 10 tokens of each other; c_v compares each word's NPMI profile (windows of 110
tokens) with its topic's rather than scoring pairs directly.
"""

import matplotlib

matplotlib.use("Agg")  # no display needed: the figure is drawn for the gallery or a file
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.feature_extraction.text import CountVectorizer  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.datasets import make_lda_corpus  # noqa: E402
from sklearn_gpulda.metrics import gensim_coherence, npmi_coherence, top_words  # noqa: E402

# The true topics (from make_lda_corpus), then 500 documents of about 80 tokens written from them.
truth = make_lda_corpus(n_docs=1, n_words=600, n_topics=6, beta=0.05, random_state=0)
words = np.asarray(truth.feature_names)
rng = np.random.default_rng(0)
sentence_topics = np.array([rng.choice(6, size=10, p=theta)
                            for theta in rng.dirichlet(np.full(6, 0.2), size=500)])
tokens = np.empty((500, 10, 8), dtype=np.int64)  # document, sentence, word
for k in range(6):
    in_topic = sentence_topics == k
    tokens[in_topic] = rng.choice(words.size, size=(in_topic.sum(), 8), p=truth.topic_word[k])
texts = words[tokens.reshape(500, 80)].tolist()

vectorizer = CountVectorizer(analyzer=lambda tokens: tokens)  # the texts are tokenised already
X = vectorizer.fit_transform(texts)
vocabulary = vectorizer.get_feature_names_out()

# %%
# Scores of fitted models and of the true topics: the mean over topics of their 10 top words.
measures = ["c_v", "c_npmi", "c_uci", "u_mass"]


rows = {}
for k in (3, 6, 12):
    lda = GPULatentDirichletAllocation(n_components=k, max_iter=50, random_state=0).fit(X)
    rows[k] = {m: gensim_coherence(lda.components_, texts, m, top_n=10,
                                   feature_names=vocabulary).mean for m in measures}
    rows[k]["npmi (documents)"] = np.nanmean(npmi_coherence(X, lda.components_, top_n=10))
true_topics = top_words(truth.topic_word, words, n_words=10)
rows["true"] = {m: gensim_coherence(true_topics, texts, m).mean for m in measures}
columns_of_vocabulary = [int(w[1:]) for w in vocabulary]  # "w17" is word 17 of the truth
rows["true"]["npmi (documents)"] = np.nanmean(
    npmi_coherence(X, truth.topic_word[:, columns_of_vocabulary], top_n=10))

columns = measures + ["npmi (documents)"]
print(f"{'topics':>7}" + "".join(f"{c:>18}" for c in columns))
for k, row in rows.items():
    print(f"{k:>7}" + "".join(f"{row[c]:18.4f}" for c in columns))

# %%
# The same as a figure, one panel per measure; the dashed line is the true topics' score.
fig, axes = plt.subplots(1, 4, figsize=(12, 2.8))
ks = [k for k in rows if k != "true"]
for ax, m in zip(axes, measures):
    ax.plot(ks, [rows[k][m] for k in ks], "o-")
    ax.axhline(rows["true"][m], color="gray", linestyle="--")
    ax.set(title=m, xlabel="number of topics", xticks=ks)
axes[0].set_ylabel("mean coherence")
fig.tight_layout()
plt.show()
