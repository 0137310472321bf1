"""Statistics shared by the sampler tests."""

import numpy as np
from scipy import stats


def merged_chisquare(observed, expected, min_expected=5.0):
    """Chi-square test after merging neighbouring bins until each expects ``min_expected`` draws.

    Bins are merged left to right in the order given; the expectation is rescaled to the observed
    total, so ``expected`` may be probabilities or counts.

    Returns
    -------
    result : scipy.stats.Power_divergenceResult
    """
    obs, exp, acc_o, acc_e = [], [], 0.0, 0.0
    scale = np.sum(observed) / np.sum(expected)
    for o, e in zip(observed, np.asarray(expected, dtype=float) * scale):
        acc_o += o
        acc_e += e
        if acc_e >= min_expected:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0:
        obs[-1] += acc_o
        exp[-1] += acc_e
    obs, exp = np.asarray(obs), np.asarray(exp)
    return stats.chisquare(obs, exp * obs.sum() / exp.sum())
