"""How many draws ezLDA's three-branch sampling would spare on a real corpus (issue 13).

ezLDA (Sec. III, Eq. 6-10) singles out each word's most popular topic K0 as a third branch:
with ``M = Bhat'[v, K0] (A'[d, K0] + alpha_K0)`` first in the order of the draw, a token whose
uniform falls below ``M / (M + S_est + Q')`` takes K0 without the pass over its document's row
of A, because ``S_est`` bounds the document side ``S'`` (the row without K0) from above:
``S_est = a2 b2 + a3 (N'_d - b1 - b2)`` with ``a1 >= a2 >= a3`` the word's three largest Bhat'
values and ``b1, b2`` the document's counts at the first two (Eq. 10 with g = 2). The rest of
the draw is the two-branch one. Primes mean the token's own count taken out, as this project's
sampler does.

This script runs this project's NumPy sampler (the oracle of the CUDA one, fixed priors) on a
corpus and, after the sweeps named, computes for every token the probability that its draw
would be spared, ``M / (M + S_est + Q')``, and the probability that the exact draw lands on K0,
``M / (M + S' + Q')``, and prints their means over the tokens. Nothing here changes the sampler.

Usage::

    python tools/three_branch_skip.py --data ../shared/data/nips_tmt/docword.nips_tmt.txt.gz \
        --topics 100 1000 --at 50 200
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda.backends.numpy.sampler import NumpySampler  # noqa: E402
from sklearn_gpulda.datasets import load_uci_bow  # noqa: E402


def skip_rates(sampler, corpus, alpha, beta):
    """Mean over tokens of the spared-draw probability and of the exact K0 probability."""
    z = sampler.topics().astype(np.int64)
    doc = np.asarray(corpus.doc, dtype=np.int64)
    word = np.asarray(corpus.word, dtype=np.int64)
    a = sampler.doc_topic_counts()               # (D, K)
    b = sampler.word_topic_counts().T.copy()     # (V, K)
    n = b.sum(axis=0)
    k = a.shape[1]
    v = b.shape[0]
    denom = n + v * beta
    bhat = (b + beta) / denom                    # (V, K), with every token in
    # The word's four largest Bhat (a token's own count only lowers its own topic, so the
    # three largest Bhat' of any token are among them and its own topic).
    top4 = np.argsort(-bhat, axis=1)[:, :4]
    # S_full = sum_k A[d, k] Bhat[w, k] for each token's (d, w), a block of documents at a time
    # (tokens are in document order).
    s_full = np.empty(len(doc))
    doc_ptr = np.searchsorted(doc, np.arange(a.shape[0] + 1))
    step = max(1, 20_000_000 // max(v, 1))
    for lo in range(0, a.shape[0], step):
        hi = min(lo + step, a.shape[0])
        block = a[lo:hi] @ bhat.T                # (docs, V)
        t0, t1 = doc_ptr[lo], doc_ptr[hi]
        s_full[t0:t1] = block[doc[t0:t1] - lo, word[t0:t1]]
    q_full = (bhat @ alpha)[word]
    own_a = a[doc, z] - 1.0
    own_bhat = (b[word, z] - 1.0 + beta) / (n[z] - 1.0 + v * beta)
    # Bhat' and A' of every token at its candidates (top four of its word, and its own topic).
    cand = np.concatenate([top4[word], z[:, None]], axis=1)            # (T, 5)
    vals = bhat[word[:, None], cand]
    vals = np.where(cand == z[:, None], own_bhat[:, None], vals)
    counts = a[doc[:, None], cand] - (cand == z[:, None])
    order = np.argsort(-vals, axis=1, kind="stable")
    vals = np.take_along_axis(vals, order, axis=1)
    counts = np.take_along_axis(counts, order, axis=1)
    cand = np.take_along_axis(cand, order, axis=1)
    # The own topic can appear twice (in the top four and as itself): drop the second copy.
    dup = np.zeros_like(cand, dtype=bool)
    for j in range(1, 5):
        dup[:, j] = (cand[:, :j] == cand[:, j:j + 1]).any(axis=1)
    vals = np.where(dup, -1.0, vals)
    order = np.argsort(-vals, axis=1, kind="stable")
    vals = np.take_along_axis(vals, order, axis=1)
    counts = np.take_along_axis(counts, order, axis=1)
    cand = np.take_along_axis(cand, order, axis=1)
    a1, a2, a3 = vals[:, 0], vals[:, 1], vals[:, 2]
    b1, b2 = counts[:, 0], counts[:, 1]
    k0 = cand[:, 0]
    n_d = a.sum(axis=1)[doc] - 1.0
    m = a1 * (b1 + alpha[k0])
    s_est = a2 * b2 + a3 * np.maximum(n_d - b1 - b2, 0.0)
    # Exact S' and Q' without K0, the own count out: from the full sums, corrected at the own
    # topic and with K0's terms removed.
    s_prime = (s_full - a[doc, z] * bhat[word, z] + own_a * own_bhat) - b1 * a1
    q_prime = (q_full - alpha[z] * bhat[word, z] + alpha[z] * own_bhat) - alpha[k0] * a1
    spared = m / (m + s_est + q_prime)
    exact = m / (m + np.maximum(s_prime, 0.0) + q_prime)
    assert np.all(s_est >= s_prime - 1e-9 * np.abs(s_prime).max()), "S_est must bound S'"
    return float(spared.mean()), float(exact.mean()), k


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="a UCI docword file")
    ap.add_argument("--topics", type=int, nargs="+", default=[100])
    ap.add_argument("--at", type=int, nargs="+", default=[50, 200], help="sweeps to look after")
    ap.add_argument("--alpha", type=float, default=None, help="per topic (default 1 / K)")
    ap.add_argument("--beta", type=float, default=0.01)
    args = ap.parse_args(argv)
    X = sp.csr_matrix(load_uci_bow(args.data).data)
    corpus = tokens(X)
    print(f"{Path(args.data).name}: D={X.shape[0]:,} V={X.shape[1]:,} tokens={corpus.n_tokens:,}")
    for k in args.topics:
        alpha_value = args.alpha if args.alpha is not None else 1.0 / k
        alpha = np.full(k, alpha_value)
        sampler = NumpySampler(k, alpha_value, args.beta, 0)
        sampler.load(corpus)
        sampler.init_topics()
        done = 0
        for at in sorted(args.at):
            while done < at:
                done += 1
                sampler.sweep(done)
            spared, exact, _ = skip_rates(sampler, corpus, alpha, args.beta)
            print(f"K={k} alpha={alpha_value:g} after {at} sweeps: spared {spared:.1%} of the "
                  f"document-side passes (exact draws landing on the top topic: {exact:.1%})",
                  flush=True)


if __name__ == "__main__":
    main()
