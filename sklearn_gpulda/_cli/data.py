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
import zlib
from pathlib import Path

from .common import CommandError, check_input_file, one_line

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

#: How much of a file ``sniff_format`` reads: enough for the header lines of a UCI file and for
#: an executable's NUL bytes, little enough to cost nothing on a gigabyte corpus.
SNIFF_BYTES = 1 << 16

#: Errors a damaged or unreadable file raises while being read (gzip raises zlib.error for a
#: corrupt stream, EOFError for a truncated one).
_READ_ERRORS = (OSError, EOFError, zlib.error)


def encoding_name(text):
    """``text`` if Python can decode text files with it, else a usage error."""
    try:
        # Decoding a byte, rather than codecs.lookup, also refuses codecs that exist but do not
        # turn bytes into text ('base64', 'zlib'); 'replace' lets UTF-16 accept an odd byte.
        b"a".decode(text, "replace")
    except (LookupError, UnicodeError):
        raise argparse.ArgumentTypeError(
            f"not a text encoding Python knows: {text!r} (e.g. utf-8, latin-1, cp1252)") from None
    return text


def _read_bytes(path, size=-1):
    """The first ``size`` bytes of ``path`` (all with -1), decompressed when it ends in .gz."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            return handle.read(size)
    except _READ_ERRORS as exc:
        raise CommandError(f"cannot read {path}: {one_line(exc)}") from None


def decode_text(path, raw, encoding="utf-8", errors="strict"):
    """``raw``, the bytes of ``path``, as text; bytes that are not text are a CommandError.

    Text has no NUL characters: a file with one is binary (an executable, an archive, a
    spreadsheet), and reading it as documents would fit topics to its byte patterns. Bytes that
    are not valid ``encoding`` are an error unless ``errors`` is ``'replace'``, so that a Latin-1
    file read as UTF-8 does not lose its accented letters without a word.
    """
    try:
        text = raw.decode(encoding, errors)
    except UnicodeDecodeError as exc:
        # The line is counted on the decoded prefix, so it is right for UTF-16 as well.
        line = raw[:exc.start].decode(encoding, "replace").count("\n") + 1
        raise CommandError(
            f"{path} is not valid {encoding}: byte 0x{raw[exc.start]:02x} at byte offset "
            f"{exc.start} (line {line}); give the file's encoding with --encoding (e.g. "
            "--encoding latin-1), or --encoding-errors replace") from None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise CommandError(f"{path} is not a text file: NUL byte on line {line}; give a text "
                           "file with one document per line, or a UCI docword file")
    return text


def sniff_format(path, encoding="utf-8"):
    """'uci' when the file opens with the three integer header lines of a UCI docword file.

    Only the first ``SNIFF_BYTES`` are read; a NUL byte among them is an error here already, so
    that a binary file is refused before anything else is done with it.
    """
    raw = _read_bytes(path, SNIFF_BYTES)
    # 'replace': the chunk may end inside a multi-byte character; strict decoding of the whole
    # file, for text input, comes later in read_lines.
    head = []
    for line in split_lines(decode_text(path, raw, encoding, "replace")):
        if line.strip():
            head.append(line.split())
        if len(head) == 4:
            break
    header_ok = len(head) >= 3 and all(len(f) == 1 and f[0].isdigit() for f in head[:3])
    body_ok = len(head) < 4 or (len(head[3]) == 3 and all(f.isdigit() for f in head[3]))
    return "uci" if header_ok and body_ok else "text"


def read_lines(path, encoding="utf-8", errors="strict"):
    """The non-empty lines of a text file (plain or .gz), stripped.

    The file is read whole, as bytes, then decoded: the lines are kept in memory anyway, and an
    error can then name the byte offset of the first byte that is not text.
    """
    text = decode_text(path, _read_bytes(path), encoding, errors)
    return [line.strip() for line in split_lines(text) if line.strip()]


def split_lines(text):
    """Lines as a file opened in text mode gives them: split at \\n, \\r\\n and \\r only.

    ``str.splitlines`` would also split at form feeds and other separators, which may sit inside
    a document and must not cut it in two.
    """
    return re.split(r"\r\n?|\n", text)


def read_vocabulary(path, n_words, owner):
    """One word per line, ``n_words`` of them (a trailing empty line is not a word)."""
    check_input_file(path, "vocabulary file")
    words = split_lines(decode_text(path, _read_bytes(path)))
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
    except (ValueError, *_READ_ERRORS) as exc:
        hint = " (if it is text with one document per line, use --format text)" \
            if "header line" in str(exc) else ""
        raise CommandError(f"cannot read {path} as a UCI docword file: {one_line(exc)}{hint}") \
            from None
    return corpus.data, corpus.feature_names


def text_options(args):
    """CountVectorizer keyword arguments from the options, and the names of those given.

    A stop-word file is read with ``--encoding`` and ``--encoding-errors``, like the input.
    """
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
        options["stop_words"] = read_lines(words, args.encoding, args.encoding_errors)
    return options, given


def vectorise(path, options, encoding="utf-8", errors="strict"):
    """``(fitted CountVectorizer, counts)`` of the text file ``path``, read as ``encoding``."""
    from sklearn.feature_extraction.text import CountVectorizer

    documents = read_lines(path, encoding, errors)
    if not documents:
        raise CommandError(f"no documents in {path} (one per non-empty line)")
    vectorizer = CountVectorizer(**options)
    try:
        X = vectorizer.fit_transform(documents)
    except ValueError as exc:  # no word left after stop words and frequency limits
        raise CommandError(
            f"cannot vectorise {path} ({len(documents)} documents): {one_line(exc)}; loosen "
            "--min-df, --max-df or --stop-words (e.g. --min-df 1 --max-df 1.0)") from None
    empty = int((X.getnnz(axis=1) == 0).sum())
    if empty:
        # Kept (their rows stay aligned with the lines), but nothing is learned from them.
        print(f"warning: {empty} of {len(documents)} documents have no word left after the stop "
              "words and the frequency limits; they take no part in the fit", file=sys.stderr)
    return vectorizer, X
