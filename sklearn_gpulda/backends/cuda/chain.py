"""What the CUDA samplers share: their GPU, the memory check before allocating, the running sum
of the word-topic counts kept on the device, and counting distinct values there."""

import numpy as np

from ..._device import free_device_bytes
from .transfer import topic_major_to_host


class CudaChain:
    """Mixin of :class:`~sklearn_gpulda.backends.base.Sampler` subclasses that live on one GPU.

    A subclass provides ``estimate_bytes``, ``_memory_message``, ``_word_major_device()`` (the
    current word-topic counts as a (V', K) device array) and ``_host_rows()`` (the device row of
    each of the caller's words, or None for the identity).
    """

    def _attach(self, device):
        # Imported here, after the sampler has checked its arguments, so that a bad n_topics is
        # reported as such on a machine without CuPy.
        import cupy

        self._cp = cupy
        self._index = device.index
        self._sum = None

    def _dev(self):
        return self._cp.cuda.Device(self._index)

    def synchronize(self):
        self._dev().synchronize()

    def _check_memory(self, corpus):
        """Raise MemoryError, before allocating, when a chain on ``corpus`` would not fit."""
        steady, peak = self.estimate_bytes(corpus)
        free, total = free_device_bytes(self._cp)
        if peak > free:
            raise MemoryError(self._memory_message(corpus, steady, peak, free, total))

    # -- averaging on the device ----------------------------------------------------------------
    def _accumulate(self):
        cp = self._cp
        with self._dev():
            counts = self._word_major_device()
            if self._sum is None:
                need = counts.size * 8
                free, _ = free_device_bytes(cp)
                if need > free:
                    raise MemoryError(
                        f"averaging the word-topic counts needs a float64 running sum of "
                        f"{need / 2**30:.2f} GiB on GPU {self._index}, and {free / 2**30:.2f} "
                        "GiB is free; use n_averaged_sweeps=0"
                    )
                self._sum = counts.astype(cp.float64)
            else:
                self._sum += counts

    def _accumulated(self, divisor):
        with self._dev():
            return topic_major_to_host(self._cp, self._sum, self._host_rows(), divisor=divisor)

    # -- histograms -------------------------------------------------------------------------------
    def _topic_count_pairs(self, keys):
        """``(topic, count, n)`` host arrays from device keys ``(topic << 32) | float bits``."""
        cp = self._cp
        unique, n = cp.unique(keys, return_counts=True)
        unique = unique.get()
        topic = (unique >> np.uint64(32)).astype(np.int64)
        count = (unique & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
        return topic, count.astype(np.float64), n.get().astype(np.int64)

    def _value_counts(self, values):
        """Distinct non-zero values of a float32 device array and how many cells hold each."""
        cp = self._cp
        unique, n = cp.unique(values[values != 0], return_counts=True)
        return unique.get().astype(np.float64), n.get().astype(np.int64)

    def word_topic_histogram(self):
        """Distinct non-zero counts of B with their numbers of cells, and the topic totals; B
        comes word-major from the sampler's ``_word_major_device``."""
        self._require()
        with self._dev():
            B = self._word_major_device()
            count, n_cells = self._value_counts(B.ravel())
            totals = B.sum(axis=0, dtype=self._cp.float64).get()
        return count, n_cells, totals

    def release(self):
        """Free the chain's device arrays and return CuPy's cached blocks to the driver."""
        self._sum = None
        self._release_state()
        super().release()
        try:
            self._cp.get_default_memory_pool().free_all_blocks()
        except Exception:  # noqa: BLE001 -- freeing cached blocks is best effort
            pass
