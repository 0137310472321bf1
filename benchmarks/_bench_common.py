"""Pieces shared by the GPU sweep benchmarks (bench_dense.py, bench_algorithms.py)."""

import csv
import json
import time
from pathlib import Path

import numpy as np

#: The dense sampling kernels of cuda/sample_dense.cu.
VARIANTS = ("butterfly", "transpose", "plain")


def coarse_to_fine(n):
    """Indices 0..n-1 ordered to cover the range early: both ends, then ever finer halvings."""
    order = [0] + ([n - 1] if n > 1 else [])
    step = 1 << max(0, (n - 1).bit_length())
    while step >= 1:
        order += [i for i in range(0, n, step) if i not in order]
        step //= 2
    return order


def load_corpora(scale, seed, with_nips=True):
    """[(name, TokenCorpus, description)]: NYTimes-shaped, plus NIPS when its files are found.

    NIPS is looked for where ``_peer_corpora`` looks (``$SKLEARN_GPULDA_DATA``, ``.carry/data``,
    ``../shared/data``); empty documents are dropped.
    """
    from sklearn_gpulda._corpus import tokens_from_counts
    from sklearn_gpulda.datasets import load_uci_bow, make_lda_corpus

    out = []
    t = time.perf_counter()
    X = make_lda_corpus(shape="nytimes", scale=scale, n_topics=50, random_state=seed).data
    out.append(
        (
            "nytimes",
            tokens_from_counts(X),
            f"make_lda_corpus(shape='nytimes', scale={scale}, n_topics=50, random_state={seed}), "
            f"{time.perf_counter() - t:.1f} s",
        )
    )
    if with_nips:
        from _peer_corpora import CorpusUnavailable, _find

        try:
            docword, vocab = _find("nips")
        except CorpusUnavailable as exc:
            print(f"note: NIPS skipped ({exc})")
        else:
            X = load_uci_bow(docword, vocab).data
            X = X[np.flatnonzero(X.getnnz(axis=1))]
            out.append(("nips", tokens_from_counts(X), f"UCI {docword}"))
    return out


def describe_device(cp):
    """Print and return the name of CuPy's current device."""
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print(f"device: {name}, {props['multiProcessorCount']} SMs; cupy {cp.__version__}")
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
