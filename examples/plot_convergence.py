"""
Held-out log-likelihood against training time
=============================================

A sampler and variational Bayes approach the model along different paths, so comparing them at
equal iterations says little; what a user waits for is time. This example fits the bundled King
James Bible chapters with :class:`~sklearn_gpulda.GPULatentDirichletAllocation` and with
scikit-learn's :class:`~sklearn.decomposition.LatentDirichletAllocation` for increasing numbers
of iterations, scores each model on held-out chapters by document completion
(:func:`sklearn_gpulda.metrics.document_completion`, the same evaluator for both, fed only the
topic-word matrix), and plots the score against the fit time. ``benchmarks/peers.py`` does the same
on larger corpora and with more systems.
"""

import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed: the figure is written to a file
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.decomposition import LatentDirichletAllocation  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters  # noqa: E402
from sklearn_gpulda.metrics import document_completion  # noqa: E402

N_TOPICS = 20
kjv = load_kjv_chapters()
X_train, X_test = train_test_split(kjv.data, test_size=0.2, random_state=0)


def held_out(components, alpha):
    return document_completion(X_test, components, alpha, random_state=0).per_token


# %%
# Each point is a separate fit from the same seed, so the curve shows what a user gets by asking
# for that many iterations. ``fit_time_`` counts the sampling only; scikit-learn's time is taken
# around ``fit``.
ours = []
for n_iter in (5, 10, 20, 40, 80):
    lda = GPULatentDirichletAllocation(n_components=N_TOPICS, max_iter=n_iter, random_state=0)
    lda.fit(X_train)
    ours.append((lda.fit_time_, held_out(lda.components_, lda.doc_topic_prior_)))
    print(f"{lda.device_:>7s}  {n_iter:3d} iterations  {lda.fit_time_:6.2f} s  "
          f"held-out {ours[-1][1]:.4f}")

theirs = []
for n_iter in (2, 5, 10):
    sk = LatentDirichletAllocation(n_components=N_TOPICS, max_iter=n_iter, random_state=0)
    tic = time.perf_counter()
    sk.fit(X_train)
    elapsed = time.perf_counter() - tic
    theirs.append((elapsed, held_out(sk.components_, sk.doc_topic_prior_)))
    print(f"sklearn  {n_iter:3d} iterations  {elapsed:6.2f} s  held-out {theirs[-1][1]:.4f}")

# %%
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(*zip(*ours), "o-", label=f"sklearn-gpulda ESCA ({lda.device_})")
ax.plot(*zip(*theirs), "s--", label="scikit-learn batch VB")
ax.set_xscale("log")
ax.set_xlabel("fit time (s)")
ax.set_ylabel("held-out log-likelihood per token")
ax.set_title(f"KJV chapters, K = {N_TOPICS}")
ax.legend()
fig.tight_layout()
out = Path(tempfile.gettempdir()) / "sklearn_gpulda_convergence.png"
fig.savefig(out, dpi=100)
print("figure written to", out.name, "in the temporary folder")
