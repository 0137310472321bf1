"""Token conversion of ``sklearn_gpulda._input.corpus``, the corpus's cut into document ranges, and
the
device PDOW build run with NumPy standing in for CuPy (the host layouts are ``test_layouts.py``'s).

Checked on the bundled King James Bible (real, skewed word frequencies, one very long chapter:
Psalm 119) and on a synthetic LDA corpus, never on hand-typed matrices.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._input.layouts import frequency_relabel, pdow_chunks, split_documents


def _recount(corpus):
    """Rebuild the count matrix from the tokens (weights summed per document and word)."""
    weight = np.ones(corpus.n_tokens) if corpus.weight is None else corpus.weight
    return sp.csr_matrix(
        (weight.astype(np.float64), (corpus.doc, corpus.word)),
        shape=(corpus.n_docs, corpus.n_words),
    )


# --------------------------------------------------------------------------------------------------
# tokens
# --------------------------------------------------------------------------------------------------


def test_tokens_round_trip(counts):
    corpus = tokens(counts)
    assert corpus.weight is None  # integer counts: unweighted tokens
    assert (corpus.n_docs, corpus.n_words) == counts.shape
    assert corpus.n_tokens == counts.sum()
    assert corpus.doc.dtype == np.int32 and corpus.word.dtype == np.int32
    assert (_recount(corpus) != counts).nnz == 0

    # Canonical order: by document, then by vocabulary id inside a document.
    assert np.all(np.diff(corpus.doc) >= 0)
    same_doc = np.diff(corpus.doc) == 0
    assert np.all(np.diff(corpus.word)[same_doc] >= 0)
    np.testing.assert_array_equal(corpus.doc_ptr[1:], np.cumsum(counts.sum(axis=1).A1))
    np.testing.assert_array_equal(
        corpus.doc, np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))
    )
    np.testing.assert_array_equal(corpus.doc_lengths(), counts.sum(axis=1).A1)
    np.testing.assert_array_equal(corpus.word_frequencies(), counts.sum(axis=0).A1)
    assert corpus.total_weight == counts.sum()


def test_tokens_from_dense_and_float_integers(kjv):
    subset = kjv[:40]
    reference = tokens(subset)
    for variant in (subset.toarray(), subset.astype(np.float64), subset.tocoo()):
        corpus = tokens(variant)
        assert corpus.weight is None
        np.testing.assert_array_equal(corpus.doc, reference.doc)
        np.testing.assert_array_equal(corpus.word, reference.word)


def test_weights_for_non_integer_counts(kjv):
    X = kjv.astype(np.float64) * 0.6  # 1 -> 0.6, 2 -> 1.2, 5 -> 3.0 (integer again), ...
    corpus = tokens(X)
    assert corpus.weight is not None and corpus.weight.dtype == np.float32
    # Each non-zero c expands into ceil(c) tokens of weight c / ceil(c).
    assert corpus.n_tokens == np.ceil(X.data).sum()
    tokens_per_nz = np.ceil(X.data).astype(np.int64)
    np.testing.assert_allclose(
        corpus.weight, np.repeat(X.data / tokens_per_nz, tokens_per_nz), rtol=1e-6
    )
    assert np.all((corpus.weight > 0) & (corpus.weight <= 1))
    np.testing.assert_allclose(_recount(corpus).toarray(), X.toarray(), rtol=1e-6)
    np.testing.assert_allclose(corpus.total_weight, X.sum(), rtol=1e-6)
    np.testing.assert_allclose(corpus.doc_lengths(), X.sum(axis=1).A1, rtol=1e-6)
    np.testing.assert_allclose(corpus.word_frequencies(), X.sum(axis=0).A1, rtol=1e-6)


def test_explicit_zeros_give_no_tokens(kjv):
    X = kjv[:60].copy()
    X.data[::3] = 0  # stored, but zero
    assert X.nnz == kjv[:60].nnz
    clean = X.copy()
    clean.eliminate_zeros()
    corpus = tokens(X)
    reference = tokens(clean)
    np.testing.assert_array_equal(corpus.doc, reference.doc)
    np.testing.assert_array_equal(corpus.word, reference.word)
    np.testing.assert_array_equal(corpus.doc_ptr, reference.doc_ptr)
    assert X.nnz == kjv[:60].nnz  # the caller's matrix is left alone


def test_empty_documents_and_unsorted_input(synthetic):
    X = sp.vstack([sp.csr_matrix((2, synthetic.shape[1]), dtype=np.int64), synthetic[:20],
                   sp.csr_matrix((3, synthetic.shape[1]), dtype=np.int64)]).tocsr()
    # Reverse the column order inside every row: tokens must still come out in canonical order.
    shuffled = X.copy()
    for r in range(shuffled.shape[0]):
        lo, hi = shuffled.indptr[r], shuffled.indptr[r + 1]
        shuffled.indices[lo:hi] = shuffled.indices[lo:hi][::-1].copy()
        shuffled.data[lo:hi] = shuffled.data[lo:hi][::-1].copy()
    shuffled.has_sorted_indices = False
    corpus = tokens(shuffled)
    reference = tokens(X)
    np.testing.assert_array_equal(corpus.word, reference.word)
    assert np.all(np.diff(corpus.doc_ptr)[:2] == 0) and np.all(np.diff(corpus.doc_ptr)[-3:] == 0)
    assert (_recount(corpus) != X).nnz == 0


# --------------------------------------------------------------------------------------------------
# The corpus as counts; the device layout's build, run with NumPy standing in for CuPy
# --------------------------------------------------------------------------------------------------


def _explicit_zeros_and_duplicates(X):
    """The same counts as a non-canonical CSR matrix: every fifth row's entries split in two
    halves stored apart, an explicit zero beside every tenth entry, columns unsorted."""
    coo = sp.coo_matrix(X)
    vals = coo.data.astype(np.float64)
    split = (coo.row % 5) == 0
    vals = np.where(split, vals / 2, vals)
    zero = np.arange(coo.nnz) % 10 == 0
    rows = np.concatenate([coo.row, coo.row[split], coo.row[zero]])
    cols = np.concatenate([coo.col, coo.col[split], (coo.col[zero] + 1) % X.shape[1]])
    data = np.concatenate([vals, vals[split], np.zeros(zero.sum())])
    order = np.argsort(rows, kind="stable")  # rows in order, columns as they come
    indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=X.shape[0]))]
    return sp.csr_matrix((data[order], cols[order], indptr), shape=X.shape)


def test_counts_expand_lazily_to_the_canonical_tokens(kjv):
    X = kjv[:300]
    corpus = tokens(X)
    assert corpus._tokens is None  # nothing per token made until asked for
    reps = np.asarray(X.data, dtype=np.int64)
    np.testing.assert_array_equal(corpus.word, np.repeat(X.indices, reps))
    np.testing.assert_array_equal(corpus.doc, np.repeat(np.arange(300), np.diff(corpus.doc_ptr)))
    np.testing.assert_array_equal(corpus.doc_ptr, np.r_[0, np.cumsum(X.sum(axis=1).A1)])
    np.testing.assert_array_equal(corpus.word_frequencies(), X.sum(axis=0).A1)
    assert corpus.integral and corpus.total_weight == X.sum()


def test_duplicates_add_up_and_explicit_zeros_make_no_tokens(kjv):
    X = kjv[:200].astype(np.float64)
    messy = _explicit_zeros_and_duplicates(X)
    assert not messy.has_canonical_format
    clean, corpus = tokens(X), tokens(messy)
    assert corpus.n_tokens == clean.n_tokens
    np.testing.assert_array_equal(corpus.doc_ptr, clean.doc_ptr)
    np.testing.assert_array_equal(corpus.word, clean.word)
    np.testing.assert_array_equal(corpus.doc, clean.doc)
    np.testing.assert_array_equal(corpus.word_frequencies(), clean.word_frequencies())


def test_released_counts_keep_what_was_made(kjv):
    corpus = tokens(kjv[:50])
    word = corpus.word
    corpus.release_counts()
    assert corpus.word is word and corpus.n_tokens == word.size
    other = tokens(kjv[:50])
    other.release_counts()
    assert other.doc_lengths().sum() == corpus.n_tokens
    with pytest.raises(RuntimeError, match="released"):
        other.word


@pytest.mark.parametrize("fractional", [False, True])
@pytest.mark.parametrize("max_chunk, piece", [(None, 1 << 23), (None, 777), (3000, 500),
                                              (3000, 1)])
@pytest.mark.parametrize("chunk_by_chunk", [False, True])
def test_device_layout_build_in_pieces_is_the_pdow_order(kjv, fractional, max_chunk, piece,
                                                         chunk_by_chunk):
    # backends/cuda/sparse/layout.py builds each chunk a piece of documents at a time, from the
    # whole
    # corpus's counts or (streamed layouts) from the chunk's own; whatever the piece size, the
    # result must be the single sort of pdow_chunks. Its array calls are the NumPy API, so NumPy
    # runs it here and CuPy on the GPU.
    from sklearn_gpulda.backends.cuda.sparse.layout import build_chunks

    X = kjv[:300].astype(np.float64)
    if fractional:
        X.data *= 0.7
    corpus = tokens(X)
    new_of_old, _ = frequency_relabel(corpus.word_frequencies())
    built = []
    chunks = build_chunks(np, corpus, new_of_old, 50, max_chunk, piece,
                          each=built.append if chunk_by_chunk else None)
    assert built == (chunks if chunk_by_chunk else [])
    reference = pdow_chunks(corpus, new_of_old, max_chunk or corpus.n_tokens)
    assert len(chunks) == len(reference) > (1 if max_chunk else 0)
    for ref, ch in zip(reference, chunks):
        assert (ch.d0, ch.d1) == (ref.doc_begin, ref.doc_end)
        # A token's canonical index is its document's first token plus its place there, in
        # 16 bits where the chunk's entries are packed.
        canonical = ch.doc_off[ch.doc].astype(np.int64) + ch.place
        np.testing.assert_array_equal(canonical + ch.t0, ref.token)
        assert ch.place.dtype == (np.uint32 if fractional else np.uint16)
        np.testing.assert_array_equal(ch.doc, corpus.doc[ref.token] - ch.d0)
        if fractional:
            np.testing.assert_array_equal(ch.weight, corpus.weight[ch.t0:ch.t1])
        else:
            assert ch.weight is None
        assert ch.z is None  # the chain's state comes later (allocate_state)


def test_device_layout_places_of_a_document_of_65536_tokens_take_32_bits(kjv):
    # A document of 70,000 tokens (of 60 words: repeated words, runs longer than a work item)
    # gets a chunk of its own, wide (32-bit places, 8-byte A entries); the others stay packed.
    # Every token's canonical index is its document's first token plus its place.
    from sklearn_gpulda.backends.cuda.sparse.layout import build_chunks
    from sklearn_gpulda.backends.cuda.sparse.memory_plan import corpus_sizes, layout_bytes

    long_row = np.zeros((1, kjv.shape[1]))
    long_row[0, :60] = 70_000 // 60
    X = sp.vstack([kjv[:40].astype(np.float64), long_row, kjv[40:80]], format="csr")
    corpus = tokens(X)
    new_of_old, _ = frequency_relabel(corpus.word_frequencies())
    chunks = build_chunks(np, corpus, new_of_old, 50, 20_000, 5000)
    reference = pdow_chunks(corpus, new_of_old, 20_000)
    assert [(ch.d0, ch.d1) for ch in chunks] == [(r.doc_begin, r.doc_end) for r in reference]
    for ref, ch in zip(reference, chunks):
        canonical = ch.doc_off[ch.doc].astype(np.int64) + ch.place
        np.testing.assert_array_equal(canonical + ch.t0, ref.token)
        holds_it = ch.d0 <= 40 < ch.d1
        assert ch.packed == (not holds_it)
        assert ch.place.dtype == (np.uint32 if holds_it else np.uint16)
    # The memory plan counts the long document's tokens at 20 bytes (place 4, document 4, two
    # topics 2 + 2, an entry 8), not the packed 14.
    packed_steady, _ = layout_bytes(corpus_sizes(tokens(X[:40])), 50, None)
    wide_steady, _ = layout_bytes(corpus_sizes(tokens(X[:41])), 50, None)
    extra_tokens = corpus.doc_ptr[41] - corpus.doc_ptr[40]
    assert wide_steady - packed_steady >= extra_tokens * 20


def test_chunk_ranges_keep_a_storage_within_int32(monkeypatch):
    # A chunk's A storage (tokens plus 31 slots per document) is indexed by int32: a range that
    # would reach 2**31 entries is cut further, even with no token limit (about 2 G tokens).
    from sklearn_gpulda.backends.cuda.sparse import layout

    corpus = tokens(sp.csr_matrix(np.full((40, 3), 5)))  # 40 documents of 15 tokens
    monkeypatch.setattr(layout, "MAX_CHUNK_SLOTS", 100)  # 2 documents (2 x (15 + 31) = 92)
    ranges = layout.chunk_ranges(corpus, None)
    assert ranges[0] == (0, 2) and ranges[-1][1] == 40 and len(ranges) == 20
    assert all(b == c for (_, b), (c, _) in zip(ranges, ranges[1:]))
    # A user's token limit still holds inside.
    assert layout.chunk_ranges(corpus, 15) == [(d, d + 1) for d in range(40)]
    monkeypatch.setattr(layout, "MAX_CHUNK_SLOTS", 40)  # one document alone is too many
    with pytest.raises(ValueError, match="more than one chunk can index"):
        layout.chunk_ranges(corpus, None)


def test_chunk_cuts_are_made_before_the_build(kjv):
    # The chunks' ranges, and each chunk's pieces of at most the piece's tokens (a longer
    # document alone), numbered within the chunk: all the build needs to know of the cuts.
    from sklearn_gpulda.backends.cuda.sparse import layout

    corpus = tokens(kjv[:300])
    cuts = layout.chunk_cuts(corpus, 20_000, 3_000)
    assert [(d0, d1) for d0, d1, _ in cuts] == layout.chunk_ranges(corpus, 20_000)
    for d0, d1, pieces in cuts:
        pieces = np.asarray(pieces)
        assert pieces[0] == 0 and pieces[-1] == d1 - d0
        in_piece = np.diff(corpus.doc_ptr[d0 + pieces])
        assert np.all((in_piece <= 3_000) | (np.diff(pieces) == 1))
    empty = tokens(sp.csr_matrix((0, 5)))
    assert [(d0, d1, list(p)) for d0, d1, p in layout.chunk_cuts(empty, None, 3_000)] == [
        (0, 0, [0, 0])]


def test_integer_counts_give_the_corpus_of_their_float_copy(kjv):
    # A GPU fit whose counts stay on the host keeps integer counts as integers: the token corpus
    # must be the one their float64 copy gives, array for array.
    X = kjv[:200].astype(np.int64)
    a, b = tokens(X), tokens(X.astype(np.float64))
    assert a.integral and b.integral and a.nz_weight is None and b.nz_weight is None
    for name in ("indptr", "indices", "nz_ptr", "doc_ptr"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(a.doc_lengths(), b.doc_lengths())
    np.testing.assert_array_equal(a.word_frequencies(), b.word_frequencies())
    assert (a.n_tokens, a.total_weight) == (b.n_tokens, b.total_weight)


def test_streamed_chunk_plan_fits_its_budget(kjv):
    # The chunk size of a streamed layout (backends/cuda/sparse/memory_plan.py, plain
    # arithmetic): larger budgets give larger chunks, a cap holds, the build's piece is a
    # quarter of a chunk, and a budget the model alone fills is a MemoryError that says so.
    from sklearn_gpulda.backends.cuda.sparse import memory_plan

    sizes = memory_plan.corpus_sizes(tokens(kjv))
    k, v = 50, sizes.n_words
    model = 2 * v * k * 4 + v * k * 8
    small, piece = memory_plan.streamed_chunk_tokens(sizes, k, model + (40 << 20))
    large, _ = memory_plan.streamed_chunk_tokens(sizes, k, model + (400 << 20))
    assert memory_plan.MIN_STREAM_CHUNK <= small < large and piece == small // 4
    per_token = memory_plan.slot_bytes(1, 0, 2, 4, False)
    assert 2 * small * per_token < 40 << 20  # two slots of the chunk fit beside the model
    assert memory_plan.streamed_chunk_tokens(sizes, k, model + (400 << 20), 70_000)[0] == 70_000
    with pytest.raises(MemoryError, match="cannot stream .* K=50"):
        memory_plan.streamed_chunk_tokens(sizes, k, model)


# -- a corpus cut by documents (the parts of a multi-GPU chain) ------------------------------------
@pytest.mark.parametrize("fractional", [False, True])
def test_document_ranges_are_the_whole_corpus_cut(kjv, fractional):
    X = kjv.astype(np.float64)
    if fractional:
        X.data[X.indptr[500]:] *= 0.75      # the first 500 chapters keep integer counts
    whole = tokens(X)
    bounds = split_documents(whole.doc_ptr, 3)
    assert bounds[1] < 500 or not fractional
    for d0, d1 in zip(bounds[:-1], bounds[1:]):
        part, alone = whole.doc_range(d0, d1), tokens(X[d0:d1])
        t0, t1 = whole.doc_ptr[d0], whole.doc_ptr[d1]
        assert (part.n_docs, part.n_words, part.n_tokens) == (d1 - d0, X.shape[1], t1 - t0)
        # A part of a weighted corpus weighs its tokens even where its own counts are integers.
        assert part.integral == whole.integral
        np.testing.assert_array_equal(part.doc_ptr, alone.doc_ptr)
        np.testing.assert_array_equal(part.doc_lengths(), whole.doc_lengths()[d0:d1])
        np.testing.assert_array_equal(part.doc, whole.doc[t0:t1] - d0)
        np.testing.assert_array_equal(part.word, whole.word[t0:t1])
        if fractional:
            np.testing.assert_array_equal(part.weight, whole.weight[t0:t1])
        else:
            assert part.weight is None
        np.testing.assert_array_equal(part.word_frequencies(), alone.word_frequencies())
    whole.release_counts()
    with pytest.raises(RuntimeError, match="released before it was split"):
        whole.doc_range(0, 1)
