"""
A one-page report of a model, and pyLDAvis
==========================================

:func:`sklearn_gpulda.report.write_report` writes a single HTML file about a fitted model: its
facts, the training curve when the model records one, a map of the topics, their sizes, and each
topic's top words with its NPMI coherence in a reference corpus. The page is self-contained (its
charts are inline SVG), so it can be mailed or archived as it is. From the command line the same
page comes from ``python -m sklearn_gpulda report MODEL --data INPUT --output report.html``.

The map places topics by multidimensional scaling of the distances between their word
distributions, as LDAvis does; :func:`~sklearn_gpulda.report.topic_map` gives the coordinates, and
the figure below draws them with matplotlib. For LDAvis's interactive view,
:func:`~sklearn_gpulda.report.pyldavis_data` gathers the arguments of ``pyLDAvis.prepare``.
"""

import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed: the figure is drawn for the gallery or a file
import matplotlib.pyplot as plt  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters  # noqa: E402
from sklearn_gpulda.metrics import top_words  # noqa: E402
from sklearn_gpulda.report import pyldavis_data, topic_map, write_report  # noqa: E402

kjv = load_kjv_chapters()
lda = GPULatentDirichletAllocation(n_components=12, max_iter=40, random_state=0).fit(kjv.data)

# %%
# The report, measured on the training chapters. The file goes to a temporary folder here; open
# yours in any browser.
with tempfile.TemporaryDirectory() as folder:
    page = write_report(lda, Path(folder) / "kjv_report.html", kjv.data,
                        feature_names=kjv.feature_names, title="King James Bible, 12 topics")
    print(f"wrote {page.name}: {page.stat().st_size / 1e3:.0f} kB")

# %%
# The same map with matplotlib: circle areas are each topic's share of the tokens.
data = pyldavis_data(lda, kjv.data, kjv.feature_names)
shares = data["doc_topic_dists"].T @ data["doc_lengths"]
shares /= shares.sum()
xy = topic_map(lda.components_)
labels = top_words(lda.components_, kjv.feature_names, n_words=3)

fig, ax = plt.subplots(figsize=(6.5, 5))
ax.scatter(xy[:, 0], xy[:, 1], s=6000 * shares, alpha=0.35, edgecolors="C0")
for k, (x, y) in enumerate(xy):
    ax.annotate(f"{k}: {' '.join(labels[k])}", (x, y), ha="center", fontsize=8)
ax.set_xlabel("first principal coordinate")
ax.set_ylabel("second principal coordinate")
ax.set_title("Topics of the King James Bible")
fig.tight_layout()

# %%
# With pyLDAvis installed (``pip install pyldavis``), the interactive view is one call away.
# ``start_index=0, sort_topics=False`` keep this package's topic numbers.
try:
    import pyLDAvis
except ImportError:
    print("pyLDAvis is not installed; its inputs are ready:", ", ".join(data))
else:
    view = pyLDAvis.prepare(**data, start_index=0, sort_topics=False)
    print("pyLDAvis view prepared for", len(view.topic_order), "topics")
