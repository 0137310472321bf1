"""A GPU prototype of the Metropolis-Hastings E-step (issue 37, item 3).

:class:`MhChain` runs the chains of the NumPy reference (``backends/numpy/mh_rule.py``,
``doc/algorithm.md``, "A Metropolis-Hastings draw") with ``cuda/sample_mh.cu``, drawing the
reference's topics token for token, so that a benchmark can ask whether an O(1) draw reaches a
likelihood sooner than the exact rule at large K. No estimator setting reaches it yet.
Importing this package does not import CuPy.
"""

from .chain import MhChain

__all__ = ["MhChain"]
