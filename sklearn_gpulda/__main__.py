"""Command line: ``python -m sklearn_gpulda {demo,fit,bench}`` (or the ``sklearn-gpulda`` script).

``demo``  fits the bundled King James Bible chapters and prints device, speed, held-out
          perplexity and the topics.
``fit``   fits a UCI bag-of-words file or a text file (one document per line) and saves the model
          with joblib.
``bench`` runs a script from the repository's ``benchmarks/`` folder (source checkouts only).

The estimator and the data loaders are imported inside the commands, so ``--help`` stays fast and
works on any machine.
"""

import argparse
import ast
import gzip
import os
import subprocess
import sys
from pathlib import Path

#: Seed of the demo's train/test split; fixed (unlike --random-state) so that held-out perplexities
#: of different runs are measured on the same chapters.
DEMO_SPLIT_SEED = 0
DEMO_TEST_FRACTION = 0.1


class CommandError(Exception):
    """A problem with the user's input, reported as one line rather than a traceback."""


# --------------------------------------------------------------------------- argument helpers

def _non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _positive_int(text):
    value = _non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _device(text):
    """The estimator's own parse of ``device``, so the command line accepts exactly what it does."""
    from sklearn_gpulda._device import parse_device

    try:
        parse_device(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _resolve(device):
    """The device a fit will use (``'cpu'`` or ``'cuda:N'``), asked before the data is loaded."""
    from sklearn_gpulda._device import resolve_device

    try:
        return str(resolve_device(device))
    except RuntimeError as exc:  # a GPU was asked for and none is usable
        raise CommandError(str(exc)) from None


def describe_device(device):
    """One human line for a fitted ``device_`` string such as ``'cpu'`` or ``'cuda:0'``."""
    if device.startswith("cuda"):
        from sklearn_gpulda._device import describe_device as describe

        try:
            return f"CUDA engine on {describe(device)}"
        except Exception:  # the description is cosmetic; never fail a finished fit over it
            return f"CUDA engine on {device}"
    return f"NumPy reference engine on the CPU ({os.cpu_count() or '?'} logical cores)"


# --------------------------------------------------------------------------- reporting

def _print_fit_report(model):
    # The estimator's own clock rather than one around fit(): it leaves out input validation and
    # token-array building, which are not the sampler's work the throughput figure is about.
    device = model.device_
    seconds = float(model.fit_time_)
    tokens = float(model.n_tokens_)
    n_iter = int(model.n_iter_)
    print(f"device:      {device} - {describe_device(device)}")
    print(f"fit time:    {seconds:.2f} s for {n_iter} iterations")
    if seconds > 0:
        rate = tokens * n_iter / seconds / 1e6
        print(f"throughput:  {rate:.2f} Mtoken/s ({tokens:,.0f} training tokens x {n_iter} "
              f"iterations / {seconds:.2f} s)")


def _print_topics(components, feature_names, n_words):
    from sklearn_gpulda.metrics import top_words

    topics = top_words(components, feature_names, n_words=n_words)
    width = len(str(len(topics) - 1))
    print(f"top {n_words} words per topic:")
    for k, words in enumerate(topics):
        print(f"  topic {k:>{width}}: {' '.join(str(w) for w in words)}")


# --------------------------------------------------------------------------- demo

def _run_demo(args):
    from sklearn.model_selection import train_test_split

    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda.datasets import load_kjv_chapters

    device = _resolve(args.device)
    corpus = load_kjv_chapters()
    X = corpus.data
    X_train, X_test = train_test_split(X, test_size=DEMO_TEST_FRACTION,
                                       random_state=DEMO_SPLIT_SEED)
    print(f"corpus:      King James Bible, {X.shape[0]} chapters x {X.shape[1]} words, "
          f"{X.sum():,.0f} tokens")
    print(f"split:       {X_train.shape[0]} training chapters, {X_test.shape[0]} held out "
          f"(seed {DEMO_SPLIT_SEED})")

    model = GPULatentDirichletAllocation(n_components=args.n_components, max_iter=args.max_iter,
                                         device=args.device, random_state=args.random_state)
    print(f"fitting:     {args.n_components} topics, {args.max_iter} iterations, "
          f"device={args.device!r} ({device})", flush=True)
    model.fit(X_train)
    _print_fit_report(model)
    print(f"held-out perplexity: {model.perplexity(X_test):.1f} "
          f"({X_test.shape[0]} chapters, {X_test.sum():,.0f} tokens)")
    _print_topics(model.components_, corpus.feature_names, 10)
    return 0


# --------------------------------------------------------------------------- fit

def _open_text(path):
    # Large corpora usually arrive gzipped; reading them as-is saves a decompression step.
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def sniff_format(path):
    """'uci' when the file opens with the three integer header lines of a UCI docword file."""
    with _open_text(path) as handle:
        head = []
        for line in handle:
            if line.strip():
                head.append(line.split())
            if len(head) == 4:
                break
    header_ok = len(head) >= 3 and all(len(f) == 1 and f[0].isdigit() for f in head[:3])
    body_ok = len(head) < 4 or (len(head[3]) == 3 and all(f.isdigit() for f in head[3]))
    return "uci" if header_ok and body_ok else "text"


def _read_documents(path):
    with _open_text(path) as handle:
        return [line.strip() for line in handle if line.strip()]


def _run_fit(args):
    import joblib
    import numpy as np

    from sklearn_gpulda import GPULatentDirichletAllocation

    if not args.input.is_file():
        raise CommandError(f"input file not found: {args.input}")
    device = _resolve(args.device)  # fail before reading a large corpus, not after
    if args.vocab is not None and not args.vocab.is_file():
        raise CommandError(f"vocabulary file not found: {args.vocab}")
    fmt = args.format or sniff_format(args.input)
    vectorizer = None
    if fmt == "uci":
        from sklearn_gpulda.datasets import load_uci_bow

        corpus = load_uci_bow(args.input, vocab=args.vocab)
        X = corpus.data
        names = corpus.feature_names
        if names is None:
            # Without a vocabulary, name words by their UCI id, which counts from 1.
            names = np.array([f"#{i + 1}" for i in range(X.shape[1])])
        print(f"input:       {args.input} (UCI bag of words)")
    else:
        if args.vocab is not None:
            raise CommandError("--vocab applies to UCI input only; text input builds its own")
        from sklearn.feature_extraction.text import CountVectorizer

        documents = _read_documents(args.input)
        if not documents:
            raise CommandError(f"no documents in {args.input} (one per non-empty line)")
        vectorizer = CountVectorizer(stop_words="english")
        try:
            X = vectorizer.fit_transform(documents)
        except ValueError as exc:  # e.g. every word is a stop word
            raise CommandError(f"cannot vectorise {args.input}: {exc}") from None
        names = vectorizer.get_feature_names_out()
        print(f"input:       {args.input} (text, one document per line, "
              "English stop words removed)")
    print(f"corpus:      {X.shape[0]} documents x {X.shape[1]} words, {X.sum():,.0f} tokens")

    progress = args.progress
    if progress is None:
        progress = sys.stdout.isatty() or args.max_iter >= 20
    model = GPULatentDirichletAllocation(n_components=args.n_components, max_iter=args.max_iter,
                                         device=args.device, random_state=args.random_state,
                                         verbose=1 if progress else 0)
    print(f"fitting:     {args.n_components} topics, {args.max_iter} iterations, "
          f"device={args.device!r} ({device})", flush=True)
    model.fit(X)
    _print_fit_report(model)

    if vectorizer is not None:
        from sklearn.pipeline import Pipeline

        # Both steps are already fitted; the pipeline lets the saved model transform raw text.
        saved = Pipeline([("vectorizer", vectorizer), ("lda", model)])
        kind = "Pipeline(CountVectorizer, GPULatentDirichletAllocation)"
    else:
        saved = model
        kind = "GPULatentDirichletAllocation"
    output = args.output
    if output.parent != Path(""):
        output.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(saved, output)
    print(f"saved:       {output} ({kind}; load with joblib.load)")
    if args.top_words > 0:
        _print_topics(model.components_, names, args.top_words)
    return 0


# --------------------------------------------------------------------------- bench

def benchmarks_dir():
    """The repository's ``benchmarks/`` folder, or None when running from an installed package."""
    root = Path(__file__).resolve().parent.parent
    folder = root / "benchmarks"
    # pyproject.toml beside it tells a source checkout from a site-packages that happens to hold
    # some other project's "benchmarks" folder.
    if folder.is_dir() and (root / "pyproject.toml").is_file():
        return folder
    return None


def list_benchmarks(folder):
    """``[(name, summary)]`` for each runnable script, summary being its docstring's first line."""
    found = []
    if folder is None:
        return found
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        except (SyntaxError, UnicodeDecodeError, OSError):
            doc = ""
        found.append((path.stem, doc.strip().splitlines()[0] if doc.strip() else ""))
    return found


def _bench_epilog():
    folder = benchmarks_dir()
    if folder is None:
        return ("No benchmarks/ folder: benchmark scripts ship with the source repository, not "
                "with the installed package.")
    scripts = list_benchmarks(folder)
    if not scripts:
        return f"No benchmark scripts in {folder} yet."
    width = max(len(name) for name, _ in scripts)
    lines = [f"scripts in {folder}:"]
    lines += [f"  {name:<{width}}  {summary}".rstrip() for name, summary in scripts]
    lines.append("'bench SCRIPT --help' shows a script's own options.")
    return "\n".join(lines)


def _run_bench(args):
    folder = benchmarks_dir()
    if folder is None:
        print("bench: the benchmark scripts live in the benchmarks/ folder of the source "
              "repository, which an installed package does not include. Run this command from a "
              "clone of the repository (after 'pip install -e .').", file=sys.stderr)
        return 2
    scripts = dict(list_benchmarks(folder))
    if args.script is None:
        print(_bench_epilog())
        return 0
    name = args.script[:-3] if args.script.endswith(".py") else args.script
    if name not in scripts and f"bench_{name}" in scripts:
        name = f"bench_{name}"  # 'bench cuda' for benchmarks/bench_cuda.py
    if name not in scripts:
        available = ", ".join(scripts) or "none yet"
        print(f"bench: no benchmark named {args.script!r} in {folder} (available: {available})",
              file=sys.stderr)
        return 2
    env = dict(os.environ)
    # The script runs with benchmarks/ as its sys.path[0]; put the repository first so it
    # imports this checkout's package even when it is not installed.
    root = str(folder.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    command = [sys.executable, str(folder / f"{name}.py"), *args.args]
    return subprocess.run(command, env=env).returncode


# --------------------------------------------------------------------------- parser

def build_parser(prog=None):
    if prog is None:
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "sklearn-gpulda"
        if prog in {"__main__.py", "-c", ""}:
            prog = "python -m sklearn_gpulda"
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Latent Dirichlet Allocation on NVIDIA GPUs (NumPy engine without one).")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo", help="fit the bundled King James Bible chapters and show the topics",
        description="Fit the bundled King James Bible (1,189 chapters, public domain), holding out "
                    "10%% of the chapters, and print the device, fit time, throughput, held-out "
                    "perplexity and the top 10 words of each topic.")
    demo.add_argument("--device", type=_device, default="auto", metavar="DEVICE",
                      help="auto, cpu, cuda or cuda:N (default: %(default)s)")
    demo.add_argument("--n-components", type=_positive_int, default=20, metavar="K",
                      help="number of topics (default: %(default)s)")
    demo.add_argument("--max-iter", type=_positive_int, default=100, metavar="N",
                      help="iterations (default: %(default)s)")
    demo.add_argument("--random-state", type=int, default=0, metavar="SEED",
                      help="seed of the sampler (default: %(default)s)")
    demo.set_defaults(handler=_run_demo)

    fit = commands.add_parser(
        "fit", help="fit a UCI bag-of-words or a text file and save the model",
        description="Fit topics to INPUT and save the model with joblib. INPUT is a UCI docword "
                    "file (optionally gzipped; pair it with --vocab) or a text file with one "
                    "document per line, which is vectorised with CountVectorizer(stop_words="
                    "'english') and saved as a Pipeline that transforms raw text.")
    fit.add_argument("input", type=Path, help="docword.*.txt[.gz] or a text file")
    fit.add_argument("--vocab", type=Path, metavar="PATH",
                     help="UCI vocabulary file, one word per line")
    fit.add_argument("--format", choices=["uci", "text"],
                     help="input format (default: detected from the first lines)")
    fit.add_argument("-k", "--n-components", type=_positive_int, required=True, metavar="K",
                     help="number of topics")
    fit.add_argument("--max-iter", type=_positive_int, default=100, metavar="N",
                     help="iterations (default: %(default)s)")
    fit.add_argument("--device", type=_device, default="auto", metavar="DEVICE",
                     help="auto, cpu, cuda or cuda:N (default: %(default)s)")
    fit.add_argument("--random-state", type=int, default=0, metavar="SEED",
                     help="seed of the sampler (default: %(default)s)")
    fit.add_argument("-o", "--output", type=Path, default=Path("model.joblib"), metavar="PATH",
                     help="where to save the fitted model (default: %(default)s)")
    fit.add_argument("--top-words", type=_non_negative_int, default=10, metavar="N",
                     help="words to print per topic, 0 for none (default: %(default)s)")
    fit.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="print one line per iteration (default: on when stdout is a terminal "
                          "or --max-iter is 20 or more)")
    fit.set_defaults(handler=_run_fit)

    bench = commands.add_parser(
        "bench", help="run a script from the repository's benchmarks/ folder",
        description="Run benchmarks/SCRIPT.py with the remaining arguments (source\n"
                    "checkouts only). Without SCRIPT, list the scripts.",
        epilog=_bench_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("script", nargs="?", help="benchmark name (file name without .py)")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    bench.set_defaults(handler=_run_bench)
    return parser


def main(argv=None):
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help and usage errors: hand back argparse's status, don't exit
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.handler(args)
    except CommandError as exc:
        print(f"{parser.prog} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
