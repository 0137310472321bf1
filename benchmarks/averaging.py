"""Held-out quality of one Gibbs sample's topics against the mean of the chain's last samples.

Backs the ``n_averaged_sweeps`` figures of ``doc/user_guide.rst``: trains the NumPy sampler on
KOS documents (UCI bag-of-words, found where the peer benchmark finds it) for ``--sweeps``
sweeps at ``--topics`` topics, scores the last sample and the means of the last 3/4, 1/2 and
1/8 of the sweeps by document completion on ``--test-docs`` held-out documents, and, with
``--sklearn``, scikit-learn's batch variational fit for comparison. Runs on the CPU.

Examples::

    python benchmarks/averaging.py --topics 500 --train-docs 1000 --sweeps 160 --sklearn
    python benchmarks/averaging.py --topics 20 --train-docs 1000 --sweeps 160
    python benchmarks/averaging.py --topics 1000 --train-docs 3130 --sweeps 240
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from _peer_corpora import CorpusUnavailable, _find  # noqa: E402

from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda.backends.numpy import NumpySampler  # noqa: E402
from sklearn_gpulda.datasets import load_uci_bow  # noqa: E402
from sklearn_gpulda.metrics import document_completion  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=500)
    p.add_argument("--train-docs", type=int, default=1000)
    p.add_argument("--test-docs", type=int, default=300)
    p.add_argument("--sweeps", type=int, default=160)
    p.add_argument("--sklearn", action="store_true", help="also fit scikit-learn batch (20 passes)")
    args = p.parse_args(argv)
    try:
        docword, _ = _find("kos")
    except CorpusUnavailable as exc:
        print(f"KOS not found: {exc}")
        return 1
    X = load_uci_bow(docword).data.astype(np.float64).tocsr()
    order = np.random.default_rng(0).permutation(X.shape[0])
    test = X[order[: args.test_docs]]
    train = X[order[args.test_docs : args.test_docs + args.train_docs]]
    k, n = args.topics, args.sweeps
    prior = 1.0 / k
    print(f"KOS: {train.shape[0]} training documents, {int(train.sum()):,} tokens, K = {k}, "
          f"{test.shape[0]} test documents")

    sampler = NumpySampler(k, prior, prior, seed=0)
    sampler.load(tokens(train))
    sampler.init_topics()
    starts = {"last 3/4": n - 3 * n // 4, "last 1/2": n - n // 2, "last 1/8": n - n // 8}
    sums = dict.fromkeys(starts)
    tic = time.perf_counter()
    for i in range(n):
        sampler.sweep(i + 1)
        for name, start in starts.items():
            if i >= start:
                counts = sampler.word_topic_counts()
                sums[name] = counts if sums[name] is None else sums[name] + counts
    print(f"{n} sweeps in {time.perf_counter() - tic:.1f} s")

    def held_out(topics):
        return document_completion(test, topics, prior, n_iter=50, random_state=0).per_token

    print(f"  last sample: {held_out(sampler.word_topic_counts() + prior):.4f} nats/token")
    for name, start in starts.items():
        print(f"  mean of the {name} ({n - start} samples): "
              f"{held_out(sums[name] / (n - start) + prior):.4f}")
    if args.sklearn:
        from sklearn.decomposition import LatentDirichletAllocation

        tic = time.perf_counter()
        sk = LatentDirichletAllocation(n_components=k, learning_method="batch", max_iter=20,
                                       random_state=0).fit(train)
        print(f"  scikit-learn batch, 20 passes: {held_out(sk.components_):.4f} "
              f"({time.perf_counter() - tic:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
