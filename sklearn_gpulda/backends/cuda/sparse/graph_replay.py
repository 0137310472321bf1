"""Runs of sweeps of the sparse chain replayed as CUDA graphs: the chain's side of
:mod:`.sweep_graph` (which holds the graphs, the key and the switch).

:class:`GraphReplay` is a base of :class:`~.sampler.CudaSparseSampler` and reads its
internals (the word side, the chunks, the launch shape, averaging's running sum). Only a class
that sets ``replays_graphs = True`` in its own body replays graphs, so that a subclass which
changes what a sweep queues (``DeviceShard``: its M-step waits for the shards' sum) keeps the
kernel-by-kernel sweep.
"""

from .. import model_kernels
from . import sample_sparse, sweep_graph


class GraphReplay(sweep_graph.GraphRuns):
    """The sparse chain's runs of sweeps as CUDA graphs, where they can be
    (:func:`~.sweep_graph.graph_obstacle`) and are wanted (:func:`~.sweep_graph.enabled`);
    kernel by kernel otherwise."""

    #: The sparse engine's bound of the switch (:data:`~.sweep_graph.AUTO_MAX_TOKENS`).
    graph_max_tokens = sweep_graph.AUTO_MAX_TOKENS

    def _graph_tokens(self):
        return self._require().n_tokens

    def _graph_table(self):
        return self.words.B

    def graph_obstacle(self):
        """Why this chain's sweeps cannot be replayed as CUDA graphs, or None where they can
        (:func:`~.sweep_graph.graph_obstacle`)."""
        self._require()
        w = self.words
        return sweep_graph.graph_obstacle(
            # The class itself, not its sweep alone: a capture records _count_words,
            # _topic_totals and _count_b too, which a subclass (DeviceShard) changes.
            subclass=not type(self).__dict__.get("replays_graphs", False),
            streamed=self.streamed,
            online_batches=self._batches is not None,
            hybrid=w.rare is not None, seeded=w.seeded is not None,
            fixed_topic_word=w.bhat_fixed is not None, exact_totals=self._exact_totals(),
            profile=bool(self.profile),
            shard=self.token_offset != 0 or self.word_frequencies is not None,
            foreign_allocator=not sweep_graph.default_pool_allocates(self.cp))

    def graph_inputs(self):
        """What a captured sweep reads (:func:`~.sweep_graph.fingerprint`): the word side and
        the chunks, whose attributes, the scalars the launches take besides them, and the
        attributes that stay out of the key: beta, which a captured sweep reads from the word
        side's ``beta_word`` (written in place with it, as alpha is)."""
        return ([self.words, *self.chunks],
                (self.seed, self.token_offset, self.n_topics, self._n_sm, self.large_k,
                 self._shape),
                ("beta",))

    def graph_variant(self):
        """One state only: a sparse sweep leaves its arrays where they were."""
        return ()

    def after_graph_sweep(self):
        """Nothing for the host to do after a replayed sweep."""

    def sweep_from_device(self, iteration, accumulate=False):
        """Queue one sweep as :meth:`sweep` queues it (B stored dense, topic-word side learned,
        nothing profiled), its iteration read from the device word ``iteration`` (uint32, (1,))
        and beta from the word side's (``beta_word``); then, where ``accumulate``, its counts
        added to the running sum (:meth:`running_sum`, which must exist); then the iteration
        moved on. What a graph captures: it makes no array and reads nothing back."""
        self._queue_sweep(iteration)
        if accumulate:
            model_kernels.accumulate(self.words.B, self.running_sum())
        sample_sparse.advance_iteration(iteration)
