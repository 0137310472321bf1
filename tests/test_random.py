"""The counter-based generator every engine shares."""

import numpy as np
import pytest
from scipy import stats

from sklearn_gpulda.backends import random as _random

# Random123's published known-answer vectors for Philox4x32-10 (counter, key, output).
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("counter, key, expected", KNOWN_ANSWERS)
def test_philox_known_answers(counter, key, expected):
    got = _random.philox4x32(*counter, *key)
    assert tuple(int(w) for w in got) == expected


def test_vectorised_equals_one_at_a_time():
    tokens = np.array([0, 1, 2**32 - 1, 2**32, 2**40 + 7], dtype=np.int64)
    together = _random.token_bits(99, 5, _random.STREAM_SAMPLE, tokens, sweep=2)
    alone = [int(_random.token_bits(99, 5, _random.STREAM_SAMPLE, np.array([t]), sweep=2)[0])
             for t in tokens]
    assert together.tolist() == alone


def test_streams_iterations_and_seeds_give_other_numbers():
    t = np.arange(1000)
    base = _random.token_bits(1, 1, _random.STREAM_SAMPLE, t)
    for other in (
        _random.token_bits(2, 1, _random.STREAM_SAMPLE, t),
        _random.token_bits(1, 2, _random.STREAM_SAMPLE, t),
        _random.token_bits(1, 1, _random.STREAM_INIT, t),
        _random.token_bits(1, 1, _random.STREAM_SAMPLE, t, sweep=1),
    ):
        assert np.mean(base == other) < 0.01


def test_uniforms_are_exact_float32_in_unit_interval_and_uniform():
    u = _random.token_uniform(7, 3, _random.STREAM_SAMPLE, np.arange(200_000))
    assert u.dtype == np.float32
    assert u.min() >= 0 and u.max() < 1
    # 24 random bits: every value is a multiple of 2**-24.
    assert np.all((u * np.float32(2**24)) % 1 == 0)
    assert stats.kstest(u, "uniform").pvalue > 1e-4


@pytest.mark.parametrize("n_topics", [1, 3, 1000, 32768])
def test_uniform_topics_cover_range_evenly(n_topics):
    k = _random.token_topic(11, 0, _random.STREAM_INIT, np.arange(300_000), n_topics)
    assert k.min() >= 0 and k.max() < n_topics
    if 1 < n_topics <= 1000:
        counts = np.bincount(k, minlength=n_topics)
        assert stats.chisquare(counts).pvalue > 1e-4
