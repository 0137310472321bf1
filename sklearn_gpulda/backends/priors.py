"""The Dirichlet priors: what the ``doc_topic_prior`` and ``topic_word_prior`` parameters mean,
a scalar, one value per topic, or a matrix whose few seeded cells (:class:`CellPrior`) stand
apart from a base value. Learning them from the chain's counts is :mod:`.prior_learning`'s.
"""

from dataclasses import dataclass
from numbers import Real

import numpy as np


@dataclass(frozen=True)
class Prior:
    """A resolved prior: the value the chain starts from, and whether the fit learns it.

    Attributes
    ----------
    value : float or ndarray of shape (n_components,)
    learn : bool
    """

    value: object
    learn: bool


def resolve_prior(param, default, n_topics=None, name="doc_topic_prior"):
    """Turn a prior parameter into a :class:`Prior`.

    Parameters
    ----------
    param : None, float, array-like or 'auto'
        None means ``default``; 'auto' means learned, starting from ``default``; an array (only
        where ``n_topics`` is given) is a fixed prior per topic.
    default : float
    n_topics : int or None
        Number of topics where a per-topic array is allowed, else None.
    name : str
        Parameter name for error messages.

    Raises
    ------
    ValueError
        An array of the wrong shape or with a value that is not finite and positive.
    """
    if param is None:
        return Prior(float(default), False)
    if isinstance(param, str):
        if param != "auto":
            raise ValueError(f"{name} must be a positive number{', an array' if n_topics else ''}"
                             f" or 'auto', got {param!r}")
        return Prior(float(default), True)
    if isinstance(param, Real):
        return Prior(float(param), False)
    values = np.asarray(param, dtype=np.float64)
    if n_topics is None or values.shape != (n_topics,):
        expected = f"shape ({n_topics},)" if n_topics is not None else "a number"
        raise ValueError(f"{name} must be {expected} (one value per topic), got shape "
                         f"{values.shape}")
    if not (np.all(np.isfinite(values)) and np.all(values > 0)):
        raise ValueError(f"every value of {name} must be finite and positive")
    return Prior(values.copy(), False)


class CellPrior:
    """The seeded cells of a matrix topic-word prior: ``eta[k, v] = beta + extra[k, v]``, with
    ``extra`` zero except at a few cells (``doc/algorithm.md``, "A matrix topic-word prior").

    The chain keeps only these cells (O(seeded cells) memory, whatever K x V is) and the base
    beta apart (a number, or learned). Every array is plain NumPy, so the object pickles into
    worker processes; the fitted model keeps the cells as a SciPy matrix (:meth:`as_matrix`).

    Parameters
    ----------
    additions : scipy.sparse matrix of shape (n_topics, n_words)
        ``extra``: its stored cells (explicit zeros included), finite and non-negative.

    Attributes
    ----------
    word, topic : ndarray of int64
        The cells, ordered by ``word * n_topics + topic`` (word-major, as B is held).
    value : ndarray of float64
        ``extra`` at those cells.
    topic_sums : ndarray of float64, shape (n_topics,)
        ``sum_v extra[k, v]``: what the cells add to topic k's denominator ``n_k + V beta``.
    """

    def __init__(self, additions):
        from scipy import sparse

        coo = sparse.coo_matrix(additions, dtype=np.float64)
        coo.sum_duplicates()
        self.n_topics, self.n_words = coo.shape
        topic = coo.row.astype(np.int64)
        word = coo.col.astype(np.int64)
        cell = word * self.n_topics + topic
        order = np.argsort(cell, kind="stable")
        self.cell = cell[order]
        self.word, self.topic = word[order], topic[order]
        self.value = np.ascontiguousarray(coo.data[order], dtype=np.float64)
        if not (np.all(np.isfinite(self.value)) and np.all(self.value >= 0)):
            raise ValueError("the additions of a matrix topic_word_prior must be finite and "
                             "non-negative")
        self.topic_sums = np.bincount(self.topic, weights=self.value, minlength=self.n_topics)

    @property
    def n_cells(self):
        return self.value.size

    def at(self, v, k):
        """``extra[k, v]`` of the pairs ``(v, k)`` (0.0 where no cell is seeded), float64."""
        ids = np.asarray(v, dtype=np.int64) * self.n_topics + np.asarray(k, dtype=np.int64)
        pos = np.searchsorted(self.cell, ids)
        pos = np.minimum(pos, max(self.cell.size - 1, 0))
        if not self.cell.size:
            return np.zeros(ids.shape, dtype=np.float64)
        return np.where(self.cell[pos] == ids, self.value[pos], 0.0)

    def cells_of_rows(self, r0, r1):
        """Slice of the cells whose word is in ``range(r0, r1)``."""
        i0, i1 = np.searchsorted(self.word, (r0, r1))
        return slice(int(i0), int(i1))

    def rows(self, v, dtype=np.float64):
        """``extra[:, v].T``: one dense row of K values per entry of ``v``."""
        v = np.asarray(v, dtype=np.int64)
        out = np.zeros((v.size, self.n_topics), dtype=dtype)
        lo = np.searchsorted(self.word, v, "left")
        hi = np.searchsorted(self.word, v, "right")
        n = hi - lo
        total = int(n.sum())
        if total:
            row = np.repeat(np.arange(v.size), n)
            idx = np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(total)
            out[row, self.topic[idx]] = self.value[idx]
        return out

    def add_to_components(self, components):
        """``components[k, v] += extra[k, v]`` at the cells, in place (K x V array)."""
        components[self.topic, self.word] += self.value
        return components

    def as_matrix(self):
        """``extra`` as a SciPy CSR matrix of shape (n_topics, n_words) (what the fitted model
        keeps as ``topic_word_prior_cells_``)."""
        from scipy import sparse

        return sparse.csr_matrix((self.value, (self.topic, self.word)),
                                 shape=(self.n_topics, self.n_words))


def resolve_topic_word_prior(param, default, n_topics, n_words):
    """Turn ``topic_word_prior`` into the base :class:`Prior` and the seeded cells.

    Parameters
    ----------
    param : None, float, 'auto', array-like of shape (n_topics, n_words), or tuple
        A number, 'auto' or None: :func:`resolve_prior`'s. An array: gensim's eta, fixed; its
        least value is the base and every cell above it is a seeded cell. A tuple ``(base,
        additions)`` (what :func:`sklearn_gpulda.seeded_topic_prior` returns): a base that is
        a positive number or 'auto', and a SciPy sparse matrix of shape (n_topics, n_words)
        of the non-negative amounts its stored cells add to it.
    default : float
    n_topics, n_words : int
        The shape a matrix prior must have (``n_words`` None: not checked).

    Returns
    -------
    prior : Prior
        The base beta.
    cells : CellPrior or None
        None for a scalar prior.
    """
    name = "topic_word_prior"
    if param is None or isinstance(param, (str, Real)):
        return resolve_prior(param, default, None, name), None
    from scipy import sparse

    if isinstance(param, tuple) and len(param) == 2 and sparse.issparse(param[1]):
        base, additions = param
        if not (isinstance(base, str) and base == "auto") and not (
                isinstance(base, Real) and np.isfinite(base) and base > 0):
            raise ValueError(f"the base of a matrix {name} must be a positive number or 'auto', "
                             f"got {base!r}")
        _check_shape(additions.shape, n_topics, n_words)
        return resolve_prior(base, default, None, name), CellPrior(additions)
    if sparse.issparse(param):
        raise ValueError(f"a sparse {name} is ambiguous (its implicit zeros are no prior): pass "
                         "(base, additions), e.g. from sklearn_gpulda.seeded_topic_prior, or a "
                         "dense array")
    try:
        eta = np.asarray(param, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a positive number, 'auto', an array of shape "
                         f"(n_components, n_features) or (base, additions): {exc}") from None
    if eta.ndim != 2:
        raise ValueError(f"a matrix {name} must have shape (n_components, n_features) = "
                         f"({n_topics}, {n_words}), got shape {eta.shape}")
    _check_shape(eta.shape, n_topics, n_words)
    if eta.size == 0 or not (np.all(np.isfinite(eta)) and np.all(eta > 0)):
        raise ValueError(f"every value of a matrix {name} must be finite and positive")
    base = float(eta.min())
    topic, word = np.nonzero(eta != base)
    additions = sparse.coo_matrix((eta[topic, word] - base, (topic, word)), shape=eta.shape)
    return Prior(base, False), CellPrior(additions)


def _check_shape(shape, n_topics, n_words):
    if shape[0] != n_topics or (n_words is not None and shape[1] != n_words):
        want = f"({n_topics}, {n_words if n_words is not None else 'n_features'})"
        raise ValueError(f"a matrix topic_word_prior must have shape (n_components, "
                         f"n_features) = {want}, got shape {tuple(shape)}")
