"""Prior updates made by the GPU shards of a Dask fit (:mod:`sklearn_gpulda.dask._rank_priors`),
on the CPU: the ranks are threads, NCCL's all-gather a barrier between them, CuPy NumPy. The GPU
tests of ``test_dask.py`` run the same code over NCCL."""

import contextlib
import threading

import numpy as np
import pytest

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._fitting.batch import PriorUpdates
from sklearn_gpulda.backends import prior_learning as _learning
from sklearn_gpulda.backends.cuda.counts import KEY_BINS
from sklearn_gpulda.backends.cuda.doc_topic import merged_alpha_table
from sklearn_gpulda.backends.numpy.sampler import NumpySampler
from sklearn_gpulda.backends.priors import Prior
from sklearn_gpulda.dask import _rank_priors as rp
from sklearn_gpulda.datasets import load_kjv_chapters


class _HostArray(np.ndarray):
    """A NumPy array with CuPy's ``get``."""

    def get(self):
        return np.array(self)


class _FakeCupy:
    """What the module calls of CuPy."""

    int64, uint64, float64 = np.int64, np.uint64, np.float64

    @staticmethod
    def empty(n, dtype):
        return np.empty(n, dtype).view(_HostArray)

    @staticmethod
    def zeros(n, dtype):
        return np.zeros(n, dtype).view(_HostArray)

    @staticmethod
    def asarray(a, dtype=None):
        return np.array(a, dtype=dtype).view(_HostArray)


class _Hub:
    """NCCL's all-gather among ranks that are threads. A rank calling a collective its peers do
    not call breaks the barrier (an error, where NCCL would wait for ever)."""

    def __init__(self, n_ranks):
        self.barrier = threading.Barrier(n_ranks, timeout=10)
        self.slots = [None] * n_ranks
        self.collectives = [0] * n_ranks


class _Rank:
    def __init__(self, hub, rank):
        self.hub, self.rank = hub, rank

    def all_gather(self, send, receive, count):
        hub = self.hub
        hub.slots[self.rank] = np.array(send[:count])
        hub.collectives[self.rank] += 1
        hub.barrier.wait()
        receive[...] = np.concatenate(hub.slots)
        hub.barrier.wait()


def _keys(topic, count):
    """A's keys as ``cuda/counts.cu`` makes them: ``(topic << 32) | float32 bits``."""
    bits = np.asarray(count, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (np.asarray(topic, dtype=np.uint64) << np.uint64(32)) | bits


def _bins(counts):
    """``doc_topic_bins``' host arrays for a (documents x topics) matrix of integer counts."""
    n_topics = counts.shape[1]
    table = np.zeros((n_topics, KEY_BINS), dtype=np.uint64)
    doc, topic = np.nonzero(counts)
    value = counts[doc, topic]
    small = value < KEY_BINS
    np.add.at(table, (topic[small], value[small].astype(np.int64)), 1)
    keys, n = np.unique(_keys(topic[~small], value[~small]), return_counts=True)
    return table, keys, n.astype(np.uint64)


class _Chain:
    """A shard's chain as the module reads it, its A a given matrix of counts."""

    cp = _FakeCupy

    def __init__(self, counts, histogram, alpha, beta, fail=None):
        self.counts, self.histogram, self.fail = counts, histogram, fail
        self.alpha, self.beta = np.array(alpha, dtype=np.float64), float(beta)

    def device_context(self):
        return contextlib.nullcontext()

    def alpha_bins(self):
        if self.fail == "bins":
            raise MemoryError("out of device memory (a test's)")
        return _bins(self.counts)

    def learn_alpha(self, *args):
        return _learning.update_alpha(*args)

    def learn_beta(self, *args):
        return _learning.update_beta(*args)

    def word_topic_histogram(self):
        if self.fail == "histogram":
            raise ValueError("a histogram that failed (a test's)")
        return self.histogram

    def set_priors(self, alpha=None, beta=None):
        if alpha is not None:
            self.alpha = np.array(alpha)
        if beta is not None:
            self.beta = float(beta)


def _on_ranks(fn, n_ranks):
    """``fn(rank_index, rank, flags)`` in a thread per rank; each one's result or error."""
    hub = _Hub(n_ranks)
    out = [None] * n_ranks

    def run(r):
        try:
            out[r] = fn(r, _Rank(hub, r), rp.Flags(_FakeCupy, n_ranks))
        except Exception as exc:  # noqa: BLE001 -- the test reads it
            out[r] = exc

    threads = [threading.Thread(target=run, args=(r,)) for r in range(n_ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    return out, hub


def _parts(n_topics, seed=0):
    """Three shards' A: uneven numbers of documents, counts of 64 and more on some only."""
    rng = np.random.default_rng(seed)
    parts = []
    for n_docs, big in ((40, 3), (25, 0), (60, 9)):
        counts = rng.poisson(0.8, (n_docs, n_topics)).astype(np.float64)
        for _ in range(big):
            counts[rng.integers(n_docs), rng.integers(n_topics)] = rng.integers(64, 300)
        parts.append(counts)
    return parts


@pytest.mark.parametrize("n_topics", [20, 200])
def test_the_ranks_sum_alpha_table_as_one_process_would(n_topics):
    # K = 20 keeps the table on the host, K = 200 sends it to the (here fake) device.
    parts = _parts(n_topics)
    chains = [_Chain(c, None, np.full(n_topics, 0.1), 0.01) for c in parts]
    got, hub = _on_ranks(lambda r, rank, flags: rp.summed_alpha_table(chains[r], rank, 3, flags),
                         3)
    # One process's table of the whole corpus, from its histogram of (topic, count) pairs.
    whole = np.vstack(parts)
    doc, topic = np.nonzero(whole)
    pairs, n_docs = np.unique(np.stack([topic, whole[doc, topic]]), axis=1, return_counts=True)
    table, rest = _learning.alpha_table(pairs[0], pairs[1], n_docs, n_topics)
    for found in got:
        assert not isinstance(found, Exception), found
        np.testing.assert_array_equal(np.asarray(found[0]), table)
        for a, b in zip(found[1], rest):
            np.testing.assert_array_equal(a, b)
    assert rest[0].size > 0  # the large counts travelled too
    direct = merged_alpha_table(*zip(*[_bins(c) for c in parts]))
    np.testing.assert_array_equal(np.asarray(direct[0]), np.asarray(got[0][0]))


def test_every_rank_learns_the_one_process_priors():
    n_topics = 20
    parts = _parts(n_topics, seed=1)
    histogram = (np.array([1.0, 2.0, 7.0]), np.array([50, 20, 3]), np.full(n_topics, 4.0))
    lengths = type("Corpus", (), dict(n_words=30, doc_lengths=lambda self: np.vstack(
        parts).sum(axis=1)))()
    updates = PriorUpdates(Prior(0.1, True), Prior(0.01, True), 0, 10, lengths)
    chains = [_Chain(c, histogram, np.full(n_topics, 0.1), 0.01) for c in parts]
    got, _ = _on_ranks(lambda r, rank, flags: rp.update_on_ranks(updates, chains[r], rank, 3,
                                                                 flags), 3)
    assert got == [None] * 3
    # One process: the same update on the whole corpus's table.
    one = _Chain(np.vstack(parts), histogram, np.full(n_topics, 0.1), 0.01)
    updates.update(type("One", (), dict(
        alpha=one.alpha, beta=one.beta, set_priors=one.set_priors,
        learn_priors=lambda self, *args: None,
        word_topic_histogram=one.word_topic_histogram,
        learn_alpha=one.learn_alpha, learn_beta=one.learn_beta,
        doc_topic_table=lambda self: merged_alpha_table(*zip(_bins(one.counts)))))())
    assert not np.array_equal(one.alpha, np.full(n_topics, 0.1)) and one.beta != 0.01
    for chain in chains:
        np.testing.assert_array_equal(chain.alpha, one.alpha)
        assert chain.beta == one.beta


@pytest.mark.parametrize("fail", ["bins", "histogram"])
def test_a_rank_that_fails_has_every_rank_raise_at_the_same_point(fail):
    # Before the gather (device memory for alpha's bins) and after it (beta's histogram): every
    # rank raises, none waits in a collective its peers never call, and the failed one names
    # its error.
    n_topics = 20
    parts = _parts(n_topics)
    histogram = (np.array([1.0, 2.0]), np.array([50, 5]), np.full(n_topics, 3.0))
    lengths = type("Corpus", (), dict(n_words=30, doc_lengths=lambda self: np.vstack(
        parts).sum(axis=1)))()
    updates = PriorUpdates(Prior(0.1, True), Prior(0.01, True), 0, 10, lengths)
    chains = [_Chain(c, histogram, np.full(n_topics, 0.1), 0.01, fail if r == 1 else None)
              for r, c in enumerate(parts)]
    got, hub = _on_ranks(lambda r, rank, flags: rp.update_on_ranks(updates, chains[r], rank, 3,
                                                                   flags), 3)
    assert isinstance(got[1], rp.ShardFailed) and ("test's" in str(got[1]))
    assert all(isinstance(got[r], rp.PeerFailed) for r in (0, 2))
    assert len(set(hub.collectives)) == 1  # the same collectives on every rank
    assert not hub.barrier.broken


def test_the_driver_reports_the_failed_shards_own_error():
    from sklearn_gpulda.dask._sampler import _telling

    class Future:
        def __init__(self, exc):
            self.exc = exc

        def result(self, timeout=None):
            raise self.exc

    peer, own = rp.PeerFailed("another"), rp.ShardFailed("this one: MemoryError")
    assert _telling(peer, [Future(peer), Future(own), Future(peer)]) is own
    other = ValueError("not an update's")
    assert _telling(other, [Future(own)]) is other


def test_a_chain_making_the_updates_in_its_runs_gives_the_loops_model(monkeypatch):
    # The loop's hook: a NumPy chain that takes the updates over and makes them inside its
    # runs gives the model of the loop that ends a run at each update, bit for bit, in fewer
    # and longer runs.
    X = load_kjv_chapters().data[:300]
    params = dict(n_components=8, max_iter=25, random_state=0, device="cpu")
    plain = GPULatentDirichletAllocation(**params).fit(X)
    runs = []

    def run_prior_updates(self, updates):
        self._taken = updates
        return True

    def sweeps(self, first, last, accumulate_from=None):
        runs.append((first, last))
        for iteration in range(first, last + 1):
            self.sweep(iteration)
            if accumulate_from is not None and iteration >= accumulate_from:
                self.accumulate_word_topic()
            if self._taken.due(iteration):
                self._taken.update(self)

    monkeypatch.setattr(NumpySampler, "run_prior_updates", run_prior_updates)
    monkeypatch.setattr(NumpySampler, "sweeps", sweeps)
    taken = GPULatentDirichletAllocation(**params).fit(X)
    np.testing.assert_array_equal(taken.components_, plain.components_)
    np.testing.assert_array_equal(taken.doc_topic_prior_, plain.doc_topic_prior_)
    assert taken.topic_word_prior_ == plain.topic_word_prior_
    assert not np.array_equal(plain.doc_topic_prior_, np.full(8, 1 / 8))  # learned
    assert len(runs) == 2 and not {10, 20} & {last for _, last in runs}
