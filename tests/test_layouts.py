"""The host layouts and cuts of ``sklearn_gpulda._input.layouts``: word relabelling, PDOW chunks,
segmented CSR, and corpora cut by documents (fixtures ``kjv``, ``synthetic`` and ``counts`` come
from ``conftest.py``)."""

import numpy as np
import pytest

from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._input.layouts import (
    chunk_bounds,
    frequency_relabel,
    pdow_chunks,
    segmented_csr,
    split_documents,
)


# --------------------------------------------------------------------------------------------------
# frequency_relabel
# --------------------------------------------------------------------------------------------------


def test_frequency_relabel(counts):
    freq = tokens(counts).word_frequencies()
    new_of_old, old_of_new = frequency_relabel(freq)
    assert new_of_old.dtype == np.int32 and old_of_new.dtype == np.int32
    np.testing.assert_array_equal(np.sort(old_of_new), np.arange(freq.size))
    np.testing.assert_array_equal(new_of_old[old_of_new], np.arange(freq.size))
    relabelled = freq[old_of_new]
    assert np.all(np.diff(relabelled) <= 0)  # id 0 is the most frequent word
    ties = np.diff(relabelled) == 0
    assert np.all(np.diff(old_of_new)[ties] > 0)  # equal frequencies keep the old order
    assert relabelled[0] == freq.max()


# --------------------------------------------------------------------------------------------------
# PDOW chunks
# --------------------------------------------------------------------------------------------------


def _check_pdow(corpus, new_of_old, max_tokens):
    chunks = pdow_chunks(corpus, new_of_old, max_tokens)
    relabelled = new_of_old[corpus.word]
    lengths = np.diff(corpus.doc_ptr)
    # Chunks are consecutive document ranges that tile the corpus.
    assert chunks[0].doc_begin == 0 and chunks[-1].doc_end == corpus.n_docs
    for left, right in zip(chunks[:-1], chunks[1:]):
        assert left.doc_end == right.doc_begin
    all_tokens = np.concatenate([c.token for c in chunks])
    np.testing.assert_array_equal(np.sort(all_tokens), np.arange(corpus.n_tokens))
    for c in chunks:
        n_chunk = corpus.doc_ptr[c.doc_end] - corpus.doc_ptr[c.doc_begin]
        assert c.token.size == n_chunk
        assert n_chunk <= max_tokens or c.doc_end - c.doc_begin == 1
        if c.doc_end < corpus.n_docs:
            # Greedy: the next document would not have fitted.
            assert n_chunk + lengths[c.doc_end] > max_tokens
        docs = corpus.doc[c.token]
        assert docs.min() >= c.doc_begin and docs.max() < c.doc_end
        words = relabelled[c.token]
        assert np.all(np.diff(words) >= 0)  # ordered by relabelled word
        same_word = np.diff(words) == 0
        assert np.all(np.diff(c.token)[same_word] > 0)  # then by canonical index
        assert c.word_ptr.shape == (corpus.n_words + 1,) and c.word_ptr[-1] == c.token.size
        np.testing.assert_array_equal(
            words, np.repeat(np.arange(corpus.n_words), np.diff(c.word_ptr))
        )
    return chunks


def test_pdow_chunks(counts):
    corpus = tokens(counts)
    new_of_old, _ = frequency_relabel(corpus.word_frequencies())
    single = _check_pdow(corpus, new_of_old, corpus.n_tokens)
    assert len(single) == 1
    longest = int(np.diff(corpus.doc_ptr).max())
    several = _check_pdow(corpus, new_of_old, max(1, longest // 2))
    # Budget below the longest document: that document must sit alone in an oversized chunk.
    assert any(c.token.size > longest // 2 and c.doc_end - c.doc_begin == 1 for c in several)
    per_doc = _check_pdow(corpus, new_of_old, 1)
    assert len(per_doc) == corpus.n_docs


def test_chunk_bounds_rejects_bad_budget(kjv):
    corpus = tokens(kjv[:5])
    with pytest.raises(ValueError, match="max_tokens"):
        chunk_bounds(corpus.doc_ptr, 0)


# --------------------------------------------------------------------------------------------------
# segmented CSR
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("docs_per_batch, panel_width", [(100, 256), (7, 1000), (5000, 50000)])
def test_segmented_csr(counts, docs_per_batch, panel_width):
    corpus = tokens(counts)
    new_of_old, _ = frequency_relabel(corpus.word_frequencies())
    tiles = segmented_csr(corpus, new_of_old, docs_per_batch, panel_width)
    n_batches = -(-corpus.n_docs // docs_per_batch)
    assert tiles.n_panels == -(-corpus.n_words // panel_width)
    np.testing.assert_array_equal(
        tiles.batch_bounds, np.minimum(np.arange(n_batches + 1) * docs_per_batch, corpus.n_docs)
    )
    assert tiles.tile_ptr.shape == (n_batches * tiles.n_panels + 1,)
    np.testing.assert_array_equal(np.sort(tiles.token), np.arange(corpus.n_tokens))

    tile = np.repeat(np.arange(n_batches * tiles.n_panels), np.diff(tiles.tile_ptr))
    batch, panel = tile // tiles.n_panels, tile % tiles.n_panels
    docs = corpus.doc[tiles.token]
    words = new_of_old[corpus.word[tiles.token]]
    assert np.all(docs >= tiles.batch_bounds[batch])
    assert np.all(docs < tiles.batch_bounds[batch + 1])
    assert np.all(words >= panel * panel_width) and np.all(words < (panel + 1) * panel_width)
    same_tile = np.diff(tile) == 0
    # CSR order inside a tile: canonical order, hence documents in order.
    assert np.all(np.diff(tiles.token)[same_tile] > 0)
    assert np.all(np.diff(docs)[same_tile] >= 0)


def test_segmented_csr_rejects_bad_sizes(kjv):
    corpus = tokens(kjv[:5])
    new_of_old, _ = frequency_relabel(corpus.word_frequencies())
    for dpb, width in ((0, 10), (10, 0)):
        with pytest.raises(ValueError, match="positive"):
            segmented_csr(corpus, new_of_old, dpb, width)


# -- splitting documents into parts (a multi-GPU chain's) ----------------------------------------
def test_split_balances_tokens_and_keeps_every_part_non_empty(kjv):
    doc_ptr = tokens(kjv).doc_ptr
    for n_parts in (1, 2, 3, 8):
        bounds = split_documents(doc_ptr, n_parts)
        assert bounds[0] == 0 and bounds[-1] == kjv.shape[0] and len(bounds) == n_parts + 1
        assert np.all(np.diff(bounds) >= 1)
        sizes = np.diff(doc_ptr[bounds])
        # No part is off its share by more than its longest document (Psalm 119 is 2,400 tokens).
        longest = np.diff(doc_ptr).max()
        assert np.all(np.abs(sizes - doc_ptr[-1] / n_parts) <= longest)
    # Fewer tokens than parts, or one document holding them all: still one document each.
    skewed = np.array([0, 1000, 1000, 1000, 1001])
    bounds = split_documents(skewed, 4)
    np.testing.assert_array_equal(bounds, [0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="cannot split 4 documents into 5"):
        split_documents(skewed, 5)


@pytest.mark.parametrize("seed", range(4))
def test_frequency_relabel_is_the_stable_sort_of_every_word(seed):
    # Only the used words are sorted; unused ones follow in id order, as the full stable sort
    # of -frequency puts them (ties, zero included, by id).
    rng = np.random.default_rng(seed)
    freq = rng.integers(0, 4, 500) * (rng.random(500) < 0.3)
    if seed == 3:
        freq = freq * 0.5  # float frequencies (weighted tokens)
    new_of_old, old_of_new = frequency_relabel(freq)
    np.testing.assert_array_equal(old_of_new, np.argsort(-freq, kind="stable"))
    np.testing.assert_array_equal(new_of_old[old_of_new], np.arange(500))
