"""The CUDA sampler on a shard: a Dask worker with a GPU holds its documents on the device.

As :class:`~._shard.ShardChain` does on the CPU, the chain's M-step counts only the shard's part
of the word-topic matrix B, and the E-step reads the corpus-wide B the driver sends back
(:meth:`CudaShardChain.set_word_topic`). B on the device is in the shard's own word order (its
words relabelled by their frequency in the shard); the parts travel in the caller's word ids.
Every token is keyed by its place in the whole corpus (``token_offset``), and the tables every
block builds from B are those of the single-GPU chain, so the chain is the single-GPU chain, bit
for bit.

Imported only on a worker that runs the CUDA engine (it needs CuPy).
"""

from ..backends.cuda.multi_gpu.sampler import DeviceShard
from ._wire import cell_dtype


class CudaShardChain(DeviceShard):
    """The sparse CUDA sampler on a shard, whose M-step counts the shard's part of B and whose
    corpus-wide B comes from the driver (see the module's docstring)."""

    def local_word_topic(self):
        """The non-zero cells of the shard's part of B: ``(cells, counts)`` host arrays, cell
        ``word * K + topic`` in the caller's word ids (:func:`~._wire.cell_dtype`), counts
        float32."""
        cp = self._cp
        with self._dev():
            flat = self.words.B.ravel()
            index = cp.flatnonzero(flat)
            values = flat[index]
            k = self.n_topics
            rows = cp.asarray(self.old_of_new, dtype=cp.int64)[index // k]
            cells = rows * k + index % k
            return cells.astype(cell_dtype(self.words.n_words, k)).get(), values.get()

    def set_word_topic(self, cells, values):
        """Take the corpus-wide B as its non-zero cells (host arrays, cell ``word * K + topic``
        in the caller's word ids, float32 counts) and the topic totals that follow from it."""
        cp = self._cp
        with self._dev():
            w = self.words
            k = self.n_topics
            cells = cp.asarray(cells).astype(cp.int64)
            rows = cp.asarray(self.new_of_old, dtype=cp.int64)[cells // k]
            w.B.fill(0)
            w.B.ravel()[rows * k + cells % k] = cp.asarray(values, dtype=cp.float32)
            del cells, rows
            self.finish_reduction()
