"""The NumPy mini-batched sampler (``algorithm='minibatch'`` on the CPU), and the oracle of the
CUDA one: each sweep draws the documents batch by batch, with B and n updated after every
batch (``doc/algorithm.md``, mini-batched sweeps; Moon, thesis ch. 2).
"""

import numpy as np

from ..._input.layouts import DEFAULT_BATCH_TOKENS, batch_bounds
from ..._runtime.device import CPU
from ..random import STREAM_SAMPLE
from .minibatch_rule import batch_doc_side, draw_batch_range
from .sampler import NumpySampler


class NumpyMinibatchSampler(NumpySampler):
    """Mini-batched sweeps on the CPU (see :class:`~sklearn_gpulda.backends.base.Sampler`).

    Parameters
    ----------
    n_topics, alpha, beta, seed, device, n_jobs
        As :class:`~.sampler.NumpySampler`: each batch's draws run by token ranges on the
        ``n_jobs`` threads or worker processes (B lives in the team's shared memory), and the
        counts move in the main process between batches; the chain is the same at any
        ``n_jobs``.
    batch_tokens : int, default=DEFAULT_BATCH_TOKENS
        Most tokens of a batch (whole documents; a longer document is a batch of its own).

    Attributes
    ----------
    batch_hook : callable or None
        Called as ``batch_hook(batch, z, b, totals)`` after each batch of a sweep with the
        topics and the counts as they then are (for the tests of the per-batch invariants).
    """

    def __init__(self, n_topics, alpha, beta, seed, device=CPU, n_jobs=None,
                 batch_tokens=DEFAULT_BATCH_TOKENS):
        super().__init__(n_topics, alpha, beta, seed, device, rule="sparse", n_jobs=n_jobs)
        batch_bounds(np.zeros(2, dtype=np.int64), batch_tokens)  # the same check as at load
        self.batch_tokens = int(batch_tokens)
        self.batch_hook = None

    def batches(self):
        """Document bounds of the loaded corpus's batches."""
        return batch_bounds(self._require().doc_ptr, self.batch_tokens)

    def sweep(self, iteration, stream=STREAM_SAMPLE, sub=0):
        if self._fixed_bhat is not None:
            # Batches do not interact while the topic-word side is fixed: ESCA's E-step.
            return super().sweep(iteration, stream, sub)
        corpus = self._require()
        doc, word, weight, doc_ptr = self._loaded_tokens()
        team = self.team
        u = self._uniforms(iteration, stream, sub)
        # The topics and B as the sweep moves them, where the team's workers read them: copies,
        # since a thread team shares an array as it is, and the current topics may be the
        # caller's own (set_topics keeps an int32 array it is given).
        z = team.share("minibatch:z", np.array(self._z, dtype=np.int32))
        b = team.share("minibatch:b", np.array(self._b, dtype=np.float32))
        new = team.empty("minibatch:new", z.shape, np.int32)
        totals = np.array(self._topic_totals(), dtype=np.float64)
        alpha = self.alpha
        k = self.n_topics
        bounds = self.batches()
        for i, (d0, d1) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
            t0, t1 = int(doc_ptr[d0]), int(doc_ptr[d1])
            if t0 == t1:
                continue
            old = z[t0:t1]
            w = None if weight is None else weight[t0:t1]
            # The batch's A rows as they start: the M-step's, since only this batch moves them.
            a = self._a[d0:d1]
            dnt, denom = batch_doc_side(a, totals, corpus.n_words, alpha, self.beta,
                                        self.beta_cells)
            ranges = [(t0 + s, t0 + e) for s, e in team.token_ranges(t1 - t0)]
            team.run(draw_batch_range, ranges, doc=doc, word=word, topic=z, weight=weight, u=u,
                     first_doc=d0, a=a, b=b, denom=denom, dnt=dnt, alpha=alpha,
                     beta=self.beta, out=new, cells=self.beta_cells)
            drawn = new[t0:t1]
            moved = np.flatnonzero(drawn != old)
            if moved.size:
                v = word[t0:t1][moved]
                was, now = old[moved], drawn[moved]
                wm = np.ones(moved.size, np.float32) if w is None else w[moved]
                np.add.at(b, (v, was), -wm)
                np.add.at(b, (v, now), wm)
                wm64 = wm.astype(np.float64)
                totals += (np.bincount(now, weights=wm64, minlength=k)
                           - np.bincount(was, weights=wm64, minlength=k))
                z[t0:t1] = drawn
            if self.batch_hook is not None:
                self.batch_hook(i, z, b, totals)
        self._set(np.array(z))
