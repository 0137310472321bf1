"""Summing one float32 array per GPU in place, so that every GPU holds the sum.

Two ways, one interface (:meth:`all_reduce` takes ``(gpu, array)`` pairs in shard order and
queues the work on each GPU's current stream, after what is queued there already):

- :class:`NcclAllReduce`: NCCL's all-reduce through CuPy's bindings, one communicator per GPU
  of this process (``ncclCommInitAll``), the calls grouped because one thread drives them all.
- :class:`PeerCopyAllReduce`: the parts copied to the first GPU and added there in shard order,
  then the sum copied back. For hosts whose CuPy has no NCCL, and for several shards on one GPU
  (NCCL refuses two ranks on one device), which is how one GPU tests the multi-GPU chain.

Across processes (the GPU workers of a Dask cluster on one host) :class:`NcclRank` is one
rank of a communicator the processes join together.

The word-topic counts summed here are integers held in float32: every partial sum is exact
below 2**24, so the sum is the same whatever order either way adds in.
"""


def _queue_sum(nccl, comm, array, stream):
    """Queue NCCL's in-place sum of float32 ``array`` over ``comm``'s ranks on ``stream``."""
    comm.allReduce(array.data.ptr, array.data.ptr, array.size, nccl.NCCL_FLOAT32,
                   nccl.NCCL_SUM, stream.ptr)


def nccl_module():
    """CuPy's NCCL bindings, or None where this CuPy has none (or cannot load the library)."""
    try:
        from cupy.cuda import nccl
    except Exception:  # noqa: BLE001 -- an ImportError or a library that fails to load
        return None
    return nccl if getattr(nccl, "available", False) else None


class NcclAllReduce:
    """NCCL all-reduce over distinct GPUs of this process.

    Parameters
    ----------
    cp : module
        CuPy.
    gpus : sequence of int
        Distinct GPU ordinals, one rank each, in shard order.
    """

    name = "nccl"

    def __init__(self, cp, gpus):
        self.cp = cp
        self._nccl = nccl_module()
        if self._nccl is None:
            raise RuntimeError("CuPy's NCCL bindings are not available here")
        self.gpus = [int(g) for g in gpus]
        if len(set(self.gpus)) != len(self.gpus):
            raise ValueError(f"NCCL needs distinct GPUs, got {self.gpus}")
        self._comms = self._nccl.NcclCommunicator.initAll(self.gpus)

    def all_reduce(self, parts):
        cp, nccl = self.cp, self._nccl
        nccl.groupStart()
        try:
            for comm, (gpu, array) in zip(self._comms, parts):
                with cp.cuda.Device(gpu):
                    _queue_sum(nccl, comm, array, cp.cuda.get_current_stream())
        finally:
            nccl.groupEnd()

    def close(self):
        for comm in self._comms:
            comm.destroy()
        self._comms = []


class PeerCopyAllReduce:
    """The sum made on the first GPU from copies of the others' parts, then copied back.

    Events order the GPUs' queues: the first GPU copies a part only after its GPU has queued
    it, and a GPU's next work on either array waits until its copy back is done.
    """

    name = "peer-copy"

    def __init__(self, cp, gpus):
        self.cp = cp
        self.gpus = [int(g) for g in gpus]
        self._scratch = None

    def _event_on(self, gpu):
        cp = self.cp
        with cp.cuda.Device(gpu):
            event = cp.cuda.Event(disable_timing=True)
            event.record()
        return event

    def _wait_on(self, gpu, event):
        cp = self.cp
        with cp.cuda.Device(gpu):
            cp.cuda.get_current_stream().wait_event(event)

    def all_reduce(self, parts):
        cp = self.cp
        (lead_gpu, lead), rest = parts[0], parts[1:]
        if not rest:
            return
        with cp.cuda.Device(lead_gpu):
            if self._scratch is None or self._scratch.shape != lead.shape:
                self._scratch = cp.empty_like(lead)
            scratch = self._scratch
            stream = cp.cuda.get_current_stream()
        for gpu, array in rest:
            self._wait_on(lead_gpu, self._event_on(gpu))
            with cp.cuda.Device(lead_gpu):
                scratch.data.copy_from_device_async(array.data, array.nbytes, stream)
                lead += scratch
        summed = self._event_on(lead_gpu)
        for gpu, array in rest:
            self._wait_on(gpu, summed)
            with cp.cuda.Device(gpu):
                array.data.copy_from_device_async(lead.data, lead.nbytes,
                                                  cp.cuda.get_current_stream())
            # The lead's next writes to its sum wait for this copy back.
            self._wait_on(lead_gpu, self._event_on(gpu))

    def close(self):
        self._scratch = None


def make_all_reduce(cp, gpus, kind="auto"):
    """The all-reduce for shards on ``gpus``: ``kind`` 'nccl', 'peer-copy', or 'auto' (NCCL
    where CuPy has it and the GPUs are distinct, else peer copies)."""
    if kind not in ("auto", "nccl", "peer-copy"):
        raise ValueError(f"all_reduce must be 'auto', 'nccl' or 'peer-copy', got {kind!r}")
    distinct = len(set(gpus)) == len(gpus)
    if kind == "nccl" or (kind == "auto" and distinct and nccl_module() is not None):
        return NcclAllReduce(cp, gpus)
    return PeerCopyAllReduce(cp, gpus)


class NcclRank:
    """This process's rank of an NCCL communicator spanning several processes (a Dask worker
    each), made from a unique id one rank drew (:func:`nccl_unique_id`) and every rank joins
    at once.

    Parameters
    ----------
    cp : module
        CuPy.
    gpu : int
        This process's GPU ordinal.
    n_ranks, rank : int
    unique_id : tuple
        What :func:`nccl_unique_id` returned on one of the ranks.
    """

    name = "nccl"

    def __init__(self, cp, gpu, n_ranks, unique_id, rank):
        self.cp = cp
        self._nccl = nccl_module()
        if self._nccl is None:
            raise RuntimeError("CuPy's NCCL bindings are not available here")
        self.gpu = int(gpu)
        with cp.cuda.Device(self.gpu):
            self._comm = self._nccl.NcclCommunicator(int(n_ranks), unique_id, int(rank))

    def all_reduce(self, array):
        """Sum ``array`` (float32, on this rank's GPU) in place over the ranks, queued on the
        current stream."""
        with self.cp.cuda.Device(self.gpu):
            _queue_sum(self._nccl, self._comm, array, self.cp.cuda.get_current_stream())

    def all_gather(self, send, receive, count):
        """Gather ``count`` values of ``send`` from every rank into ``receive`` (rank after
        rank, ``count`` each), queued on the current stream. Both arrays on this rank's GPU,
        C-contiguous, of one dtype: int64, uint64 or float32."""
        nccl = self._nccl
        types = {"int64": nccl.NCCL_INT64, "uint64": nccl.NCCL_UINT64,
                 "float32": nccl.NCCL_FLOAT32}
        with self.cp.cuda.Device(self.gpu):
            self._comm.allGather(send.data.ptr, receive.data.ptr, int(count),
                                 types[send.dtype.name], self.cp.cuda.get_current_stream().ptr)

    def close(self):
        if self._comm is not None:
            self._comm.destroy()
        self._comm = None


def nccl_unique_id():
    """A new NCCL unique id (for :class:`NcclRank`), or None where this CuPy has no NCCL."""
    nccl = nccl_module()
    return None if nccl is None else nccl.get_unique_id()


def gpu_identity(cp):
    """``(host name, PCI bus id)`` of the current GPU: two processes share a GPU when these
    are equal (CUDA ordinals differ between processes with different CUDA_VISIBLE_DEVICES)."""
    import socket

    return socket.gethostname(), cp.cuda.Device().pci_bus_id
