"""Launchers of the dense sampling kernels of ``cuda/sample_dense.cu``.

Three kernels draw the same dense rule
(:func:`~sklearn_gpulda.backends.numpy.dense_rule.draw_topics_dense`) for every token of a
document-major corpus, one thread per document (Steele and Tristan, PPoPP'17):

- ``"butterfly"``: Alg. 7, butterfly-patterned partial sums (the fast path);
- ``"transpose"``: Alg. 4 with the register transposition of Fig. 2;
- ``"plain"``: Alg. 1 + Alg. 3, the uncoalesced baseline.

:func:`sample_dense_long` draws the transpose kernel's rule with a warp (or several) per document,
for long documents. Every launcher can also count the new topics into the next A and B tables as
it draws (``counts_next``), the fused M-step of integer counts.

Nothing here validates user input beyond what a kernel needs to run safely (dtypes, contiguity,
shapes, the K ceiling); CuPy is imported lazily so that the module imports without a GPU.
"""

import numpy as np

from ...random import STREAM_SAMPLE
from .. import kernels as _kernels
from ..constants import DENSE_BLOCK as BLOCK, DENSE_BLOCK_MAX, DENSE_MAX_TOPICS as MAX_TOPICS

VARIANTS = ("butterfly", "transpose", "plain")

_STEM = "sample_dense"


def document_order(doc_ptr):
    """The master index: non-empty documents by decreasing length (ties by id), as int32.

    Works on NumPy or CuPy arrays and returns the same kind. Warps take 32 consecutive entries,
    so sorting makes the documents of a warp alike in length (Alg. 4's idiom for ragged lengths).

    Parameters
    ----------
    doc_ptr : ndarray of int64, shape (n_docs + 1,)

    Returns
    -------
    order : ndarray of int32, shape (n_nonempty_docs,)
    """
    xp = np
    if type(doc_ptr).__module__.startswith("cupy"):
        import cupy as xp
    lengths = xp.diff(doc_ptr)
    # A stable sort on -length keeps ids increasing among documents of one length.
    order = xp.argsort(-lengths, kind="stable") if xp is np else xp.argsort(-lengths)
    order = order[lengths[order] > 0]
    return order.astype(xp.int32)


def sample_dense(
    variant,
    doc_order,
    doc_ptr,
    word,
    weight,
    A,
    bhat,
    alpha,
    seed,
    iteration,
    z,
    stream=STREAM_SAMPLE,
    sweep=0,
    block=BLOCK,
    word_counts=None,
    counts_next=None,
):
    """Draw a new topic for every token of the listed documents on the GPU.

    Parameters
    ----------
    variant : {"butterfly", "transpose", "plain"}
    doc_order : cupy.ndarray of int32, shape (n_order,)
        Documents to process, each at most once; best from :func:`document_order`.
    doc_ptr : cupy.ndarray of int64, shape (n_docs + 1,)
        Tokens of document d are ``doc_ptr[d]:doc_ptr[d + 1]`` in canonical order.
    word : cupy.ndarray of int32, shape (n_tokens,)
        Word of each canonical token.
    weight : cupy.ndarray of float32 of shape (n_tokens,), or None
        Token weights; None when every weight is 1.
    A : cupy.ndarray of float32, shape (n_docs, n_topics)
        Document-topic counts of the topics in ``z``, held fixed.
    bhat : cupy.ndarray of float32, shape (n_words, n_topics)
        Normalised word-topic matrix, word-major, held fixed.
    alpha : cupy.ndarray of float32, shape (n_topics,)
        Document-topic prior.
    seed, iteration : int
        Philox key (32 bits each).
    z : cupy.ndarray of int32, shape (n_tokens,)
        The current topic of each token; the tokens of the listed documents receive their new
        topic, the others are left as they are.
    stream, sweep : int, default=STREAM_SAMPLE, 0
        Philox counter words (a training E-step uses stream 1, sweep 0).
    block : int, default=128
        Threads per block, a multiple of 32 up to 256.
    word_counts : tuple (B, denom, beta) or None, default=None
        What ``bhat`` came from: B (cupy float32, V x K), ``n + V beta`` (cupy float64, K) and beta,
        for the word side of each token's own count; None when ``bhat`` is fixed.
    counts_next : tuple (A_next, B_next) or None, default=None
        The fused M-step's next tables, zeroed by the caller: cupy float32 arrays of A's and
        bhat's shapes (B_next None for A alone). Each drawn token adds its weight at (document,
        new topic) and (word, new topic) with atomics, exact for integer counts only (``weight``
        None) below 2^24 a row; None draws without counting.

    Returns
    -------
    z : cupy.ndarray
        The ``z`` argument.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    args = _checked_args(doc_order, doc_ptr, word, weight, A, bhat, alpha, seed, iteration, z,
                         stream, sweep, block, word_counts, counts_next)
    n_order = int(doc_order.size)
    if n_order == 0:
        return z
    grid = -(-n_order // block)
    _kernels.launch(_STEM, f"sample_dense_{variant}", grid, block,
                    [(doc_order, np.int32), (n_order, "i32")] + args)
    return z


def sample_dense_long(doc_order, doc_ptr, word, weight, A, bhat, alpha, seed, iteration, z,
                      stream=STREAM_SAMPLE, sweep=0, block=BLOCK, word_counts=None,
                      counts_next=None, group=1, warps=None, iteration_word=None,
                      beta_word=None):
    """:func:`sample_dense` with the transpose rule and a group of warps per listed document.

    The draws are those of ``sample_dense("transpose", ...)`` token for token (the same float32
    operations on the same values; only which thread draws a token changes), so this is the
    launcher for documents long enough to fill a warp: a thread per document leaves most of a
    large GPU idle on a corpus of a few thousand long documents.

    Parameters
    ----------
    doc_order, doc_ptr, word, weight, A, bhat, alpha, seed, iteration, z, stream, sweep
        As :func:`sample_dense`.
    block, word_counts, counts_next
        As :func:`sample_dense`.
    group : int, default=1
        Warps per document, 1 to 32, where ``warps`` is not given; the warps of a document take
        its chunks of 32 tokens in turn (more warps for fewer, longer documents).
    warps : tuple or None, default=None
        ``(warp_ptr, n_warps)``: a group per document, document ``doc_order[e]`` taking warps
        ``warp_ptr[e]`` to ``warp_ptr[e + 1] - 1`` (a cupy int32 array of ``doc_order.size + 1``
        ascending offsets from 0, each group at least 1) of ``n_warps = warp_ptr[-1]``
        (:func:`document_groups`, :func:`warp_offsets`).
    iteration_word, beta_word : cupy.ndarray or None, default=None
        Device words (uint32 and float64, one element) the kernel reads instead of
        ``iteration`` and ``word_counts``' beta: a sweep captured in a CUDA graph reads what the
        host wrote there before the replay (:mod:`..sparse.sweep_graph`).

    Returns
    -------
    z : cupy.ndarray
        The ``z`` argument.
    """
    if not 1 <= int(group) <= 32:
        raise ValueError(f"group must be in [1, 32], got {group}")
    args = _checked_args(doc_order, doc_ptr, word, weight, A, bhat, alpha, seed, iteration, z,
                         stream, sweep, block, word_counts, counts_next)
    n_order = int(doc_order.size)
    if n_order == 0:
        return z
    if warps is None:
        import cupy as cp

        warp_ptr, n_warps = warp_offsets(np.full(n_order, int(group)))
        warp_ptr = cp.asarray(warp_ptr)
    else:
        warp_ptr, n_warps = warps
    if warp_ptr.dtype != np.int32 or warp_ptr.shape != (n_order + 1,):
        raise ValueError(f"warp_ptr must be int32 of {n_order + 1} offsets, got "
                         f"{warp_ptr.dtype} of shape {warp_ptr.shape}")
    warps_per_block = block // 32
    grid = -(-int(n_warps) // warps_per_block)
    # theta and the warp's counts of its document: 2 K floats a warp.
    shared = warps_per_block * 2 * A.shape[1] * 4
    _kernels.launch(_STEM, "sample_dense_long", grid, block,
                    [(doc_order, np.int32), (n_order, "i32"), (warp_ptr, np.int32)] + args
                    + [(iteration_word, np.uint32), (beta_word, np.float64)],
                    shared_mem=shared)
    return z


def _checked_args(doc_order, doc_ptr, word, weight, A, bhat, alpha, seed, iteration, z, stream,
                  sweep, block, word_counts, counts_next):
    """Check what the dense kernels need and return their arguments after ``n_order``."""
    import cupy as cp

    arrays = [("doc_order", doc_order), ("doc_ptr", doc_ptr), ("word", word), ("A", A),
              ("bhat", bhat), ("alpha", alpha), ("z", z)]
    if weight is not None:
        arrays.append(("weight", weight))
    for name, arr in arrays:
        if not isinstance(arr, cp.ndarray):
            raise TypeError(f"{name} must be a cupy.ndarray, got {type(arr).__name__}")
    if A.ndim != 2 or bhat.ndim != 2 or A.shape[1] != bhat.shape[1]:
        raise ValueError(
            f"A and bhat must be 2-d with the same number of topics, got {A.shape} and {bhat.shape}"
        )
    n_docs, n_topics = A.shape
    if not 1 <= n_topics <= MAX_TOPICS:
        raise ValueError(f"the dense kernels support 1 to {MAX_TOPICS} topics, got {n_topics}")
    if alpha.shape != (n_topics,):
        raise ValueError(f"alpha must have shape ({n_topics},), got {alpha.shape}")
    if n_docs < 1 or bhat.shape[0] < 1:
        raise ValueError("A and bhat need at least one row")
    if bhat.shape[0] * n_topics >= 2**32:
        raise ValueError(
            "bhat must have fewer than 2**32 entries (the kernels use 32-bit row offsets)"
        )
    if doc_ptr.shape != (n_docs + 1,):
        raise ValueError(
            f"doc_ptr must have n_docs + 1 = {n_docs + 1} entries, got {doc_ptr.shape}"
        )
    if word.shape != z.shape or word.ndim != 1 or (weight is not None and weight.shape != z.shape):
        raise ValueError(
            f"word, z (and weight) must be 1-d of one length, got {word.shape} and {z.shape}"
        )
    if doc_order.ndim != 1 or doc_order.size > n_docs:
        raise ValueError(
            f"doc_order must be 1-d with at most {n_docs} entries, got {doc_order.shape}"
        )
    if block % 32 or not 32 <= block <= DENSE_BLOCK_MAX:
        raise ValueError(f"block must be a multiple of 32 in [32, {DENSE_BLOCK_MAX}], got {block}")
    B, denom, beta = (None, None, 0.0) if word_counts is None else word_counts
    if B is not None and (B.shape != bhat.shape or denom.shape != (n_topics,)):
        raise ValueError(f"B must have bhat's shape {bhat.shape} and denom ({n_topics},), got "
                         f"{B.shape} and {denom.shape}")
    A_next, B_next = (None, None) if counts_next is None else counts_next
    if A_next is not None and A_next.shape != A.shape:
        raise ValueError(f"A_next must have A's shape {A.shape}, got {A_next.shape}")
    if B_next is not None and (A_next is None or B_next.shape != bhat.shape):
        raise ValueError(f"B_next needs A_next and bhat's shape {bhat.shape}")
    return [
        (doc_ptr, np.int64),
        (word, np.int32),
        (weight, np.float32),
        (A, np.float32),
        (bhat, np.float32),
        (alpha, np.float32),
        (B, np.float32),
        (denom, np.float64),
        (beta, "f64"),
        (int(seed) & 0xFFFFFFFF, "u32"),
        (int(iteration) & 0xFFFFFFFF, "u32"),
        (int(stream), "u32"),
        (int(sweep), "u32"),
        (z, np.int32),
        (n_topics, "i32"),
        (A_next, np.float32),
        (B_next, np.float32),
    ]


#: Resident warps per SM the long-document launch aims for (16 at 128 registers a thread), twice
#: over, so that one group finishing early does not leave its SM idle.
_TARGET_WARPS_PER_SM = 32
#: Chunks of 32 tokens each warp of a group should have at least.
_MIN_CHUNKS_PER_WARP = 4


def document_groups(lengths, n_sm):
    """Warps per document for :func:`sample_dense_long` (its ``warps``), from each document's
    own length; the draws do not depend on them.

    A launch's time is at least its longest group's: a document of ``c`` chunks of 32 tokens
    shared by ``g`` warps takes ``c / g`` steps. Each document gets as many warps (1 to 32) as
    bring its warps' chunks down to the launch's mean chunks per warp, counting the warps the
    GPU holds twice over, and to no fewer than four chunks a warp (a warp's setup, its document's
    theta row, costs about a chunk). A corpus of many documents keeps a warp each; a few long
    documents among many short ones (20 Newsgroups) get groups of their own.

    Parameters
    ----------
    lengths : ndarray of int
        Tokens of each document of the launch, in its order.
    n_sm : int
        Streaming multiprocessors of the GPU.

    Returns
    -------
    groups : ndarray of int64
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    chunks = -(-lengths // 32)
    if chunks.size == 0:
        return chunks
    per_warp = max(float(_MIN_CHUNKS_PER_WARP), chunks.sum() / (_TARGET_WARPS_PER_SM * n_sm))
    groups = np.minimum(np.ceil(chunks / per_warp), chunks // _MIN_CHUNKS_PER_WARP)
    return np.clip(groups, 1, 32).astype(np.int64)


def warp_offsets(groups):
    """``(warp_ptr, n_warps)`` of :func:`sample_dense_long` for ``groups`` (host int32 offsets
    from 0 and their total)."""
    warp_ptr = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum(groups, out=warp_ptr[1:])
    if warp_ptr[-1] >= 2**31:
        raise ValueError("more than 2**31 warps in one launch")
    return warp_ptr.astype(np.int32), int(warp_ptr[-1])
