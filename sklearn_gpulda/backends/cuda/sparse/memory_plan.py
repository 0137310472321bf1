"""The sparse chain's memory plan: what it decides at load to stay within its device memory
budget, and what each part of the chain costs there.

It decides how B is stored (dense, or dense rows for the frequent words beside hash rows for the
rare ones: :mod:`.hybrid`), whether the corpus stays on the device or is streamed through it and
in chunks of how many tokens (:mod:`.streaming`), and whether averaging's running sum is
reserved beside them. Every answer is arithmetic on the corpus's sizes (:class:`CorpusSizes`)
and the chain's settings (:class:`ChainSettings`), so that it reads no sampler and no corpus:
the sampler measures its corpus once, asks :func:`load_plan` once, before it allocates anything,
and carries out the :class:`LoadPlan` it is given.

Averaging is asked for in one of three ways (the sampler's ``averaging``): 'required' (its sum
is part of the plan: a corpus that fits only without it is streamed), 'optional' (the
estimator's default averaging: reserved where chunks still fit beside it, else the fit will find
no room for it and go on without it, with a warning) or 'none' (a fit that does not average).
"""

from dataclasses import dataclass

import numpy as np

from ..constants import ROW_PAD, WARP
from ..counts import ROWS_PER_SLICE
from .hybrid import ADD_BYTES_PER_ENTRY
from .hybrid_table import MAX_RARE_TOKENS
from .layout import BUILD_PIECE_TOKENS, ITEMS_TO_FILL, PIECE, packed_format, topic_dtype

#: What a sampler's ``averaging`` may say.
AVERAGING = ("required", "optional", "none")
#: What ``word_topic_storage`` may say.
STORAGES = ("auto", "dense", "hybrid")
#: 'auto' stores B hybrid from this many topics on (where a word needs at least 32 tokens to be
#: stored dense), or wherever the dense table would not fit the device beside the corpus.
AUTO_HYBRID_MIN_TOPICS = 4096
#: Slots of a rare word's row per token: a row is at most two thirds full, where linear probing
#: still finds a present topic in about 2 probes and an absent one in about 5.
SLOTS_PER_TOKEN = 1.5
#: Averaging's reservation per slot of the rare rows, an estimate (:meth:`.hybrid.HybridSum.add`
#: checks the room it really takes): a union of the averaged sweeps' entries of up to twice one
#: sweep's at 16 bytes a key, and one add's scratch, with at most 2/3 of an entry per slot.
SUM_BYTES_PER_SLOT = -(-(2 * 16 + ADD_BYTES_PER_ENTRY) * 2 // 3)
#: Fewest tokens a streamed chunk may hold: below this the per-chunk launches and copies cost
#: more than the sampling they feed.
MIN_STREAM_CHUNK = 1 << 16


def check_averaging(averaging):
    """``averaging`` if it is one of :data:`AVERAGING`, else ValueError."""
    if averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {AVERAGING}, got {averaging!r}")
    return averaging


def check_storage(storage):
    """``storage`` if it is one of :data:`STORAGES`, else ValueError."""
    if storage not in STORAGES:
        raise ValueError(f"word_topic_storage must be one of {STORAGES}, got {storage!r}")
    return storage


@dataclass(frozen=True, eq=False)
class CorpusSizes:
    """What the plan reads of a corpus (:func:`corpus_sizes` measures it)."""

    n_tokens: int
    n_docs: int
    n_words: int
    n_nonzero: int
    longest: int              # tokens of the longest document
    weighted: bool            # tokens carry weights (counts that are not all integers)
    integral: bool            # every count is an integer
    on_device: bool           # the counts lie on a GPU already (the layout uploads nothing)
    frequencies: object = None  # host (n_words,) the rare rows are sized by, any order


def corpus_sizes(corpus, frequencies=None):
    """The :class:`CorpusSizes` of ``corpus`` (a token corpus, or one in row blocks), with the
    word frequencies its chain relabels by."""
    return CorpusSizes(n_tokens=corpus.n_tokens, n_docs=corpus.n_docs, n_words=corpus.n_words,
                       n_nonzero=corpus.n_nonzero,
                       longest=int(np.diff(corpus.doc_ptr).max(initial=0)),
                       weighted=corpus.weighted, integral=corpus.integral,
                       on_device=corpus.on_device, frequencies=frequencies)


@dataclass(frozen=True)
class ChainSettings:
    """What the plan reads of a chain: its K, its device budget and what it was asked for."""

    n_topics: int
    budget: int                     # device bytes the chain may take
    averaging: str = "optional"     # one of AVERAGING
    storage: str = "dense"          # one of STORAGES
    max_chunk_tokens: object = None  # token budget of a chunk, or None (one chunk)
    scratch_bytes: int = 0          # the sampler's scratch beside B (the large-K Bhat rows)
    shared_frequencies: bool = False  # words relabelled by frequencies from elsewhere (a shard)
    gpu: int = 0                    # the GPU, which MemoryError names


@dataclass(frozen=True, eq=False)
class TablePlan:
    """How one B is stored."""

    hybrid: bool       # the rare words' rows are hash tables
    n_dense: int       # rows stored dense (the frequent words, relabelled)
    offsets: object    # host int64 first slots of the rare rows, and their total (None: dense)
    nbytes: int        # device bytes of B with the topic totals' scratch and the K-vectors


@dataclass(frozen=True, eq=False)
class LoadPlan:
    """What the chain lays out at load, and where."""

    table: TablePlan
    streamed: bool            # the chunks live in host memory and pass through the device
    chunk_tokens: object      # token budget of a chunk, or None (the corpus in one chunk)
    piece_tokens: int         # tokens laid out at a time while a chunk is built
    averaging_reserved: bool  # averaging's sum is counted in the plan
    peak_bytes: int           # the resident chain's peak while building its layout


def layout_bytes(sizes, n_topics, max_chunk_tokens, piece_tokens=BUILD_PIECE_TOKENS):
    """Device bytes of the resident layout and chain state kept (steady), and the peak while
    building them (:mod:`.layout`).

    Kept: per token its place (2 bytes packed, 4 wide), document, two topics and an A slot
    (4 bytes packed, 8 wide) and, for weighted counts, its weight; per document its headers and
    A row padding. Building holds the places and documents, the counts on the device (their
    words relabelled, plus a copy of each array when the corpus is on the host) and one piece's
    scratch, but not the state.

    Returns
    -------
    steady, peak : int
    """
    n, d, v = sizes.n_tokens, sizes.n_docs, sizes.n_words
    nnz = sizes.n_nonzero
    weighted = sizes.weighted
    tsize = np.dtype(topic_dtype(n_topics)).itemsize
    packed = packed_format(weighted, sizes.longest, n_topics)
    entry = 4 if packed else 8
    layout_token = (2 if packed else 4) + 4 + (4 if weighted else 0)
    per_doc = 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + ROW_PAD * entry
    # Small chunks take smaller items (layout.item_tokens): at most 2 * ITEMS_TO_FILL of them.
    items = (n // PIECE + v + 2 * ITEMS_TO_FILL) * 16 * 2
    steady = n * (layout_token + 2 * tsize + entry) + d * per_doc + items + (n // WARP + v) * 8
    chunk = n if max_chunk_tokens is None else min(n, int(max_chunk_tokens))
    uploaded = 0 if sizes.on_device else nnz * (4 + 8 + (4 if weighted else 0)) + d * 8
    build = (n * layout_token + nnz * 4 + uploaded + v * 24
             + min(chunk, int(piece_tokens)) * 80)
    return int(steady), int(max(steady, build))


def resident_bytes(sizes, settings, table, extra_bytes=0):
    """``(steady, peak)``: device bytes of a chain that keeps its corpus on the device with B
    stored as ``table`` says (a :class:`TablePlan`), and its peak while building its layout;
    ``extra_bytes`` is what an engine keeps beside the chain for this corpus, in both."""
    layout, layout_peak = layout_bytes(sizes, settings.n_topics, settings.max_chunk_tokens)
    held = table.nbytes + settings.scratch_bytes
    # The table is allocated once the layout's build scratch is gone.
    steady, peak = int(layout + held), int(max(layout_peak, layout + held))
    return steady + extra_bytes, peak + extra_bytes


def sum_bytes(sizes, n_topics, table):
    """Device bytes planned for averaging's running sum of a B stored as ``table`` says: a
    dense B's float64; a hybrid one's dense rows in float64 and :data:`SUM_BYTES_PER_SLOT` per
    slot of its rare rows."""
    if table.hybrid:
        return (int(table.n_dense) * int(n_topics) * 8
                + SUM_BYTES_PER_SLOT * int(table.offsets[-1]))
    return sizes.n_words * n_topics * 8


# -- how B is stored ----------------------------------------------------------------------------
def resolve_storage(storage, integral, n_topics, dense_preferred):
    """Whether a chain stores B hybrid: ``storage`` as asked ('dense', 'hybrid' or 'auto'), for
    a corpus of integer counts or not. 'auto' takes hybrid from
    :data:`AUTO_HYBRID_MIN_TOPICS` topics on, and below that wherever the memory plan does not
    prefer the dense table (``dense_preferred()``, asked only then)."""
    if check_storage(storage) == "dense":
        return False
    if not integral:
        if storage == "hybrid":
            raise ValueError("word_topic_storage='hybrid' needs integer counts: a rare word's "
                             "row holds integer counts of its tokens")
        return False
    if storage == "hybrid" or n_topics >= AUTO_HYBRID_MIN_TOPICS:
        return True
    return not dense_preferred()


def _vector_bytes(n_topics):
    """Device bytes of the K-vectors beside B (totals, denominators, alpha and the like)."""
    return 5 * n_topics * 8


def dense_table(n_words, n_topics):
    """The :class:`TablePlan` of a dense (V, K) float32 B."""
    nbytes = (n_words * n_topics * 4 + (-(-n_words // ROWS_PER_SLICE)) * n_topics * 8
              + _vector_bytes(n_topics))
    return TablePlan(False, n_words, None, nbytes)


def capacity(frequencies):
    """Slots of each word's table: :data:`SLOTS_PER_TOKEN` per token rounded up, at least 2
    (0 for a word without tokens)."""
    f = np.ceil(np.asarray(frequencies, dtype=np.float64)).astype(np.int64)
    cap = np.zeros(f.shape, dtype=np.int64)
    pos = f > 0
    # (3 f + 1) // 2 is ceil(1.5 f) in integers.
    cap[pos] = np.maximum((3 * f[pos] + 1) // 2, 2)
    return cap


def split_rows(frequencies, n_topics):
    """``(n_dense, offsets)`` of a hybrid B for words in decreasing frequency order.

    A word is rare when its table takes at most half a dense row (``capacity <= K / 2`` slots of
    4 bytes against K float32 cells) and its tokens fit a slot's count; decreasing frequencies
    make the rare words a suffix. ``offsets`` (int64, ``V - n_dense + 1``) are the first slots of
    the rare words' rows and the total at the end.
    """
    f = np.asarray(frequencies, dtype=np.float64)
    if f.size > 1 and np.any(np.diff(f) > 0):
        raise ValueError("frequencies must be in decreasing order (relabelled words)")
    cap = capacity(f)
    rare = (cap <= n_topics // 2) & (f <= MAX_RARE_TOKENS)
    n_dense = int(np.argmax(rare)) if rare.any() else f.size
    offsets = np.zeros(f.size - n_dense + 1, dtype=np.int64)
    np.cumsum(cap[n_dense:], out=offsets[1:])
    return n_dense, offsets


def rows_bytes(n_dense, offsets, n_topics):
    """Device bytes of a hybrid B split as :func:`split_rows` says: dense rows, slots, offsets."""
    return n_dense * n_topics * 4 + int(offsets[-1]) * 4 + offsets.size * 8


def hybrid_rows(frequencies, n_topics):
    """The :class:`TablePlan` of a hybrid B for words of these frequencies (any order): the
    rare words' rows as :func:`split_rows` lays them out."""
    n_dense, offsets = split_rows(-np.sort(-np.asarray(frequencies)), n_topics)
    slice_rows = -(-max(n_dense, 1) // ROWS_PER_SLICE)
    nbytes = (rows_bytes(n_dense, offsets, n_topics) + slice_rows * n_topics * 8
              + _vector_bytes(n_topics))
    return TablePlan(True, n_dense, offsets, int(nbytes))


def table_plan(sizes, settings):
    """How B is stored (a :class:`TablePlan`). Below :data:`AUTO_HYBRID_MIN_TOPICS` topics
    'auto' keeps B dense where the corpus then stays on the device, or else where it streams
    either way and the dense table leaves room for chunks and averaging's sum
    (:func:`dense_preferred`); the hash rows serve only where they save the corpus its
    streaming, or the fit its averaging.

    Raises
    ------
    ValueError
        Where B would be hybrid on frequencies from elsewhere, or on counts that are not
        integers.
    """
    k, v = settings.n_topics, sizes.n_words
    dense = dense_table(v, k)
    if settings.storage == "dense" or v == 0:
        return dense
    rows = hybrid_rows(sizes.frequencies, k)
    if not resolve_storage(settings.storage, sizes.integral, k,
                           lambda: dense_preferred(sizes, settings, dense, rows)):
        return dense
    if settings.shared_frequencies:
        # A rare row is sized by its word's tokens; frequencies from elsewhere (a shard's
        # whole corpus) could undercount the loaded corpus's, and a full row drops tokens.
        raise ValueError("hybrid word-topic storage sizes its rows by the loaded corpus's own "
                         "word frequencies; a chain given word_frequencies stores B dense")
    return rows


def dense_preferred(sizes, settings, dense, rows):
    """Whether 'auto' keeps B dense, given its dense and hybrid :class:`TablePlan`.

    In this order: the storage with which the corpus stays on the device beside averaging's sum
    (where the fit averages), dense first; the one with which it stays without the sum (unless
    the sum is required); and where both stream, dense unless it leaves no room for chunks, or
    none for the sum where the hybrid table does. Chains given their word frequencies keep it
    dense (hybrid rows need the loaded corpus's own).
    """
    if settings.shared_frequencies:
        return True
    k = settings.n_topics

    def resident(table, with_sum):
        extra = sum_bytes(sizes, k, table) if with_sum else 0
        return resident_bytes(sizes, settings, table)[1] + extra <= settings.budget

    # A required sum must fit; an optional one is given up before the corpus's residence.
    sums = {"required": (True,), "optional": (True, False)}.get(settings.averaging, (False,))
    for with_sum in sums:
        if resident(dense, with_sum):
            return True
        if resident(rows, with_sum):
            return False
    dense_stream = _streams(sizes, settings, dense)
    if dense_stream is None:
        return False
    if dense_stream or settings.averaging == "none":
        return True
    return not _streams(sizes, settings, rows)


def _streams(sizes, settings, table):
    """Whether averaging's sum is reserved when the corpus streams with this B (None where
    chunks do not fit at all)."""
    try:
        return stream_plan(sizes, settings, table)[2]
    except MemoryError:
        return None


# -- streamed chunks ----------------------------------------------------------------------------
def slot_bytes(n_tokens, n_docs, topic_bytes, entry_bytes, weighted):
    """Device bytes of one streaming slot holding ``n_tokens`` tokens of ``n_docs`` documents
    (:class:`.streaming.Slot`): place, document, weight, the topic in both orders and A's
    entries per token; A's row header and padding per document. Places take 2 bytes beside
    packed entries, 4 beside wide ones."""
    place = 2 if entry_bytes == 4 else 4
    per_token = place + 4 + (4 if weighted else 0) + 2 * topic_bytes + entry_bytes
    return n_tokens * per_token + n_docs * (8 + ROW_PAD * entry_bytes)


def streamed_chunk_tokens(sizes, n_topics, budget, max_chunk_tokens=None, gpu=0,
                          scratch_bytes=0, table_bytes=None, averaging_bytes=None):
    """Tokens per chunk of a streamed layout of a corpus of ``sizes``, and per piece of its
    build, within ``budget`` device bytes: while building, the documents' arrays and one chunk's
    build; while sampling, the model (B twice, averaging's sum, and ``scratch_bytes`` the
    sampler keeps beside them), the documents' arrays and two slots. ``table_bytes`` is one B's
    device bytes (None: dense, V x K float32 with the totals' scratch) and ``averaging_bytes``
    what averaging's sum is given (None: the float64 of a dense B; 0 where the fit does not
    average).

    Raises
    ------
    MemoryError
        When chunks of :data:`MIN_STREAM_CHUNK` tokens do not fit (``gpu`` names the GPU).
    """
    k, v, n, d = n_topics, sizes.n_words, sizes.n_tokens, sizes.n_docs
    weighted = sizes.weighted
    entry = 8 if weighted else 4  # packed 4-byte A entries for integer counts (any K taken)
    tbytes = np.dtype(topic_dtype(k)).itemsize
    # Two B (the one sampled from, the one counted into) and averaging's sum.
    if table_bytes is None:
        table_bytes = v * k * 4 + (-(-v // ROWS_PER_SLICE)) * k * 8 + 4 * k * 8
    if averaging_bytes is None:
        averaging_bytes = v * k * 8
    model = 2 * int(table_bytes) + int(averaging_bytes) + scratch_bytes
    documents = d * 40 + (n // PIECE) * 16
    per_token_docs = d / max(n, 1)
    slots = 2 * (slot_bytes(1, 0, tbytes, entry, weighted)
                 + slot_bytes(0, 1, tbytes, entry, weighted) * per_token_docs)
    # A chunk's build: offsets, documents and weights; its counts on the device (first token,
    # word, the uploaded indices and weights per non-zero); the sort scratch of a piece of a
    # quarter of the chunk (about 80 bytes a token); its work items.
    nz_per_token = sizes.n_nonzero / max(n, 1)
    build = (8 + (4 if weighted else 0) + nz_per_token * (8 + 4 + 4 + (4 if weighted else 0))
             + 80 / 4 + 16 * v / max(n, 1))
    usable = 0.9 * budget - documents
    tokens = int(min(usable / build, (usable - model) / slots))
    if tokens < min(MIN_STREAM_CHUNK, n):
        # Name the bytes this K needs against those available, as the CPU engine's check does:
        # the least budget for which the smallest chunk passes both bounds above.
        least = min(MIN_STREAM_CHUNK, n)
        need = int(np.ceil((documents + max(least * build, model + least * slots)) / 0.9))
        raise MemoryError(
            f"the CUDA engine cannot stream {n} tokens at K={k}, V={v}: n_components={k} "
            f"needs about {need:,} bytes ({need / 2**30:.2f} GiB) of GPU {gpu}, of which the "
            f"word-topic tables take {model:,} bytes, but {budget:,} bytes "
            f"({budget / 2**30:.2f} GiB) are available; raise max_device_memory, free device "
            "memory or lower n_components")
    if max_chunk_tokens is not None:
        tokens = min(tokens, int(max_chunk_tokens))
    tokens = max(1, tokens)
    return tokens, min(BUILD_PIECE_TOKENS, max(1, tokens // 4))


def stream_plan(sizes, settings, table):
    """``(tokens, piece_tokens, reserved)`` of a streamed layout with B stored as ``table``
    says (:func:`streamed_chunk_tokens`), averaging's sum reserved as ``settings.averaging``
    says: 'required', 'optional' (reserved where chunks still fit beside it; otherwise
    averaging will find no room and the fit goes on without it) or 'none'.

    Raises
    ------
    MemoryError
        Where chunks do not fit (beside a required sum).
    """
    k = settings.n_topics

    def chunks(averaging_bytes):
        return streamed_chunk_tokens(
            sizes, k, settings.budget, max_chunk_tokens=settings.max_chunk_tokens,
            gpu=settings.gpu, scratch_bytes=settings.scratch_bytes,
            table_bytes=table.nbytes if table.hybrid else None, averaging_bytes=averaging_bytes)

    if settings.averaging == "none":
        return chunks(0) + (False,)
    try:
        return chunks(sum_bytes(sizes, k, table)) + (True,)
    except MemoryError:
        if settings.averaging != "optional":
            raise
    return chunks(0) + (False,)


# -- the plan -----------------------------------------------------------------------------------
def load_plan(sizes, settings, extra_bytes=0):
    """The :class:`LoadPlan` of a corpus of ``sizes`` on a chain of ``settings``: resident
    where the chain's peak, with the ``extra_bytes`` an engine keeps beside it, fits the budget
    (beside averaging's sum where that is required), else streamed.

    Raises
    ------
    MemoryError
        When even streamed chunks do not fit (:func:`streamed_chunk_tokens`).
    ValueError
        Where B cannot be stored as asked (:func:`table_plan`).
    """
    table = table_plan(sizes, settings)
    _, peak = resident_bytes(sizes, settings, table, extra_bytes)
    averaging, budget = settings.averaging, settings.budget
    averaged = sum_bytes(sizes, settings.n_topics, table)
    if peak + (averaged if averaging == "required" else 0) <= budget:
        return LoadPlan(table, False, settings.max_chunk_tokens, BUILD_PIECE_TOKENS,
                        averaging != "none" and peak + averaged <= budget, peak)
    tokens, piece, reserved = stream_plan(sizes, settings, table)
    return LoadPlan(table, True, tokens, piece, reserved, peak)
