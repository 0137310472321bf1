"""
Comparing with scikit-learn's LDA fairly
========================================

Both estimators have ``score`` and ``perplexity`` methods, but they do not measure the same thing,
so their numbers must not be set side by side:

- :class:`~sklearn_gpulda.GPULatentDirichletAllocation` folds each test document in (finds its
  topic mixture with the topics fixed) and then scores the same words it was folded in from. The
  mixture has seen the words it is judged on, so the estimate is optimistic.
- :class:`~sklearn.decomposition.LatentDirichletAllocation` reports its variational bound, a lower
  bound on the log-likelihood that also charges the Dirichlet terms of the topics themselves, a
  fixed amount that weighs the more the smaller the test set. It is pessimistic.

:func:`sklearn_gpulda.metrics.compare_models` scores both models by one procedure instead,
document completion (Wallach et al. 2009): half of each held-out document's tokens estimate its
topic mixture, the other half are scored, on one random split shared by every model. It needs only
each model's ``components_`` and ``doc_topic_prior_``, so it treats the two libraries alike.
"""

import time

import matplotlib

matplotlib.use("Agg")  # no display needed: the figure is drawn for the gallery or a file
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.decomposition import LatentDirichletAllocation  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters  # noqa: E402
from sklearn_gpulda.metrics import compare_models, perplexity  # noqa: E402

N_TOPICS = 20
kjv = load_kjv_chapters()
X_train, X_test = train_test_split(kjv.data, test_size=0.2, random_state=0)
print(f"{X_train.shape[0]} training chapters, {X_test.shape[0]} held out "
      f"({X_test.sum():,} tokens)")

# %%
# Two models with comparable fit times on a CPU: 50 sweeps of the sampler, 10 passes of batch
# variational Bayes.
ours = GPULatentDirichletAllocation(n_components=N_TOPICS, max_iter=50, random_state=0)
ours.fit(X_train)
print(f"sklearn-gpulda on {ours.device_}: {ours.fit_time_:.1f} s")

tic = time.perf_counter()
theirs = LatentDirichletAllocation(n_components=N_TOPICS, max_iter=10, random_state=0)
theirs.fit(X_train)
print(f"scikit-learn: {time.perf_counter() - tic:.1f} s")

# %%
# Each library's own ``perplexity`` suggests a large difference between the models.
own = {"sklearn-gpulda": ours.perplexity(X_test), "scikit-learn": theirs.perplexity(X_test)}
for name, value in own.items():
    print(f"{name:>15s}  own perplexity(): {value:8.1f}")

# %%
# Most of that difference is in what is measured, not in the topics. Estimating each model's
# document mixtures with its own ``transform`` and scoring the same words with them, the kind of
# estimate this package's ``perplexity`` makes, puts scikit-learn's model next to ours.
plug_in = {name: perplexity(X_test, model.transform(X_test), model.components_)
           for name, model in (("sklearn-gpulda", ours), ("scikit-learn", theirs))}
for name, value in plug_in.items():
    print(f"{name:>15s}  fold in, score the same words: {value:8.1f}")

# %%
# Scored alike, by document completion on one split, the two models are close. This is the
# comparison to report: no model sees the words it is scored on.
fair = compare_models(X_test, {"sklearn-gpulda": ours, "scikit-learn": theirs}, random_state=0)
for name, result in fair.items():
    print(f"{name:>15s}  document completion: perplexity {result.perplexity:8.1f}, "
          f"{result.per_token:.4f} nats per held-out token ({result.n_tokens:,} tokens)")

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.8))
names = list(own)
measures = [("each library's own perplexity()", own),
            ("fold in, score the same words", plug_in),
            ("document completion (compare_models)", {n: fair[n].perplexity for n in names})]
for i, (label, values) in enumerate(measures):
    ax.bar([p + (i - 1) * 0.27 for p in range(len(names))], [values[n] for n in names],
           width=0.27, label=label)
ax.set_xticks(range(len(names)), names)
ax.set_ylabel("held-out perplexity (lower is better)")
ax.set_title(f"KJV chapters, K = {N_TOPICS}")
ax.legend(fontsize="small")
fig.tight_layout()
