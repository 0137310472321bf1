"""What the sparse chain decides at load to stay within its device memory budget: how B is
stored (dense or hybrid, :mod:`.hybrid`), whether the corpus stays on the device or is streamed
through it and in chunks of how many tokens (:mod:`.streaming`), and whether averaging's running
sum is reserved beside them.

Averaging is asked for in one of three ways (the sampler's ``averaging``): 'required' (its sum
is part of the plan: a corpus that fits only without it is streamed), 'optional' (the
estimator's default averaging: reserved where chunks still fit beside it, else the fit will find
no room for it and go on without it, with a warning) or 'none' (a fit that does not average).
"""

from dataclasses import dataclass

from . import hybrid
from .layout import chunk_bytes
from .streaming import plan_stream

#: What a sampler's ``averaging`` may say.
AVERAGING = ("required", "optional", "none")


@dataclass
class LoadPlan:
    hybrid: bool            # B's rare rows stored as hash tables
    n_dense: int            # rows of B stored dense
    offsets: object         # host int64 first slots of the rare rows (None when dense)
    table_bytes: int        # one B's device bytes, with its scratch
    stream_tokens: object   # tokens per streamed chunk, or None (the corpus stays resident)
    piece_tokens: object    # tokens per piece of a streamed chunk's build
    averaging_reserved: bool  # averaging's sum is counted in the plan
    peak_bytes: int         # the resident chain's peak while building its layout


def check_averaging(averaging):
    if averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {AVERAGING}, got {averaging!r}")
    return averaging


def table_plan(sampler, corpus, layout=None):
    """How B is stored for ``corpus`` (:func:`.hybrid.plan`). Below
    :data:`.hybrid.AUTO_HYBRID_MIN_TOPICS` topics 'auto' keeps B dense where the corpus then
    stays on the device, or else where it streams either way and the dense table leaves room
    for chunks and averaging's sum (:func:`dense_preferred`); the hash rows serve only where
    they save the corpus its streaming, or the fit its averaging."""
    def prefer_dense(dense, rows):
        sizes = layout
        if sizes is None:
            sizes = chunk_bytes(corpus, sampler.n_topics, sampler.max_chunk_tokens)
        return dense_preferred(sampler, corpus, sizes, dense, rows)

    plan = hybrid.plan(sampler.word_topic_storage, corpus, sampler.n_topics,
                       lambda: sampler._frequencies(corpus), prefer_dense)
    if plan[0] and sampler.word_frequencies is not None:
        # A rare row is sized by its word's tokens; frequencies from elsewhere (a shard's
        # whole corpus) could undercount the loaded corpus's, and a full row drops tokens.
        raise ValueError("hybrid word-topic storage sizes its rows by the loaded corpus's own "
                         "word frequencies; a chain given word_frequencies stores B dense")
    return plan


def dense_preferred(sampler, corpus, layout, dense, rows):
    """Whether 'auto' keeps B dense, given the dense and hybrid plans ``(n_dense, offsets,
    bytes)`` and the resident layout's bytes and build peak (:func:`.layout.chunk_bytes`).

    In this order: the storage with which the corpus stays on the device beside averaging's sum
    (where the fit averages), dense first; the one with which it stays without the sum (unless
    the sum is required); and where both stream, dense unless it leaves no room for chunks, or
    none for the sum where the hybrid table does. Chains given ``word_frequencies`` keep it
    dense (hybrid rows need the loaded corpus's own).
    """
    if sampler.word_frequencies is not None:
        return True
    budget = sampler._memory_budget()
    k = sampler.n_topics

    def resident(plan, hybrid_b, with_sum):
        # As estimate_bytes counts a chain's peak: the table comes after the build's scratch.
        held = layout[0] + plan[2] + sampler._leaf_scratch_bytes()
        extra = _sum_bytes(corpus, k, hybrid_b, *plan[:2]) if with_sum else 0
        return max(layout[1], held) + extra <= budget

    # A required sum must fit; an optional one is given up before the corpus's residence.
    for with_sum in {"required": (True,), "optional": (True, False)}.get(sampler.averaging,
                                                                          (False,)):
        if resident(dense, False, with_sum):
            return True
        if resident(rows, True, with_sum):
            return False
    dense_stream = _streams(sampler, corpus, False, *dense)
    if dense_stream is None:
        return False
    if dense_stream or sampler.averaging == "none":
        return True
    return not _streams(sampler, corpus, True, *rows)


def _streams(sampler, corpus, hybrid_b, n_dense, offsets, table_bytes):
    """Whether averaging's sum is reserved when ``corpus`` streams with this B (None where
    chunks do not fit at all)."""
    try:
        return _stream_plan(sampler, corpus, hybrid_b, n_dense, offsets, table_bytes)[2]
    except MemoryError:
        return None


def _stream_plan(sampler, corpus, hybrid_b, n_dense, offsets, table_bytes):
    """:func:`.streaming.plan_stream` of ``corpus`` on ``sampler`` with this B: ``(tokens,
    piece_tokens, reserved)``; MemoryError where chunks do not fit."""
    k = sampler.n_topics
    return plan_stream(
        corpus, k, sampler._memory_budget(), sampler.averaging,
        _sum_bytes(corpus, k, hybrid_b, n_dense, offsets),
        max_chunk_tokens=sampler.max_chunk_tokens, gpu=sampler._index,
        scratch_bytes=sampler._leaf_scratch_bytes(),
        table_bytes=table_bytes if hybrid_b else None)


def _sum_bytes(corpus, n_topics, hybrid_b, n_dense, offsets):
    """Device bytes planned for averaging's running sum of a B stored this way."""
    if hybrid_b:
        return hybrid.sum_bytes(n_dense, offsets, n_topics)
    return corpus.n_words * n_topics * 8


def load_plan(sampler, corpus):
    """The :class:`LoadPlan` of ``corpus`` on ``sampler`` (a
    :class:`~.sparse.CudaSparseSampler`) within its memory budget.

    Raises
    ------
    MemoryError
        When even streamed chunks do not fit (:func:`.streaming.streamed_chunk_tokens`).
    """
    k = sampler.n_topics
    table = table_plan(sampler, corpus)
    _, peak = sampler.estimate_bytes(corpus, table)
    hybrid_b, n_dense, offsets, table_bytes = table
    budget = sampler._memory_budget()
    averaging = sampler.averaging
    sum_bytes = _sum_bytes(corpus, k, hybrid_b, n_dense, offsets)
    if peak + (sum_bytes if averaging == "required" else 0) <= budget:
        return LoadPlan(hybrid_b, n_dense, offsets, table_bytes, None, None,
                        averaging != "none" and peak + sum_bytes <= budget, peak)
    tokens, piece, reserved = _stream_plan(sampler, corpus, hybrid_b, n_dense, offsets,
                                           table_bytes)
    return LoadPlan(hybrid_b, n_dense, offsets, table_bytes, tokens, piece, reserved, peak)
