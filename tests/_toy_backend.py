"""A toy backend for the registry tests: the NumPy sampler's state, with each draw made from the
exact collapsed conditional in float64 by inverse transform. What adding a backend takes: this
class (the protocol's methods it changes) and one registry entry."""

import numpy as np

from sklearn_gpulda import _random
from sklearn_gpulda.backends.numpy.sampler import NumpySampler


class Float64Sampler(NumpySampler):
    def sweep(self, iteration, stream=_random.STREAM_SAMPLE, sub=0):
        c = self._require()
        u = _random.token_uniform(self.seed, iteration, stream, np.arange(c.n_tokens), sweep=sub)
        p = self._a[c.doc].astype(np.float64)
        p[np.arange(c.n_tokens), self._z] -= 1.0 if c.weight is None else c.weight
        p = (np.maximum(p, 0) + self.alpha) * self._tables.bhat[c.word]
        run = np.cumsum(p, axis=1)
        z = (run <= (u * run[:, -1])[:, None]).sum(axis=1)
        self._set(np.minimum(z, self.n_topics - 1).astype(np.int32))
