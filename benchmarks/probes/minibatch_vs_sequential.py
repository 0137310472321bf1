#!/usr/bin/env python3
"""Training log-likelihood per sweep of three kinds of chain on the same corpus: a plain
sequential collapsed Gibbs sampler (one token at a time, a Python loop), ESCA ('sparse', every
token of a sweep drawn from the counts at its start) and mini-batched sweeps ('minibatch') of
one document, 5,000 tokens and the whole corpus per batch.

A mini-batched chain sits between the two others: one document per batch is close to the
sequential sampler, one batch of everything is ESCA's distribution. Comparing how far each gets
in the same sweeps is the measurement behind doc/performance.md's explanation of why 'sparse'
reaches a converged model sooner than 'minibatch' ("Mini-batched sweeps"). NumPy samplers only,
on the first ``--docs`` chapters of the bundled KJV corpus, fixed priors; the log-likelihood is
printed after sweep 10, half of ``--sweeps`` and ``--sweeps``.

Usage::

    python benchmarks/probes/minibatch_vs_sequential.py [--docs 120] [--topics 10] [--sweeps 60]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout

from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda.backends.numpy import NumpySampler  # noqa: E402
from sklearn_gpulda.backends.numpy.minibatch import NumpyMinibatchSampler  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters  # noqa: E402


def per_token_loglik(corpus, z, k, alpha, beta):
    """Mean log p(w) under theta = (A + alpha)/(N + K alpha), phi = (B + beta)/(n + V beta)."""
    a = np.zeros((corpus.n_docs, k))
    np.add.at(a, (corpus.doc, z), 1)
    b = np.zeros((corpus.n_words, k))
    np.add.at(b, (corpus.word, z), 1)
    phi = (b + beta) / (b.sum(axis=0) + corpus.n_words * beta)
    theta = (a + alpha) / (a.sum(axis=1, keepdims=True) + k * alpha)
    return float(np.mean(np.log((theta[corpus.doc] * phi[corpus.word]).sum(axis=1))))


def sequential_gibbs(corpus, k, alpha, beta, sweeps, marks, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, k, corpus.n_tokens)
    v_beta = corpus.n_words * beta
    a = np.zeros((corpus.n_docs, k))
    np.add.at(a, (corpus.doc, z), 1)
    b = np.zeros((corpus.n_words, k))
    np.add.at(b, (corpus.word, z), 1)
    n = b.sum(axis=0)
    out = []
    for it in range(1, sweeps + 1):
        u = rng.random(corpus.n_tokens)
        for i in range(corpus.n_tokens):
            d, v, t = corpus.doc[i], corpus.word[i], z[i]
            a[d, t] -= 1
            b[v, t] -= 1
            n[t] -= 1
            c = np.cumsum((a[d] + alpha) * (b[v] + beta) / (n + v_beta))
            t = int(np.searchsorted(c, u[i] * c[-1], side="right"))
            z[i] = t
            a[d, t] += 1
            b[v, t] += 1
            n[t] += 1
        if it in marks:
            out.append(per_token_loglik(corpus, z, k, alpha, beta))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=120)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--sweeps", type=int, default=60)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--beta", type=float, default=0.01)
    args = parser.parse_args()
    corpus = tokens(load_kjv_chapters().data[: args.docs])
    k, alpha, beta = args.topics, args.alpha, args.beta
    marks = sorted({10, args.sweeps // 2, args.sweeps})
    print(f"KJV chapters 0:{args.docs}: {corpus.n_tokens} tokens, K = {k}, alpha = {alpha}, "
          f"beta = {beta}; per-token training log-likelihood after sweeps {marks}")
    tic = time.perf_counter()
    print(f"  {'sequential Gibbs':>22}: " + "  ".join(
        f"{x:.4f}" for x in sequential_gibbs(corpus, k, alpha, beta, args.sweeps, marks))
        + f"   ({time.perf_counter() - tic:.0f} s)")
    chains = [("ESCA (sparse)", NumpySampler(k, alpha, beta, 7))]
    for bt in (1, 5000, 10**9):
        label = "minibatch, 1 document" if bt == 1 else f"minibatch, {bt} tokens"
        chains.append((label, NumpyMinibatchSampler(k, alpha, beta, 7, batch_tokens=bt)))
    for label, sampler in chains:
        sampler.load(corpus)
        sampler.init_topics()
        out = []
        for it in range(1, args.sweeps + 1):
            sampler.sweep(it)
            if it in marks:
                out.append(per_token_loglik(corpus, sampler.topics(), k, alpha, beta))
        print(f"  {label:>22}: " + "  ".join(f"{x:.4f}" for x in out))


if __name__ == "__main__":
    main()
