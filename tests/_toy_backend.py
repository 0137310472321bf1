"""A toy backend for the registry tests: the NumPy sampler's state, with each draw made in float64
by inverse transform from the document side of the conditional (the token's own weight out of
A; the word side kept simple, from the tables as they stand). It is a different sampler on
purpose: the tests check that the registry reaches it, not that it matches the oracle. What
adding a backend takes: this class (the protocol's methods it changes) and one registry entry."""

import numpy as np

from sklearn_gpulda.backends import random as _random
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
