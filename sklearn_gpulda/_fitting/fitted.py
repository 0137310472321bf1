"""The fitted state of the estimator: what a fit returns (:class:`FittedState`), assigned whole
after a successful fit, restored whole after a failed one, pickled as plain NumPy, and
``exp_dirichlet_component_`` derived on demand. ``components_`` may stay on the GPU between
``partial_fit`` calls and reach the host only when it is read."""

from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from scipy.special import psi

from .._runtime.device import is_device_array, to_host


@dataclass
class FittedState:
    """The fitted attributes a successful fit gives the estimator."""

    components: np.ndarray
    doc_topic_prior: object
    topic_word_prior: float
    n_iter: int
    n_batch_iter: int
    bound: float
    n_tokens: float
    fit_time: float
    history: dict = field(default_factory=dict)
    #: The seeded cells of a matrix topic-word prior (SciPy CSR, n_components x n_features),
    #: or None for a scalar prior.
    topic_word_prior_cells: object = None


@dataclass
class Continuation:
    """What ``partial_fit`` continues from: the model so far (on the host, or still on the GPU
    that learned it), the counters it keeps, and the history of the last ``fit``."""

    components: object
    n_batch_iter: int
    n_iter: int
    history: dict


def public_prior(value, prior):
    """A fixed number stays a number (scikit-learn's ``doc_topic_prior_``); a learned or
    per-topic prior is an array."""
    if not prior.learn and np.ndim(prior.value) == 0:
        return float(prior.value)
    return np.array(value, dtype=np.float64)


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
        """Set the fitted attributes from a :class:`FittedState`; a model still on the GPU
        (``partial_fit``) is kept there, to be copied when it is read."""
        if is_device_array(state.components):
            self.__dict__.pop("_components_host", None)
            self.__dict__["_components_device"] = (state.components, np.dtype(dtype))
        else:
            self.components_ = np.asarray(state.components, dtype=dtype)
        self.doc_topic_prior_ = state.doc_topic_prior
        self.topic_word_prior_ = state.topic_word_prior
        if state.topic_word_prior_cells is None:
            self.__dict__.pop("topic_word_prior_cells_", None)
        else:
            self.topic_word_prior_cells_ = state.topic_word_prior_cells
        self.n_iter_ = state.n_iter
        self.n_batch_iter_ = state.n_batch_iter
        self.bound_ = state.bound
        self.n_tokens_ = state.n_tokens
        self.fit_time_ = state.fit_time
        self.history_ = state.history
        self.device_ = str(device)
        self.algorithm_ = backend.algorithm
        self._seed = seed

    # components_ lives in one of two private slots: the host array (set by batch fits and by
    # users, or copied from the device when first read, which drops the device array), or,
    # after partial_fit on a GPU, the device array with the dtype it takes on the host. A loop
    # of partial_fit calls then copies nothing of size K x V to the host unless it reads
    # components_.
    @property
    def components_(self):
        """Topic-word pseudo-counts, ``(n_components, n_features)``, on the host (see the class
        docstring); after ``partial_fit`` on a GPU, copied from the device on first access."""
        host = self.__dict__.get("_components_host")
        if host is None:
            pending = self.__dict__.get("_components_device")
            if pending is None:
                raise AttributeError(
                    f"'{type(self).__name__}' object has no attribute 'components_'")
            array, dtype = pending
            host = self.__dict__["_components_host"] = np.asarray(to_host(array), dtype=dtype)
            # The next partial_fit continues from the copy read (it may be edited in place):
            # the device array is no longer needed, and its GPU memory goes back now.
            del self.__dict__["_components_device"]
        return host

    @components_.setter
    def components_(self, value):
        self.__dict__["_components_host"] = value
        self.__dict__.pop("_components_device", None)

    @components_.deleter
    def components_(self):
        if not self._has_components():
            raise AttributeError("components_")
        self.__dict__.pop("_components_host", None)
        self.__dict__.pop("_components_device", None)

    def _fitted_items(self):
        """The instance entries that make up the fitted state (public ``*_`` attributes, the
        seed and the slots of ``components_``), for copying it to another instance."""
        private = ("_seed", "_components_host", "_components_device")
        return {k: v for k, v in self.__dict__.items() if k.endswith("_") or k in private}

    def _has_components(self):
        return "_components_host" in self.__dict__ or "_components_device" in self.__dict__

    def _n_topics_fitted(self):
        """Rows of ``components_``, without copying a model that is still on the GPU."""
        pending = self.__dict__.get("_components_device")
        if pending is not None:
            return int(pending[0].shape[0])
        return self.components_.shape[0]

    def _continuation(self, device):
        """The :class:`Continuation` of the next ``partial_fit`` step on ``device``; None before
        the first."""
        if not self._has_components():
            return None
        return Continuation(self._components_to_continue(device), self.n_batch_iter_,
                            self.n_iter_, getattr(self, "history_", {}))

    def _components_to_continue(self, device):
        """The model the next ``partial_fit`` step starts from: the device array where it is
        still on ``device`` and was not read (a read copy may have been edited in place), else
        the host array. Either way in the host array's dtype, so that reading ``components_``
        between calls does not change the model (float32 input keeps a float32 model)."""
        pending = self.__dict__.get("_components_device")
        if pending is not None:
            array, dtype = pending
            if device.kind == "cuda" and array.device.id == device.lead.index:
                return array.astype(dtype, copy=False)
        return self.components_

    @property
    def exp_dirichlet_component_(self):
        # Computed on first access rather than in fit: nothing here uses it, and at K = 1,000
        # over 55k words the digamma and exp of K x V entries took 1-3 s on the host, longer
        # than the whole GPU fit. Cached against the components_ array it was computed from.
        if not self._has_components():
            raise AttributeError(
                f"This {type(self).__name__} instance is not fitted yet: "
                "exp_dirichlet_component_ is derived from components_."
            )
        components = self.components_
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
        # pickling would drop the cache from the live model too. components_ is pickled under
        # its public name, as a host array, so that a model pickled on a GPU loads anywhere.
        state = dict(super().__getstate__())
        state.pop("_exp_dirichlet_cache", None)
        if self._has_components():
            state["components_"] = self.components_
        state.pop("_components_host", None)
        state.pop("_components_device", None)
        return state

    def __setstate__(self, state):
        state = dict(state)
        if "components_" in state:
            state["_components_host"] = state.pop("components_")
        super().__setstate__(state)
