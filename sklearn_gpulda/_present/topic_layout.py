"""Where the report's map puts the topics: metric MDS of their distances, spread for reading.

Classical scaling (:func:`sklearn_gpulda.report.topic_map`) keeps the two directions of largest
variance. Topics of a real corpus are nearly equidistant in many directions, so those two
directions explain little and most topics project near the centre: on a 10-topic 20 Newsgroups
model seven circles fell into one clump although no two of them are close. Stress majorisation
(SMACOF) fits the distances themselves instead, starting from the classical solution: equidistant
topics come out evenly apart, near topics stay near, and one scale factor maps the result to
the page, so on-screen distance is still proportional to the fitted distance.
"""

import numpy as np

from ..metrics import topic_word_distribution

#: Iteration cap of the majorisation; it converges in a few dozen on maps of up to 1,000 topics.
MAX_ITER = 300
#: Relative drop of the stress below which the majorisation stops.
TOL = 1e-7


def hellinger_distances(components):
    """Hellinger distances between the rows of ``components`` (normalised here)."""
    roots = np.sqrt(topic_word_distribution(components))
    return np.sqrt(np.clip(1.0 - roots @ roots.T, 0.0, None))


def spread_map(components, start):
    """Two-dimensional coordinates fitted to the topics' Hellinger distances.

    Parameters
    ----------
    components : array-like of shape (n_topics, n_words)
        Non-negative topic-word weights.
    start : ndarray of shape (n_topics, 2)
        Starting coordinates (classical scaling's); they fix the orientation, so the map is
        the same on every run.

    Returns
    -------
    coordinates : ndarray of shape (n_topics, 2)
        Centred, in the distances' own units: ``hypot`` of two rows approximates the
        Hellinger distance of their topics in the least-squares (stress) sense.
    """
    target = hellinger_distances(components)
    n = target.shape[0]
    xy = np.array(start, dtype=np.float64)
    if n < 3 or not np.any(target > 0):
        return xy - xy.mean(axis=0)
    # Guttman transform (unit weights): X <- B(X) X / n, which never increases the stress.
    # A start with coincident points (classical scaling of nearly identical topics) gets a
    # tiny deterministic nudge so that the transform can separate them.
    scale = np.sqrt((target ** 2).sum() / max((_pairwise(xy) ** 2).sum(), 1e-300))
    xy = xy * min(scale, 1e12) + 1e-6 * np.c_[np.cos(np.arange(n)), np.sin(np.arange(n))]
    stress = np.inf
    for _ in range(MAX_ITER):
        current = _pairwise(xy)
        ratio = np.divide(target, current, out=np.zeros_like(target), where=current > 1e-12)
        b = -ratio
        b[np.diag_indices(n)] = ratio.sum(axis=1)
        xy = b @ xy / n
        new = ((_pairwise(xy) - target) ** 2).sum()
        if stress - new <= TOL * max(new, 1e-300):
            break
        stress = new
    return xy - xy.mean(axis=0)


def _pairwise(xy):
    diff = xy[:, None, :] - xy[None, :, :]
    return np.sqrt((diff ** 2).sum(axis=-1))
