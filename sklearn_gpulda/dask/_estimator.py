"""``sklearn_gpulda.dask.LatentDirichletAllocation``: the estimator, trained on a Dask cluster."""

import inspect
import os

import numpy as np
import scipy.sparse as sp
from sklearn.base import _fit_context, clone

from .._fitting import loop as _fit, score as _score
from .._fitting.fitted import transaction
from .._input.validation import check_counts, warn_if_empty
from .._runtime.device import CPU, Device, parse_device
from ..estimator import GPULatentDirichletAllocation
from ._nccl_sampler import NcclDaskSampler
from ._sampler import DaskSampler, ShardedCorpus, WorkerLost, shard_workers
from ._shard import Shard, validated_block

_DASK_DOC = """Latent Dirichlet Allocation trained on a Dask cluster, data-parallel.

    The documents are split into shards, one or more per worker, and stay on the workers for the
    whole fit. Every sweep, each shard samples its tokens; the word-topic counts of the shards
    are summed (integers: the sum does not depend on its order) and sent back. Every token draws
    the random number it draws in one process, so the model is identical, bit for bit, to
    :class:`~sklearn_gpulda.GPULatentDirichletAllocation` fitted on the CPU with the same
    parameters and ``random_state``, whatever the number of workers or shards: on the CPU engine
    as a CPU fit, on GPU workers as a fit on one GPU. Batch learning only.

    Parameters
    ----------
    client : distributed.Client, default=None
        The cluster to train on; None means the current client (``distributed.get_client``).
    **params
        Every parameter of :class:`~sklearn_gpulda.GPULatentDirichletAllocation`, with the same
        meaning, except ``device``: 'cpu' runs every shard on its worker's CPU engine
        (``n_jobs`` threads each); 'cuda' on its worker's first visible GPU (under dask-cuda's
        ``LocalCUDACluster`` or ``dask cuda worker``, each worker's own GPU; workers of a plain
        cluster share GPU 0 of their host); 'auto' means 'cuda' when every worker sees a GPU,
        else 'cpu'. ``learning_method`` must be 'batch'; ``algorithm`` 'sparse' or 'auto' on
        GPU workers. A matrix ``topic_word_prior`` (seeded topics) runs on both: every shard
        samples with the seeded cells, and the model is still the single process's.

    Notes
    -----
    The fitted attributes are those of :class:`~sklearn_gpulda.GPULatentDirichletAllocation`;
    :meth:`to_local` returns that plain estimator, which pickles and transforms without Dask.

    Input: a Dask array of row blocks (dense or SciPy sparse chunks; split along rows only, it is
    rechunked otherwise), or anything the plain estimator takes, which is then split into one
    block per worker. Per sweep each shard sends its non-zero word-topic cells (8 bytes each, at
    most one per token it holds) and receives those of the corpus's word-topic matrix. GPU
    workers with one shard per GPU (dask-cuda's ``LocalCUDACluster`` with one block per
    worker) instead sum the matrix among themselves in place through NCCL, where their CuPy
    has it (workers of one host the whole matrix; workers on several hosts only where the
    environment variable ``SKLEARN_GPULDA_NCCL_ACROSS_HOSTS=1`` asks for it, never tried across
    hosts yet, and then by the cells each changed): nothing of it crosses to the driver during
    the sweeps, and the workers run the
    sweeps between two evaluations (or the start of averaging, or the end) on their own, one
    call from the driver per such run (one per sweep under ``verbose`` or a ``callback``),
    making the prior updates among themselves (for integer counts; weighted ones end a run at
    each update).
    ``bound_``, the final training perplexity, is summed over shards and may differ from a
    single-process fit's in the last digits; the model does not.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> from sklearn_gpulda.dask import LatentDirichletAllocation
    >>> from sklearn_gpulda.datasets import load_kjv_chapters
    >>> X = load_kjv_chapters().data[:300]
    >>> with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster, \\
    ...         Client(cluster) as client:
    ...     lda = LatentDirichletAllocation(n_components=5, max_iter=5, random_state=0,
    ...                                     client=client).fit(X)
    >>> lda.to_local().transform(X[:2]).shape
    (2, 5)
    """


def _worker_has_gpu():
    """Run on a worker: whether CuPy sees a GPU there."""
    from .._runtime.device import gpu_count

    return gpu_count() > 0


#: Set to 1 to let GPU workers on several hosts sum B among themselves over NCCL (by changed
#: cells) instead of through the client. Off by default: it has run on one host only (forced
#: there by the tests and the benchmark), never across hosts.
ACROSS_HOSTS_VARIABLE = "SKLEARN_GPULDA_NCCL_ACROSS_HOSTS"


def _in_place_exchange(identities, integral=True, across_hosts=None):
    """How GPU shards at ``identities`` (:meth:`~._shard.Shard.gpu_identity`) sum their
    word-topic counts among themselves through NCCL, or None where the client sums them (some
    shard has no NCCL or no GPU, two share a GPU -- NCCL takes one rank per GPU --, or they are
    on several hosts without :data:`ACROSS_HOSTS_VARIABLE`). 'ring' (NCCL's all-reduce of the
    whole table) on one host, and across hosts for weighted counts; 'changes' (each shard's
    changed cells, gathered by all; exact for integer counts only) across hosts, whose links
    are slower."""
    if not identities or any(i is None for i in identities):
        return None
    if len(set(identities)) != len(identities):
        return None
    if len({host for host, _ in identities}) == 1:
        return "ring"
    if across_hosts is None:
        across_hosts = os.environ.get(ACROSS_HOSTS_VARIABLE) == "1"
    if not across_hosts:
        return None
    return "changes" if integral else "ring"


def _is_dask_array(X):
    return type(X).__module__.startswith("dask.array")


def _signature_with_client():
    base = inspect.signature(GPULatentDirichletAllocation.__init__)
    client = inspect.Parameter("client", inspect.Parameter.KEYWORD_ONLY, default=None)
    return base.replace(parameters=[*base.parameters.values(), client])


class LatentDirichletAllocation(GPULatentDirichletAllocation):
    __doc__ = _DASK_DOC

    _parameter_constraints: dict = {
        **GPULatentDirichletAllocation._parameter_constraints,
        "client": [None, object],
    }

    def __init__(self, n_components=10, *, client=None, **params):
        super().__init__(n_components, **params)
        self.client = client

    # The constructor forwards the plain estimator's parameters; its signature names them all
    # (with their defaults), as get_params, clone and the estimator's repr read it.
    __init__.__signature__ = _signature_with_client()

    def __sklearn_clone__(self):
        # clone() deep-copies every parameter, and a client cannot be copied: the copy shares it.
        params = {k: clone(v, safe=False) for k, v in self.get_params(deep=False).items()
                  if k != "client"}
        return type(self)(client=self.client, **params)

    def __getstate__(self):
        # A client holds sockets and threads; a pickled model does not need one.
        state = super().__getstate__()
        state["client"] = None
        return state

    # -- the cluster ---------------------------------------------------------------------------
    def _get_client(self):
        if self.client is not None:
            return self.client
        from distributed import get_client

        try:
            return get_client()
        except ValueError:
            raise ValueError(
                "no Dask client: pass client= or create a distributed.Client first"
            ) from None

    def _check_dask_params(self, client):
        """The device the plan is made for (CPU, or GPU 0 of each worker)."""
        if self.learning_method != "batch":
            raise ValueError(
                "learning_method='online' does not run on a Dask cluster; use 'batch', or "
                "partial_fit of sklearn_gpulda.GPULatentDirichletAllocation over the blocks")
        if self.word_topic_storage == "hybrid":
            # The shards' chains store B dense: the shards sum their B every sweep.
            raise ValueError("word_topic_storage='hybrid' does not run on a Dask cluster; use "
                             "'auto' or 'dense'")
        kind, indices = parse_device(self.device)
        if indices:
            raise ValueError(
                f"device={self.device!r}: on a Dask cluster each worker uses its own first "
                "visible GPU; give device='cuda' and choose the GPUs with the workers' "
                "CUDA_VISIBLE_DEVICES (dask-cuda does this)")
        if kind != "cpu":
            has_gpu = client.run(_worker_has_gpu)
            without = sorted(w for w, yes in has_gpu.items() if not yes)
            if kind == "auto":
                kind = "cuda" if has_gpu and not without else "cpu"
            elif without:
                raise RuntimeError(
                    f"device='cuda', but Dask worker(s) {', '.join(without)} see no GPU (CuPy "
                    "with a CUDA GPU); start the workers on GPU hosts, or use device='cpu'")
        if kind == "cpu":
            return CPU
        if self.algorithm not in ("auto", "sparse"):
            raise ValueError(
                f"algorithm={self.algorithm!r} does not run on GPU workers; use 'sparse' or "
                "'auto' (or device='cpu')")
        return Device("cuda", (0,))

    def _place(self, client, X, device):
        """Validated row blocks of ``X`` on the workers, in document order (futures), and the
        dtype the model takes from ``X``."""
        if _is_dask_array(X):
            if X.ndim != 2:
                raise ValueError(f"X must be 2-d, got a Dask array of shape {X.shape}")
            self.n_features_in_ = int(X.shape[1])
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            from dask import delayed

            X = X.rechunk({1: -1}) if len(X.chunks[1]) > 1 else X
            blocks = [delayed(validated_block)(b, self.n_features_in_)
                      for b in X.to_delayed()[:, 0]]
            dtype = np.float32 if X.dtype == np.float32 else np.float64
            return client.compute(blocks), dtype
        X = check_counts(self, X, reset=True, whom=f"{type(self).__name__}.fit", device=device)
        X = sp.csr_matrix(X)
        n_workers = max(1, len(client.scheduler_info()["workers"]))
        cuts = np.searchsorted(X.indptr, np.linspace(0, X.indptr[-1], n_workers + 1)[1:-1])
        cuts = np.unique(np.concatenate(([0], cuts, [X.shape[0]])))
        parts = [X[r0:r1] for r0, r1 in zip(cuts[:-1], cuts[1:])] or [X]
        # Keys of their own (hash=False): scattered by content, a refit on the same counts got
        # the keys of the previous fit's blocks, whose cancel at the end of that fit reaches
        # the scheduler late and could cancel the new blocks ("lost dependencies", seen in CI).
        return client.scatter(parts, hash=False), X.dtype

    # -- fitting -------------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, callback=None):
        """Learn topics from a document-term count matrix on the cluster.

        Parameters
        ----------
        X : dask.array.Array, {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts.
        y : Ignored
        callback : callable, default=None
            As in :meth:`sklearn_gpulda.GPULatentDirichletAllocation.fit`.

        Returns
        -------
        self : object
            If the fit raises (bad input, a lost worker, an interrupt), the estimator is left
            exactly as it was before the call.
        """
        with transaction(self):
            client = self._get_client()
            device = self._check_dask_params(client)
            # The driver validates on its CPU whatever the workers run on.
            blocks, dtype = self._place(client, X, CPU)
            plan = self._plan(device, self.algorithm, self._new_seed(), callback=callback)
            rule = plan.backend.options.get("rule", "sparse")
            # A matrix prior's seeded cells (plain NumPy) travel to every shard, which samples
            # with them against the summed B, as one process's chain does.
            actor_futures = [
                client.submit(Shard, block, plan.n_topics, plan.alpha.value, plan.beta.value,
                              plan.seed, self.n_jobs, rule, device.kind, plan.beta_cells,
                              actor=True, pure=False)
                for block in blocks
            ]
            try:
                shards = client.gather(actor_futures)
                holders = shard_workers(client, actor_futures)

                def check_alive():
                    alive = set(client.scheduler_info()["workers"])
                    lost = sorted(holders - alive)
                    if lost:
                        raise WorkerLost(
                            f"Dask worker(s) {', '.join(lost)} holding shards of the corpus were "
                            "lost during the fit; the estimator was left as it was. Fit again "
                            "once the cluster is whole.")

                sampler = DaskSampler(shards, plan.n_topics, plan.alpha.value, plan.beta.value,
                                      plan.seed, device, check_alive)
                sampler.set_beta_cells(plan.beta_cells)
                summaries = sampler.call_all("summary")
                offsets = np.cumsum([0] + [n_tokens for n_tokens, _, _ in summaries])[:-1]
                integral = all(sampler.call_all("integral"))
                in_place = None if device.kind != "cuda" else _in_place_exchange(
                    sampler.call_all("gpu_identity"), integral=integral)
                frequencies = None
                if in_place:
                    sampler = NcclDaskSampler(shards, plan.n_topics, plan.alpha.value,
                                              plan.beta.value, plan.seed, device, check_alive)
                    in_place = sampler.exchange or in_place  # tests and benchmarks may force it
                    sampler.integral = integral
                    sampler.prefetch = tuple(name for name, prior in (("doc", plan.alpha),
                                                                      ("word", plan.beta))
                                             if prior.learn)
                    sampler.set_beta_cells(plan.beta_cells)
                    frequencies = np.sum(sampler.call_all("word_frequencies"), axis=0)
                # Shards that will sum by changed cells plan room for the exchange's buffers.
                ranks = len(shards) if in_place == "changes" else None
                sampler.call_each("prepare", [(int(o), frequencies, ranks) for o in offsets])
                if in_place:
                    sampler.join(in_place)
                corpus = ShardedCorpus(self.n_features_in_, summaries)
                warn_if_empty(float(corpus.n_tokens), "fit")
                state = _fit.fit_corpus(plan, corpus, sampler)
            finally:
                client.cancel(actor_futures + list(blocks))
            self._assign(state, dtype, device, plan.backend, plan.seed)
        return self

    def partial_fit(self, X, y=None):
        raise NotImplementedError(
            "partial_fit does not run on a Dask cluster; fit here, or use to_local().partial_fit")

    # -- the fitted model ------------------------------------------------------------------------
    def to_local(self):
        """The fitted model as a plain :class:`~sklearn_gpulda.GPULatentDirichletAllocation`
        (same parameters, same fitted attributes), which pickles and transforms without Dask."""
        params = {k: v for k, v in self.get_params(deep=False).items() if k != "client"}
        local = GPULatentDirichletAllocation(**params)
        local.__dict__.update(self._fitted_items())
        return local

    def transform(self, X, *, normalize=True):
        """As :meth:`sklearn_gpulda.GPULatentDirichletAllocation.transform`; a Dask array is
        transformed block by block, lazily, and comes back as a Dask array."""
        if not _is_dask_array(X):
            return super().transform(X, normalize=normalize)
        local = self.to_local()
        X = X.rechunk({1: -1}) if len(X.chunks[1]) > 1 else X
        dtype = np.float32 if X.dtype == np.float32 else np.float64
        return X.map_blocks(lambda b: local.transform(b, normalize=normalize), dtype=dtype,
                            chunks=(X.chunks[0], (self.n_components,)))

    def _block_scores(self, X):
        """Per-block ``(score, tokens)`` of a Dask array, computed on the cluster."""
        import dask

        local = self.to_local()
        X = X.rechunk({1: -1}) if len(X.chunks[1]) > 1 else X
        parts = [dask.delayed(lambda b: (local.score(b), float(b.sum())))(b)
                 for b in X.to_delayed()[:, 0]]
        return dask.compute(*parts)

    def score(self, X, y=None):
        """As :meth:`sklearn_gpulda.GPULatentDirichletAllocation.score`; for a Dask array the
        sum of its blocks' scores (a score is a sum over documents)."""
        if not _is_dask_array(X):
            return super().score(X)
        return float(sum(s for s, _ in self._block_scores(X)))

    def perplexity(self, X, sub_sampling=False):
        """As :meth:`sklearn_gpulda.GPULatentDirichletAllocation.perplexity`, for Dask arrays
        too."""
        if not _is_dask_array(X):
            return super().perplexity(X, sub_sampling=sub_sampling)
        parts = self._block_scores(X)
        return _score.perplexity(sum(s for s, _ in parts), sum(n for _, n in parts))
