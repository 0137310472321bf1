"""Training on a Dask cluster (``pip install sklearn-gpulda[dask]``).

:class:`LatentDirichletAllocation` takes the parameters of
:class:`sklearn_gpulda.GPULatentDirichletAllocation` and a ``client``, keeps the documents on the
workers, and trains the model a single process trains with the same seed, bit for bit. Nothing
outside this subpackage imports Dask.
"""

try:
    import distributed  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sklearn_gpulda.dask needs Dask's distributed scheduler: "
        "pip install 'sklearn-gpulda[dask]'"
    ) from exc

from ._estimator import LatentDirichletAllocation
from ._sampler import WorkerLost

__all__ = ["LatentDirichletAllocation", "WorkerLost"]
