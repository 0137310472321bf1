"""Launchers of ``cuda/sample_sparse.cu``: initial topics, the E-step and the token log-likelihood,
and their launch geometry (block size, grid, shared memory; which K takes the large-K kernels).

Each function checks nothing a kernel cannot run safely without (``_kernels.launch`` checks the
dtype and contiguity of every array and casts every scalar); the sampler in :mod:`.sparse` decides
what to launch when.
"""

import numpy as np

from .. import counts
from .. import kernels as _kernels
from ..constants import SAMPLE_BLOCK, SAMPLE_BLOCK_MAX, SHARED_MAX_TOPICS, WARP

STEM = "sample_sparse"


def tree_floats(n_topics, leaves=True):
    """Shared floats of one word's table (``cuda/tree.cuh``): the Bhat row unless ``leaves`` is
    False (the large-K sampler keeps it in global memory), tile sums, and group sums in windows
    of 32."""
    tiles = -(-n_topics // WARP)
    level1 = -(-tiles // (WARP * WARP)) * WARP
    return (n_topics if leaves else 0) + tiles + level1


#: Static shared bytes the samplers may declare beside the table (the hybrid ones' flags of the
#: tiles a rare word touched take 272 on every architecture, ``tools/build_kernels.py``'s report).
SAMPLER_STATIC_SHARED = 512

#: Threads per block of the large-K sampler: one 1,024-thread block per SM leaves one Bhat row
#: per SM to compete for its L1 (and 132 rows, 34 MB at K = 65,536, for an H200's 50 MB L2);
#: ``benchmarks/bench_large_k.py`` measured 160 ms per sweep at K = 65,536 on the NYTimes shape
#: against 279 with 512 threads and 345 with 256 (H200).
LARGE_K_BLOCK = SAMPLE_BLOCK_MAX


def large_k_shape(smem_block, regs, block, n_sm, regs_sm=65536, max_threads_sm=2048):
    """Grid of the large-K sampler: the blocks that are resident at once, since each holds a
    global row of K floats (more blocks would only add scratch)."""
    per_sm = max(1, min(max_threads_sm // block, regs_sm // max(1, regs * block)))
    return n_sm * per_sm, block, smem_block


#: The smallest block :func:`sample_shape` considers (``kSampleBlock``, 128 threads). A block
#: walks one work item at a time and its warps wait at a barrier for the item's last token, so
#: a word of few tokens leaves most of a large block idle; ``benchmarks/probes/sampler_block.py``
#: times other sizes.
FIRST_BLOCK = SAMPLE_BLOCK


def sample_shape(smem_block, smem_sm, max_threads_sm=2048, max_blocks_sm=32, warp_regs=0,
                 regs_sm=65536):
    """Sampler block size and resident blocks per SM: the smallest block reaching the most warps.

    A large K takes enough shared memory per block (the word's Bhat row and tree) to cap resident
    blocks; larger blocks then keep the SM's warp slots full. ``max_blocks_sm`` and the
    registers a warp holds (``warp_regs``, allocation granularity included; 0: not limiting)
    cap the resident blocks too.
    """
    best = None
    block = FIRST_BLOCK
    while block <= SAMPLE_BLOCK_MAX:
        per_sm = min(max_threads_sm // block, smem_sm // (smem_block + 1024), max_blocks_sm)
        if warp_regs:
            per_sm = min(per_sm, regs_sm // (warp_regs * (block // WARP)))
        per_sm = max(1, per_sm)
        if best is None or per_sm * block > best[0] * best[1]:
            best = (block, per_sm)
        block *= 2
    return best


def launch_shape(n_topics, device_index, n_sm, smem_sm, smem_block_max, max_blocks_sm=32,
                 regs_sm=65536):
    """Whether K takes the large-K kernels, and the sampler's (grid, block, shared bytes).

    Past 32,768 topics, or where the word's table outgrows a block's shared memory, the Bhat row
    lives in a global scratch row per resident block (the ``*_large`` kernels).
    """
    smem = tree_floats(n_topics) * 4
    if n_topics > SHARED_MAX_TOPICS or smem + SAMPLER_STATIC_SHARED > smem_block_max:
        regs = sampler_registers(device_index)
        return True, large_k_shape(tree_floats(n_topics, leaves=False) * 4, regs, LARGE_K_BLOCK,
                                   n_sm)
    block, per_sm = sample_shape(smem + SAMPLER_STATIC_SHARED, smem_sm,
                                 max_blocks_sm=max_blocks_sm,
                                 warp_regs=warp_registers(device_index), regs_sm=regs_sm)
    return False, (n_sm * per_sm, block, smem)


def init_topics(t0, n_topics, seed, iteration, stream, z, sweep=0):
    """``z[p]`` = the uniform topic of canonical token ``t0 + p`` (``_random.token_topic``): ``z``
    in canonical order."""
    n = int(z.shape[0])
    if n == 0:
        return
    suffix = "u16" if z.dtype == np.uint16 else "i32"
    _kernels.launch(
        STEM, f"init_topics_{suffix}", -(-n // 256), 256,
        [(n, "i64"), (t0, "i64"), (n_topics, "u32"), (seed, "u32"),
         (iteration, "u32"), (stream, "u32"), (sweep, "u32"), (z, z.dtype)],
    )


def _registers(device_index, kernel):
    """Registers per thread of one of this module's kernels on a device (0 where CuPy does not
    say)."""
    import cupy

    with cupy.cuda.Device(device_index):
        return int(getattr(_kernels.get_function(STEM, kernel), "num_regs", 0))


def sampler_registers(device_index):
    """Registers per thread of the large-K sampler on this device (they bound its resident
    blocks, hence its grid and its global scratch)."""
    return _registers(device_index, "sample_tokens_u16_wide_large") or 48


def warp_registers(device_index):
    """Registers a warp of the packed sampler holds (per-thread count rounded up to the
    allocation unit of 256 per warp); 0 where the kernel does not say."""
    regs = _registers(device_index, "sample_tokens_u16_packed")
    return -(-regs * WARP // 256) * 256


def _token_walk(kernel, chunk, words, shape, tail, suffix=""):
    """Launch a kernel that walks a chunk's work items word by word (the sampler, the token
    log-likelihood): they share their first arguments, and the scheduling counter starts at 0.
    With the word side's ``leaf_scratch`` set, the ``_large`` variant runs (Bhat rows in global
    memory, ``cuda/sample_sparse.cu``); ``suffix`` ends the kernel's name."""
    counts.clear(words.counter)
    grid, block, shared = shape
    if words.leaf_scratch is not None:
        kernel += "_large"
    if _reads_rare_rows(words):
        kernel += "_hybrid"
    kernel += suffix
    _kernels.launch(
        STEM, kernel, grid, block,
        [(chunk.items, np.int32), (chunk.items.shape[0], "i32"), (words.counter, np.int32),
         (chunk.place, chunk.place_dtype), (chunk.doc, np.int32), (chunk.a_row, np.int32),
         (chunk.a_ent, chunk.ent_dtype), *tail, (words.leaf_scratch, np.float32)],
        shared_mem=shared,
    )


def _reads_rare_rows(words):
    """Whether the walk reads B in hybrid storage (not when a fixed Bhat replaces B)."""
    return words.rare is not None and words.bhat_fixed is None


def _word_side(words, beta_on_device=False):
    """The kernels' arguments from B to the rare rows: B and its denominators, beta (its
    number, or where ``beta_on_device`` its device word), a fixed Bhat, and the rare rows
    (slots, offsets, prior row, first rare word; null and V when all dense)."""
    fixed = words.bhat_fixed is not None
    rare = words.rare if _reads_rare_rows(words) else None
    beta = (words.beta_word, np.float64) if beta_on_device else (words.beta, "f64")
    return [(None if fixed else words.B, np.float32),
            (None if fixed else words.denom, np.float64), beta,
            (words.bhat_fixed, np.float32),
            (None if rare is None else rare.slots, np.uint32),
            (None if rare is None else rare.offsets, np.int64),
            (None if rare is None else words.prior, np.float32),
            (words.n_words if rare is None else rare.n_dense, "i32")]


def sample_tokens(chunk, words, shape, seed, iteration, stream, sweep, token_offset=0):
    """One E-step over a chunk: ``chunk.z`` (PDOW order) goes from the current to the new topics.
    Token ``t`` of the chunk (canonical index ``t0 + t``) draws the numbers of canonical token
    ``token_offset + t0 + t`` (a shard's tokens are keyed by their place in the whole corpus).

    ``words`` holds the word side (:class:`~.sparse.WordSide`): B with its denominators, or a
    fixed Bhat, the prior and the scheduling counter; ``shape`` is (grid, block, shared bytes).

    ``iteration`` is a number, or a device array of one uint32 that the kernel reads it from;
    then beta is read from the word side's device word too (``words.beta_word``, float64): the
    ``_dev`` kernels, B stored dense only, for a sweep captured in a CUDA graph
    (:mod:`.sweep_graph`).
    """
    if chunk.n_tokens == 0:
        return
    import cupy

    on_device = isinstance(iteration, cupy.ndarray)
    if on_device and _reads_rare_rows(words):
        raise ValueError("the sampler reads its iteration from the device with B stored dense "
                         "only")
    _token_walk(
        f"sample_tokens_{chunk.suffix}_{chunk.fmt}", chunk, words, shape,
        [(chunk.weight, np.float32), (token_offset + chunk.t0, "i64"),
         *_word_side(words, beta_on_device=on_device), (words.alpha, np.float32),
         (words.n_topics, "i32"), (seed, "u32"),
         (iteration, np.uint32) if on_device else (iteration, "u32"), (stream, "u32"),
         (sweep, "u32"), (chunk.z, chunk.z.dtype)],
        suffix="_dev" if on_device else "",
    )


def set_iteration(iteration, value):
    """``iteration[0] = value`` on the current stream (``iteration``: device uint32, (1,))."""
    _kernels.launch(STEM, "set_iteration", 1, 1, [(iteration, np.uint32), (value, "u32")])


def advance_iteration(iteration):
    """``iteration[0] += 1`` on the current stream: the last step of a captured sweep."""
    _kernels.launch(STEM, "advance_iteration", 1, 1, [(iteration, np.uint32)])


def token_loglik(chunk, words, shape, partial):
    """Per-batch partial sums of the training log-likelihood of a chunk's tokens into ``partial``
    (float64, one slot per 32-token batch of every work item)."""
    _token_walk(
        f"token_loglik_{chunk.fmt}", chunk, words, shape,
        [(chunk.weight, np.float32), (chunk.doc_norm, np.float64), *_word_side(words),
         (words.alpha, np.float32),
         (words.n_topics, "i32"), (partial, np.float64)],
    )
