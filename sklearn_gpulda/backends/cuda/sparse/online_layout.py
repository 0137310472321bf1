"""Online learning's mini-batches laid out together: a PDOW chunk per batch, built for many
batches at once.

:class:`.layout.Chunk` lays one chunk out with some twenty CuPy and NumPy calls, several of them
over the whole vocabulary (the chunk's word counts, its work items). For a mini-batch of 128
documents those calls are the whole cost: about 3 ms of host time each, as much as the batch's
ten sweeps. Here consecutive batches are sorted together by (batch, word, position) in one pass,
their work items found from the runs of that key, and their per-document arrays made in one go;
each batch's chunk is a set of views into those arrays, numbered as if its batch were the whole
corpus (documents and tokens from 0) over its own words: a chunk's work items name words by
their rank among the batch's words, and ``chunk.words`` (host) says which relabelled word each
rank is, so that a batch's chain holds tables of its words' rows only. The order within a chunk
is :class:`.layout.Chunk`'s.
"""

import numpy as np

from ...._input.layouts import range_bounds
from ..constants import WARP
from .layout import BUILD_PIECE_TOKENS, Chunk, CountsOnDevice, document_views, item_tokens


def build_online_chunks(cp, corpus, new_of_old, n_topics, ranges,
                        group_tokens=BUILD_PIECE_TOKENS):
    """A chunk per document range of ``ranges`` (consecutive: each starts where the one before
    ends), numbered from 0, over its own words (``chunk.words``).

    Batches are built in groups of at most ``group_tokens`` tokens (the build's scratch, about
    80 bytes per token, is bounded by it); a batch larger than that is built alone, by
    :class:`.layout.Chunk`.
    """
    counts = CountsOnDevice(cp, corpus, new_of_old)
    doc_ptr = corpus.doc_ptr
    # The sort key holds (batch, word) above a batch's positions (at most 24 bits here).
    max_batches = max(1, (1 << 38) // max(corpus.n_words, 1))
    chunks, i = [], 0
    while i < len(ranges):
        j, total = i, 0
        while j < len(ranges) and j - i < max_batches:
            size = int(doc_ptr[ranges[j][1]] - doc_ptr[ranges[j][0]])
            if j > i and total + size > group_tokens:
                break
            total += size
            j += 1
        if j == i + 1 and total > group_tokens:
            d0, d1 = ranges[i]
            chunk = Chunk(cp, corpus, d0, d1, counts, n_topics,
                          range_bounds(doc_ptr, d0, d1, BUILD_PIECE_TOKENS))
            chunk.d1, chunk.t1 = chunk.d1 - chunk.d0, chunk.t1 - chunk.t0
            chunk.d0 = chunk.t0 = 0
            chunk.words = np.unique(chunk.items[:, 0].get()).astype(np.int64)
            chunk.items[:, 0] = cp.searchsorted(cp.asarray(chunk.words), chunk.items[:, 0])
            chunks.append(chunk)
        else:
            chunks.extend(_group(cp, corpus, counts, n_topics, ranges[i:j]))
        i = j
    return chunks


def _group(cp, corpus, counts, n_topics, ranges):
    """The chunks of consecutive batches ``ranges``, laid out in one sort."""
    n_words = corpus.n_words
    d_first = np.array([d0 for d0, _ in ranges] + [ranges[-1][1]], dtype=np.int64)
    tok_first = corpus.doc_ptr[d_first]                     # each batch's first token
    g0, n = int(tok_first[0]), int(tok_first[-1] - tok_first[0])
    n_batch = len(ranges)
    local = cp.arange(n, dtype=cp.int64)                    # the group's canonical tokens
    j0, j1 = counts.nz_range(int(d_first[0]), int(d_first[-1]))
    nz = cp.searchsorted(counts.nz_ptr[j0 + 1 : j1 + 1] - g0, local, side="right") + j0
    word = counts.word[nz].astype(cp.int64)
    weight = None if counts.nz_weight is None else counts.nz_weight[nz]
    doc = cp.searchsorted(counts.indptr_d[1:], nz, side="right") + counts.d0
    del nz
    # Each token's place in its document (the group's documents' first tokens, from g0).
    doc_first_token = cp.asarray(corpus.doc_ptr[d_first[0] : d_first[-1] + 1] - g0)
    place = local - doc_first_token[doc - int(d_first[0])]
    starts = cp.asarray(tok_first - g0)
    batch = cp.searchsorted(starts[1:], local, side="right")
    in_batch = local - starts[batch]                       # canonical index within its batch
    del local
    # Unique keys (batch, word, position in the batch): tokens sorted by word within their
    # batch, canonical inside a word, whatever the sort's stability.
    shift = max(1, int(np.max(np.diff(tok_first))).bit_length())
    run = batch * n_words + word                            # one run per (batch, word)
    assert (n_batch * n_words) >> (62 - shift) == 0, "the sort key needs more than 63 bits"
    order = cp.argsort((run << shift) | in_batch)
    run = run[order]
    place = place[order]  # int64; each chunk casts its part to its own dtype
    doc_first = cp.asarray(d_first)
    doc = (doc[order] - doc_first[batch[order]]).astype(cp.int32)
    del order, in_batch, word, batch
    items, item_first, n_warps, words, word_first = _items(cp, run, n_words, tok_first - g0,
                                                           weight is not None)
    documents, longest = document_views(cp, corpus, d_first)
    chunks = []
    for b in range(n_batch):
        t0, t1 = int(tok_first[b] - g0), int(tok_first[b + 1] - g0)
        d0, d1 = int(d_first[b]), int(d_first[b + 1])
        a, z = item_first[b], item_first[b + 1]
        chunk = Chunk.assembled(
            (0, d1 - d0, 0, t1 - t0), place[t0:t1], doc[t0:t1],
            None if weight is None else weight[t0:t1],
            {name: view(b) for name, view in documents.items()}, items[a:z], n_warps[b],
            n_topics, longest[b])
        chunk.words = words[word_first[b] : word_first[b + 1]]
        chunks.append(chunk)
    return chunks


def _items(cp, run, n_words, batch_start, weighted):
    """Work items ``(word, begin, end, first warp batch)`` of every batch, each batch's
    numbered within it (:meth:`.layout.Chunk._items`'s, but a word named by its rank among the
    batch's words), from the sorted runs of ``batch * n_words + word``; made on the device (a
    call's batches hold about a million (batch, word) runs).

    Returns
    -------
    items : device int32 array (n_items, 4)
    item_first : ndarray of int64 (n_batches + 1,)
        Batch ``b``'s items are ``items[item_first[b]:item_first[b + 1]]``.
    n_warps : ndarray of int64 (n_batches,)
    words, word_first : ndarray of int64
        Batch ``b``'s words, increasing, are ``words[word_first[b]:word_first[b + 1]]``.
    """
    n = int(run.shape[0])
    n_batch = batch_start.shape[0] - 1
    edges = cp.arange(n_batch + 1, dtype=cp.int64)
    head = cp.flatnonzero(cp.concatenate([cp.ones(min(n, 1), dtype=bool), run[1:] != run[:-1]]))
    run_end = cp.concatenate([head[1:], cp.full(min(n, 1), n, dtype=head.dtype)])
    key = run[head]
    batch = key // n_words
    word = key - batch * n_words
    # A run is one (batch, word): its rank within its batch is the word's local name.
    word_first = cp.searchsorted(batch, edges, side="left")
    rank = cp.arange(head.shape[0], dtype=cp.int64) - word_first[batch]
    # A run is split into items of its batch's item size (.layout.item_tokens, as the batch
    # laid out alone takes).
    sizes = np.diff(np.asarray(batch_start, dtype=np.int64))
    size = cp.asarray(np.array([item_tokens(int(n), weighted) for n in sizes],
                               dtype=np.int64))[batch]
    pieces = (run_end - head + size - 1) // size
    piece_end = cp.cumsum(pieces)
    n_items = int(piece_end[-1]) if head.shape[0] else 0
    item = cp.arange(n_items, dtype=cp.int64)
    item_run = cp.searchsorted(piece_end, item, side="right")
    item_size = size[item_run]
    begin = head[item_run] + (item - (piece_end - pieces)[item_run]) * item_size
    end = cp.minimum(begin + item_size, run_end[item_run])
    item_batch = batch[item_run]
    # Positions and warp batches counted from the item's batch's own first.
    first_token = cp.asarray(batch_start)[item_batch]
    begin -= first_token
    end -= first_token
    warps = (end - begin + WARP - 1) // WARP
    warp_end = cp.cumsum(warps)
    item_first = cp.searchsorted(item_batch, edges, side="left")
    batch_warp0 = cp.concatenate([cp.zeros(1, dtype=cp.int64), warp_end])[item_first]
    warp_first = warp_end - warps - batch_warp0[item_batch]
    items = cp.stack([rank[item_run], begin, end, warp_first], axis=1).astype(cp.int32)
    return (items, item_first.get(), cp.diff(batch_warp0).get(), word.get(),
            word_first.get())
