"""Host builds of the token layouts and the cuts of a corpus by documents.

- :func:`frequency_relabel`: words relabelled by decreasing frequency (SaberLDA 3.4, ezLDA IV-B).
- PDOW (SaberLDA 3.1.4): the sparse CUDA backend builds its chunks on the device straight from
  the counts (``backends/cuda/sparse/layout.py``); :func:`pdow_chunks` builds the same token order
  on
  the host, and is what the GPU tests check the device layout against.
- Segmented CSR (Moon, thesis Fig. 2.11): :func:`segmented_csr`, which the mini-batched CUDA
  backend reads (``backends/cuda/minibatch/sampler.py``).
- Cuts by documents: :func:`chunk_bounds` (chunks of a token budget) and :func:`range_bounds`
  (the same within a range of documents), :func:`batch_bounds` (the mini-batched samplers'
  batches), :func:`split_documents` (the parts of a multi-GPU chain).
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


def stable_counting_sort(keys, n_keys, offset=0):
    """Positions ``offset + i`` sorted by ``keys[i]`` (stable), and the bucket pointers.

    SciPy's CSR -> CSC conversion is a linear-time stable counting sort written in C++: a single
    row whose column indices are the keys and whose values are the positions comes back with the
    values grouped by key, in their original order inside a key. At 100 M tokens this is several
    times faster than ``np.argsort(kind="stable")``.
    """
    n = keys.size
    row = sp.csr_matrix(
        (np.arange(offset, offset + n, dtype=np.int64), keys, np.array([0, n], dtype=np.int64)),
        shape=(1, n_keys),
    )
    by_key = row.tocsc()
    return by_key.data, by_key.indptr.astype(np.int64, copy=False)


def frequency_relabel(word_frequencies):
    """New word ids in decreasing frequency (ties by old id), as SaberLDA 3.4 and ezLDA IV-B do.

    Returns
    -------
    new_of_old : ndarray of int32
        ``new_of_old[v]`` is the relabelled id of vocabulary word ``v``; id 0 is the most frequent.
    old_of_new : ndarray of int32
        The inverse permutation.
    """
    freq = np.asarray(word_frequencies)
    # The words a corpus uses, by decreasing frequency, then the unused ones in id order: the
    # stable sort of every word's -frequency, at the cost of sorting the used ones only (a
    # mini-batch uses a few thousand of a vocabulary of 100,000; the full sort was an eighth of
    # its partial_fit step at K = 20).
    used = np.flatnonzero(freq > 0)
    old_of_new = np.concatenate([used[np.argsort(-freq[used], kind="stable")],
                                 np.flatnonzero(~(freq > 0))]).astype(np.int32)
    new_of_old = np.empty_like(old_of_new)
    new_of_old[old_of_new] = np.arange(old_of_new.size, dtype=np.int32)
    return new_of_old, old_of_new


@dataclass
class PDOWChunk:
    """One chunk of the partition-by-document, order-by-word layout (SaberLDA 3.1.4).

    Attributes
    ----------
    doc_begin, doc_end : int
        The chunk holds every token of documents ``doc_begin:doc_end``.
    token : ndarray of int64
        Canonical indices of the chunk's tokens, sorted by relabelled word, then canonical index.
    word_ptr : ndarray of int64, shape (n_words + 1,)
        Tokens of relabelled word ``w`` are ``token[word_ptr[w]:word_ptr[w + 1]]``.
    """

    doc_begin: int
    doc_end: int
    token: np.ndarray
    word_ptr: np.ndarray


def split_documents(doc_ptr, n_parts):
    """Bounds of ``n_parts`` consecutive document ranges holding about equal numbers of tokens,
    each with at least one document (``n_parts`` at most the number of documents).

    Returns
    -------
    bounds : ndarray of int64
        ``[0, ..., n_docs]``; part i holds documents ``bounds[i]:bounds[i + 1]``.
    """
    n_docs = doc_ptr.size - 1
    if not 1 <= n_parts <= max(n_docs, 1):
        raise ValueError(f"cannot split {n_docs} documents into {n_parts} non-empty parts")
    targets = doc_ptr[-1] * np.arange(1, n_parts, dtype=np.float64) / n_parts
    bounds = np.concatenate([[0], np.searchsorted(doc_ptr, targets), [n_docs]]).astype(np.int64)
    for i in range(1, n_parts):              # at least one document in each part ...
        bounds[i] = max(bounds[i], bounds[i - 1] + 1)
    for i in range(n_parts - 1, 0, -1):      # ... the last ones included
        bounds[i] = min(bounds[i], bounds[i + 1] - 1)
    return bounds


def chunk_bounds(doc_ptr, max_tokens):
    """Split documents into consecutive ranges of at most ``max_tokens`` tokens each.

    A document longer than ``max_tokens`` gets a chunk of its own.

    Returns
    -------
    bounds : ndarray of int64
        Document indices ``[0, ..., n_docs]``; chunk i holds documents ``bounds[i]:bounds[i+1]``.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    n_docs = doc_ptr.size - 1
    bounds = [0]
    while bounds[-1] < n_docs:
        start = bounds[-1]
        limit = doc_ptr[start] + max_tokens
        end = int(np.searchsorted(doc_ptr, limit, side="right")) - 1
        bounds.append(min(max(end, start + 1), n_docs))
    return np.asarray(bounds, dtype=np.int64)


def range_bounds(doc_ptr, d0, d1, max_tokens):
    """:func:`chunk_bounds` of documents ``d0:d1`` alone, numbered from ``d0`` (``[0, 0]``
    where the range holds no document)."""
    if d1 <= d0:
        return np.zeros(2, dtype=np.int64)
    return chunk_bounds(doc_ptr[d0 : d1 + 1] - doc_ptr[d0], max_tokens)


def pdow_chunks(corpus, new_of_old, max_tokens):
    """Partition by document into chunks of at most ``max_tokens`` tokens, order each by word.

    Parameters
    ----------
    corpus : TokenCorpus
    new_of_old : ndarray of int32
        Word relabelling from :func:`frequency_relabel`.
    max_tokens : int
        Token budget of one chunk (the engine derives it from its memory budget).

    Returns
    -------
    chunks : list of PDOWChunk
    """
    relabelled = new_of_old[corpus.word]
    chunks = []
    bounds = chunk_bounds(corpus.doc_ptr, max_tokens)
    for d0, d1 in zip(bounds[:-1], bounds[1:]):
        t0, t1 = corpus.doc_ptr[d0], corpus.doc_ptr[d1]
        token, word_ptr = stable_counting_sort(relabelled[t0:t1], corpus.n_words, int(t0))
        chunks.append(PDOWChunk(int(d0), int(d1), token, word_ptr))
    return chunks


#: Tokens per batch of the mini-batched samplers when none is given. Each batch is a whole pass
#: over the GPU, so fewer tokens than a GPU holds in flight at once (a few hundred thousand)
#: would idle it; the number was chosen from the NIPS/KOS measurements of
#: ``doc/performance.md`` (mini-batched sweeps).
DEFAULT_BATCH_TOKENS = 1 << 17


def batch_bounds(doc_ptr, batch_tokens):
    """Document bounds of the batches: consecutive documents, at most ``batch_tokens`` tokens
    each (a longer document alone)."""
    if int(batch_tokens) < 1:
        raise ValueError(f"batch_tokens must be a positive integer, got {batch_tokens!r}")
    if doc_ptr.size < 2:
        return np.zeros(1, dtype=np.int64)
    return chunk_bounds(doc_ptr, int(batch_tokens))


@dataclass
class SegmentedCSR:
    """Tokens tiled by document mini-batch and vocabulary panel (Moon, thesis Fig. 2.11).

    Tile ``(b, p)`` holds the tokens of documents ``batch_bounds[b]:batch_bounds[b+1]`` whose
    relabelled word lies in ``[p * panel_width, (p + 1) * panel_width)``, in CSR order by document.

    Attributes
    ----------
    batch_bounds : ndarray of int64
        Document boundaries of the mini-batches.
    panel_width : int
        Words per vocabulary panel (chosen so a panel's word-topic rows fit in shared memory).
    n_panels : int
    token : ndarray of int64
        Canonical token indices, tile after tile (batch-major, then panel), CSR order inside a tile.
    tile_ptr : ndarray of int64, shape (n_batches * n_panels + 1,)
        Tile ``b * n_panels + p`` is ``token[tile_ptr[i]:tile_ptr[i + 1]]``.
    """

    batch_bounds: np.ndarray
    panel_width: int
    n_panels: int
    token: np.ndarray
    tile_ptr: np.ndarray


def segmented_csr(corpus, new_of_old, docs_per_batch, panel_width):
    """Build the segmented-CSR tiling of a corpus.

    Parameters
    ----------
    corpus : TokenCorpus
    new_of_old : ndarray of int32
        Word relabelling from :func:`frequency_relabel`.
    docs_per_batch : int or ndarray of int64
        Documents per mini-batch, or the batches' document bounds ``[0, ..., n_docs]`` (the
        mini-batched sampler cuts batches by tokens, :func:`chunk_bounds`).
    panel_width : int
        Relabelled words per vocabulary panel.

    Returns
    -------
    tiles : SegmentedCSR
    """
    if np.ndim(docs_per_batch) == 0:
        if docs_per_batch < 1:
            raise ValueError("docs_per_batch and panel_width must be positive")
        batch_bounds = np.arange(0, corpus.n_docs + docs_per_batch, docs_per_batch,
                                 dtype=np.int64)
        batch_bounds[-1] = corpus.n_docs
        batch_bounds = np.unique(batch_bounds)
    else:
        batch_bounds = np.asarray(docs_per_batch, dtype=np.int64)
        if (batch_bounds.size < 1 or batch_bounds[0] != 0 or batch_bounds[-1] != corpus.n_docs
                or np.any(np.diff(batch_bounds) < 0)):
            raise ValueError("batch bounds must rise from 0 to the number of documents")
    if panel_width < 1:
        raise ValueError("docs_per_batch and panel_width must be positive")
    n_panels = max(1, -(-corpus.n_words // panel_width))
    n_batches = max(batch_bounds.size - 1, 0)
    n_tiles = n_batches * n_panels
    # Tile ids in 32 bits when they fit: half the memory traffic of int64 on 100 M tokens.
    tile_dtype = np.int32 if n_tiles <= np.iinfo(np.int32).max else np.int64
    batch_of_doc = np.repeat(np.arange(n_batches, dtype=tile_dtype), np.diff(batch_bounds))
    tile = batch_of_doc[corpus.doc]
    tile *= n_panels
    tile += new_of_old[corpus.word] // panel_width
    # Canonical order is already by document, so a stable sort by tile keeps CSR order inside it.
    token, tile_ptr = stable_counting_sort(tile, n_tiles)
    return SegmentedCSR(batch_bounds, int(panel_width), int(n_panels), token, tile_ptr)
