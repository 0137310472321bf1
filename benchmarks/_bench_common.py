"""Pieces shared by the GPU sweep benchmarks (bench_dense.py, bench_algorithms.py)."""

import time

import numpy as np

#: The dense sampling kernels of cuda/sample_dense.cu.
VARIANTS = ("butterfly", "transpose", "plain")


def coarse_to_fine(n):
    """Indices 0..n-1 ordered to cover the range early: both ends, then ever finer halvings."""
    order = [0] + ([n - 1] if n > 1 else [])
    step = 1 << max(0, (n - 1).bit_length())
    while step >= 1:
        order += [i for i in range(0, n, step) if i not in order]
        step //= 2
    return order


def load_corpora(scale, seed, with_nips=True):
    """[(name, TokenCorpus, description)]: NYTimes-shaped, plus NIPS when its files are found.

    NIPS is looked for where ``_peer_corpora`` looks (``$SKLEARN_GPULDA_DATA``, ``.carry/data``,
    ``../shared/data``); empty documents are dropped.
    """
    from sklearn_gpulda._corpus import tokens_from_counts
    from sklearn_gpulda.datasets import load_uci_bow, make_lda_corpus

    out = []
    t = time.perf_counter()
    X = make_lda_corpus(shape="nytimes", scale=scale, n_topics=50, random_state=seed).data
    out.append(
        (
            "nytimes",
            tokens_from_counts(X),
            f"make_lda_corpus(shape='nytimes', scale={scale}, n_topics=50, random_state={seed}), "
            f"{time.perf_counter() - t:.1f} s",
        )
    )
    if with_nips:
        from _peer_corpora import CorpusUnavailable, _find

        try:
            docword, vocab = _find("nips")
        except CorpusUnavailable as exc:
            print(f"note: NIPS skipped ({exc})")
        else:
            X = load_uci_bow(docword, vocab).data
            X = X[np.flatnonzero(X.getnnz(axis=1))]
            out.append(("nips", tokens_from_counts(X), f"UCI {docword}"))
    return out


def describe_device(cp):
    """Print and return the name of CuPy's current device."""
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print(f"device: {name}, {props['multiProcessorCount']} SMs; cupy {cp.__version__}")
    return name
