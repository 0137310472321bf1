"""The mini-batches' layout built together (``backends/cuda/sparse/online_layout.py``) against each
batch laid out alone by :class:`~sklearn_gpulda.backends.cuda.sparse.layout.Chunk`."""

import numpy as np
import pytest

from test_cuda_sparse import _lda_counts
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._input.layouts import frequency_relabel

pytestmark = pytest.mark.gpu

ARRAYS = ("place", "doc", "weight", "doc_off", "row_off", "doc_len", "short_docs", "long_docs",
          "all_docs", "doc_weight", "items")
SCALARS = ("d0", "d1", "t0", "t1", "n_tokens", "n_docs", "n_slots", "n_batches", "packed",
           "fmt", "suffix", "place_dtype")


@pytest.mark.parametrize("fractional", [False, True])
@pytest.mark.parametrize("group_tokens", [1 << 23, 3000])
def test_batch_chunks_are_the_batches_laid_out_alone(fractional, group_tokens):
    import cupy as cp

    from sklearn_gpulda._input.layouts import range_bounds
    from sklearn_gpulda.backends.cuda.sparse.layout import BUILD_PIECE_TOKENS, Chunk, CountsOnDevice
    from sklearn_gpulda.backends.cuda.sparse.online_layout import build_online_chunks

    # Long documents (short and long A rows), a word of more than a work item's tokens, empty
    # documents; batches of one document, of many, and one larger than a small group.
    X = _lda_counts(300, 500, 6, 40, seed=4, long_docs=3, fractional=fractional).tolil()
    X[7, 3] = 5000
    X[20, :] = 0
    X = X.tocsr()
    corpus = tokens(X)
    new_of_old, _ = frequency_relabel(corpus.word_frequencies())
    cuts = [0, 1, 2, 20, 21, 90, 150, 151, 300]
    ranges = list(zip(cuts[:-1], cuts[1:]))
    got = build_online_chunks(cp, corpus, new_of_old, 12, ranges, group_tokens=group_tokens)
    assert len(got) == len(ranges)
    for chunk, (d0, d1) in zip(got, ranges):
        part = corpus.doc_range(d0, d1)
        want = Chunk(cp, part, 0, d1 - d0, CountsOnDevice(cp, part, new_of_old), 12,
                     range_bounds(part.doc_ptr, 0, d1 - d0, BUILD_PIECE_TOKENS))
        for name in SCALARS:
            assert getattr(chunk, name) == getattr(want, name), (d0, name)
        # Its items name words by their rank among the batch's words, which chunk.words lists.
        words = np.unique(want.items[:, 0].get())
        np.testing.assert_array_equal(chunk.words, words)
        assert chunk.items.shape == want.items.shape
        np.testing.assert_array_equal(chunk.words[chunk.items[:, 0].get()],
                                      want.items[:, 0].get())
        for name in ARRAYS:
            a, b = getattr(chunk, name), getattr(want, name)
            if name == "items":
                a, b = a[:, 1:], b[:, 1:]
            if b is None:
                assert a is None, (d0, name)
                continue
            assert a.dtype == b.dtype, (d0, name)
            assert getattr(chunk, name).flags.c_contiguous, (d0, name)
            np.testing.assert_array_equal(a.get(), b.get(), err_msg=f"{d0} {name}")
