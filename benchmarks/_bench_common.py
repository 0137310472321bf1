"""Pieces shared by the benchmarks: where they write, the GPU benchmarks' timing helpers
(bench_cuda.py, bench_dense.py, bench_algorithms.py, bench_end_to_end.py) and the peer
benchmark's worker.

Nothing here imports the package or CuPy at module level: ``bench_cuda.py --compare-with`` runs
these helpers in a subprocess against another checkout's package.
"""

import csv
import json
import time
from pathlib import Path

import numpy as np

#: The dense sampling kernels of cuda/sample_dense.cu.
VARIANTS = ("butterfly", "transpose", "plain")

#: Where a benchmark writes unless told otherwise: one folder per script under
#: ``benchmarks/results/``, which git ignores. Results are evidence for ``doc/performance.md``,
#: whose tables say how they were made; the files themselves are not kept in the repository.
RESULTS = Path(__file__).resolve().parent / "results"


def output_path(script, filename=None):
    """``benchmarks/results/<script>``, or the file ``filename`` in it: a script's default
    output. Nothing is created here; :func:`save_json` and the writers make the folder."""
    folder = RESULTS / script
    return folder if filename is None else folder / filename


def save_json(path, obj):
    """Write ``obj`` as indented JSON to ``path``, making its folder first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1, default=str))


ALPHA_HELP = ("document-topic prior: a number, or 'C/K' for C divided by the number of topics "
              "(e.g. 50/K, 1/K)")


def alpha_for(spec, n_topics):
    """The prior a spelling of ``--alpha`` gives at K = ``n_topics``: ``'50/K'`` is 50 / K,
    ``'0.1'`` is 0.1 whatever K.

    Raises
    ------
    ValueError
        Anything else, or a prior that is not positive.
    """
    text = str(spec).strip()
    try:
        value = float(text[:-2]) / n_topics if text.upper().endswith("/K") else float(text)
    except ValueError:
        raise ValueError(f"alpha must be a number or 'C/K', got {spec!r}") from None
    if not value > 0:
        raise ValueError(f"alpha must be positive, got {spec!r}")
    return value


def cuda_sampler(algorithm, n_topics, alpha, beta, seed, **options):
    """A profiled sampler of the registry's CUDA backend for ``algorithm`` on GPU 0.

    Going through :func:`sklearn_gpulda.backends.choose_backend` times what the estimator would
    run, and refuses a K the backend does not support with the estimator's message.
    """
    from sklearn_gpulda._runtime.device import resolve_device
    from sklearn_gpulda.backends import choose_backend

    device = resolve_device("cuda:0")
    backend = choose_backend(algorithm, n_topics, device)
    return backend.make(n_topics, alpha, beta, seed, device, profile=True, **options)


def start_chain(sampler, corpus):
    """Lay ``corpus`` out and draw the initial topics (the protocol's ``load``, ``init_topics``)."""
    sampler.load(corpus)
    sampler.init_topics()


def run_sweeps(cp, sampler, corpus, iters, before_sweep=None):
    """Start a chain on ``corpus`` and time ``iters`` sweeps with CUDA events.

    Parameters
    ----------
    cp : module
        CuPy.
    sampler : object
        A profiled CUDA sampler (``stage_ms`` filled by each sweep).
    corpus : TokenCorpus
    iters : int
        Sweeps, numbered 1..iters as the fit loop numbers them.
    before_sweep : callable, optional
        Called with the sampler before each sweep, outside the timed region; its dict (if any)
        is kept with that sweep.

    Returns
    -------
    dict
        ``init_s`` (wall seconds of :func:`start_chain`, synchronised), ``ms`` (one float per
        sweep), ``stages`` (a copy of ``stage_ms`` after each sweep) and ``extra`` (what
        ``before_sweep`` returned). The caller releases the sampler.
    """
    t = time.perf_counter()
    start_chain(sampler, corpus)
    cp.cuda.Device().synchronize()
    init_s = time.perf_counter() - t
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    out = dict(init_s=init_s, ms=[], stages=[], extra=[])
    for it in range(1, iters + 1):
        out["extra"].append((before_sweep(sampler) if before_sweep else None) or {})
        start.record()
        sampler.sweep(it)
        stop.record()
        stop.synchronize()
        out["ms"].append(cp.cuda.get_elapsed_time(start, stop))
        out["stages"].append(dict(getattr(sampler, "stage_ms", None) or {}))
    return out


def after_first(values):
    """Values of sweeps 2..n (sweep 1 pays for loading kernels), or all when there is one."""
    return values[1:] if len(values) > 1 else values


class DevicePeak:
    """Peak bytes in use in CuPy's default memory pool while active (0 without CuPy).

    A memory hook sees every allocation, so the peak is exact; polling ``used_bytes`` between
    calls would miss the temporaries of a single call. With ``site=True``, ``site`` names where
    the peak was reached (the package's innermost calls at the allocation that set it): a
    stack walk at every new peak, so not for timed runs that track their peak.
    """

    def __init__(self, active=True, site=False):
        self.peak = 0
        self.site = ""
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
                    used = pool.used_bytes()
                    if used > tracker.peak:
                        tracker.peak = used
                        if site:
                            tracker.site = _package_calls()

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


def _package_calls(depth=4):
    """The innermost ``depth`` calls of the sklearn_gpulda package on the stack, outermost
    first, as ``module:function:line`` joined by ' > '."""
    import traceback

    calls = [f"{f.filename.rsplit('sklearn_gpulda/', 1)[1]}:{f.name}:{f.lineno}"
             for f in traceback.extract_stack() if "sklearn_gpulda/" in f.filename]
    return " > ".join(calls[-depth:])


def budget_fit(X, n_components, sweeps, budget, on_load=None, site=False, **params):
    """One GPU fit of ``sweeps`` sweeps within ``max_device_memory=budget`` (None: the GPU's
    free memory), estimator defaults otherwise (``params`` override them), timed from outside
    with the device drained at the end of each sweep.

    ``on_load(sampler)`` is called once the sparse sampler has loaded the corpus. Returns the
    fitted model and a dict: ``wall_s``; ``sweep_ms``, the median of sweeps 3 on (sweep 1
    loads, sweep 2 may still grow the pool); ``setup_s``, the time before the first sweep less
    one sweep; ``chunks``, streamed chunks (1 when resident); ``peak_gb`` and ``peak_site``
    (:class:`DevicePeak`); ``stages``, seconds per stage of at least 0.05 s; ``warnings``, the
    fit's warning messages.
    """
    import warnings

    import cupy

    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda._runtime.stages import recording
    from sklearn_gpulda.backends.cuda.sparse import sampler as sparse, streaming

    chunks, ends = [], []
    real_load, real_stream = sparse.CudaSparseSampler.load, streaming.ChunkStream.__init__

    def load(self, corpus):
        real_load(self, corpus)
        if on_load is not None:
            on_load(self)

    def stream(self, cp, chunk_list):
        chunks.append(len(chunk_list))
        real_stream(self, cp, chunk_list)

    def sweep_end(iteration, info):
        cupy.cuda.Device().synchronize()
        ends.append(time.perf_counter())

    settings = dict(n_components=n_components, max_iter=sweeps, random_state=0, device="cuda",
                    max_device_memory=budget)
    settings.update(params)
    sparse.CudaSparseSampler.load, streaming.ChunkStream.__init__ = load, stream
    cupy.get_default_memory_pool().free_all_blocks()
    try:
        lda = GPULatentDirichletAllocation(**settings)
        sync = cupy.cuda.Device().synchronize
        with DevicePeak(site=site) as peak, recording(sync) as log, \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tic = time.perf_counter()
            lda.fit(X, callback=sweep_end)
            wall = time.perf_counter() - tic
    finally:
        sparse.CudaSparseSampler.load, streaming.ChunkStream.__init__ = real_load, real_stream
    steps = np.diff(ends)
    per_sweep = float(np.median(steps[1:] if steps.size > 1 else steps)) if steps.size else 0.0
    return lda, dict(wall_s=wall, sweep_ms=per_sweep * 1e3,
                     setup_s=(ends[0] - tic - per_sweep) if ends else wall,
                     chunks=chunks[0] if chunks else 1, peak_gb=peak.peak / 1e9,
                     peak_site=peak.site,
                     stages={k: round(v, 3) for k, v in log.seconds.items() if v >= 0.05},
                     warnings=[str(w.message) for w in caught])


def coarse_to_fine(n):
    """Indices 0..n-1 ordered to cover the range early: both ends, then ever finer halvings."""
    order = [0] + ([n - 1] if n > 1 else [])
    step = 1 << max(0, (n - 1).bit_length())
    while step >= 1:
        order += [i for i in range(0, n, step) if i not in order]
        step //= 2
    return order


def load_corpora(scale, seed, with_nips=True, extra=()):
    """[(name, TokenCorpus, description)]: NYTimes-shaped, plus NIPS when its files are found,
    plus the corpora named in ``extra`` ('kos', '20news': their training split as
    ``_peer_corpora.load_corpus`` makes it; 'kjv': the bundled chapters) that are found.

    Real corpora are looked for where ``_peer_corpora`` looks (``$SKLEARN_GPULDA_DATA``,
    ``.carry/data``, ``../shared/data``); empty documents are dropped.
    """
    from sklearn_gpulda._input.corpus import tokens
    from sklearn_gpulda.datasets import load_kjv_chapters, load_uci_bow, make_lda_corpus

    out = []
    t = time.perf_counter()
    X = make_lda_corpus(shape="nytimes", scale=scale, n_topics=50, random_state=seed).data
    out.append(
        (
            "nytimes",
            tokens(X),
            f"make_lda_corpus(shape='nytimes', scale={scale}, n_topics=50, random_state={seed}), "
            f"{time.perf_counter() - t:.1f} s",
        )
    )
    from _peer_corpora import CorpusUnavailable, _find, load_corpus

    if with_nips:
        try:
            docword, vocab = _find("nips")
        except CorpusUnavailable as exc:
            print(f"note: NIPS skipped ({exc})")
        else:
            X = load_uci_bow(docword, vocab).data
            X = X[np.flatnonzero(X.getnnz(axis=1))]
            out.append(("nips", tokens(X), f"UCI {docword}"))
    for name in extra:
        if name == "kjv":
            out.append(("kjv", tokens(load_kjv_chapters().data), "the bundled KJV chapters"))
            continue
        try:
            X, _, _ = load_corpus(name, seed=seed)
        except CorpusUnavailable as exc:
            print(f"note: {name} skipped ({exc})")
            continue
        out.append((name, tokens(X), f"{name}, training split of _peer_corpora.load_corpus"))
    return out


def device_name(cp):
    """The name of GPU 0, e.g. 'NVIDIA H200'."""
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def describe_device(cp):
    """Print and return the name of GPU 0, with its SM count and CuPy's version."""
    name = device_name(cp)
    n_sm = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    print(f"device: {name}, {n_sm} SMs; cupy {cp.__version__}")
    return name


def plot_throughput(rows, path, series, ylabel, log_k=False):
    """One panel per corpus: Mtoken/s against K for each ``(key, label)`` of ``series``.

    Rows are dicts with ``corpus``, ``K``, ``n_tokens`` and the series' keys (missing or None
    where not measured). Returns False, with a note, when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:  # matplotlib is optional
        print(f"note: no plot ({type(exc).__name__}: {exc})")
        return False
    corpora = sorted({r["corpus"] for r in rows})
    fig, axes = plt.subplots(1, len(corpora), figsize=(7 * len(corpora), 4.5), squeeze=False)
    for ax, name in zip(axes[0], corpora):
        # Sorted by K: the sweeps measure K in coarse-to-fine order.
        mine = sorted((r for r in rows if r["corpus"] == name), key=lambda r: r["K"])
        for key, label in series:
            pts = [(r["K"], r[key]) for r in mine if r.get(key)]
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, label=label)
        if log_k:
            ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("K (topics)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{name}: {mine[0]['n_tokens'] / 1e6:.1f} M tokens")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_rows(out, stem, keys, rows, device_name, args, corpora):
    """``<stem>.csv`` (the ``keys`` columns) and ``<stem>.json`` (rows, device, arguments,
    corpora) in ``out``, rows sorted by corpus and K. Nothing when ``out`` is empty. Called
    after every measured point, so a run cut short keeps what it measured."""
    if not out:
        return
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    ordered = sorted(rows, key=lambda r: (r["corpus"], r["K"]))
    with open(out_dir / f"{stem}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(ordered)
    info = dict(
        device=device_name, args=vars(args), corpora=[(c, d) for c, _, d in corpora], rows=ordered
    )
    (out_dir / f"{stem}.json").write_text(json.dumps(info, indent=1, default=str))
