"""Save, or check against saved ones, the models a set of fits gives, to prove that a change of
code leaves every engine's model the same bit for bit.

    python3 tools/model_fingerprints.py save DIR [--device cpu|cuda]
    python3 tools/model_fingerprints.py check DIR [--device cpu|cuda]

``save`` fits each configuration on the bundled King James Bible chapters and writes one ``.npz``
per fit (fitted arrays, scalars and the transform of the first documents); ``check`` fits them
again and exits 1, naming each difference, where any array or scalar differs at all.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters  # noqa: E402

# Short fits that still pass through prior learning (every 5 sweeps) and averaging (the last
# half): each configuration names the settings it adds to these.
BASE = dict(n_components=12, max_iter=16, prior_update_every=5, random_state=7)

CONFIGS = {
    "sparse": dict(algorithm="sparse"),
    "sparse-fixed-priors": dict(algorithm="sparse", doc_topic_prior=0.1,
                                topic_word_prior=0.01, n_averaged_sweeps=0),
    "sparse-two-jobs": dict(algorithm="sparse", n_jobs=2),
    "sparse-evaluated": dict(algorithm="sparse", evaluate_every=4, perp_tol=1e-9),
    "dense": dict(algorithm="dense"),
    "minibatch": dict(algorithm="minibatch", minibatch_tokens=20000),
    # Online learning and partial_fit name their engine too, so that a change of what
    # algorithm='auto' picks never changes a fingerprint.
    "online": dict(algorithm="sparse", learning_method="online", max_iter=3, batch_size=256),
    "partial-fit": dict(algorithm="sparse", max_iter=None, batch_size=200),
}

GPU_CONFIGS = {
    "sparse-hybrid": dict(algorithm="sparse", word_topic_storage="hybrid"),
    # 24 MB beside what the process holds (the budget is the whole process's): the corpus
    # streams in chunks, and the model is the resident one's.
    "sparse-streamed": dict(algorithm="sparse", max_device_memory=("held+", 24_000_000)),
}


def _budget(value):
    """A ``max_device_memory`` of ``('held+', n)``: what the process holds on GPU 0 now (for
    the sparse engine) plus n bytes."""
    if not (isinstance(value, tuple) and value[0] == "held+"):
        return value
    import gc

    import cupy

    from sklearn_gpulda.backends.cuda.process_memory import held_bytes
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    gc.collect()
    with cupy.cuda.Device(0):
        return held_bytes(cupy, CudaSparseSampler.budget_kernels) + value[1]


def fingerprint(name, settings, device, X):
    params = {**BASE, **settings, "device": device}
    if "max_device_memory" in params:
        params["max_device_memory"] = _budget(params["max_device_memory"])
    lda = GPULatentDirichletAllocation(**params)
    if name == "partial-fit":
        lda.set_params(total_samples=X.shape[0])
        for start in range(0, 900, 300):
            lda.partial_fit(X[start:start + 300])
    else:
        lda.fit(X)
    return {
        "components": np.asarray(lda.components_),
        "doc_topic_prior": np.asarray(lda.doc_topic_prior_, dtype=np.float64),
        "topic_word_prior": np.float64(lda.topic_word_prior_),
        "bound": np.float64(lda.bound_),
        "n_iter": np.int64(lda.n_iter_),
        "n_batch_iter": np.int64(lda.n_batch_iter_),
        "transform": np.asarray(lda.transform(X[:40])),
    }


def configs_for(device):
    if "," in device:
        # Several GPUs of one host train the sparse engine's chain only.
        return {name: CONFIGS[name] for name in ("sparse", "sparse-fixed-priors")}
    out = dict(CONFIGS)
    if device != "cpu":
        out.update(GPU_CONFIGS)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["save", "check"])
    parser.add_argument("folder")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", nargs="*", help="configurations to run (default: all)")
    args = parser.parse_args(argv)
    X = load_kjv_chapters().data[:900]
    folder = os.path.join(args.folder, args.device.replace(":", "").replace(",", "-"))
    os.makedirs(folder, exist_ok=True)
    failed = []
    for name, settings in configs_for(args.device).items():
        if args.only and name not in args.only:
            continue
        got = fingerprint(name, settings, args.device, X)
        path = os.path.join(folder, f"{name}.npz")
        if args.mode == "save":
            np.savez(path, **got)
            print(f"saved {name}: bound {float(got['bound']):.6f}")
            continue
        if not os.path.exists(path):
            print(f"{name}: no saved model at {path}")
            failed.append(name)
            continue
        saved = np.load(path)
        diffs = [k for k in got if not np.array_equal(saved[k], got[k])]
        print(f"{name}: {'same' if not diffs else 'DIFFERS in ' + ', '.join(diffs)}")
        failed += [name] if diffs else []
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
