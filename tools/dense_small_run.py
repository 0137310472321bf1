"""Every dense kernel over a small ragged corpus, checked against the oracle.

Run under compute-sanitizer by tools/device_dense.sh and tools/device_all.sh: empty documents, a
partial last warp, K below, at and above one warp; a wrong answer fails even when the tool is quiet.
"""
import numpy as np, cupy as cp
from sklearn_gpulda import _random
from sklearn_gpulda._engines.dense_rule import draw_topics_dense
from sklearn_gpulda._engines.dense_sampler import VARIANTS, document_order, sample_dense
rng = np.random.default_rng(0)
lengths = rng.integers(0, 60, size=75)
lengths[[3, 40]] = 0
doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
n, n_words = int(doc_ptr[-1]), 90
word = rng.integers(0, n_words, size=n).astype(np.int32)
doc = np.repeat(np.arange(lengths.size), lengths)
u = _random.token_uniform(7, 1, _random.STREAM_SAMPLE, np.arange(n))
bad = 0
for K in (5, 32, 33, 70):
    A = rng.integers(0, 5, size=(lengths.size, K)).astype(np.float32)
    bhat = rng.random((n_words, K)).astype(np.float32)
    ref = draw_topics_dense(doc, word, u, A, bhat, 0.3)
    for v in VARIANTS:
        out = cp.full(n, -1, dtype=cp.int32)
        sample_dense(v, document_order(cp.asarray(doc_ptr)), cp.asarray(doc_ptr), cp.asarray(word),
                     cp.asarray(A), cp.asarray(bhat), 0.3, 7, 1, out)
        got = out.get()
        agree = float(np.mean(got == ref))
        print(f"K={K:3d} {v:9s} agreement with the oracle {agree:.4f}")
        bad += agree < 0.99
cp.cuda.Device().synchronize()
print("small run:", "FAILED" if bad else "ok")
raise SystemExit(1 if bad else 0)
