"""sklearn-gpulda: scikit-learn compatible Latent Dirichlet Allocation trained on NVIDIA GPUs.

Importing the package never imports CuPy; the CUDA engine loads only when a fit asks for a GPU
or ``device='auto'`` finds one.
"""

from .estimator import GPULatentDirichletAllocation

__version__ = "0.1.0"

__all__ = ["GPULatentDirichletAllocation", "__version__"]
