"""Command line: ``python -m sklearn_gpulda COMMAND`` (or the ``sklearn-gpulda`` script).

``demo``    fits the bundled King James Bible chapters and prints device, speed, held-out
            perplexity and the topics.
``fit``     fits a UCI bag-of-words file or a text file (one document per line) and saves the
            model, with its vocabulary, with joblib.
``topics``  prints the top words of a saved model.
``report``  writes one self-contained HTML page about a saved model.
``choose-k`` fits several numbers of topics on one corpus and compares them on held-out
            documents.
``bench``   runs a script from the repository's ``benchmarks/`` folder (source checkouts only).

Every mistake in the user's input is reported as one line on stderr with exit status 2, and
output paths are checked before any fitting starts; Ctrl-C at any point prints "interrupted" and
exits with status 130. The commands live in ``sklearn_gpulda/_cli/`` and import NumPy,
scikit-learn and the estimator only when they run, so ``--help`` stays fast and works on any
machine (the package's ``__init__`` loads the estimator lazily for the same reason).
"""

import argparse
import os
import sys
from pathlib import Path

_DEVICE_HELP = "auto, cpu, cuda or cuda:N, as the estimator's device (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors in one line; ``--help`` still shows the full usage."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_fit_options(parser):
    from sklearn_gpulda._cli.common import n_jobs, parse_device, positive_int

    parser.add_argument("--max-iter", type=positive_int, default=None, metavar="N",
                        help="sweeps (default: the estimator's, 1000 on a GPU, 100 on the CPU)")
    parser.add_argument("--device", type=parse_device, default="auto", metavar="DEVICE",
                        help=_DEVICE_HELP)
    parser.add_argument("--random-state", type=int, default=0, metavar="SEED",
                        help="seed of the sampler (default: %(default)s)")
    parser.add_argument("--n-jobs", type=n_jobs, default=-1, metavar="N",
                        help="CPU threads of the CPU engine, -1 for every core; the model does "
                             "not depend on it (default: %(default)s)")


def _add_input_options(parser):
    """INPUT and how it is read: what ``commands.read_input`` takes (fit, choose-k)."""
    parser.add_argument("input", type=Path, help="docword.*.txt[.gz] or a text file")
    parser.add_argument("--vocab", type=Path, metavar="PATH",
                        help="UCI vocabulary file, one word per line")
    parser.add_argument("--format", choices=["uci", "text"],
                        help="input format (default: detected from the first lines)")


def _fraction(text):
    """A number strictly between 0 and 1 (``--test-size``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.1, got {text!r}")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text}")
    return value


def _add_encoding_options(group):
    from sklearn_gpulda._cli import data

    group.add_argument("--encoding", type=data.encoding_name, default="utf-8", metavar="NAME",
                       help="encoding of text files, such as utf-8, latin-1 or cp1252 "
                            "(default: %(default)s)")
    group.add_argument("--encoding-errors", choices=["strict", "replace"], default="strict",
                       help="bytes that are not valid in the encoding: strict stops with an "
                            "error naming the first one, replace reads them as U+FFFD "
                            "(default: %(default)s)")


def _add_text_options(parser):
    from sklearn_gpulda._cli import data
    from sklearn_gpulda._cli.common import positive_int

    text = parser.add_argument_group(
        "text input", "How text is turned into word counts (scikit-learn's CountVectorizer). "
                      "The defaults suit topic models; they apply to text input only.")
    defaults = data.TEXT_DEFAULTS
    text.add_argument("--stop-words", metavar="english|none|FILE",
                      help="words to drop: scikit-learn's English list, none, or a file with "
                           "one word per line (default: english)")
    text.add_argument("--min-df", type=data.document_frequency, metavar="N|F",
                      help="drop words in fewer than N documents, or a fraction F of them "
                           f"(default: {defaults['min_df']})")
    text.add_argument("--max-df", type=data.document_frequency, metavar="N|F",
                      help="drop words in more than N documents, or a fraction F of them; "
                           "0.5 drops words such as 'said' in news (default: "
                           f"{defaults['max_df']})")
    text.add_argument("--max-features", type=positive_int, metavar="N",
                      help="keep the N most frequent words (default: all)")
    text.add_argument("--ngram-range", type=data.ngram_range, metavar="MIN,MAX",
                      help="word n-grams to count, e.g. 1,2 for words and word pairs "
                           "(default: 1,1)")
    _add_encoding_options(text)


def _add_model_options(parser):
    from sklearn_gpulda._cli.common import positive_int

    parser.add_argument("model", type=Path, metavar="MODEL",
                        help="a model saved by 'fit' or with joblib.dump (only load files you "
                             "trust: loading runs code stored in them)")
    parser.add_argument("--vocab", type=Path, metavar="PATH",
                        help="vocabulary file, one word per line, for a model saved without one")
    parser.add_argument("--top-words", type=positive_int, default=10, metavar="N",
                        help="words per topic (default: %(default)s)")


def _command(subcommands, name, handler, summary, description, **kwargs):
    """A subcommand parser whose ``handler`` runs the command."""
    parser = subcommands.add_parser(name, help=summary, description=description, **kwargs)
    parser.set_defaults(handler=handler)
    return parser


def build_parser(prog=None):
    """The argument parser of every command; building it imports no numerical library."""
    from sklearn_gpulda._cli import bench, choose_k, commands
    from sklearn_gpulda._cli.common import non_negative_int, positive_int

    if prog is None:
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "sklearn-gpulda"
        if prog in {"__main__.py", "-c", ""}:
            prog = "python -m sklearn_gpulda"
    parser = _Parser(
        prog=prog,
        description="Latent Dirichlet Allocation on NVIDIA GPUs (NumPy engine without one).")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = _command(
        subcommands, "demo", commands.run_demo,
        "fit the bundled King James Bible chapters and show the topics",
        "Fit the bundled King James Bible (1,189 chapters, public domain), holding out 10% of "
        "the chapters, and print the device, fit time, throughput, two held-out perplexities "
        "(the estimator's own, and document completion's) and the top 10 words of each topic.")
    demo.add_argument("--n-components", type=positive_int, default=20, metavar="K",
                      help="number of topics (default: %(default)s)")
    _add_fit_options(demo)

    fit = _command(
        subcommands, "fit", commands.run_fit,
        "fit a UCI bag-of-words or a text file and save the model",
        "Fit topics to INPUT and save the model with joblib, with its vocabulary. INPUT is a "
        "UCI docword file (optionally gzipped; pair it with --vocab) or a text file with one "
        "document per line. Text is saved as a Pipeline that transforms raw text; UCI input "
        "with --vocab as a Pipeline whose first step carries the vocabulary.")
    _add_input_options(fit)
    fit.add_argument("-k", "--n-components", type=positive_int, required=True, metavar="K",
                     help="number of topics")
    _add_fit_options(fit)
    fit.add_argument("-o", "--output", type=Path, default=Path("model.joblib"), metavar="PATH",
                     help="where to save the fitted model (default: %(default)s)")
    fit.add_argument("--top-words", type=non_negative_int, default=10, metavar="N",
                     help="words to print per topic, 0 for none (default: %(default)s)")
    fit.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="show progress on stderr (default: on a terminal, when the estimator "
                          "reports each sweep)")
    fit.add_argument("--curve-every", type=non_negative_int, default=None, metavar="N",
                     help="record the training log-likelihood every N sweeps for the report's "
                          "training curve, 0 for none; it never stops the fit early nor changes "
                          "the model (default: about 20 points, at most one per 25 sweeps, "
                          "which costs about 1%% of a CPU fit)")
    _add_text_options(fit)

    topics = _command(
        subcommands, "topics", commands.run_topics, "print the top words of a saved model",
        "Print the top words of each topic of a saved model: one fitted by 'fit', or any "
        "fitted LDA (this package's or scikit-learn's), or a Pipeline ending in one, saved "
        "with joblib.")
    _add_model_options(topics)

    report = _command(
        subcommands, "report", commands.run_report, "write an HTML page about a saved model",
        "Write one self-contained, interactive HTML page about a saved model (it loads "
        "nothing from the network): a map of the topics, their words ranked by relevance "
        "with a lambda slider, a word search, the documents that load most on each topic "
        "(with text --data), the training curve (which 'fit' records), the topics' sizes, "
        "and their top words with coherence (with --data).")
    _add_model_options(report)
    report.add_argument("--data", type=Path, metavar="INPUT",
                        help="reference corpus for topic sizes and coherence: the UCI or text "
                             "file the model was fitted on, or one like it")
    report.add_argument("--format", choices=["uci", "text"],
                        help="format of --data (default: detected from the first lines)")
    report.add_argument("-o", "--output", type=Path, default=Path("report.html"), metavar="PATH",
                        help="the HTML file to write (default: %(default)s)")
    report.add_argument("--title", help="page title (default: the model file's name)")
    _add_encoding_options(report.add_argument_group("text in --data"))

    choose = _command(
        subcommands, "choose-k", choose_k.run_choose_k,
        "fit several numbers of topics and compare them on held-out documents",
        "Hold out a share of INPUT's documents, fit one model per K on the rest with the "
        "estimator's defaults, and print for each K the held-out log-likelihood per token "
        "(document completion), perplexity, UMass and NPMI coherence, fit time, sweeps and "
        "the learned priors.")
    _add_input_options(choose)
    choose.add_argument("-k", "--topics", type=positive_int, nargs="+", required=True,
                        metavar="K", help="the numbers of topics to compare")
    choose.add_argument("--test-size", type=_fraction, default=0.1, metavar="FRACTION",
                        help="share of documents held out (default: %(default)s)")
    choose.add_argument("--fits-at-once", type=positive_int, default=1, metavar="N",
                        help="fits run at once, in threads; on a GPU each on a stream of its "
                        "own, sharing one copy of the counts (for small corpora; same table; "
                        "default: %(default)s)")
    _add_fit_options(choose)
    choose.add_argument("-o", "--output", type=Path, metavar="PATH",
                        help="also write the table as CSV here")
    choose.add_argument("--report", type=Path, metavar="PATH",
                        help="also write an HTML report of the best K's model with the table")
    _add_text_options(choose)

    bench_parser = _command(
        subcommands, "bench", bench.run_bench,
        "run a script from the repository's benchmarks/ folder",
        "Run benchmarks/SCRIPT.py with the remaining arguments (source\n"
        "checkouts only). Without SCRIPT, list the scripts.",
        epilog=bench.bench_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_parser.add_argument("script", nargs="?", help="benchmark name (file name without .py)")
    bench_parser.add_argument("args", nargs=argparse.REMAINDER,
                              help="arguments passed to the script")
    return parser


def main(argv=None):
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    The whole run sits inside the KeyboardInterrupt handler, the imports and the building of the
    parser included, so that Ctrl-C during start-up is one line too, not a traceback.
    """
    try:
        return _run(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _run(argv):
    from sklearn_gpulda._cli.common import CommandError

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


if __name__ == "__main__":
    sys.exit(main())
