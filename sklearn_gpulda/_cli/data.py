"""Reading the user's corpus: UCI bag-of-words files, or text with one document per line.

Text is vectorised with scikit-learn's CountVectorizer, with defaults meant for topic models:
English stop words out, words of a single document out (``--min-df 2``: they co-occur with
nothing, so they cannot shape a topic, yet they are most of a large vocabulary), and words of
more than half the documents out (``--max-df 0.5``: the same as gensim's ``filter_extremes``;
on news, words such as "said" otherwise top every topic).
"""

import argparse
import gzip
import re
import sys
from pathlib import Path

import numpy as np

from .common import CommandError, one_line

#: Defaults of the vectoriser options, applied when the option is not given; kept apart from
#: argparse so that giving one with UCI input can be told from not giving it.
TEXT_DEFAULTS = {"stop_words": "english", "min_df": 2, "max_df": 0.5, "max_features": None,
                 "ngram_range": (1, 1)}


# --------------------------------------------------------------------------- argument types

def document_frequency(text):
    """An int (a number of documents) or a float in [0, 1] (a fraction), as CountVectorizer."""
    try:
        value = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0.0 <= value <= 1.0:
            raise argparse.ArgumentTypeError(
                f"a fraction of documents must lie in [0, 1], got {value}")
        return value
    if value < 1:
        raise argparse.ArgumentTypeError(f"a number of documents must be at least 1, got {value}")
    return value


def ngram_range(text):
    """``'1,2'`` -> ``(1, 2)``."""
    match = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", text)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise argparse.ArgumentTypeError(f"expected MIN,MAX with 1 <= MIN <= MAX, got {text!r}")
    return int(match[1]), int(match[2])


# --------------------------------------------------------------------------- files

def open_text(path):
    # Large corpora usually arrive gzipped; reading them as-is saves a decompression step.
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def sniff_format(path):
    """'uci' when the file opens with the three integer header lines of a UCI docword file."""
    try:
        with open_text(path) as handle:
            head = []
            for line in handle:
                if line.strip():
                    head.append(line.split())
                if len(head) == 4:
                    break
    except (OSError, EOFError) as exc:  # e.g. a damaged .gz file
        raise CommandError(f"cannot read {path}: {one_line(exc)}") from None
    header_ok = len(head) >= 3 and all(len(f) == 1 and f[0].isdigit() for f in head[:3])
    body_ok = len(head) < 4 or (len(head[3]) == 3 and all(f.isdigit() for f in head[3]))
    return "uci" if header_ok and body_ok else "text"


def read_lines(path):
    """The non-empty lines of a text file (plain or .gz), stripped."""
    try:
        with open_text(path) as handle:
            return [line.strip() for line in handle if line.strip()]
    except (OSError, EOFError) as exc:
        raise CommandError(f"cannot read {path}: {one_line(exc)}") from None


def read_vocabulary(path, n_words, owner):
    """One word per line, ``n_words`` of them (a trailing empty line is not a word)."""
    if not path.is_file():
        raise CommandError(f"vocabulary file not found: {path}")
    try:
        with open_text(path) as handle:
            words = handle.read().splitlines()
    except (OSError, EOFError) as exc:
        raise CommandError(f"cannot read {path}: {one_line(exc)}") from None
    while words and words[-1] == "":
        words.pop()
    if len(words) != n_words:
        raise CommandError(f"vocabulary {path} has {len(words)} words but {owner} has {n_words}")
    return words


def load_uci(path, vocab=None):
    """``(counts, feature names or None)`` of a UCI docword file; errors in one line."""
    from sklearn_gpulda.datasets import load_uci_bow

    try:
        corpus = load_uci_bow(path, vocab=vocab)
    except (ValueError, OSError, EOFError) as exc:
        hint = " (if it is text with one document per line, use --format text)" \
            if "header line" in str(exc) else ""
        raise CommandError(f"cannot read {path} as a UCI docword file: {one_line(exc)}{hint}") \
            from None
    return corpus.data, corpus.feature_names


def text_options(args):
    """CountVectorizer keyword arguments from the options, and the names of those given."""
    given = [key for key in TEXT_DEFAULTS if getattr(args, key) is not None]
    options = {key: TEXT_DEFAULTS[key] if getattr(args, key) is None else getattr(args, key)
               for key in TEXT_DEFAULTS}
    if options["stop_words"] == "none":
        options["stop_words"] = None
    elif options["stop_words"] != "english":
        words = Path(options["stop_words"])
        if not words.is_file():
            raise CommandError(f"--stop-words takes english, none or a file name; {words} is "
                               "not a file")
        options["stop_words"] = read_lines(words)
    return options, given


def vectorise(path, options):
    """``(fitted CountVectorizer, counts)`` of the text file ``path``."""
    from sklearn.feature_extraction.text import CountVectorizer

    documents = read_lines(path)
    if not documents:
        raise CommandError(f"no documents in {path} (one per non-empty line)")
    vectorizer = CountVectorizer(**options)
    try:
        X = vectorizer.fit_transform(documents)
    except ValueError as exc:  # no word left after stop words and frequency limits
        raise CommandError(
            f"cannot vectorise {path} ({len(documents)} documents): {one_line(exc)}; loosen "
            "--min-df, --max-df or --stop-words (e.g. --min-df 1 --max-df 1.0)") from None
    empty = int(np.count_nonzero(X.getnnz(axis=1) == 0))
    if empty:
        # Kept (their rows stay aligned with the lines), but nothing is learned from them.
        print(f"warning: {empty} of {len(documents)} documents have no word left after the stop "
              "words and the frequency limits; they take no part in the fit", file=sys.stderr)
    return vectorizer, X
