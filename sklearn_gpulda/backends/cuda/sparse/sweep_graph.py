"""Runs of sweeps of the resident sparse chain replayed as a CUDA graph.

A sweep of a small corpus costs more host time than GPU time: Python queues about ten launches
a sweep (``doc/performance.md``; issue 35). A run of sweeps that the fit loop hands over at once
(:meth:`~sklearn_gpulda.backends.base.Sampler.sweeps`) is instead captured once with CuPy's
stream capture and the graph launched once per sweep, which queues the same kernels with the
same arguments.

What one captured sweep holds, in the order :meth:`~.sampler.CudaSparseSampler.sweep` queues
it: per chunk the scheduling counter's memset and the E-step; per chunk A's rebuild; B zeroed
and counted; its column partials, topic totals and denominators; averaging's accumulation into
the running sum where the run accumulates; and last ``advance_iteration``.

What changes from sweep to sweep is the iteration (the Philox key's second word), and every
few sweeps the priors, which learned priors update between runs. A graph holds every argument
it captured, so its sampler (the ``sample_tokens_*_dev`` kernels of ``cuda/sample_sparse.cu``)
reads the iteration from a device word instead: ``set_iteration`` writes it before each run, and
the graph's last node moves it on. A prior update writes alpha's device array and beta's device
word (the word side's ``beta_word``, which the ``_dev`` samplers and ``topic_totals_dev`` read
in place of the ``beta`` argument) in place, queued on the stream the sweeps run on, so a
captured graph stays valid across it and draws with the new priors. Every other thing a captured
kernel reads, by value (the number of words, the seed, the shapes) or by address (every array,
alpha's and beta's word included), is in the graph's key (:func:`fingerprint`); the chain names
what stays out of it (beta's number). A graph whose key no longer matches is captured again,
never replayed.

Memory: every array a captured sweep touches exists before the capture, the capture allocates
nothing (a memory hook counts CuPy's pool requests while it runs; one that asked raises), and a
graph holds the arrays of its key, so that none of them is freed and its memory handed to
another array while the graph can still be launched. Only a CuPy pool's ``malloc`` calls memory
hooks (the raw allocator, an asynchronous pool or another library's do not), so graphs are used
only while CuPy allocates from its default pool (:func:`default_pool_allocates`).
Nothing in a captured sweep reads the device from the host.

Where: only a chain whose whole corpus is resident on one GPU, with B stored dense, integer
counts, a scalar topic-word prior and a topic-word side it learns, made by the sparse sampler's
own class (:func:`graph_obstacle`); anything else, and every chain while graphs are off, runs
its sweeps kernel by kernel.

Stages (:mod:`sklearn_gpulda._runtime.stages`): a sweep is charged to ``sweeps: sampling`` and
an add to averaging's running sum made the ordinary way (the first, which makes the sum, and the
run's eager sweep's) to ``sweeps: averaging``, as without graphs; an add captured inside a graph
is one of its nodes and cannot be timed apart from the sweep, so it counts under sampling.

When: chains of at most :data:`AUTO_MAX_TOKENS` tokens, where a sweep's GPU work is shorter
than the host's queueing (``doc/performance.md``, "Sweeps replayed as CUDA graphs"). The
environment variable ``SKLEARN_GPULDA_CUDA_GRAPHS``, read when a run starts (by
:func:`enabled`, nowhere else), forces them on for every chain that can (``1``) or off
(``0``).
"""

import os

import numpy as np

from ...._runtime.stages import stage
from . import sample_sparse

SAMPLING, AVERAGING = "sweeps: sampling", "sweeps: averaging"  # as Sampler.sweeps names them

#: The environment variable that turns graphs on ("1") or off ("0") whatever the chain's
#: size; read by :func:`enabled` only.
ENV = "SKLEARN_GPULDA_CUDA_GRAPHS"

#: What the graphs of this process did, for tests and benchmarks: ``eager`` sweeps queued
#: kernel by kernel (a run's first sweep on a chain whose graph kernels never ran), ``captures``
#: and ``replays`` (graph launches, one per sweep).
STATS = {"eager": 0, "captures": 0, "replays": 0}


#: Chains of at most this many tokens replay their sweeps as graphs unless the switch says
#: otherwise. Where a sweep's GPU work is shorter than the host's time to queue it kernel by
#: kernel (about 0.3 ms of Python and launches), replaying removes the host from the sweep: a
#: chain of 11,634 tokens at K = 20 went from 0.35-0.48 to 0.28-0.36 ms a sweep in each of three
#: runs. At 307,970 tokens the sweep's 0.24 ms of GPU work already hides the host's queueing,
#: and graphs measured from 19% faster to 27% slower on two hosts: they stay off there.
AUTO_MAX_TOKENS = 1 << 17


def enabled(n_tokens=None, environ=None, limit=AUTO_MAX_TOKENS):
    """Whether a chain of ``n_tokens`` tokens replays its runs of sweeps as graphs:
    ``SKLEARN_GPULDA_CUDA_GRAPHS=1`` in ``environ`` (default: the process's environment) turns
    them on for every chain that can, ``0`` off; otherwise chains of at most ``limit`` tokens
    (the engine's own bound; :data:`AUTO_MAX_TOKENS`, the sparse engine's, by default) replay
    them (None: no chain)."""
    value = (os.environ if environ is None else environ).get(ENV)
    if value in ("0", "1"):
        return value == "1"
    return n_tokens is not None and n_tokens <= limit


def reset_stats():
    """Zero :data:`STATS`."""
    for name in STATS:
        STATS[name] = 0


def default_pool_allocates(cp):
    """Whether CuPy's current allocator (this thread's) is its default memory pool's ``malloc``.

    Only a pool's ``malloc`` calls CuPy's memory hooks, which is how a capture checks that it
    allocates nothing: under another allocator (``cupy.cuda.set_allocator``, ``using_allocator``,
    an asynchronous pool, or none) a capture's allocations would go unseen. CuPy installs the
    default pool as ``set_allocator(pool.malloc)``, a bound method; bound methods compare equal
    when they bind the same function to the same object, so a fresh ``pool.malloc`` equals the
    installed one.
    """
    allocator = cp.cuda.get_allocator()
    pool = cp.get_default_memory_pool()
    if allocator == pool.malloc:
        return True
    # Where the method's equality is not the bound method's (an extension type's), the same
    # question asked directly: ``malloc`` bound to the default pool itself.
    return (getattr(allocator, "__self__", None) is pool
            and getattr(allocator, "__name__", None) == "malloc")


def graph_obstacle(*, subclass, streamed, online_batches, hybrid, seeded, fixed_topic_word,
                   exact_totals, profile, shard, foreign_allocator):
    """Why a chain's sweeps cannot be replayed as a graph, or None where they can.

    Parameters
    ----------
    subclass : bool
        The sampler is a subclass of the sparse chain (the mini-batched engine, the shards of
        several GPUs or Dask workers): a capture records the sparse chain's own ``sweep``,
        ``_count_words``, ``_topic_totals`` and ``_count_b``, which a subclass may change.
    streamed : bool
        The chunks live in host memory and pass through the device every sweep.
    online_batches : bool
        The chain holds online learning's mini-batches.
    hybrid : bool
        B is stored hybrid (rare words in hash rows).
    seeded : bool
        A matrix topic-word prior adds pseudo-counts to B around the E-step.
    fixed_topic_word : bool
        Bhat is held fixed (mini-batch learning, inference).
    exact_totals : bool
        The topic totals take the one-kernel path (B dense, integer counts); the other path
        makes CuPy temporaries, which a capture must not.
    profile : bool
        The sampler records CUDA events around its stages.
    shard : bool
        The chain is a shard of a larger corpus (several GPUs, Dask workers).
    foreign_allocator : bool
        CuPy's allocator is not its default pool's (:func:`default_pool_allocates`).

    Returns
    -------
    str or None
    """
    reasons = (
        (subclass, "the sampler is a subclass of the sparse chain"),
        (streamed, "the corpus is streamed through the device"),
        (online_batches, "the chain holds online mini-batches"),
        (hybrid, "B is stored hybrid"),
        (seeded, "the topic-word prior is a matrix"),
        (fixed_topic_word, "the topic-word side is fixed"),
        (not exact_totals, "the topic totals are not the integer-count kernel's"),
        (profile, "the sampler profiles its stages"),
        (shard, "the chain is a shard of a larger corpus"),
        (foreign_allocator, "CuPy's allocator is not its default memory pool"),
    )
    for blocked, reason in reasons:
        if blocked:
            return reason
    return None


#: Attribute values that enter a key by value; any other object enters it by identity.
_VALUES = (bool, int, float, str, bytes, type(None), type, np.generic, np.dtype)


def fingerprint(cp, owners, scalars=(), unkeyed=()):
    """The key of what a captured sweep reads, and what a graph must hold alive.

    Every attribute of every object of ``owners`` enters the key, but those named in
    ``unkeyed`` (numbers a captured sweep reads from a device word instead, which the key holds
    by address): a CuPy array as its name, address, shape and dtype; a number, string, dtype or
    None by value; a NumPy array not at all (a captured kernel cannot read host arrays); any
    other object by identity. The arrays and those other objects are listed, so that a graph
    that keeps the list keeps every address and identity of its key from being reused.
    ``scalars`` are added as they are.

    Returns
    -------
    key : tuple
    held : list
    """
    parts, held = [tuple(scalars)], []
    for owner in owners:
        entry = [type(owner).__name__]
        attributes = vars(owner)
        for name in sorted(attributes):
            if name in unkeyed:
                continue
            value = attributes[name]
            if isinstance(value, cp.ndarray):
                held.append(value)
                entry.append((name, value.data.ptr, value.shape, value.dtype.str))
            elif isinstance(value, np.ndarray):
                continue
            elif isinstance(value, _VALUES):
                entry.append((name, value))
            else:
                held.append(value)
                entry.append((name, type(value).__name__, id(value)))
        parts.append(tuple(entry))
    return tuple(parts), held


class _Graph:
    """A captured sweep, its key and the arrays it holds alive."""

    def __init__(self, key, graph, arrays):
        self.key, self.graph, self.arrays = key, graph, arrays


def _allocation_counter(cp):
    """A CuPy memory hook that counts the pool requests made while it is entered."""

    class AllocationCounter(cp.cuda.MemoryHook):
        name = "sklearn_gpulda_sweep_graph_capture"

        def __init__(self):
            self.count = 0

        def malloc_preprocess(self, **kwargs):
            self.count += 1

    return AllocationCounter()


class SweepGraphs:
    """The graphs of one chain, and the device word its captured sampler reads the iteration
    from. Make it with the chain's GPU current.

    The chain provides ``cp``; ``graph_inputs()``, the objects whose attributes a captured
    sweep reads, the scalars it captures and the attribute names left out of the key
    (:func:`fingerprint`'s ``owners``, ``scalars`` and ``unkeyed``); ``graph_variant()``, a
    tuple that tells apart the states a chain's sweeps alternate between (the dense chain's
    tables, which change places every sweep), each with a graph of its own, and that names the
    addresses of arrays left out of the key; ``after_graph_sweep()``, the host's bookkeeping of
    a sweep queued by a replay (the dense chain's change of places); ``running_sum()``,
    averaging's running sum on the device where a captured sweep can add to it, else None;
    ``sweep_from_device(iteration, accumulate)``, which queues one sweep reading the
    iteration from the device word ``iteration``, adds the counts to the running sum where
    ``accumulate``, and moves the word on; ``accumulate_word_topic()`` and ``n_accumulated``.
    """

    def __init__(self, cp, set_iteration=sample_sparse.set_iteration):
        self.cp = cp
        self.set_iteration = set_iteration  # (word, value): queues word[0] = value
        self.iteration = cp.zeros(1, dtype=cp.uint32)
        # Capture needs a stream of its own (never the legacy default one); non-blocking, so
        # that nothing on the legacy stream is implicitly ordered with the capture.
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.graphs = {}  # (accumulate (bool), chain's variant) -> _Graph
        self.warm = False

    def forget(self, accumulate=None):
        """Drop the graphs (those that accumulate, or those that do not, where ``accumulate``
        is given), and the arrays they hold."""
        if accumulate is None:
            self.graphs.clear()
            self.warm = False
        else:
            for slot in [s for s in self.graphs if s[0] == bool(accumulate)]:
                del self.graphs[slot]

    def run(self, chain, first, last, accumulate_from=None):
        """Sweeps ``first`` to ``last`` of ``chain``, as
        :meth:`~sklearn_gpulda.backends.base.Sampler.sweeps` runs them (and charged to the same
        stages, but for the adds inside a graph: see the module's docstring)."""
        first, last = int(first), int(last)
        base = fingerprint(self.cp, *chain.graph_inputs())
        with stage(SAMPLING):
            self.set_iteration(self.iteration, first)
        for iteration in range(first, last + 1):
            add = accumulate_from is not None and iteration >= accumulate_from
            # A sweep adds inside its graph where the running sum exists, except the eager one
            # (no graph yet): it adds the ordinary way, timed as averaging. The same kernel adds
            # the same B either way.
            total = chain.running_sum() if add and self.warm else None
            with stage(SAMPLING):
                self._sweep(chain, base, total)
                chain.after_graph_sweep()
            if total is not None:
                chain.n_accumulated += 1
            elif add:
                try:
                    with stage(AVERAGING):
                        chain.accumulate_word_topic()
                except MemoryError as exc:
                    exc.sweep = iteration
                    raise

    def _sweep(self, chain, base, total):
        """Queue one sweep: its graph where one matches, else the sweep kernel by kernel the
        first time (it loads every kernel a graph holds), else a new graph."""
        accumulate = total is not None
        key, arrays = base
        variant = tuple(chain.graph_variant())
        key = key + (("variant",) + variant,)
        if accumulate:
            key = key + (("running sum", total.data.ptr, total.shape, total.dtype.str),)
            arrays = arrays + [total]
        slot = (accumulate, variant)
        record = self.graphs.get(slot)
        if record is None or record.key != key:
            self.graphs.pop(slot, None)
            if not self.warm:  # no graph at all yet (run passes no sum then)
                chain.sweep_from_device(self.iteration, accumulate)
                self.warm = True
                STATS["eager"] += 1
                return
            record = self.graphs[slot] = self._capture(chain, key, arrays, accumulate)
        record.graph.launch()
        STATS["replays"] += 1

    def _capture(self, chain, key, arrays, accumulate):
        stream = self.stream
        hook = _allocation_counter(self.cp)
        with stream, hook:
            stream.begin_capture()
            try:
                chain.sweep_from_device(self.iteration, accumulate)
            except BaseException:
                try:
                    stream.end_capture()
                except Exception:  # noqa: BLE001 -- the capture's own error is the one to see
                    pass
                raise
            graph = stream.end_capture()
        if hook.count:
            raise RuntimeError(f"a captured sweep asked CuPy's pool for memory {hook.count} "
                               "times; a graph must not allocate (its memory could be reused)")
        STATS["captures"] += 1
        return _Graph(key, graph, arrays)


class GraphRuns:
    """What an engine's chain needs to hand its runs of sweeps to :class:`SweepGraphs`: the
    switch, the graphs' life and averaging's running sum. A mixin of the chains that replay
    graphs (``sparse/graph_replay.py``, ``dense/graph_replay.py``), which provide
    ``graph_obstacle()`` (why not, or None), ``_graph_tokens()`` (the chain's tokens, for the
    switch), ``graph_max_tokens`` (the engine's bound of :func:`enabled`) and
    ``_graph_table()`` (B, the table averaging adds), besides :class:`SweepGraphs`' contract."""

    _graphs = None

    def sweeps(self, first, last, accumulate_from=None):
        graphs = self._sweep_graphs()
        if graphs is None:
            return super().sweeps(first, last, accumulate_from)
        with self.device_context():
            # run charges each sweep and each ordinary add to the stages Sampler.sweeps uses.
            graphs.run(self, first, last, accumulate_from)

    def _sweep_graphs(self):
        """The chain's :class:`SweepGraphs` where the switch is on and its sweeps can be
        replayed as graphs, else None."""
        if (not enabled(self._graph_tokens(), limit=self.graph_max_tokens)
                or self.graph_obstacle() is not None):
            self._forget_graphs()
            return None
        if self._graphs is None:
            with self.device_context():
                self._graphs = SweepGraphs(self.cp)
        return self._graphs

    def _forget_graphs(self, accumulate=None):
        if self._graphs is not None:
            self._graphs.forget(accumulate)

    def running_sum(self):
        """Averaging's running sum where a captured sweep can add to it in place (float64, the
        shape of B), else None."""
        total, B = self._sum, self._graph_table()
        if (isinstance(total, self.cp.ndarray) and total.dtype == self.cp.float64
                and total.shape == B.shape and total.flags.c_contiguous):
            return total
        return None

    def _discard_sum(self):
        # The graph that adds to the running sum holds it: let it go with the sum.
        self._forget_graphs(accumulate=True)
        super()._discard_sum()
