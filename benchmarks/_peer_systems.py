"""The systems of the peer benchmark behind one small interface, and the worker that times them.

Each adapter trains towards a number of iterations (passes for the variational methods) and hands
back a topic-word matrix and the document-topic prior its model ended with (learnt, where the
library learns it); nothing else of a system is looked at, so
:func:`sklearn_gpulda.metrics.document_completion` scores all of them alike. With ``priors="own"``
every library keeps its own default priors, as a new user gets them; with ``priors="sklearn"``
every system is given scikit-learn's ``alpha = beta = 1 / K`` and tomotopy's prior optimisation is
switched off.

Systems that can continue training (scikit-learn online through ``partial_fit``, gensim through
``update``, tomotopy through ``train``) do; the others are refitted from scratch with more
iterations, and each point's time is then the time of that one fit.

:func:`run_system` is what a worker process runs for one (corpus, K, system) triple, so that
its peak memory is its own and a crash or a stuck library costs one row of the results.
"""

import importlib
import math
import os
import resource
import threading
import time
from pathlib import Path

import numpy as np

from sklearn_gpulda.metrics import document_completion

from _bench_common import DevicePeak


def _doubling(first, last):
    """``first, 2 first, 4 first, ...`` up to ``last``: the convergence rule compares each
    checkpoint with the one of half its iterations, so every schedule doubles."""
    schedule = [first]
    while schedule[-1] * 2 <= last:
        schedule.append(schedule[-1] * 2)
    return schedule


#: Iteration checkpoints per system; the convergence rule or the budget usually stops them earlier.
SCHEDULES = {
    "gpulda-cuda": _doubling(25, 12_800),
    "gpulda-cuda-avg": _doubling(25, 12_800),
    "gpulda-cpu": _doubling(25, 12_800),
    "gpulda-cuda-online": _doubling(1, 1024),
    "sklearn-batch": _doubling(1, 1024),
    "sklearn-online": _doubling(1, 1024),
    "gensim": _doubling(1, 1024),
    "tomotopy": _doubling(25, 6_400),
}
#: Every system peers.py knows; ``--systems`` may name any of them.
SYSTEMS = list(SCHEDULES)
#: What runs when ``--systems`` is not given: the systems of the issue.
DEFAULT_SYSTEMS = [s for s in SYSTEMS if s not in ("gpulda-cuda-avg", "gpulda-cuda-online")]
#: The systems whose results define "ours" in the table, best first.
OURS = ["gpulda-cuda", "gpulda-cuda-avg", "gpulda-cpu", "gpulda-cuda-online"]
#: ``--priors``: each library's own defaults, or scikit-learn's 1 / K for every system.
PRIORS = ["own", "sklearn"]


def converged(points, tol):
    """Whether the last checkpoint gained less than ``tol`` over the one with half its iterations.

    Parameters
    ----------
    points : list of dict
        Checkpoints so far, each with ``iterations`` and ``heldout_ll``, in training order.
    tol : float
        Nats per token; 0 or less switches the rule off.

    Returns
    -------
    converged : bool
        False as well when no checkpoint has half the last one's iterations (the first one).
    """
    if tol <= 0 or not points:
        return False
    last = points[-1]
    half = next((p for p in points if 2 * p["iterations"] == last["iterations"]), None)
    # A fall counts as less than tol: more training no longer helps.
    return half is not None and last["heldout_ll"] - half["heldout_ll"] < tol


def describe_prior(alpha):
    """A short text for a document-topic prior: its value, or for a vector that is not constant,
    its mean and range (a learnt asymmetric prior)."""
    alpha = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if np.all(alpha == alpha[0]):
        return f"{alpha[0]:.6g}"
    return f"mean {alpha.mean():.4g} ({alpha.min():.4g} to {alpha.max():.4g})"


class SystemUnavailable(Exception):
    """The system cannot run here (library missing, no GPU)."""


def n_cores():
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _peak_rss_mb():
    # ru_maxrss is in kB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _tree_rss_bytes(pid):
    """Resident bytes of a process and all its descendants, from /proc (Linux)."""
    total, stack = 0, [pid]
    page = os.sysconf("SC_PAGE_SIZE")
    while stack:
        p = stack.pop()
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * page
            for task in Path(f"/proc/{p}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):  # the process ended while we looked
            continue
    return total


class _HostPeak:
    """Peak resident memory of this process and its children (joblib's loky workers, gensim's
    worker processes), above a baseline, over the periods between :meth:`resume` and
    :meth:`pause`. A thread samples /proc every 20 ms; where /proc is missing the process's own
    ``ru_maxrss`` stands in, which cannot see children or exclude the paused periods."""

    def __init__(self):
        self.pid = os.getpid()
        self.proc = Path(f"/proc/{self.pid}/statm").exists()
        self.base = _tree_rss_bytes(self.pid) if self.proc else _peak_rss_mb() * 2**20
        self.peak = 0
        self.active = threading.Event()
        self.stop = threading.Event()
        if self.proc:
            self.thread = threading.Thread(target=self._sample, daemon=True)
            self.thread.start()

    def _sample(self):
        while not self.stop.wait(0.02):
            if self.active.is_set():
                self.peak = max(self.peak, _tree_rss_bytes(self.pid) - self.base)

    def resume(self):
        self.active.set()

    def pause(self):
        if self.proc:
            self.peak = max(self.peak, _tree_rss_bytes(self.pid) - self.base)
        self.active.clear()

    def close(self):
        """Peak in MB."""
        self.stop.set()
        if not self.proc:
            return _peak_rss_mb() - self.base / 2**20
        return self.peak / 2**20


class _System:
    """Train to a number of iterations; report topics, prior and the seconds spent training.

    ``priors`` is "own" (the library's default priors, untouched) or "sklearn" (``1 / K`` for
    both priors and nothing learnt); see :data:`PRIORS`.
    """

    continues = False

    def __init__(self, n_topics, seed, cores, priors="own"):
        if priors not in PRIORS:
            raise ValueError(f"priors must be one of {PRIORS}, got {priors!r}")
        self.n_topics, self.seed, self.cores, self.priors = n_topics, seed, cores, priors
        self.device = "cpu"

    def _given_priors(self, alpha="doc_topic_prior", beta="topic_word_prior"):
        """Keyword arguments that set both priors to 1 / K under "sklearn", none under "own"."""
        if self.priors == "own":
            return {}
        return {alpha: 1.0 / self.n_topics, beta: 1.0 / self.n_topics}

    def version(self):
        return ""

    def prepare(self, X_train):
        """Convert the training counts into the system's input (not timed)."""
        self.X_train = X_train

    def train_to(self, n_iter):
        """Seconds of training it took to reach ``n_iter`` iterations from the last point."""
        raise NotImplementedError

    def topic_word(self):
        raise NotImplementedError

    def doc_topic_prior(self):
        """The document-topic prior of the trained model: a float, or an array of shape (K,)."""
        raise NotImplementedError

    def transform(self, X):
        raise NotImplementedError


class _Continuing(_System):
    """A system that trains on from where it stopped: ``train_to`` runs only the extra steps."""

    continues = True
    done = 0  # iterations (passes) trained so far

    def _advance(self, n_steps):
        raise NotImplementedError

    def train_to(self, n_iter):
        tic = time.perf_counter()
        self._advance(n_iter - self.done)
        self.done = n_iter
        return time.perf_counter() - tic


class _SklearnAPI(_System):
    """A model with scikit-learn's fitted attributes in ``self.model`` (this package's too)."""

    def topic_word(self):
        return self.model.components_

    def doc_topic_prior(self):
        # Whatever the fit ended with: a learnt prior may be a vector.
        return self.model.doc_topic_prior_

    def transform(self, X):
        return self.model.transform(X)


def _import_peer(name):
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise SystemUnavailable(f"{name} is not importable ({exc})") from None


class GPULDA(_SklearnAPI):
    def __init__(self, n_topics, seed, cores, priors="own", device="cpu", averaged=None):
        super().__init__(n_topics, seed, cores, priors)
        # Fraction of each fit's sweeps whose counts are averaged into the topics
        # (n_averaged_sweeps); the last three quarters did best in the CPU measurements of
        # doc/user_guide.rst. None leaves the estimator's default.
        self.averaged = averaged
        from sklearn_gpulda._runtime.device import resolve_device

        try:
            # A string ('cpu', 'cuda:0'): it goes into the results and to the estimator as is.
            self.device = str(resolve_device(device))
        except RuntimeError as exc:
            raise SystemUnavailable(str(exc)) from None

    def version(self):
        import sklearn_gpulda

        return sklearn_gpulda.__version__

    def _make(self, n_iter):
        from sklearn_gpulda import GPULatentDirichletAllocation

        # Only what the benchmark must set: every other parameter, the priors under "own"
        # included, stays the estimator's default, so the run measures what a user gets.
        options = self._given_priors()
        if self.averaged is not None:
            options["n_averaged_sweeps"] = int(n_iter * self.averaged)
        return GPULatentDirichletAllocation(n_components=self.n_topics, max_iter=n_iter,
                                            random_state=self.seed, device=self.device,
                                            **options)

    def prepare(self, X_train):
        super().prepare(X_train)
        if self.device != "cpu":
            # Load (or NVRTC-compile) the kernels before any timed fit.
            self._make(1).fit(X_train[:50])

    def train_to(self, n_iter):
        tic = time.perf_counter()
        self.model = self._make(n_iter).fit(self.X_train)
        seconds = time.perf_counter() - tic
        if self.priors == "sklearn" and np.any(self.model.doc_topic_prior_ != 1.0 / self.n_topics):
            # Should the estimator come to learn its prior by default, "sklearn" must switch
            # that off here; scoring a learnt prior under that name would mislead.
            raise RuntimeError("the estimator changed the document-topic prior it was given; "
                               "--priors sklearn must keep it at 1 / K")
        return seconds


class GPULDAOnline(_Continuing, GPULDA):
    """Our online learning on the GPU, pass by pass as :class:`SklearnOnline` runs: one
    ``partial_fit`` over the training set per pass (mini-batches of the estimator's default
    ``batch_size``, as scikit-learn's), ``total_samples`` the corpus size."""

    def prepare(self, X_train):
        from sklearn_gpulda import GPULatentDirichletAllocation

        super().prepare(X_train)  # loads the kernels outside the timed passes
        # And CuPy's own kernels of the online path (compiled once per machine, on first use):
        # two calls, the second continuing a model over several mini-batches.
        warm = GPULatentDirichletAllocation(n_components=self.n_topics, batch_size=64,
                                            random_state=self.seed, device=self.device)
        warm.partial_fit(X_train[:64]).partial_fit(X_train[64:320])
        self.model = GPULatentDirichletAllocation(
            n_components=self.n_topics, learning_method="online", total_samples=X_train.shape[0],
            random_state=self.seed, device=self.device, **self._given_priors())

    def _advance(self, n_steps):
        for _ in range(n_steps):
            self.model.partial_fit(self.X_train)


class SklearnBatch(_SklearnAPI):
    def version(self):
        import sklearn

        return sklearn.__version__

    def prepare(self, X_train):
        from sklearn.decomposition import LatentDirichletAllocation

        super().prepare(X_train)
        # Start joblib's worker processes, which later fits reuse, outside the timed fits.
        LatentDirichletAllocation(n_components=2, max_iter=1, n_jobs=self.cores).fit(X_train[:50])

    def train_to(self, n_iter):
        from sklearn.decomposition import LatentDirichletAllocation

        self.model = LatentDirichletAllocation(
            n_components=self.n_topics, learning_method="batch", max_iter=n_iter,
            n_jobs=self.cores, random_state=self.seed, **self._given_priors())
        tic = time.perf_counter()
        self.model.fit(self.X_train)
        return time.perf_counter() - tic


class SklearnOnline(_Continuing, SklearnBatch):

    def prepare(self, X_train):
        from sklearn.decomposition import LatentDirichletAllocation

        super().prepare(X_train)  # starts joblib's workers
        # total_samples = the corpus size makes one partial_fit call exactly one pass of
        # fit(learning_method="online"), so passes can be added one call at a time.
        # One job: scikit-learn splits each mini-batch of 128 documents over its jobs, and
        # dispatching so little work to worker processes costs more than the E-step saves, so
        # one job is its fastest setting here (benchmarks/probes/sklearn_online_threads.py
        # checks that on a given host).
        self.model = LatentDirichletAllocation(
            n_components=self.n_topics, learning_method="online",
            total_samples=X_train.shape[0], n_jobs=1, random_state=self.seed,
            **self._given_priors())

    def _advance(self, n_steps):
        for _ in range(n_steps):
            self.model.partial_fit(self.X_train)


class Gensim(_Continuing):
    def __init__(self, n_topics, seed, cores, priors="own"):
        super().__init__(n_topics, seed, cores, priors)
        self.gensim = _import_peer("gensim")
        # LdaMulticore's own advice: one worker per core less the process that merges updates.
        self.workers = max(1, cores - 1)

    def version(self):
        return self.gensim.__version__

    def prepare(self, X_train):
        from gensim.matutils import Sparse2Corpus
        from gensim.models import LdaMulticore

        super().prepare(X_train)
        self.corpus = Sparse2Corpus(X_train, documents_columns=False)
        id2word = {i: str(i) for i in range(X_train.shape[1])}
        # gensim's "symmetric" alpha is 1 / K, so scikit-learn's priors need only eta set.
        priors = {} if self.priors == "own" else dict(alpha="symmetric", eta=1.0 / self.n_topics)
        # eval_every=None: gensim's own perplexity estimate would be timed as training.
        self.model = LdaMulticore(corpus=None, id2word=id2word, num_topics=self.n_topics,
                                  workers=self.workers, passes=1, eval_every=None,
                                  random_state=self.seed, **priors)

    def _advance(self, n_steps):
        for _ in range(n_steps):
            self.model.update(self.corpus)

    def topic_word(self):
        return self.model.get_topics()

    def doc_topic_prior(self):
        return np.asarray(self.model.alpha, dtype=np.float64)

    def transform(self, X):
        from gensim.matutils import Sparse2Corpus

        gamma, _ = self.model.inference(list(Sparse2Corpus(X, documents_columns=False)))
        return gamma / gamma.sum(axis=1, keepdims=True)


class Tomotopy(_Continuing):
    def __init__(self, n_topics, seed, cores, priors="own"):
        super().__init__(n_topics, seed, cores, priors)
        self.tp = _import_peer("tomotopy")

    def version(self):
        return f"{self.tp.__version__} ({self.tp.isa})"

    @staticmethod
    def _documents(X):
        # tomotopy takes documents as lists of word strings; word ids as strings keep the
        # mapping back to our columns trivial.
        words = np.char.mod("%d", np.arange(X.shape[1]))
        for d in range(X.shape[0]):
            lo, hi = X.indptr[d], X.indptr[d + 1]
            yield np.repeat(words[X.indices[lo:hi]], X.data[lo:hi]).tolist()

    def prepare(self, X_train):
        super().prepare(X_train)
        # min_cf and rm_top are vocabulary filters (both off by default), not model settings:
        # stated so that every system keeps every training word.
        self.model = self.tp.LDAModel(k=self.n_topics, seed=self.seed, min_cf=0, rm_top=0,
                                      **self._given_priors("alpha", "eta"))
        if self.priors == "sklearn":
            # Keep alpha fixed, as every other system does under scikit-learn's priors. Under
            # "own" it is learnt every optim_interval (10) iterations, tomotopy's default.
            self.model.optim_interval = 0
        for doc in self._documents(X_train):
            self.model.add_doc(doc)

    def _advance(self, n_steps):
        self.model.train(iterations=n_steps, workers=self.cores)

    def topic_word(self):
        used = np.array([int(w) for w in self.model.used_vocabs])
        phi = np.zeros((self.n_topics, self.X_train.shape[1]))
        for k in range(self.n_topics):
            phi[k, used] = self.model.get_topic_word_dist(k)
        return phi

    def doc_topic_prior(self):
        return np.asarray(self.model.alpha, dtype=np.float64)

    def transform(self, X):
        docs = [self.model.make_doc(words) for words in self._documents(X)]
        dists, _ = self.model.infer(docs, workers=self.cores)
        return np.asarray(dists)


_MAKERS = {
    "gpulda-cuda": lambda *a: GPULDA(*a, device="cuda"),
    "gpulda-cuda-avg": lambda *a: GPULDA(*a, device="cuda", averaged=0.75),
    "gpulda-cpu": lambda *a: GPULDA(*a, device="cpu"),
    "gpulda-cuda-online": lambda *a: GPULDAOnline(*a, device="cuda"),
    "sklearn-batch": SklearnBatch,
    "sklearn-online": SklearnOnline,
    "gensim": Gensim,
    "tomotopy": Tomotopy,
}


def make_system(name, n_topics, seed, cores, priors="own"):
    """An adapter by name; raises :class:`SystemUnavailable` when it cannot run here."""
    if name not in _MAKERS:
        raise ValueError(f"unknown system {name!r}; choose from {SYSTEMS}")
    return _MAKERS[name](n_topics, seed, cores, priors)


def _next_cost(system, last, n_iter):
    """Predicted training seconds of the checkpoint at ``n_iter``, time linear in iterations."""
    more = n_iter - last["iterations"] if system.continues else n_iter
    return last["train_s"] * more / last["iterations"]


def _score(system, X_test, job):
    # The prior is read after every checkpoint: a learnt one changes as training goes on.
    # The fold-in may run on a GPU (eval_device): the same iteration as on the host, to ~1e-5,
    # and minutes faster at K = 1,000; the split and the scoring stay on the host.
    return document_completion(X_test, system.topic_word(), system.doc_topic_prior(),
                               n_iter=job["eval_iter"], random_state=job["seed"],
                               device=job.get("eval_device", "cpu")).per_token


def _train(system, X_test, job, host_peak, report):
    """Train and score through the job's schedule; the checkpoints and what ended the run
    ("converged", "budget" or "schedule", the end of the schedule)."""
    points, spent = [], 0.0  # spent: all training seconds, refits included (what budget limits)
    for n_iter in job["schedule"]:
        if points and spent + _next_cost(system, points[-1], n_iter) > job["budget_s"]:
            return points, "budget"
        host_peak.resume()
        seconds = system.train_to(n_iter)
        host_peak.pause()
        spent += seconds
        # train_s: the seconds behind the current model (a refit's own seconds).
        before = points[-1]["train_s"] if points and system.continues else 0.0
        point = dict(iterations=n_iter, train_s=before + seconds,
                     heldout_ll=_score(system, X_test, job))
        points.append(point)
        if report is not None:
            report(point)
        print(f"  {job['corpus']:>8s} K={job['n_topics']:<5d} {job['system']:<15s} "
              f"{n_iter:5d} it {point['train_s']:9.2f} s  held-out {point['heldout_ll']:.4f}",
              flush=True)
        if converged(points, job.get("converge_tol", 0.0)):
            return points, "converged"
    return points, "schedule"


def _time_transform(system, X_test, job):
    """Seconds to transform ``transform_docs`` new documents, and how many were timed.

    Test documents are drawn with replacement up to the requested number (the test split is
    smaller than that on most corpora). A slow system (a CPU peer at K = 1000) is timed on a
    first slice only when the whole would exceed the job's transform budget.
    """
    rng = np.random.default_rng(job["seed"])
    X_new = X_test[rng.integers(0, X_test.shape[0], size=job["transform_docs"])]
    system.transform(X_test[:10])  # warm-up: kernel loading, thread pools
    probe = min(X_new.shape[0], 1000)
    tic = time.perf_counter()
    system.transform(X_new[:probe])
    seconds = time.perf_counter() - tic
    if probe < X_new.shape[0] and seconds * X_new.shape[0] / probe <= job.get(
            "transform_budget_s", math.inf):
        tic = time.perf_counter()
        system.transform(X_new)
        return time.perf_counter() - tic, X_new.shape[0]
    return seconds, probe


def run_system(job, report=None):
    """Train one system on one corpus through its checkpoints; what :mod:`peers` records.

    Parameters
    ----------
    job : dict
        ``corpus_path`` (an ``.npz`` from :func:`_peer_corpora.save_corpus`), ``corpus``,
        ``n_topics``, ``system``, ``seed``, ``budget_s`` (training seconds after which no new
        checkpoint is started), ``schedule`` (doubling iteration counts), ``transform_docs``
        (documents in the latency measurement), ``eval_iter`` (fold-in iterations of the
        evaluator), and optionally ``priors`` (see :data:`PRIORS`; default "own"),
        ``converge_tol`` (nats per token of :func:`converged`; default 0, off) and
        ``transform_budget_s`` (seconds the transform of ``transform_docs`` documents may take;
        beyond it only the first 1,000 are timed).
    report : callable, optional
        Called with each checkpoint's dict as soon as it is scored, so that a caller that has to
        stop a slow run keeps the checkpoints reached so far.

    Returns
    -------
    result : dict
        ``points`` (a list of dicts: iterations, train_s, heldout_ll), ``status`` ("ok" or the
        reason it was skipped), ``converged`` (bool) and ``stopped_by`` ("converged", "budget"
        or "schedule"), ``doc_topic_prior`` (:func:`describe_prior` of the final model's prior),
        and the summary figures: host peak MB (resident memory of the worker and its children
        above the level after loading the corpus, during preparation and training only), device
        peak MB (CuPy's memory pool), transform seconds and the number of documents they are
        for, version, device.
    """
    from _peer_corpora import read_corpus

    X_train, X_test, _ = read_corpus(job["corpus_path"])
    cores = n_cores()
    result = dict(corpus=job["corpus"], n_topics=job["n_topics"], system=job["system"],
                  points=[], status="ok", host_peak_mb=float("nan"),
                  device_peak_mb=float("nan"), transform_s=float("nan"), version="",
                  device="", cores=cores, converged=False, stopped_by="")
    try:
        system = make_system(job["system"], job["n_topics"], job["seed"], cores,
                             job.get("priors", "own"))
    except SystemUnavailable as exc:
        result["status"] = f"skipped: {exc}"
        return result
    result["version"], result["device"] = system.version(), system.device

    on_gpu = system.device.startswith("cuda")
    host_peak = _HostPeak()
    with DevicePeak(on_gpu) as device_peak:
        tic = time.perf_counter()
        host_peak.resume()
        system.prepare(X_train)
        host_peak.pause()
        result["prepare_s"] = time.perf_counter() - tic
        result["points"], result["stopped_by"] = _train(system, X_test, job, host_peak, report)
    result["converged"] = result["stopped_by"] == "converged"
    result["doc_topic_prior"] = describe_prior(system.doc_topic_prior())
    result["host_peak_mb"] = host_peak.close()
    result["device_peak_mb"] = device_peak.peak / 2**20 if on_gpu else float("nan")
    result["transform_s"], result["transform_docs"] = _time_transform(system, X_test, job)
    return result
