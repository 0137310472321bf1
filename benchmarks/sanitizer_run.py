"""A small run of every CUDA kernel the samplers launch, checked against the NumPy samplers.

This is what ``tools/gpu_stages.sh sanitizer`` runs under compute-sanitizer memcheck and
racecheck; it also runs on its own, and exits 1 on a wrong answer, so that a kernel that computes
garbage fails even where the tool reports nothing.

1. Samplers. A small ragged corpus -- empty documents, lengths that leave a warp partly idle, one
   document longer than ``kShortDocMax`` tokens -- with integer counts and with non-integer
   counts (weighted tokens, 8-byte A entries). The sparse CUDA sampler at K = 5, 32, 33, 70 and
   2,100 (above ``kHistMaxTopics``: the bitmap and long-document A rebuilds) and the dense one with
   each kernel variant at K = 5, 32, 33, 70, and the mini-batched one at K = 7 and 40 with batches
   of 300 tokens, go through the protocol side by side with
   the NumPy sampler of the same rule, from the same seed and an asymmetric prior: initial topics
   and counts (must be equal), two sweeps, new priors and a third, fixed topic-word rows and a
   fourth (each sweep's draws must agree on at least 99% of the tokens: float rounding may move
   a draw across a boundary; after each the CUDA chain takes the oracle's topics through
   ``set_topics`` so the comparison stays in step), the log-likelihood (relative 1e-4), both
   histograms and the averaged counts.
2. The estimator, on the integer corpus: a batch fit with each algorithm on the GPU with learned
   priors, evaluation and averaging, then ``transform`` and ``score`` (the fold-in kernel); an
   online fit and a ``partial_fit``.

``--device cpu`` runs the same sequence with the NumPy backends on both sides (one dense case per
K, as they have no kernel variants): a check of this script on a machine without a GPU, not of
any kernel.

Usage::

    python benchmarks/sanitizer_run.py
    compute-sanitizer --tool racecheck --error-exitcode 9 python benchmarks/sanitizer_run.py
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda._runtime.device import CPU, resolve_device  # noqa: E402
from sklearn_gpulda.backends import choose_backend  # noqa: E402

SPARSE_TOPICS = (5, 32, 33, 70, 2100)
DENSE_TOPICS = (5, 32, 33, 70)
VARIANTS = ("butterfly", "transpose", "plain")
#: Share of a sweep's draws that must equal the oracle's.
AGREEMENT = 0.99
BETA = 0.01
SEED = 7


def ragged_counts(weighted, n_docs=40, n_words=90, seed=0):
    """Counts of a small corpus whose shape reaches every branch of the layouts."""
    from sklearn_gpulda.backends.cuda.constants import SHORT_DOC_MAX

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 60, size=n_docs)
    lengths[[3, 17]] = 0
    # A long document (its own A rebuild path), still long once weighting thins its tokens.
    lengths[25] = 2 * SHORT_DOC_MAX + 77
    doc = np.repeat(np.arange(n_docs), lengths)
    # Zipf-like words, so that a few words hold many tokens and most hold few.
    word = np.minimum(rng.zipf(1.3, size=doc.size) - 1, n_words - 1)
    X = sp.csr_matrix((np.ones(doc.size), (doc, word)), shape=(n_docs, n_words))
    X.sum_duplicates()
    if weighted:
        X.data = X.data * 0.75  # 0.75, 1.5, 2.25, ...: some counts are not integers
    return X


class Checks:
    """Failed checks, collected so that one run reports all of them."""

    def __init__(self):
        self.failed = []

    def expect(self, ok, what):
        if not ok:
            self.failed.append(what)
            print(f"    FAILED: {what}", flush=True)


def agreement(a, b):
    return float(np.mean(a == b)) if a.size else 1.0


def sorted_pairs(*arrays):
    """Histogram rows sorted the same way, whatever order a backend returned them in."""
    order = np.lexsort(arrays[::-1])
    return [np.asarray(a)[order] for a in arrays]


def compare_histograms(cpu, gpu, checks, label):
    ref, got = cpu.doc_topic_histogram(), gpu.doc_topic_histogram()
    checks.expect(all(np.allclose(r, g) for r, g in zip(sorted_pairs(*ref), sorted_pairs(*got))),
                  f"{label}: document-topic histogram")
    ref, got = cpu.word_topic_histogram(), gpu.word_topic_histogram()
    checks.expect(all(np.allclose(r, g) for r, g in zip(sorted_pairs(*ref[:2]),
                                                        sorted_pairs(*got[:2])))
                  and np.allclose(ref[2], got[2]), f"{label}: word-topic histogram")


def check_sampler(cuda, cpu, corpus, checks, label):
    """Run ``cuda`` and its oracle ``cpu`` side by side through the protocol on ``corpus``."""
    for s in (cpu, cuda):
        s.load(corpus)
        s.init_topics()
    checks.expect(np.array_equal(cpu.topics(), cuda.topics()), f"{label}: initial topics")
    checks.expect(np.allclose(cpu.word_topic_counts(), cuda.word_topic_counts(), rtol=1e-5),
                  f"{label}: initial word-topic counts")

    def step(iteration, what):
        for s in (cpu, cuda):
            s.sweep(iteration)
        share = agreement(cpu.topics(), cuda.topics())
        checks.expect(share >= AGREEMENT, f"{label}: {what}: {share:.4f} of draws agree")
        cuda.set_topics(cpu.topics())  # back in step for the next comparison

    step(1, "sweep 1")
    cuda.accumulate_word_topic()
    step(2, "sweep 2")
    cuda.accumulate_word_topic()
    ll_cpu, ll_gpu = cpu.log_likelihood(), cuda.log_likelihood()
    checks.expect(abs(ll_gpu - ll_cpu) <= 1e-4 * abs(ll_cpu),
                  f"{label}: log-likelihood {ll_gpu} against {ll_cpu}")
    if corpus.weight is None:  # exact counts: the histograms must match value for value
        compare_histograms(cpu, cuda, checks, label)
    else:  # weighted counts are float32 sums: only run the kernels
        cuda.doc_topic_histogram()
        cuda.word_topic_histogram()
    mean = cuda.mean_word_topic()
    checks.expect(mean.shape == cpu.word_topic_counts().shape and np.all(np.isfinite(mean)),
                  f"{label}: averaged word-topic counts")
    for s in (cpu, cuda):
        s.set_priors(alpha=s.alpha[::-1].copy(), beta=2 * BETA)
    step(3, "sweep 3 after new priors")
    components = cpu.word_topic_counts() + BETA
    for s in (cpu, cuda):
        s.fix_topic_word(components)
    step(4, "sweep 4 with fixed topic-word rows")
    checks.expect(np.allclose(cpu.doc_topic_counts(), cuda.doc_topic_counts(), rtol=1e-5),
                  f"{label}: document-topic counts")
    for s in (cpu, cuda):
        s.release()


def run_samplers(checks, device):
    # The NumPy backend has one dense rule; the CUDA backend has a kernel per variant.
    variants = [dict(variant=v) for v in VARIANTS] if device.kind == "cuda" else [{}]
    for weighted in (False, True):
        corpus = tokens(ragged_counts(weighted))
        kind = "weighted" if weighted else "integer"
        print(f"  {kind} corpus: {corpus.n_docs} documents, {corpus.n_tokens} tokens", flush=True)
        cases = [("sparse", k, {}) for k in SPARSE_TOPICS]
        cases += [("dense", k, options) for k in DENSE_TOPICS for options in variants]
        # Small batches, so a sweep runs several (documents of one batch, B moved between them).
        cases += [("minibatch", k, {"batch_tokens": 300}) for k in (7, 40)]
        for algorithm, k, options in cases:
            alpha = 0.05 + 0.1 * (np.arange(k) % 3)  # asymmetric: each topic's own prior
            tic = time.perf_counter()
            cuda = choose_backend(algorithm, k, device).make(k, alpha, BETA, SEED, device,
                                                             **options)
            # The same algorithm's CPU backend (the kernel variant is a CUDA option only).
            cpu = choose_backend(algorithm, k, CPU).make(
                k, alpha, BETA, SEED, CPU, **{o: v for o, v in options.items() if o != "variant"})
            label = f"{algorithm} {options.get('variant', '')} K={k} {kind}".replace("  ", " ")
            check_sampler(cuda, cpu, corpus, checks, label)
            print(f"    {label}: {time.perf_counter() - tic:.1f} s", flush=True)


def run_estimator(checks, device):
    X = ragged_counts(False)
    for algorithm in ("sparse", "dense", "minibatch"):
        tic = time.perf_counter()
        lda = GPULatentDirichletAllocation(
            n_components=8, max_iter=6, random_state=0, device=str(device), algorithm=algorithm,
            doc_topic_prior="auto", topic_word_prior="auto", prior_update_every=2,
            n_averaged_sweeps=2, evaluate_every=2,
        ).fit(X)
        theta = lda.transform(X)
        score = lda.score(X)
        rows = theta[np.asarray(X.sum(axis=1)).ravel() > 0]
        checks.expect(np.allclose(rows.sum(axis=1), 1.0) and np.isfinite(score),
                      f"estimator {algorithm}: transform rows sum to 1 and the score is finite")
        print(f"    fit, transform, score ({algorithm}): {time.perf_counter() - tic:.1f} s",
              flush=True)
    tic = time.perf_counter()
    online = GPULatentDirichletAllocation(n_components=8, learning_method="online", batch_size=16,
                                          max_iter=2, random_state=0,
                                          device=str(device)).fit(X)
    online.partial_fit(X[:10])
    checks.expect(np.all(np.isfinite(online.components_)), "online: finite components")
    print(f"    online fit and partial_fit: {time.perf_counter() - tic:.1f} s", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-estimator", action="store_true", help="the samplers only")
    ap.add_argument("--device", default="cuda:0",
                    help="cuda:N (default cuda:0), or cpu to check this script without a GPU")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    checks = Checks()
    tic = time.perf_counter()
    print(f"samplers on {device} against NumpySampler:", flush=True)
    run_samplers(checks, device)
    if not args.no_estimator:
        print(f"estimator on {device}:", flush=True)
        run_estimator(checks, device)
    if device.kind == "cuda":
        import cupy

        cupy.cuda.Device(device.index).synchronize()  # report a late launch error here
    verdict = f"FAILED ({len(checks.failed)} checks)" if checks.failed else "ok"
    print(f"small run: {verdict} in {time.perf_counter() - tic:.1f} s")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
