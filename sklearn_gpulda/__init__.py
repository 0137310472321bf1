"""sklearn-gpulda: scikit-learn compatible Latent Dirichlet Allocation trained on NVIDIA GPUs.

Importing the package never imports CuPy; the CUDA engine loads only when a fit asks for a GPU
or ``device='auto'`` finds one. Nor does it import scikit-learn: the estimator is loaded the
first time ``GPULatentDirichletAllocation`` is asked for (PEP 562), because
``python -m sklearn_gpulda --help`` imports this file first and should not pay for
scikit-learn's seconds of start-up before printing its usage.
"""

__version__ = "0.1.0"

__all__ = ["GPULatentDirichletAllocation", "seeded_topic_prior", "__version__"]


def __getattr__(name):
    # Called only for names not yet in the module's namespace; after the first call the class
    # is stored there, so later look-ups are ordinary attribute reads.
    if name == "GPULatentDirichletAllocation":
        from .estimator import GPULatentDirichletAllocation

        globals()[name] = GPULatentDirichletAllocation
        return GPULatentDirichletAllocation
    if name == "seeded_topic_prior":
        from .seeding import seeded_topic_prior

        globals()[name] = seeded_topic_prior
        return seeded_topic_prior
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    # dir() lists the lazy name too, as it did when the estimator was imported eagerly.
    return sorted(set(globals()) | set(__all__))
