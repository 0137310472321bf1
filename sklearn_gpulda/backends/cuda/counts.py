"""Launchers of ``cuda/counts.cu``: the M-step (A rows, B, topic totals) and A's histogram keys."""

import numpy as np

from .. import prior_learning as _learning
from . import kernels as _kernels
from .constants import COUNT_BLOCK, HIST_MAX_TOPICS, LONG_HIST_WINDOW, SHORT_DOC_MAX, WARP

STEM = "counts"
#: Rows of B per slice in the topic-total reduction.
ROWS_PER_SLICE = 128


def _reorder(kernel, chunk, source, target):
    n = chunk.n_tokens
    if n:
        _kernels.launch(
            STEM, f"{kernel}_{chunk.suffix}_{chunk.fmt}", -(-n // 256), 256,
            [(source, chunk.topic_dtype), (chunk.place, chunk.place_dtype),
             (chunk.doc, np.int32), (chunk.doc_off, np.int32), (n, "i64"),
             (target, chunk.topic_dtype)],
        )


def scatter_topics(chunk):
    """The chunk's topics from PDOW into canonical order: ``z_can[t] = z[p]`` for the token
    ``t = doc_off[doc[p]] + place[p]`` at position ``p``."""
    _reorder("scatter_topics", chunk, chunk.z, chunk.z_can)


def gather_topics(chunk):
    """The chunk's topics from canonical into PDOW order (``z[p] = z_can[t]``)."""
    _reorder("gather_topics", chunk, chunk.z_can, chunk.z)


def _rebuild(chunk, kind, docs, n_docs, n_sm, blocks_per_sm, extra, shared_mem):
    """Launch ``rebuild_a_<kind>`` over ``n_docs`` documents listed in ``docs``.

    Warp-strided kernels get at most ``blocks_per_sm`` blocks per SM; the block-per-document
    kernel (``blocks_per_sm=None``) at most four. ``extra`` are the kernel's arguments between
    ``z_can`` and ``a_row`` (counts.cu gives each kernel's contract).
    """
    if not n_docs:
        return
    if blocks_per_sm is None:
        grid = min(n_docs, n_sm * 4)
    else:
        grid = min(-(-n_docs // (COUNT_BLOCK // WARP)), n_sm * blocks_per_sm)
    _kernels.launch(
        STEM, f"rebuild_a_{kind}_{chunk.suffix}_{chunk.fmt}", grid, COUNT_BLOCK,
        [(docs, np.int32), (n_docs, "i32"), (chunk.doc_off, np.int32), (chunk.doc_len, np.int32),
         (chunk.row_off, np.int32), (chunk.z_can, chunk.z.dtype), *extra,
         (chunk.a_row, np.int32), (chunk.a_ent, chunk.ent_dtype)],
        shared_mem=shared_mem,
    )


def rebuild_a(chunk, n_topics, n_sm):
    """The chunk's sparse A rows from its topics (scatter to canonical order, then count)."""
    if chunk.n_tokens == 0:
        return
    scatter_topics(chunk)
    count_rows(chunk, n_topics, n_sm)


def count_rows(chunk, n_topics, n_sm):
    """The chunk's sparse A rows from its topics in canonical order (``z_can``)."""
    if chunk.n_tokens == 0:
        return
    n_short = int(chunk.short_docs.shape[0])
    if chunk.weight is None and n_topics <= HIST_MAX_TOPICS:
        # Per-warp histograms: O(n + K) per document, cheaper than sorting while K is small.
        # A long document takes a block (below): a warp walking 20 k tokens alone was the
        # whole rebuild's time on 20 Newsgroups (0.66 ms a sweep, H100). Both give the row
        # the same bits (integer counts in topic order).
        _rebuild(chunk, "hist", chunk.short_docs, n_short, n_sm, 16, [(n_topics, "i32")],
                 (COUNT_BLOCK // WARP) * n_topics * 4)
    elif chunk.weight is None:
        # Large K, integer counts: a topic bitmap per warp, O(n + K / 32) per document.
        bitmap_words = 2 * (-(-n_topics // 32)) + SHORT_DOC_MAX
        _rebuild(chunk, "bitmap", chunk.short_docs, n_short, n_sm, 16, [(n_topics, "i32")],
                 (COUNT_BLOCK // WARP) * bitmap_words * 4)
    else:
        _rebuild(chunk, "short", chunk.short_docs, n_short, n_sm, 12,
                 [(chunk.weight, np.float32)], 0)
    window = min(n_topics, LONG_HIST_WINDOW)
    _rebuild(chunk, "long", chunk.long_docs, int(chunk.long_docs.shape[0]), n_sm, None,
             [(chunk.weight, np.float32), (n_topics, "i32"), (window, "i32")], window * 4)


def count_b(chunk, n_topics, B, n_sm, rare=None):
    """``B[word, z] += w`` for every token of the chunk (B is not zeroed here); with ``rare``
    (:class:`~.hybrid.RareRows`, hybrid storage) B holds the first ``rare.n_dense`` words and
    the others' tokens count into their rows of slots."""
    if chunk.n_tokens == 0:
        return
    n_items = int(chunk.items.shape[0])
    _kernels.launch(
        STEM, f"count_b_{chunk.suffix}", min(n_items, n_sm * 16), 256,
        [(chunk.items, np.int32), (n_items, "i32"), (chunk.z, chunk.z.dtype),
         *_weight_index(chunk), (chunk.weight, np.float32), (n_topics, "i32"), (B, np.float32),
         (int(B.shape[0]), "i32"), (None if rare is None else rare.slots, np.uint32),
         (None if rare is None else rare.offsets, np.int64)],
    )


def _weight_index(chunk):
    """count_b's arguments that locate a token's weight (place, doc, doc_off): null without
    weights, where a packed chunk's 16-bit places do not match the kernel's uint32."""
    if chunk.weight is None:
        return [(None, np.uint32), (None, np.int32), (None, np.int32)]
    return [(chunk.place, np.uint32), (chunk.doc, np.int32), (chunk.doc_off, np.int32)]


def clear(array):
    """Zero a contiguous device array with a memset on the current stream: CuPy's ``fill``
    would compile a kernel on a user's machine (``cupy_fill``) and launch it."""
    import cupy as cp

    if array.nbytes:
        cp.cuda.runtime.memsetAsync(array.data.ptr, 0, array.nbytes,
                                    cp.cuda.get_current_stream().ptr)


def topic_totals(partial, totals, denom, n_words, beta, extra_sums=None):
    """``totals`` = the sum of ``partial``'s slices (a warp per topic), then ``denom`` =
    totals + n_words * beta (``cuda/counts.cu``), plus ``extra_sums`` (K float64: what a
    matrix prior's seeded cells add to each topic) where given; with ``partial`` None only
    ``denom``, from the totals kept. Exact, so equal to CuPy's sum over the slices, for integer
    counts: the sampler takes it for those only.

    ``beta`` is a number, or a device array of one float64 that the kernel reads it from
    (``topic_totals_dev``: a sweep captured in a CUDA graph, :mod:`.sparse.sweep_graph`)."""
    import cupy

    n_topics = int(totals.shape[0])
    n_slices = 0 if partial is None else int(partial.shape[0])
    on_device = isinstance(beta, cupy.ndarray)
    _kernels.launch(
        STEM, "topic_totals_dev" if on_device else "topic_totals", -(-n_topics * WARP // 128),
        128,
        [(partial, np.float64), (n_slices, "i32"), (n_topics, "i32"), (n_words, "i32"),
         (beta, np.float64) if on_device else (beta, "f64"), (extra_sums, np.float64),
         (totals, np.float64), (denom, np.float64)],
    )


def _cell_grid(n, n_sm):
    return max(1, min(-(-n // 256), n_sm * 8))


def seed_cells(B, rows, topics, extra, saved, n_sm):
    """``saved`` = B at the cells ``(rows, topics)``, then ``B += extra`` there (float64 sums
    rounded to float32); with ``extra`` None only the counts are read (``cuda/counts.cu``)."""
    n = int(rows.shape[0])
    if n == 0:
        return
    _kernels.launch(
        STEM, "seed_cells", _cell_grid(n, n_sm), 256,
        [(B, np.float32), (int(B.shape[1]), "i32"), (rows, np.int32), (topics, np.int32),
         (extra, np.float64), (n, "i64"), (saved, np.float32)],
    )


def unseed_cells(B, rows, topics, saved, n_sm):
    """``B`` at the cells ``(rows, topics)`` = ``saved`` (what :func:`seed_cells` read)."""
    n = int(rows.shape[0])
    if n == 0:
        return
    _kernels.launch(
        STEM, "unseed_cells", _cell_grid(n, n_sm), 256,
        [(B, np.float32), (int(B.shape[1]), "i32"), (rows, np.int32), (topics, np.int32),
         (saved, np.float32), (n, "i64")],
    )


def column_partials(B, partial):
    """``partial[s, k]`` = sum of ``B[v, k]`` over the rows of slice s, in float64, in row order
    (``partial`` has ``ceil(V / ROWS_PER_SLICE)`` rows)."""
    n_words, n_topics = B.shape
    _kernels.launch(
        STEM, "column_partials", (-(-n_topics // 128), partial.shape[0]), 128,
        [(B, np.float32), (n_words, "i32"), (n_topics, "i32"), (ROWS_PER_SLICE, "i32"),
         (partial, np.float64)],
    )


def a_entry_keys(chunk, key_off, keys, n_sm):
    """Every non-zero of the chunk's A as ``(topic << 32) | float bits of its count`` into
    ``keys`` (uint64), document d's at ``key_off[d]`` onwards."""
    if chunk.n_docs == 0:
        return
    grid = min(-(-chunk.n_docs // (COUNT_BLOCK // WARP)), n_sm * 16)
    _kernels.launch(
        STEM, f"a_entry_keys_{chunk.fmt}", grid, COUNT_BLOCK,
        [(chunk.a_row, np.int32), (chunk.a_ent, chunk.ent_dtype), (key_off, np.int64),
         (chunk.n_docs, "i32"), (keys, np.uint64)],
    )


#: Integer values 1 .. VALUE_BINS - 1 of B are counted in a shared-memory table per block.
VALUE_BINS = 4096
#: Integer counts 1 .. KEY_BINS - 1 of A are counted in a (K, KEY_BINS) table: the columns of
#: the table learning alpha reads (``_learning.TABLE_COUNTS``).
KEY_BINS = _learning.TABLE_COUNTS


def value_bins(values, n_bins, capacity, n_sm):
    """:func:`value_histogram` left on the device, nothing read back: ``(buffer, overflow)``,
    the table in ``buffer[:n_bins]`` and the overflow's count in ``buffer[n_bins]`` (uint64),
    the overflow's values in ``overflow`` (float32, ``capacity`` or 1 of them)."""
    import cupy as cp

    flat = values.ravel()
    # The table and the overflow's count in one buffer, read back at once.
    buffer = cp.zeros(n_bins + 1, dtype=cp.uint64)
    table, n_overflow = buffer[:n_bins], buffer[n_bins:]
    overflow = cp.empty(max(1, capacity), dtype=cp.float32)
    if flat.size:
        _kernels.launch(
            STEM, "value_histogram", min(-(-flat.size // 256), n_sm * 8), 256,
            [(flat, np.float32), (flat.size, "i64"), (n_bins, "i32"), (table, np.uint64),
             (overflow, np.float32), (n_overflow, np.uint64), (capacity, "i64")],
            shared_mem=n_bins * 4,
        )
    return buffer, overflow


def value_histogram(values, n_bins, capacity, n_sm):
    """``(table, overflow, n_overflow)``: ``table[c]`` (host) entries of ``values`` (float32)
    equal the integer c in 1 .. n_bins - 1; the other non-zero values are listed in the device
    array ``overflow[:n_overflow]`` when ``n_overflow <= capacity`` (``cuda/counts.cu``). The
    table and the count come back in one copy."""
    buffer, overflow = value_bins(values, n_bins, capacity, n_sm)
    host = buffer.get()
    return host[:n_bins], overflow, int(host[n_bins])


def a_entry_histogram(chunk, table, overflow, n_overflow, n_sm):
    """Add the chunk's A entries to ``table`` (K x n_bins uint64): integer counts below n_bins
    there, the other entries' keys (as :func:`a_entry_keys` makes them) appended to
    ``overflow`` (its size is the capacity) through the device counter ``n_overflow``."""
    if chunk.n_docs == 0:
        return
    grid = min(-(-chunk.n_docs // (COUNT_BLOCK // WARP)), n_sm * 16)
    _kernels.launch(
        STEM, f"a_entry_histogram_{chunk.fmt}", grid, COUNT_BLOCK,
        [(chunk.a_row, np.int32), (chunk.a_ent, chunk.ent_dtype), (chunk.n_docs, "i32"),
         (table.shape[1], "i32"), (table, np.uint64), (overflow, np.uint64),
         (n_overflow, np.uint64), (overflow.size, "i64")],
    )
