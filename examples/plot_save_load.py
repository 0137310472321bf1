"""
Saving a model and using it on a machine without a GPU
======================================================

A fitted model holds NumPy arrays only, so :func:`joblib.dump` writes it like any scikit-learn
estimator, and :func:`joblib.load` reads it back on a machine without a GPU or without CuPy.
``device_`` keeps recording where the model was trained. ``transform``, ``score`` and
``perplexity`` follow the ``device`` parameter: ``'auto'`` uses a GPU when the loading machine has
one and the CPU otherwise, and ``device='cpu'`` keeps them (and every later ``fit``) on the CPU.
"""

import tempfile
import time
from pathlib import Path

import joblib
from sklearn.model_selection import train_test_split

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import load_kjv_chapters

kjv = load_kjv_chapters()
X_train, X_new = train_test_split(kjv.data, test_size=0.1, random_state=0)

# device='auto': the GPU when CuPy sees one, the NumPy engine otherwise.
lda = GPULatentDirichletAllocation(n_components=12, max_iter=30, random_state=0).fit(X_train)
print(f"trained on {lda.device_} in {lda.fit_time_:.1f} s")

with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "kjv_lda.joblib"
    joblib.dump(lda, path)
    print(f"saved {path.stat().st_size / 1e6:.2f} MB")

    # %%
    # On the machine that loads it (here the same one), nothing else is needed.
    loaded = joblib.load(path)

print("device_ of the loaded model:", loaded.device_)
loaded.set_params(device="cpu")

tic = time.perf_counter()
doc_topics = loaded.transform(X_new)
print(f"transformed {X_new.shape[0]} new chapters in {time.perf_counter() - tic:.2f} s, "
      f"shape {doc_topics.shape}")

# The fold-in is deterministic, so the loaded model gives the original's answer (up to rounding
# when the original ran its fold-in on a GPU).
print("same as before saving:", bool((abs(doc_topics - lda.transform(X_new)) < 1e-6).all()))
print(f"held-out perplexity: {loaded.perplexity(X_new):.1f}")
