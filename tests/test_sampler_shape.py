"""The sparse sampler's launch shape (``sample_sparse.sample_shape``): the block it takes and how
many of them stay resident on an SM. Pure arithmetic on a GPU's limits, so it runs anywhere."""

import pytest

from sklearn_gpulda.backends.cuda.sparse import sample_sparse as ss

# An H200's (and H100's) limits: shared memory per SM, threads and blocks per SM, registers.
HOPPER = dict(smem_sm=233_472, max_threads_sm=2048, max_blocks_sm=32, regs_sm=65_536)
# The packed sampler's 36 registers a thread, allocated 256 to a warp.
WARP_REGS = 1280


def _shape(n_topics, **limits):
    smem = ss.tree_floats(n_topics) * 4 + ss.SAMPLER_STATIC_SHARED
    args = dict(HOPPER, **limits)
    return ss.sample_shape(smem, args.pop("smem_sm"), warp_regs=WARP_REGS, **args)


@pytest.mark.parametrize("n_topics", [20, 200, 1000, 4096])
def test_a_small_table_takes_four_warp_blocks_as_many_as_the_registers_hold(n_topics):
    # 48 warps of 40 allocated registers a thread fill the 64 K registers; four-warp blocks reach
    # them, so no larger block is taken (its warps would wait longer at an item's barrier).
    assert ss.FIRST_BLOCK == 128
    assert _shape(n_topics) == (128, 12)


def test_a_large_table_takes_larger_blocks_for_more_resident_warps():
    # K = 10,000: a table of about 41 KB leaves room for 5 blocks an SM; 512-thread blocks
    # hold 3 x 16 = 48 warps (the registers' limit) against 5 x 8 = 40 for 256 threads.
    block, per_sm = _shape(10_000)
    assert (block, per_sm) == (512, 3)
    smem = ss.tree_floats(10_000) * 4 + ss.SAMPLER_STATIC_SHARED
    assert HOPPER["smem_sm"] // (smem + 1024) == 5


def test_resident_blocks_never_pass_the_sms_limits():
    # A GPU holding 16 blocks and 1,536 threads an SM, no register limit given.
    block, per_sm = ss.sample_shape(4096, 102_400, max_threads_sm=1536, max_blocks_sm=16)
    assert per_sm <= 16 and per_sm * block <= 1536 and per_sm * (4096 + 1024) <= 102_400
    # Without the block limit, 128-thread blocks would count 12 resident; with a limit of 8,
    # a larger block holds more warps and is taken.
    block, per_sm = ss.sample_shape(4096, 233_472, max_blocks_sm=8)
    assert per_sm <= 8 and block * per_sm == 2048 and block == 256
