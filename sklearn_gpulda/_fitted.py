"""The fitted state of the estimator: assigned whole after a successful fit, restored whole after
a failed one, pickled as plain NumPy, and ``exp_dirichlet_component_`` derived on demand."""

from contextlib import contextmanager

import numpy as np
from scipy.special import psi


@contextmanager
def transaction(estimator):
    """Run a fit as a transaction: if the body raises (bad input, out of memory, Ctrl-C), the
    estimator's attributes are put back exactly as they were, so a fitted model keeps its fitted
    state (and pickles to the same bytes) and an unfitted one stays unfitted.

    scikit-learn's validators set ``n_features_in_`` and ``feature_names_in_`` before any
    sampling starts; restoring the whole instance dictionary undoes those too.
    """
    saved = dict(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(saved)
        raise


class FittedStateMixin:
    """Assignment, derived attributes and pickling of a fitted model's state."""

    def _assign(self, state, dtype, device, backend, seed):
        """Set the fitted attributes from a :class:`~sklearn_gpulda._fit.FittedState`."""
        self.components_ = np.asarray(state.components, dtype=dtype)
        self.doc_topic_prior_ = state.doc_topic_prior
        self.topic_word_prior_ = state.topic_word_prior
        self.n_iter_ = state.n_iter
        self.n_batch_iter_ = state.n_batch_iter
        self.bound_ = state.bound
        self.n_tokens_ = state.n_tokens
        self.fit_time_ = state.fit_time
        self.history_ = state.history
        self.device_ = str(device)
        self.algorithm_ = backend.algorithm
        self._seed = seed

    @property
    def exp_dirichlet_component_(self):
        # Computed on first access rather than in fit: nothing here uses it, and at K = 1,000
        # over 55k words the digamma and exp of K x V entries took 1-3 s on the host, longer
        # than the whole GPU fit. Cached against the components_ array it was computed from.
        components = self.__dict__.get("components_")
        if components is None:
            raise AttributeError(
                f"This {type(self).__name__} instance is not fitted yet: "
                "exp_dirichlet_component_ is derived from components_."
            )
        cached = self.__dict__.get("_exp_dirichlet_cache")
        if cached is None or cached[0] is not components:
            value = np.exp(
                psi(components) - psi(np.sum(components, axis=1))[:, np.newaxis]
            ).astype(components.dtype, copy=False)
            cached = (components, value)
            self._exp_dirichlet_cache = cached
        return cached[1]

    def __getstate__(self):
        # The cache is derived data, as large as components_: not worth pickling.
        # On Python 3.11+ the inherited state may be the instance's own __dict__: copy it, or
        # pickling would drop the cache from the live model too.
        state = dict(super().__getstate__())
        state.pop("_exp_dirichlet_cache", None)
        return state
