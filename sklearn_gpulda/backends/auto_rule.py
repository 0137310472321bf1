"""What ``algorithm='auto'`` picks beyond the registry's order: the dense GPU engine where it
was measured to win.

The rule is a table of conditions on the fit (:class:`FitShape`), each of which must hold for
'auto' to take 'dense'; anywhere else 'auto' reads the registry (:func:`.choose_backend`). It
reads no device, so it is tested as arithmetic, and the measured bounds are one named table to
change after a new measurement. Whether the dense chain fits the GPU is known only once the
corpus is tokenised: the estimator asks the chain then, and falls back to the sparse engine.
"""

from dataclasses import dataclass

#: ``(fewest tokens, largest K)``: 'auto' takes the dense engine for a corpus of at least that
#: many tokens at K up to that bound. First measured as whole sweeps
#: (``benchmarks/bench_algorithms.py``, H200, 2026-11-27): on the NYTimes shape at a quarter
#: (24.9 M tokens) dense 3.6, 3.9, 3.4, 3.1 and 1.7 times as fast at K = 8, 16, 32, 64 and 128,
#: slower at 256; on NIPS (2.3 M tokens) 1.4-2.6 times at K = 8 to 64; on 20 Newsgroups, KOS
#: and the KJV chapters no faster, while a thread per short document left a small corpus's GPU
#: idle. With warps for every document, each group sized by its own document (2026-11-28,
#: ``benchmarks/probes/dense_small_docs.py``, default fits through the public API, H200,
#: ``doc/performance.md``, "Warps for every document"), dense is 2.1-3.3 times as fast as
#: sparse on 20 Newsgroups (1.4 M tokens) and 1.8-2.4 on NIPS at K = 16 to 64, 1.5-1.7 on both
#: at K = 96 and 128 and 1.0-1.2 at 192 and 256: hence K <= 128 from 1 M tokens. Once prior
#: updates stopped waiting on the host (resident fixed points; ``bench_users.py``, H200,
#: 2026-11-28, ``doc/performance.md``, "Prior updates on the device, waited on once"), smaller
#: corpora gained as well: dense 1.25-1.8 times as fast as sparse on the KJV chapters' first
#: 400 and 800 chapters (133 k and 210 k tokens), all of them (308 k) and KOS (420 k) at K = 20,
#: 1.8-2.4 times at K = 64 and 128; 1.1 times on the first 200 (67 k tokens); and 0.52 times
#: on the first 40 (11.6 k tokens), where the sparse engine replays CUDA graphs. Hence from
#: 2^17 tokens, the size below which the sparse engine replays graphs
#: (``sweep_graph.AUTO_MAX_TOKENS``).
AUTO_DENSE_BOUNDS = ((1 << 17, 128),)


def dense_topic_bound(n_tokens):
    """The largest K at which 'auto' takes the dense engine for ``n_tokens`` tokens (0: none)."""
    return max((k for least, k in AUTO_DENSE_BOUNDS if n_tokens >= least), default=0)


@dataclass(frozen=True)
class FitShape:
    """What the rule reads of a fit.

    Attributes
    ----------
    n_topics : int
    device_kind : {'cpu', 'cuda'}
    n_gpus : int
        GPUs the fit is spread over (0 on the CPU).
    method : {'batch', 'online', 'partial'}
        A batch fit, online learning's fit, or the first ``partial_fit``.
    word_topic_storage : {'auto', 'dense', 'hybrid'}
    n_tokens : float
        The corpus's tokens (its counts' sum); 0 where unknown.
    memory_budget : bool
        ``max_device_memory`` is set.
    row_blocks : bool
        The corpus comes as a list of row blocks.
    """

    n_topics: int
    device_kind: str
    n_gpus: int = 1
    method: str = "batch"
    word_topic_storage: str = "auto"
    n_tokens: float = 0.0
    memory_budget: bool = False
    row_blocks: bool = False


#: Each condition the dense engine needs to be 'auto''s pick, with why (for the docs and tests).
DENSE_CONDITIONS = (
    ("on a GPU", lambda f: f.device_kind == "cuda",
     "on the CPU both draw rules cost the same and 'auto' keeps the reference (sparse) rule"),
    ("one GPU", lambda f: f.n_gpus <= 1, "only the sparse chain spreads over several GPUs"),
    ("batch learning", lambda f: f.method == "batch",
     "measured on whole batch sweeps only; mini-batches are short and stay on the sparse chain"),
    ("small K for the corpus", lambda f: 1 <= f.n_topics <= dense_topic_bound(f.n_tokens),
     "dense wins only where a token's K terms are few and the corpus fills the GPU "
     "(AUTO_DENSE_BOUNDS)"),
    ("dense word-topic storage", lambda f: f.word_topic_storage in ("auto", "dense"),
     "'hybrid' storage is the sparse engine's"),
    ("no memory budget", lambda f: not f.memory_budget,
     "a budget asks for the sparse engine's streaming, which the dense engine does not do"),
    ("one matrix", lambda f: not f.row_blocks,
     "row blocks are read by the sparse engine, held or streamed"),
)


def auto_picks_dense(shape):
    """Whether ``algorithm='auto'`` takes the dense engine for a fit of this
    :class:`FitShape`: every one of :data:`DENSE_CONDITIONS` holds."""
    return all(test(shape) for _, test, _ in DENSE_CONDITIONS)


def failed_conditions(shape):
    """Names of the :data:`DENSE_CONDITIONS` this fit does not meet (empty: 'auto' is dense)."""
    return [name for name, test, _ in DENSE_CONDITIONS if not test(shape)]
