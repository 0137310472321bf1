"""Sampling engines and the choice between them.

The CUDA engines are imported only when a GPU is asked for or ``device='auto'`` finds one, so the
package imports on machines without CuPy.
"""

from .base import Engine
from .numpy_engine import NumpyEngine

__all__ = [
    "Engine",
    "NumpyEngine",
    "DENSE_MAX_TOPICS",
    "choose_algorithm",
    "resolve_device",
    "make_engine",
]


def _cuda_available():
    try:
        from .cuda_engine import cuda_available
    except ImportError:
        return False
    return cuda_available()


def resolve_device(device):
    """Turn the ``device`` parameter into ``'cpu'`` or ``'cuda:N'``.

    Parameters
    ----------
    device : {'auto', 'cpu', 'cuda'} or str of the form 'cuda:N'

    Returns
    -------
    resolved : str

    Raises
    ------
    RuntimeError
        A GPU was asked for explicitly and none can be used.
    """
    if device == "cpu":
        return "cpu"
    if device == "auto":
        return "cuda:0" if _cuda_available() else "cpu"
    index = 0 if device == "cuda" else int(device.split(":", 1)[1])
    if not _cuda_available():
        raise RuntimeError(
            f"device={device!r} needs CuPy and a CUDA GPU, and none is usable here; "
            "install the CUDA extra (pip install 'sklearn-gpulda[cuda13]') or use device='cpu'"
        )
    return f"cuda:{index}"


#: Largest K at which ``algorithm='auto'`` picks the dense engine: none. Whole iterations measured
#: by ``benchmarks/bench_algorithms.py`` on an H200 (doc/performance.md, 2026-11-22): the sparse
#: engine was faster at every K from 16 to 1,024 on the NYTimes-shaped corpus (3,701 against
#: 2,344 Mtoken/s at K = 16) and on NIPS, because the dense engine's M-step and its thread per
#: document cost more than the dense sampling kernel saves. The sampling kernels alone favoured
#: dense at K <= 48, which is where this constant stood before the whole-iteration run.
DENSE_MAX_TOPICS = 0


def _dense_max_topics():
    from .dense_sampler import MAX_TOPICS

    return MAX_TOPICS


def choose_algorithm(algorithm, n_topics, device):
    """Resolve the ``algorithm`` parameter to ``'sparse'`` or ``'dense'``.

    Parameters
    ----------
    algorithm : {'auto', 'sparse', 'dense'}
    n_topics : int
        Number of topics K.
    device : str
        Resolved device, 'cpu' or 'cuda:N'. The crossover was measured on a GPU; on the CPU both
        rules cost the same in the NumPy engine, so 'auto' keeps the reference sparse rule there.

    Returns
    -------
    resolved : {'sparse', 'dense'}
        'auto' gives 'dense' on a GPU when ``n_topics <= DENSE_MAX_TOPICS``, else 'sparse'.

    Raises
    ------
    ValueError
        ``algorithm`` is unknown, or 'dense' is asked for with more topics than the dense
        kernels support.
    """
    n_topics = int(n_topics)
    if algorithm == "auto":
        return "dense" if device != "cpu" and n_topics <= DENSE_MAX_TOPICS else "sparse"
    if algorithm == "sparse":
        return "sparse"
    if algorithm == "dense":
        limit = _dense_max_topics()
        if n_topics > limit:
            raise ValueError(
                f"algorithm='dense' supports at most {limit} topics (the dense kernels keep a "
                f"document's K probabilities in per-thread arrays), got n_components={n_topics}; "
                "use algorithm='sparse' or 'auto'"
            )
        return "dense"
    raise ValueError(f"algorithm must be 'auto', 'sparse' or 'dense', got {algorithm!r}")


def make_engine(resolved_device, n_topics, alpha, beta, seed, algorithm="sparse"):
    """Engine instance for a device string from :func:`resolve_device`.

    Parameters
    ----------
    resolved_device : str
        'cpu' or 'cuda:N'.
    n_topics, alpha, beta, seed
        As :class:`~sklearn_gpulda._engines.base.Engine`.
    algorithm : {'sparse', 'dense'}, default='sparse'
        A resolved choice (:func:`choose_algorithm`): the CPU engine switches its draw rule, a
        GPU gets :class:`~sklearn_gpulda._engines.cuda_engine.CudaEngine` or
        :class:`~sklearn_gpulda._engines.cuda_dense_engine.CudaDenseEngine`.

    Returns
    -------
    engine : Engine
    """
    if algorithm not in ("sparse", "dense"):
        raise ValueError(f"algorithm must be 'sparse' or 'dense', got {algorithm!r}")
    if resolved_device == "cpu":
        return NumpyEngine(n_topics, alpha, beta, seed, algorithm=algorithm)
    device = int(resolved_device.split(":")[1])
    if algorithm == "dense":
        from .cuda_dense_engine import CudaDenseEngine

        return CudaDenseEngine(n_topics, alpha, beta, seed, device=device)
    from .cuda_engine import CudaEngine

    return CudaEngine(n_topics, alpha, beta, seed, device=device)
