"""Runs of sweeps of the dense chain replayed as CUDA graphs: the dense chain's side of
:mod:`..sparse.sweep_graph` (which holds the graphs, the key and the switch).

A dense sweep queues five operations from Python (two fills, the sampling kernel, the topic
totals and Bhat), which on a small corpus take the host longer than the GPU takes to run them
(``doc/performance.md``, "Dense sweeps replayed as CUDA graphs"). Replayed, a sweep is one
launch. The sampling kernel and Bhat read the iteration and beta from device words
(``iteration_word``, the chain's ``prior_word``), which the host writes in place, as it writes
alpha: a captured graph stays valid across prior updates.

The fused M-step counts a sweep's topics into a second A and B, which then change places with
the first: the chain alternates between two states, and each has a graph of its own
(:meth:`DenseGraphReplay.graph_variant`), the host swapping its references after each replay
(:meth:`DenseGraphReplay.after_graph_sweep`) as after a sweep queued kernel by kernel.

:class:`DenseGraphReplay` is a base of :class:`~.sampler.CudaDenseSampler` and reads its
state (``_st``).
"""

from .. import counts, model_kernels
from ..sparse import sample_sparse, sweep_graph
from . import mstep as _mstep
from .sample_dense import sample_dense_long

#: Dense chains of at most this many tokens replay their sweeps as graphs unless
#: ``SKLEARN_GPULDA_CUDA_GRAPHS`` says otherwise (measured in ``doc/performance.md``, "Dense
#: sweeps replayed as CUDA graphs").
AUTO_MAX_TOKENS = 1 << 20


class DenseGraphReplay(sweep_graph.GraphRuns):
    """The dense chain's runs of sweeps as CUDA graphs, where they can be
    (:meth:`graph_obstacle`) and are wanted (:func:`~..sparse.sweep_graph.enabled`); kernel
    by kernel otherwise."""

    #: The dense engine's bound of the switch.
    graph_max_tokens = AUTO_MAX_TOKENS

    def _graph_tokens(self):
        return self._require_state().n_tokens

    def _graph_table(self):
        return self._st.B

    def graph_obstacle(self):
        """Why this chain's sweeps cannot be replayed as CUDA graphs, or None where they can."""
        st = self._require_state()
        reasons = (
            (not st.fused, "the M-step is not the fused one (weighted counts, or "
                           "mstep='bincount')"),
            (st.n_long != st.order.size, "some documents are drawn by a thread each"),
            (st.seeded is not None, "the topic-word prior is a matrix"),
            (st.fixed, "the topic-word side is fixed"),
            (bool(self.profile), "the sampler profiles its stages"),
        )
        for blocked, reason in reasons:
            if blocked:
                return reason
        if not sweep_graph.default_pool_allocates(self.cp):
            return "CuPy's allocator is not its default memory pool"
        return None

    #: The tables that change places every sweep: out of the key, named by
    #: :meth:`graph_variant` instead.
    _SWAPPED = ("A", "A_next", "B", "B_next")

    def graph_inputs(self):
        """What a captured sweep reads (:func:`~..sparse.sweep_graph.fingerprint`): the chain's
        state, the scalars its launches take, and the tables :meth:`graph_variant` names."""
        return [self._st], (self.seed, self.n_topics, self.block, self._sm_count()), \
            self._SWAPPED

    def graph_variant(self):
        """Which of its two states the chain is in: the addresses of the tables that change
        places (each state replays a graph of its own)."""
        st = self._st
        return tuple(getattr(st, name).data.ptr for name in self._SWAPPED)

    def after_graph_sweep(self):
        """The counted tables become A and B, as after a sweep queued kernel by kernel."""
        st = self._st
        st.A, st.A_next = st.A_next, st.A
        st.B, st.B_next = st.B_next, st.B
        st.b_current = True

    def sweep_from_device(self, iteration, accumulate=False):
        """Queue one sweep as :meth:`sweep` queues it (every document drawn by warps, the fused
        M-step), its iteration read from the device word ``iteration`` and beta from
        ``prior_word``; where ``accumulate``, the new counts added to the running sum; then the
        iteration moved on. It makes no array and reads nothing back; the host's swap of the
        tables is :meth:`after_graph_sweep`'s."""
        st = self._st
        counts.clear(st.A_next)
        counts.clear(st.B_next)
        sample_dense_long(st.order_long, st.doc_ptr, st.word, st.weight, st.A, st.bhat,
                          st.alpha, self.seed, 0, st.z, block=self.block,
                          word_counts=(st.B, st.denom, self.beta),
                          counts_next=(st.A_next, st.B_next), warps=st.warps,
                          iteration_word=iteration, beta_word=st.prior_word[:1])
        _mstep.set_bhat(st.B_next, st.totals, self.beta, st.n_words * self.beta, st.bhat,
                        st.denom, self._sm_count(), prior_word=st.prior_word)
        if accumulate:
            model_kernels.accumulate(st.B_next, self.running_sum())
        sample_sparse.advance_iteration(iteration)
