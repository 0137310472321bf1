"""How many Metropolis-Hastings cycles a sweep needs: held-out log-likelihood per sweep of the
NumPy engine's exact rule ('sparse') against its MH rule at 1, 2 and 4 cycles, on one corpus
with fixed priors, every chain from the same initial topics. A CPU probe of sweeps to quality
(issue 37, item 3), not of time: the MH rule here is a one-thread NumPy reference.

    python benchmarks/probes/mh_cycles.py --corpus kos --topics 100 --sweeps 25 50 100 200
"""

import argparse
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _peer_corpora import load_corpus  # noqa: E402

from sklearn_gpulda._input.corpus import tokens  # noqa: E402
from sklearn_gpulda._runtime.device import CPU  # noqa: E402
from sklearn_gpulda.backends.numpy import NumpySampler  # noqa: E402
from sklearn_gpulda.backends.numpy import sampler as _sampler_module  # noqa: E402
from sklearn_gpulda.metrics import document_completion  # noqa: E402


def curve(X, test, k, alpha, beta, rule, cycles, checkpoints, seed=0):
    real = _sampler_module.draw_topics_mh
    if rule == "mh":
        _sampler_module.draw_topics_mh = functools.partial(real, n_cycles=cycles)
    try:
        sampler = NumpySampler(k, alpha, beta, seed, CPU, rule=rule, n_jobs=1)
        sampler.load(tokens(X))
        sampler.init_topics()
        points, done, seconds = [], 0, 0.0
        for target in checkpoints:
            tic = time.perf_counter()
            for iteration in range(done + 1, target + 1):
                sampler.sweep(iteration)
            seconds += time.perf_counter() - tic
            done = target
            phi = sampler.topic_word_components()
            held = document_completion(test, phi, alpha, n_iter=50, random_state=0).per_token
            points.append((target, held, seconds))
    finally:
        _sampler_module.draw_topics_mh = real
    return points


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default="kos")
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--sweeps", type=int, nargs="+", default=[25, 50, 100, 200])
    p.add_argument("--cycles", type=int, nargs="+", default=[1, 2, 4])
    args = p.parse_args(argv)
    X, test, _ = load_corpus(args.corpus, test_fraction=0.1)
    k = args.topics
    alpha, beta = 50.0 / k, 0.01
    print(f"{args.corpus}: {X.shape[0]:,} documents, {int(X.sum()):,} tokens; K = {k}, "
          f"alpha = {alpha:g}, beta = {beta}; held-out per token by document completion")
    runs = [("sparse", 0)] + [("mh", c) for c in args.cycles]
    print("| rule | " + " | ".join(f"sweep {s}" for s in args.sweeps) + " | s/sweep (1 thread) |")
    print("|---|" + "---:|" * (len(args.sweeps) + 1))
    for rule, cycles in runs:
        points = curve(X, test, k, alpha, beta, rule, cycles, args.sweeps)
        name = rule if rule == "sparse" else f"mh, {cycles} cycle(s)"
        cells = " | ".join(f"{held:.4f}" for _, held, _ in points)
        print(f"| {name} | {cells} | {points[-1][2] / args.sweeps[-1]:.3f} |", flush=True)


if __name__ == "__main__":
    main()
