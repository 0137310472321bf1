"""Batch fits from a list of row blocks (``sklearn_gpulda._input.row_blocks``): the model of the
joined
matrix, without joining it; blocks checked one by one with errors that name the block."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._input.row_blocks import BlockCorpus, is_block_sequence
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._input.layouts import frequency_relabel
from sklearn_gpulda.datasets import load_kjv_chapters

PARAMS = dict(n_components=7, max_iter=12, random_state=3, device="cpu")


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data[:400].tocsr()


def _blocks(X, cuts):
    bounds = [0, *cuts, X.shape[0]]
    return [X[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _same_model(a, b):
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.doc_topic_prior_, b.doc_topic_prior_)
    assert a.topic_word_prior_ == b.topic_word_prior_
    assert (a.n_iter_, a.n_features_in_, a.n_tokens_) == (b.n_iter_, b.n_features_in_,
                                                          b.n_tokens_)
    assert a.bound_ == pytest.approx(b.bound_, rel=1e-12)


def test_what_counts_as_blocks(kjv):
    assert is_block_sequence([kjv[:3], kjv[3:5].toarray()])
    assert not is_block_sequence(kjv)
    assert not is_block_sequence([[1, 0], [0, 2]])       # one matrix as nested lists
    assert not is_block_sequence([np.ones(3), np.ones(3)])  # rows, not blocks
    assert not is_block_sequence([])


@pytest.mark.parametrize("fractional", [False, True])
def test_summaries_are_those_of_the_joined_matrix(kjv, fractional):
    X = kjv.astype(np.float64)
    if fractional:
        X.data *= 0.6
    blocks = _blocks(X, [1, 150, 151, 390])
    blocks[2] = blocks[2].toarray()  # a dense block among sparse ones
    corpus, whole = BlockCorpus(blocks), tokens(X)
    for name in ("n_docs", "n_words", "n_tokens", "n_nonzero", "integral", "weighted",
                 "total_weight"):
        assert getattr(corpus, name) == getattr(whole, name), name
    np.testing.assert_array_equal(corpus.doc_ptr, whole.doc_ptr)
    np.testing.assert_array_equal(corpus.doc_lengths(), whole.doc_lengths())
    np.testing.assert_allclose(corpus.word_frequencies(), whole.word_frequencies(), rtol=1e-12)
    for got, want in zip((corpus.doc, corpus.word, corpus.weight),
                         (whole.doc, whole.word, whole.weight)):
        if want is None:
            assert got is None
        else:
            np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(corpus.doc_offsets, [0, 1, 150, 151, 390, 400])


def test_device_layout_of_blocks_is_the_whole_corpus_layout(kjv):
    # Each block is laid out on its own and its chunks placed in the whole: a chunk holds the
    # tokens a chunk of the same documents of the joined matrix holds (NumPy stands in for
    # CuPy, as in test_corpus).
    from sklearn_gpulda._input.layouts import range_bounds
    from sklearn_gpulda.backends.cuda.sparse.layout import (
        BUILD_PIECE_TOKENS,
        Chunk,
        CountsOnDevice,
        build_chunks,
    )

    blocks = _blocks(kjv, [100, 101, 333])
    corpus, whole = BlockCorpus(blocks), tokens(kjv)
    new_of_old, _ = frequency_relabel(corpus.word_frequencies())
    chunks = build_chunks(np, corpus, new_of_old, 20, 9000, 1000)
    assert len(chunks) > len(blocks)
    assert [c.d0 for c in chunks[1:]] == [c.d1 for c in chunks[:-1]]
    counts = CountsOnDevice(np, whole, new_of_old)
    for ch in chunks:
        assert (ch.t0, ch.t1) == (whole.doc_ptr[ch.d0], whole.doc_ptr[ch.d1])
        ref = Chunk(np, whole, ch.d0, ch.d1, counts, 20,
                    range_bounds(whole.doc_ptr, ch.d0, ch.d1, BUILD_PIECE_TOKENS))
        for name in ("place", "doc", "doc_off", "row_off", "doc_weight", "items"):
            np.testing.assert_array_equal(getattr(ch, name), getattr(ref, name), err_msg=name)


@pytest.mark.parametrize("fractional", [False, True])
def test_fit_on_blocks_is_the_fit_on_the_joined_matrix(kjv, fractional):
    X = kjv.astype(np.float64)
    if fractional:
        X.data *= 0.6
    one = GPULatentDirichletAllocation(**PARAMS).fit(X)
    blocks = _blocks(X, [57, 58, 300])
    blocks[1] = blocks[1].toarray()
    _same_model(GPULatentDirichletAllocation(**PARAMS).fit(blocks), one)
    _same_model(GPULatentDirichletAllocation(**PARAMS).fit(tuple(blocks)), one)


def test_float32_blocks_give_float32_components(kjv):
    blocks = [b.astype(np.float32) for b in _blocks(kjv, [200])]
    model = GPULatentDirichletAllocation(**PARAMS).fit(blocks)
    assert model.components_.dtype == np.float32
    mixed = GPULatentDirichletAllocation(**PARAMS).fit([blocks[0], blocks[1].astype(np.float64)])
    assert mixed.components_.dtype == np.float64


def test_a_bad_block_is_named_and_the_model_stays(kjv):
    model = GPULatentDirichletAllocation(**PARAMS).fit(kjv)
    before = model.components_.copy()
    negative = kjv[10:20].toarray().astype(float)
    negative[3, 5] = -1.0
    with pytest.raises(ValueError, match="block 1 of X: .*Negative values"):
        model.fit([kjv[:10], negative])
    with pytest.raises(ValueError, match="block 2 of X: .*features"):
        model.fit([kjv[:10], kjv[10:20], kjv[20:30, :-1]])
    with pytest.raises(ValueError, match="partial_fit on each block"):
        GPULatentDirichletAllocation(**dict(PARAMS, learning_method="online")).fit(
            [kjv[:10], kjv[10:20]])
    np.testing.assert_array_equal(model.components_, before)


@pytest.mark.gpu
def test_gpu_fit_on_blocks_held_and_streamed(kjv, monkeypatch):
    # On the GPU, held on the device and streamed within a budget, blocks give the joined
    # matrix's model.
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler
    from sklearn_gpulda._runtime.device import Device

    X = load_kjv_chapters().data
    # The sparse engine on both sides: blocks and a budget take it, and 'auto' may take the
    # dense one for the joined matrix (backends/auto_rule.py).
    params = dict(PARAMS, device="cuda", n_components=20, max_iter=25, algorithm="sparse")
    one = GPULatentDirichletAllocation(**params).fit(X)
    blocks = _blocks(X, [300, 301, 900])
    _same_model(GPULatentDirichletAllocation(**params).fit(blocks), one)
    _, peak = CudaSparseSampler(20, 0.05, 0.05, 0, Device("cuda", (0,))).estimate_bytes(tokens(X))
    streamed = GPULatentDirichletAllocation(max_device_memory=_held_now() + peak // 4,
                                            **params).fit(blocks)
    _same_model(streamed, one)


def test_memory_mapped_blocks_stay_as_given(kjv, tmp_path):
    # Integer blocks opened from disk are kept as the caller's memory-mapped matrices (the
    # checked float copy is dropped), and give the model of the joined matrix.
    blocks = []
    for i, block in enumerate(_blocks(kjv, [150, 280])):
        arrays = []
        for name in ("data", "indices", "indptr"):
            path = tmp_path / f"part-{i}-{name}.npy"
            np.save(path, getattr(block, name).astype(np.int64 if name == "data" else np.int32))
            arrays.append(np.load(path, mmap_mode="r"))
        blocks.append(sp.csr_matrix(tuple(arrays), shape=block.shape, copy=False))

    def mapped(a):  # SciPy may hold a plain view of the map: walk to the array it views
        while a is not None and not isinstance(a, np.memmap):
            a = a.base
        return a is not None

    assert all(mapped(b.data) for b in blocks)
    kept = []
    real = BlockCorpus.__init__

    def spy(self, given):
        kept.extend(given)
        real(self, given)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(BlockCorpus, "__init__", spy)
        model = GPULatentDirichletAllocation(**PARAMS).fit(blocks)
    assert len(kept) == len(blocks) and all(k is b for k, b in zip(kept, blocks))
    _same_model(model, GPULatentDirichletAllocation(**PARAMS).fit(kjv))


@pytest.mark.parametrize("fractional", [False, True])
def test_document_ranges_of_blocks(kjv, fractional):
    X = kjv.astype(np.float64)
    if fractional:
        X.data[X.indptr[300]:] *= 0.6       # only the last block's counts are fractional
    corpus = BlockCorpus(_blocks(X, [100, 300]))
    for d0, d1 in [(0, 50), (50, 320), (320, 400), (100, 300)]:
        part, alone = corpus.doc_range(d0, d1), tokens(X[d0:d1])
        assert (part.n_docs, part.n_tokens) == (d1 - d0, alone.n_tokens)
        assert part.integral == corpus.integral
        np.testing.assert_array_equal(part.doc_ptr, alone.doc_ptr)
        np.testing.assert_array_equal(part.doc_lengths(), corpus.doc_lengths()[d0:d1])
        np.testing.assert_array_equal(part.word, alone.word)
    corpus.release_counts()
    with pytest.raises(RuntimeError, match="released before it was split"):
        corpus.doc_range(0, 10)


def _held_now():
    """What a budget counts as the process's on GPU 0 before a sparse fit allocates (the
    context, modules and arrays held now): a budget of this plus n leaves the fit n bytes."""
    import gc

    import cupy

    from sklearn_gpulda.backends.cuda.process_memory import held_bytes
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    gc.collect()
    with cupy.cuda.Device(0):
        return held_bytes(cupy, CudaSparseSampler.budget_kernels)
