"""Sampling engines and the choice between them.

The CUDA engine is imported only when a GPU is asked for or ``device='auto'`` finds one, so the
package imports on machines without CuPy.
"""

from .base import Engine
from .numpy_engine import NumpyEngine

__all__ = ["Engine", "NumpyEngine", "resolve_device", "make_engine"]


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


def make_engine(resolved_device, n_topics, alpha, beta, seed):
    """Engine instance for a device string from :func:`resolve_device`."""
    if resolved_device == "cpu":
        return NumpyEngine(n_topics, alpha, beta, seed)
    from .cuda_engine import CudaEngine

    return CudaEngine(n_topics, alpha, beta, seed, device=int(resolved_device.split(":")[1]))
