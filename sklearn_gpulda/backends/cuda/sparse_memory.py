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


def table_plan(sampler, corpus, layout_bytes=None):
    """How B is stored for ``corpus`` (:func:`.hybrid.plan`): 'auto' takes the dense table
    only where it fits the budget beside the layout."""
    def dense_fits(dense_bytes):
        layout = layout_bytes
        if layout is None:
            layout = chunk_bytes(corpus, sampler.n_topics, sampler.max_chunk_tokens)[0]
        return layout + dense_bytes <= sampler._memory_budget()

    plan = hybrid.plan(sampler.word_topic_storage, corpus, sampler.n_topics,
                       lambda: sampler._frequencies(corpus), dense_fits)
    if plan[0] and sampler.word_frequencies is not None:
        # A rare row is sized by its word's tokens; frequencies from elsewhere (a shard's
        # whole corpus) could undercount the loaded corpus's, and a full row drops tokens.
        raise ValueError("hybrid word-topic storage sizes its rows by the loaded corpus's own "
                         "word frequencies; a chain given word_frequencies stores B dense")
    return plan


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
    sum_bytes = (hybrid.sum_bytes(n_dense, offsets, k) if hybrid_b
                 else corpus.n_words * k * 8)
    if peak + (sum_bytes if averaging == "required" else 0) <= budget:
        return LoadPlan(hybrid_b, n_dense, offsets, table_bytes, None, None,
                        averaging != "none" and peak + sum_bytes <= budget, peak)
    tokens, piece, reserved = plan_stream(
        corpus, k, budget, averaging, sum_bytes, max_chunk_tokens=sampler.max_chunk_tokens,
        gpu=sampler._index, scratch_bytes=sampler._leaf_scratch_bytes(),
        table_bytes=table_bytes if hybrid_b else None)
    return LoadPlan(hybrid_b, n_dense, offsets, table_bytes, tokens, piece, reserved, peak)
