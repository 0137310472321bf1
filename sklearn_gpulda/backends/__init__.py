"""Sampling backends: one registry entry each, behind the :class:`~.base.Sampler` protocol.

A backend is a sampler class for one kind of device and one draw rule ('algorithm'), with its
limits. ``algorithm='auto'`` reads :data:`BACKENDS` in order and takes the first entry for the
device whose ``auto_max_topics`` admits K. Adding a backend means writing the protocol's methods
and one entry here; the estimator and the fit loop need no change. CUDA modules are imported only
when a GPU backend is made, so the package imports on machines without CuPy.
"""

import importlib
from dataclasses import dataclass, field

from .base import Sampler, topic_prior

__all__ = ["Backend", "BACKENDS", "ENGINE_SETTINGS", "Sampler", "algorithm_names",
           "choose_backend", "fold_in", "topic_prior"]


@dataclass(frozen=True)
class Backend:
    """One registry entry.

    Attributes
    ----------
    name : str
        Unique name, e.g. 'cuda-sparse'.
    algorithm : str
        The value of the ``algorithm`` parameter that selects it.
    device_kind : {'cpu', 'cuda'}
    target : str
        ``'module:Class'`` of the sampler, relative to this package.
    options : dict
        Keyword arguments given to the sampler class besides the protocol's.
    max_topics : int or None
        Largest K it supports (None: no limit of its own).
    auto_max_topics : int or None
        Largest K at which ``algorithm='auto'`` picks it (None: up to ``max_topics``; 0: never).
    multi_target : str or None
        ``'module:Class'`` of the sampler that spreads the chain over several GPUs of the host,
        made where the device names more than one; None: one GPU only.
    why_max_topics : str
        What ``max_topics`` comes from, for the error message.
    takes : tuple of str
        The fit's engine settings (:data:`ENGINE_SETTINGS`) its sampler takes as keyword
        arguments; the fit passes it those and no other.
    multi_takes : tuple of str
        Those its multi-GPU sampler takes.
    matrix_prior : bool
        Whether its samplers (one GPU and several) sample with a matrix topic-word prior
        (:meth:`~.base.Sampler.set_beta_cells`): in batch fits, online learning and
        ``partial_fit``, and on Dask workers where its engine runs there.
    """

    name: str
    algorithm: str
    device_kind: str
    target: str
    options: dict = field(default_factory=dict)
    max_topics: int = None
    auto_max_topics: int = None
    multi_target: str = None
    why_max_topics: str = ""
    takes: tuple = ()
    multi_takes: tuple = ()
    matrix_prior: bool = False

    def sampler_class(self, n_devices=1):
        target = self.target if n_devices <= 1 else self.multi_target
        module, _, cls = target.partition(":")
        return getattr(importlib.import_module(module, __name__), cls)

    def make(self, n_topics, alpha, beta, seed, device, **options):
        """A :class:`~.base.Sampler` of this backend on ``device`` (the multi-GPU one where it
        names several GPUs); ``options`` override the entry's."""
        cls = self.sampler_class(len(device.indices))
        return cls(n_topics, alpha, beta, seed, device, **{**self.options, **options})

    def sampler_options(self, settings, device):
        """The keyword arguments of this backend's sampler on ``device`` among ``settings`` (a
        dict of :data:`ENGINE_SETTINGS`): those it takes, where not None (None leaves the
        sampler's own default)."""
        names = self.takes if len(device.indices) <= 1 else self.multi_takes
        return {name: settings[name] for name in names if settings.get(name) is not None}

    def auto_admits(self, n_topics):
        limit = self.max_topics if self.auto_max_topics is None else self.auto_max_topics
        return limit is None or n_topics <= limit


#: What a fit can tell a sampler beside the protocol's arguments, each taken by the engines
#: whose entry names it: the CPU's threads ('n_jobs'), the GPU memory a sampler may use
#: ('max_device_memory'), the tokens of a mini-batched sweep's batch ('batch_tokens'), and the
#: sparse engine's storage of B and the room its memory plan keeps for averaging's sum
#: ('word_topic_storage', 'averaging'; ``backends/cuda/sparse/memory_plan.py``).
ENGINE_SETTINGS = ("n_jobs", "max_device_memory", "batch_tokens", "word_topic_storage",
                   "averaging")

_CPU = ("n_jobs",)
_GPU = ("max_device_memory",)

_DENSE_WHY = ("the dense kernels keep a document's K probabilities in per-thread arrays, and the "
              "CPU's dense rule follows them")

_MINIBATCH_WHY = ("every token's draw walks all K topics (the rule of doc/algorithm.md, "
                  "mini-batched sweeps), so past a few thousand topics 'sparse' is the algorithm")

#: The registry, in the order ``algorithm='auto'`` reads it. The dense CUDA backend is not read
#: by 'auto' here (``auto_max_topics=0``): the estimator asks :mod:`.auto_rule` first, which
#: takes it for batch fits on one GPU at small K, where whole sweeps measured on an H100 ran
#: faster than the sparse backend's (doc/performance.md). On the CPU both rules cost the same,
#: and 'auto' keeps the reference (sparse) rule.

BACKENDS = (
    Backend("cuda-dense", "dense", "cuda", ".cuda.dense.sampler:CudaDenseSampler", max_topics=1024,
            auto_max_topics=0, why_max_topics=_DENSE_WHY, takes=_GPU, matrix_prior=True),
    # The storage of B and the room kept for averaging are the one-GPU chain's: the chain
    # spread over several GPUs sums a dense B every sweep.
    Backend("cuda-sparse", "sparse", "cuda", ".cuda.sparse.sampler:CudaSparseSampler",
            max_topics=65536,
            multi_target=".cuda.multi_gpu.sampler:MultiGpuSampler",
            why_max_topics="topics are stored in 16 bits in the sparse kernels' token and "
                           "document-topic layouts",
            takes=_GPU + ("word_topic_storage", "averaging"), multi_takes=_GPU,
            matrix_prior=True),
    Backend("cuda-minibatch", "minibatch", "cuda", ".cuda.minibatch.sampler:CudaMinibatchSampler",
            max_topics=4096, auto_max_topics=0, why_max_topics=_MINIBATCH_WHY,
            takes=_GPU + ("batch_tokens",), matrix_prior=True),
    Backend("numpy-dense", "dense", "cpu", ".numpy.sampler:NumpySampler",
            options={"rule": "dense"}, max_topics=1024, auto_max_topics=0,
            why_max_topics=_DENSE_WHY, takes=_CPU, matrix_prior=True),
    Backend("numpy-sparse", "sparse", "cpu", ".numpy.sampler:NumpySampler",
            options={"rule": "sparse"}, takes=_CPU, matrix_prior=True),
    Backend("numpy-minibatch", "minibatch", "cpu", ".numpy.minibatch:NumpyMinibatchSampler",
            max_topics=4096, auto_max_topics=0, why_max_topics=_MINIBATCH_WHY,
            takes=_CPU + ("batch_tokens",), matrix_prior=True),
)


def algorithm_names():
    """Values of the ``algorithm`` parameter besides 'auto', from the registry as it is now."""
    return tuple(sorted({b.algorithm for b in BACKENDS}))


def choose_backend(algorithm, n_topics, device):
    """The registry entry for an ``algorithm`` value, a number of topics and a resolved device.

    Parameters
    ----------
    algorithm : str
        'auto' or one of :func:`algorithm_names`.
    n_topics : int
    device : sklearn_gpulda._runtime.device.Device

    Returns
    -------
    backend : Backend

    Raises
    ------
    ValueError
        Unknown algorithm, or K or the number of GPUs beyond what the backend supports.
    """
    n_topics = int(n_topics)
    candidates = [b for b in BACKENDS if b.device_kind == device.kind]
    if algorithm == "auto":
        chosen = next((b for b in candidates if b.auto_admits(n_topics)), None)
        if chosen is None:
            limit = max((b.max_topics or 0) for b in candidates)
            raise ValueError(
                f"no backend on {device} supports n_components={n_topics} (at most {limit})"
            )
    else:
        chosen = next((b for b in candidates if b.algorithm == algorithm), None)
        if chosen is None:
            names = ", ".join(repr(a) for a in ("auto",) + algorithm_names())
            raise ValueError(f"algorithm must be one of {names}, got {algorithm!r}")
        if chosen.max_topics is not None and n_topics > chosen.max_topics:
            raise ValueError(
                f"algorithm={algorithm!r} supports at most {chosen.max_topics} topics "
                f"({chosen.why_max_topics}), got n_components={n_topics}; use "
                "algorithm='sparse' or 'auto'"
            )
    n_gpus = len(device.indices)
    if n_gpus > 1 and chosen.multi_target is None:
        raise ValueError(
            f"device={str(device)!r} names {n_gpus} GPUs, but algorithm={chosen.algorithm!r} "
            "trains on one GPU; name one GPU, or use algorithm='sparse' on several"
        )
    return chosen


def fold_in(device, X, components, alpha, max_iter, tol, return_loglik=False, n_jobs=None):
    """The deterministic fold-in of ``doc/algorithm.md`` on ``device``, the same function on
    every backend of a device kind (it reads no sampler's state).

    See :func:`sklearn_gpulda.backends.numpy.fold_in` for the parameters; ``device`` is a
    resolved :class:`~sklearn_gpulda._runtime.device.Device`; ``n_jobs`` sets the CPU's threads (a
    GPU
    ignores it).
    """
    if device.kind == "cpu":
        from .numpy import fold_in as host_fold_in

        return host_fold_in(X, components, alpha, max_iter, tol, return_loglik, n_jobs)
    from .cuda.infer import fold_in as device_fold_in

    return device_fold_in(device, X, components, alpha, max_iter, tol, return_loglik)
