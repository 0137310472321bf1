"""The NumPy backend: the oracle of ``doc/algorithm.md`` and the CPU engine."""

from .fold_in import fold_in
from .sampler import NumpySampler

__all__ = ["NumpySampler", "fold_in"]
