"""The systems of the peer benchmark behind one small interface, and the worker that times them.

Each adapter trains towards a number of iterations (passes for the variational methods) and hands
back a topic-word matrix and the document-topic prior it used; nothing else of a system is
looked at, so :func:`sklearn_gpulda.metrics.document_completion` scores all of them alike.
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

#: Iteration checkpoints per system (the budget usually stops them earlier).
SCHEDULES = {
    "gpulda-cuda": [5, 10, 20, 40, 80, 160, 320, 640, 1280],
    "gpulda-cuda-avg": [8, 16, 32, 64, 128, 256, 512, 1024],
    "gpulda-cpu": [5, 10, 20, 40, 80, 160, 320],
    "sklearn-batch": [1, 2, 4, 8, 16, 32, 64],
    "sklearn-online": [1, 2, 4, 8, 16, 32, 64],
    "gensim": [1, 2, 4, 8, 16, 32],
    "tomotopy": [5, 10, 20, 40, 80, 160, 320, 640],
}
#: Every system peers.py knows; ``--systems`` may name any of them.
SYSTEMS = list(SCHEDULES)
#: What runs when ``--systems`` is not given: the systems of the issue.
DEFAULT_SYSTEMS = [s for s in SYSTEMS if s != "gpulda-cuda-avg"]
#: The systems whose results define "ours" in the ratio column, best first.
OURS = ["gpulda-cuda", "gpulda-cuda-avg", "gpulda-cpu"]
SKLEARN = ["sklearn-batch", "sklearn-online"]


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
    """Train to a number of iterations; report topics, prior and the seconds spent training."""

    continues = False

    def __init__(self, n_topics, seed, cores):
        self.n_topics, self.seed, self.cores = n_topics, seed, cores
        self.alpha = 1.0 / n_topics  # scikit-learn's default priors, given to every system
        self.beta = 1.0 / n_topics
        self.device = "cpu"

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
        return self.alpha

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


def _import_peer(name):
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise SystemUnavailable(f"{name} is not importable ({exc})") from None


class GPULDA(_System):
    def __init__(self, n_topics, seed, cores, device, averaged=0.0):
        super().__init__(n_topics, seed, cores)
        # Fraction of each fit's sweeps whose counts are averaged into the topics
        # (n_averaged_sweeps); the last three quarters did best in the CPU measurements of
        # doc/user_guide.rst.
        self.averaged = averaged
        from sklearn_gpulda._engines import resolve_device

        try:
            self.device = resolve_device(device)
        except RuntimeError as exc:
            raise SystemUnavailable(str(exc)) from None

    def version(self):
        import sklearn_gpulda

        return sklearn_gpulda.__version__

    def _make(self, n_iter):
        from sklearn_gpulda import GPULatentDirichletAllocation

        return GPULatentDirichletAllocation(n_components=self.n_topics, max_iter=n_iter,
                                            doc_topic_prior=self.alpha,
                                            topic_word_prior=self.beta,
                                            random_state=self.seed, device=self.device,
                                            n_averaged_sweeps=int(n_iter * self.averaged))

    def prepare(self, X_train):
        super().prepare(X_train)
        if self.device != "cpu":
            # Load (or NVRTC-compile) the kernels before any timed fit.
            self._make(1).fit(X_train[:50])

    def train_to(self, n_iter):
        tic = time.perf_counter()
        self.model = self._make(n_iter).fit(self.X_train)
        return time.perf_counter() - tic

    def topic_word(self):
        return self.model.components_

    def transform(self, X):
        return self.model.transform(X)


class SklearnBatch(_System):
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
            n_components=self.n_topics, doc_topic_prior=self.alpha, topic_word_prior=self.beta,
            learning_method="batch", max_iter=n_iter, n_jobs=self.cores, random_state=self.seed)
        tic = time.perf_counter()
        self.model.fit(self.X_train)
        return time.perf_counter() - tic

    def topic_word(self):
        return self.model.components_

    def transform(self, X):
        return self.model.transform(X)


class SklearnOnline(_Continuing, SklearnBatch):

    def prepare(self, X_train):
        from sklearn.decomposition import LatentDirichletAllocation

        super().prepare(X_train)  # starts joblib's workers
        # total_samples = the corpus size makes one partial_fit call exactly one pass of
        # fit(learning_method="online"), so passes can be added one call at a time.
        self.model = LatentDirichletAllocation(
            n_components=self.n_topics, doc_topic_prior=self.alpha, topic_word_prior=self.beta,
            learning_method="online", total_samples=X_train.shape[0], n_jobs=self.cores,
            random_state=self.seed)

    def _advance(self, n_steps):
        for _ in range(n_steps):
            self.model.partial_fit(self.X_train)


class Gensim(_Continuing):
    def __init__(self, n_topics, seed, cores):
        super().__init__(n_topics, seed, cores)
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
        # eval_every=None: gensim's own perplexity estimate would be timed as training.
        self.model = LdaMulticore(corpus=None, id2word=id2word, num_topics=self.n_topics,
                                  workers=self.workers, passes=1, alpha="symmetric",
                                  eta=self.beta, eval_every=None, random_state=self.seed)

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
    def __init__(self, n_topics, seed, cores):
        super().__init__(n_topics, seed, cores)
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
        self.model = self.tp.LDAModel(k=self.n_topics, alpha=self.alpha, eta=self.beta,
                                      seed=self.seed, min_cf=0, rm_top=0)
        # Keep alpha fixed, as every other system here does.
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


def make_system(name, n_topics, seed, cores):
    """An adapter by name; raises :class:`SystemUnavailable` when it cannot run here."""
    if name == "gpulda-cuda":
        return GPULDA(n_topics, seed, cores, "cuda")
    if name == "gpulda-cuda-avg":
        return GPULDA(n_topics, seed, cores, "cuda", averaged=0.75)
    if name == "gpulda-cpu":
        return GPULDA(n_topics, seed, cores, "cpu")
    if name == "sklearn-batch":
        return SklearnBatch(n_topics, seed, cores)
    if name == "sklearn-online":
        return SklearnOnline(n_topics, seed, cores)
    if name == "gensim":
        return Gensim(n_topics, seed, cores)
    if name == "tomotopy":
        return Tomotopy(n_topics, seed, cores)
    raise ValueError(f"unknown system {name!r}; choose from {SYSTEMS}")


class _DevicePeak:
    """Peak bytes in use in CuPy's default memory pool while active (0 without CuPy)."""

    def __init__(self, active):
        self.peak = 0
        self.hook = None
        if not active:
            return
        try:
            import cupy

            pool = cupy.get_default_memory_pool()
            tracker = self

            class _Hook(cupy.cuda.MemoryHook):
                name = "PeakTracker"

                def malloc_postprocess(self, **kwargs):
                    tracker.peak = max(tracker.peak, pool.used_bytes())

            self.hook = _Hook()
        except Exception:  # an old CuPy without hooks: report 0 rather than fail the run
            self.hook = None

    def __enter__(self):
        if self.hook is not None:
            self.hook.__enter__()
        return self

    def __exit__(self, *exc):
        if self.hook is not None:
            self.hook.__exit__(*exc)


def run_system(job, report=None):
    """Train one system on one corpus through its checkpoints; what :mod:`peers` records.

    Parameters
    ----------
    job : dict
        ``corpus_path`` (an ``.npz`` from :func:`_peer_corpora.save_corpus`), ``corpus``,
        ``n_topics``, ``system``, ``seed``, ``budget_s`` (training seconds after which no new
        checkpoint is started), ``schedule`` (iteration counts), ``transform_docs``
        (documents in the latency measurement), ``eval_iter`` (fold-in iterations of the
        evaluator), and optionally ``transform_budget_s`` (seconds the transform of
        ``transform_docs`` documents may take; beyond it only the first 1,000 are timed).
    report : callable, optional
        Called with each checkpoint's dict as soon as it is scored, so that a caller that has to
        stop a slow run keeps the checkpoints reached so far.

    Returns
    -------
    result : dict
        ``points`` (a list of dicts: iterations, train_s, heldout_ll), ``status`` ("ok" or the
        reason it was skipped), and the summary figures: host peak MB (resident memory of the
        worker and its children above the level after loading the corpus, during preparation
        and training only), device peak MB (CuPy's memory pool), transform seconds and the
        number of documents they are for, version, device.
    """
    from _peer_corpora import read_corpus

    X_train, X_test, _ = read_corpus(job["corpus_path"])
    cores = n_cores()
    result = dict(corpus=job["corpus"], n_topics=job["n_topics"], system=job["system"],
                  points=[], status="ok", host_peak_mb=float("nan"),
                  device_peak_mb=float("nan"), transform_s=float("nan"), version="",
                  device="", cores=cores)
    try:
        system = make_system(job["system"], job["n_topics"], job["seed"], cores)
    except SystemUnavailable as exc:
        result["status"] = f"skipped: {exc}"
        return result
    result["version"], result["device"] = system.version(), system.device

    on_gpu = system.device.startswith("cuda")
    host_peak = _HostPeak()
    with _DevicePeak(on_gpu) as device_peak:
        tic = time.perf_counter()
        host_peak.resume()
        system.prepare(X_train)
        host_peak.pause()
        result["prepare_s"] = time.perf_counter() - tic
        spent = 0.0       # all training seconds, refits included: what the budget limits
        elapsed = 0.0     # training seconds behind the current model
        last = None
        for n_iter in job["schedule"]:
            if last is not None:
                last_n, last_s = last
                # Cost of the next step, assuming time linear in iterations.
                more = n_iter - last_n if system.continues else n_iter
                step = last_s * more / last_n
                if spent + step > job["budget_s"]:
                    break
            host_peak.resume()
            seconds = system.train_to(n_iter)
            host_peak.pause()
            spent += seconds
            elapsed = elapsed + seconds if system.continues else seconds
            score = document_completion(X_test, system.topic_word(), system.doc_topic_prior(),
                                        n_iter=job["eval_iter"], random_state=job["seed"])
            point = dict(iterations=n_iter, train_s=elapsed, heldout_ll=score.per_token)
            result["points"].append(point)
            if report is not None:
                report(point)
            last = (n_iter, elapsed)
            print(f"  {job['corpus']:>8s} K={job['n_topics']:<5d} {job['system']:<15s} "
                  f"{n_iter:4d} it {elapsed:9.2f} s  held-out {score.per_token:.4f}",
                  flush=True)
    result["host_peak_mb"] = host_peak.close()
    result["device_peak_mb"] = device_peak.peak / 2**20 if on_gpu else float("nan")

    # Latency of inference on new documents: test documents drawn with replacement up to the
    # requested number (the test split is smaller than that on most corpora). A slow system
    # (a CPU peer at K = 1000) is timed on a first slice only when the whole would exceed the
    # job's transform budget; the number of documents timed is reported with the time.
    rng = np.random.default_rng(job["seed"])
    X_new = X_test[rng.integers(0, X_test.shape[0], size=job["transform_docs"])]
    system.transform(X_test[:10])  # warm-up: kernel loading, thread pools
    probe = min(X_new.shape[0], 1000)
    tic = time.perf_counter()
    system.transform(X_new[:probe])
    seconds = time.perf_counter() - tic
    n_docs = probe
    if probe < X_new.shape[0] and seconds * X_new.shape[0] / probe <= job.get(
            "transform_budget_s", math.inf):
        tic = time.perf_counter()
        system.transform(X_new)
        seconds, n_docs = time.perf_counter() - tic, X_new.shape[0]
    result["transform_s"], result["transform_docs"] = seconds, n_docs
    return result
