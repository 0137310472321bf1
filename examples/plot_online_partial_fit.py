"""
Online learning from a stream of documents with partial_fit
===========================================================

When documents arrive in batches, or do not fit in memory at once, ``partial_fit`` updates the
topics one mini-batch at a time, as scikit-learn's online variational Bayes does: each batch is
sampled with the current topics held fixed, and its word-topic statistics are blended into
``components_`` with weight ``(learning_offset + n_batch_iter_) ** -learning_decay``.
``total_samples`` tells the model how many documents the whole stream holds, so that one batch's
counts are scaled to the corpus size.

The stream here is the bundled King James Bible chapters in shuffled order; a tenth of them is kept
aside to follow the held-out log-likelihood per token as batches arrive.
"""

import numpy as np
from sklearn.model_selection import train_test_split

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import load_kjv_chapters
from sklearn_gpulda.metrics import document_completion, top_words

kjv = load_kjv_chapters()
X_stream, X_test = train_test_split(kjv.data, test_size=0.1, random_state=0)
BATCH = 128

lda = GPULatentDirichletAllocation(
    n_components=12,
    learning_offset=5.0,
    total_samples=X_stream.shape[0],
    batch_size=BATCH,
    random_state=0,
)


def stream(X, batch_size, n_passes):
    """Yield mini-batches of rows of ``X``, as a reader of new documents would."""
    for _ in range(n_passes):
        for start in range(0, X.shape[0], batch_size):
            yield X[start:start + batch_size]


for i, batch in enumerate(stream(X_stream, BATCH, n_passes=2), start=1):
    lda.partial_fit(batch)
    if i % 3 == 0:
        held_out = document_completion(X_test, lda.components_, lda.doc_topic_prior_,
                                       random_state=0)
        print(f"batch {i:2d} ({batch.shape[0]:3d} documents): "
              f"held-out log-likelihood per token {held_out.per_token:.4f}")

# %%
# The topics after two passes over the stream.
for k, words in enumerate(top_words(lda.components_, kjv.feature_names, n_words=8)):
    print(f"topic {k:2d}: {' '.join(words)}")
print("mini-batches seen:", lda.n_batch_iter_ - 1, "| rows sum to 1:",
      bool(np.allclose(lda.transform(X_test[:5]).sum(axis=1), 1.0)))
