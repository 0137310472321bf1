"""What ``algorithm='auto'`` picks beyond the registry's order: the dense GPU engine where it
was measured to win.

The rule is a table of conditions on the fit (:class:`FitShape`), each of which must hold for
'auto' to take 'dense'; anywhere else 'auto' reads the registry (:func:`.choose_backend`). It
reads no corpus and no device, so it is tested as arithmetic, and the threshold is one named
constant to change after a new measurement.
"""

from dataclasses import dataclass

#: Largest K at which 'auto' takes the dense engine for a batch fit on one GPU. Whole sweeps
#: measured on an H100 (``benchmarks/bench_algorithms.py``, doc/performance.md, dense section),
#: Mtoken/s dense against sparse: the NYTimes shape at a quarter (24.9 M tokens), K = 16 / 32 /
#: 64: 10,721 / 9,918 / 7,375 against 2,880 / 2,891 / 2,582; NIPS: 4,492 / 3,853 / 2,887
#: against 2,376 / 2,345 / 2,182. The gap narrows with K (2.9x to 1.3x on NIPS at 64); K = 8,
#: 128 and 256 and the KOS, 20 Newsgroups and KJV corpora are not measured yet (TODO: stage
#: bench-algorithms with ALGO_CORPORA="kos 20news kjv" and ALGO_TOPICS="8 128 256", then move
#: this bound to the last K where dense wins on every corpus).
AUTO_DENSE_MAX_TOPICS = 64


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
    scalar_topic_word_prior : bool
        False for a matrix ``topic_word_prior`` (only the CPU engine samples with one).
    word_topic_storage : {'auto', 'dense', 'hybrid'}
    """

    n_topics: int
    device_kind: str
    n_gpus: int = 1
    method: str = "batch"
    scalar_topic_word_prior: bool = True
    word_topic_storage: str = "auto"


#: Each condition the dense engine needs to be 'auto''s pick, with why (for the docs and tests).
DENSE_CONDITIONS = (
    ("on a GPU", lambda f: f.device_kind == "cuda",
     "on the CPU both draw rules cost the same and 'auto' keeps the reference (sparse) rule"),
    ("one GPU", lambda f: f.n_gpus <= 1, "only the sparse chain spreads over several GPUs"),
    ("batch learning", lambda f: f.method == "batch",
     "measured on whole batch sweeps only; mini-batches are short and stay on the sparse chain"),
    ("small K", lambda f: 1 <= f.n_topics <= AUTO_DENSE_MAX_TOPICS,
     "dense wins only where a token's K terms are few (AUTO_DENSE_MAX_TOPICS)"),
    ("scalar topic_word_prior", lambda f: f.scalar_topic_word_prior,
     "a matrix prior is the CPU engine's"),
    ("dense word-topic storage", lambda f: f.word_topic_storage in ("auto", "dense"),
     "'hybrid' storage is the sparse engine's"),
)


def auto_picks_dense(shape):
    """Whether ``algorithm='auto'`` takes the dense engine for a fit of this
    :class:`FitShape`: every one of :data:`DENSE_CONDITIONS` holds."""
    return all(test(shape) for _, test, _ in DENSE_CONDITIONS)


def failed_conditions(shape):
    """Names of the :data:`DENSE_CONDITIONS` this fit does not meet (empty: 'auto' is dense)."""
    return [name for name, test, _ in DENSE_CONDITIONS if not test(shape)]
