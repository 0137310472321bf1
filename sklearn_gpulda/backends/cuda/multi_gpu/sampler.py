"""One chain over several GPUs of this host (``device='cuda:0,1'``).

The documents are split into contiguous ranges of about equal tokens, one per GPU. Each GPU
holds its range in a :class:`~.shard.DeviceShard`, the sparse sampler whose tokens are keyed by
their place in the whole corpus (``token_offset``) and whose words are relabelled by the whole
corpus's frequencies, so that every shard's word-topic matrix B has the same rows as the
one-GPU chain's.

A sweep: every shard samples its tokens against the same B and then counts its own tokens'
part of B into that array; the parts are summed in place on every GPU (:mod:`.all_reduce`,
NCCL between distinct GPUs), and each shard takes the topic totals from the sum. Integer
counts in float32 add exactly in any order, so after every sweep B is the one-GPU chain's B,
bit for bit, and so are the tables every sampling block builds from it: each token draws what
it draws on one GPU, and the model is the one-GPU model. (Fractional counts can differ in the
last bits, as they can between a corpus in one chunk and in several.)

What is not split: every GPU holds the whole B (V x K float32) and does the per-sweep work of
size V x K (clearing B before counting, the topic totals) on its own. The training
log-likelihood is each shard's sum, summed, so it can differ from the one-GPU figure in the last
bits; the model does not use it.
"""

import contextlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...._input.layouts import split_documents
from ...._runtime.device import Device
from ...._runtime.stages import stage
from ...base import Sampler
from ...prior_learning import TABLE_COUNTS, merge_histograms
from ...random import STREAM_INIT, STREAM_SAMPLE
from ..doc_topic import merged_alpha_table
from .all_reduce import make_all_reduce
from .shard import DeviceShard


class MultiGpuSampler(Sampler):
    """The sparse CUDA chain spread over several GPUs (see the module's docstring).

    Parameters
    ----------
    n_topics, alpha, beta, seed
        As :class:`~sklearn_gpulda.backends.base.Sampler`.
    device : sklearn_gpulda._runtime.device.Device
        The GPUs, in the order the document ranges go to them. The same ordinal may appear
        more than once (several shards on one GPU, summed by peer copies): how one GPU tests
        the chain.
    max_chunk_tokens, max_device_memory
        As :class:`~.sparse.CudaSparseSampler`, for each GPU (a GPU that cannot hold its part
        streams it).
    all_reduce : {'auto', 'nccl', 'peer-copy'}
        How the parts of B are summed (:func:`~.all_reduce.make_all_reduce`).
    """

    def __init__(self, n_topics, alpha, beta, seed, device, max_chunk_tokens=None,
                 max_device_memory=None, all_reduce="auto"):
        super().__init__(n_topics, alpha, beta, seed, device)
        if device.kind != "cuda" or not device.indices:
            raise ValueError(f"a multi-GPU chain needs GPUs, got device {device}")
        self.gpus = list(device.indices)
        self.shards = [DeviceShard(n_topics, self._alpha, beta, seed, Device("cuda", (gpu,)),
                                   max_chunk_tokens=max_chunk_tokens,
                                   max_device_memory=max_device_memory)
                       for gpu in self.gpus]
        self.all_reduce_kind = all_reduce
        self._reducer = None
        self._pool = None
        self._active = []       # the shards holding a part of the loaded corpus
        self.bounds = None      # document bounds of the parts

    @property
    def _lead(self):
        return self._active[0]

    def _each(self, fn):
        """``fn(shard)`` on every active shard at once, one thread per shard (a shard's work is
        queued on its GPU without waiting, except where it streams or reads results back);
        the results in shard order."""
        if len(self._active) == 1:
            return [fn(self._active[0])]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(len(self.shards), thread_name_prefix="gpulda-gpu")
        return list(self._pool.map(fn, self._active))

    def _reduce(self):
        """Sum the shards' parts of B in place on every GPU, then the topic totals."""
        with stage("sweeps: all-reduce"):
            self._reducer.all_reduce([(s.gpu, s.word_topic_buffer()) for s in self._active])
        for shard in self._active:
            shard.finish_reduction()

    # -- memory ---------------------------------------------------------------------------------
    def _parts(self, corpus):
        n_parts = max(1, min(len(self.shards), corpus.n_docs))
        self.bounds = split_documents(np.asarray(corpus.doc_ptr), n_parts)
        with self._on_counts_gpu(corpus):
            return [corpus.doc_range(int(a), int(b))
                    for a, b in zip(self.bounds[:-1], self.bounds[1:])]

    def _on_counts_gpu(self, corpus):
        """The GPU a corpus's counts lie on as the current device (their slices are computed
        there), or no change for host counts."""
        if getattr(corpus, "on_device", False):
            return self.shards[0].cp.cuda.Device(corpus.nz_ptr.device.id)
        return contextlib.nullcontext()

    def estimate_bytes(self, corpus):
        """The largest part's bytes on its GPU (every GPU holds about as much)."""
        sizes = [s.estimate_bytes(p) for s, p in zip(self.shards, self._parts(corpus))]
        return max(a for a, _ in sizes), max(b for _, b in sizes)

    # -- the chain ------------------------------------------------------------------------------
    def load(self, corpus):
        self.release()
        with stage("load: split"):
            frequencies = corpus.word_frequencies()
            parts = self._parts(corpus)
        self._active = self.shards[: len(parts)]
        offsets = np.asarray(corpus.doc_ptr)[self.bounds[:-1]]
        for shard, offset in zip(self._active, offsets):
            shard.word_frequencies = frequencies
            shard.token_offset = int(offset)

        def load_part(pair):
            shard, part = pair
            placed = self._placed(shard, part)
            shard.load(placed)
            # The layout is built: the part's counts are not read again.
            placed.release_counts()
            part.release_counts()

        placed = dict(zip(map(id, self._active), parts))
        self._each(lambda shard: load_part((shard, placed[id(shard)])))
        with stage("load: communicator"):
            self._reducer = make_all_reduce(self._lead.cp, [s.gpu for s in self._active],
                                            self.all_reduce_kind)
        self.corpus = corpus

    def _placed(self, shard, part):
        """``part`` with its counts on the shard's GPU when they lie on another one (a CuPy
        input lies on the GPU it was made on); host counts are uploaded by the layout."""
        if not getattr(part, "on_device", False) or part.nz_ptr.device.id == shard.gpu:
            return part
        cp = shard.cp

        def to_shard(array):
            with shard.device_context():
                copy = cp.empty(array.shape, dtype=array.dtype)
            copy.data.copy_from_device(array.data, array.nbytes)
            return copy

        with self._on_counts_gpu(part):
            return part.doc_range(0, part.n_docs, move=to_shard)

    def init_topics(self, iteration=0, stream=STREAM_INIT):
        self._require()
        self._each(lambda s: s.init_topics(iteration, stream))
        self._reduce()

    def set_topics(self, topics):
        topics = self._checked_topics(topics)
        starts = [s.token_offset for s in self._active] + [topics.size]
        parts = {id(s): topics[a:b] for s, a, b in zip(self._active, starts, starts[1:])}
        self._each(lambda s: s.set_topics(parts[id(s)]))
        self._reduce()

    def sweep(self, iteration, stream=STREAM_SAMPLE, sub=0):
        self._require()
        self._each(lambda s: s.sweep(iteration, stream, sub))
        self._reduce()

    def fix_topic_word(self, components, row_sums=None):
        raise NotImplementedError("online learning runs on one GPU (the first one named)")

    def _priors_changed(self):
        for shard in self.shards:
            shard.set_priors(alpha=self._alpha, beta=self.beta)

    def set_beta_cells(self, cells):
        # Every shard samples against the summed B with the same pseudo-counts at the seeded
        # cells (added while it samples, never summed), so the chain is the one-GPU chain.
        for shard in self.shards:
            shard.set_beta_cells(cells)
        super().set_beta_cells(cells)

    def seeded_counts(self):
        self._require()
        return self._lead.seeded_counts()

    # -- reading the state ----------------------------------------------------------------------
    def topics(self):
        self._require()
        return np.concatenate([s.topics() for s in self._active])

    def word_topic_counts(self):
        self._require()
        return self._lead.word_topic_counts()

    def doc_topic_counts(self):
        self._require()
        return np.vstack([s.doc_topic_counts() for s in self._active])

    def log_likelihood(self):
        self._require()
        return float(sum(self._each(lambda s: s.log_likelihood())))

    def doc_topic_histogram(self):
        self._require()
        return merge_histograms([s.doc_topic_histogram() for s in self._active])

    def doc_topic_table(self):
        """The shards' binned tables summed and their other entries merged
        (:func:`~..doc_topic.merged_alpha_table`), which is the one-GPU chain's table; the
        host's way for weighted counts, as there."""
        corpus = self._require()
        bins = []
        if corpus.integral:
            for shard in self._active:
                with shard.device_context():
                    bins.append(shard.doc_topic_bins(shard.corpus))
        if not bins or any(b is None for b in bins) or bins[0][0].shape[1] != TABLE_COUNTS:
            return super().doc_topic_table()
        # Summed on the host: CuPy's uint64 addition would be a kernel it compiles on a user's
        # machine.
        return merged_alpha_table(*zip(*bins))

    def learn_alpha(self, *args):
        return self._lead.learn_alpha(*args)

    def learn_beta(self, *args):
        return self._lead.learn_beta(*args)

    def word_topic_histogram(self):
        self._require()
        return self._lead.word_topic_histogram()

    # -- averaging: every GPU holds the summed B, so the first one's is the chain's -------------
    def _accumulate(self):
        self._lead.accumulate_word_topic()

    def averaged_word_topic(self, divisor):
        return self._lead.averaged_word_topic(divisor)

    def _discard_sum(self):
        self._lead.discard_accumulated()

    def topic_word_components(self, dtype=np.float64):
        self._require()
        return self._lead.topic_word_components(dtype)

    def word_topic_statistics(self):
        return self._lead.word_topic_statistics()

    def synchronize(self):
        for shard in self._active:
            shard.synchronize()

    def release(self):
        for shard in self.shards:
            shard.release()
        if self._reducer is not None:
            self._reducer.close()
        if self._pool is not None:
            self._pool.shutdown()
        self._reducer = self._pool = None
        self._active = []
        super().release()
