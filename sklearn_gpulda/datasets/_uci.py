"""Reader of the UCI "Bag of Words" format (KOS, NIPS, Enron, NYTimes, PubMed and the like)."""

import gzip
import io
import os
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

# Bytes of text parsed at a time: large enough that the per-block overhead vanishes, small enough
# that the temporary string and integer arrays of a block stay far below the size of the result.
_PARSE_BLOCK_BYTES = 1 << 25


def _open_binary(source):
    """Open a path or binary file object, gunzipping by magic number rather than by file name.

    Returns the stream to read and the object to close afterwards (None for a caller's object).
    """
    if hasattr(source, "read"):
        fh, owned = source, None
        if not (hasattr(fh, "seekable") and fh.seekable()):
            fh = io.BytesIO(fh.read())
    else:
        fh = owned = open(source, "rb")
    position = fh.tell()
    magic = fh.read(2)
    fh.seek(position)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh, mode="rb"), owned
    return fh, owned


def _source_name(source):
    if hasattr(source, "read"):
        name = getattr(source, "name", None)
        return name if isinstance(name, str) else "docword file"
    return os.fsdecode(source)


def _read_header(fh, name):
    values = []
    labels = ("D (number of documents)", "W (vocabulary size)", "NNZ (number of lines)")
    for label in labels:
        line = fh.readline()
        try:
            value = int(line.strip())
        except ValueError:
            raise ValueError(
                f"{name}: header line {len(values) + 1} should hold {label} as a single integer, "
                f"got {line[:60]!r}"
            ) from None
        if value < 0:
            raise ValueError(f"{name}: header {label} is negative ({value})")
        values.append(value)
    return values


def _parse_block_numpy(block, name):
    """Integers of a block of whole lines, checking that each line has exactly three of them."""
    text = block.strip()
    if not text:
        return np.empty((0, 3), dtype=np.int64)
    n_lines = text.count(b"\n") + 1
    with warnings.catch_warnings():
        # Some NumPy versions only warn when the text holds something that is not an integer.
        warnings.simplefilter("error", DeprecationWarning)
        try:
            values = np.fromstring(text.decode("ascii"), dtype=np.int64, sep=" ")
        except (ValueError, DeprecationWarning, UnicodeDecodeError):
            raise ValueError(
                f"{name}: the body must hold only 'docID wordID count' lines of integers"
            ) from None
    if values.size != 3 * n_lines:
        raise ValueError(
            f"{name}: every body line must hold exactly 3 integers (docID wordID count); "
            f"a block of {n_lines} lines holds {values.size} integers"
        )
    return values.reshape(-1, 3)


def _parse_body_numpy(fh, name):
    parts = []
    rest = b""
    while True:
        block = fh.read(_PARSE_BLOCK_BYTES)
        if not block:
            break
        block = rest + block
        # Parse whole lines only; the partial last line waits for the next block.
        cut = block.rfind(b"\n") + 1
        rest = block[cut:]
        if cut:
            parts.append(_parse_block_numpy(block[:cut], name))
    parts.append(_parse_block_numpy(rest, name))
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _parse_body_pandas(fh, name):
    import pandas as pd

    try:
        frame = pd.read_csv(fh, sep=r"\s+", header=None, dtype=np.int64, engine="c")
    except pd.errors.EmptyDataError:
        return np.empty((0, 3), dtype=np.int64)
    except (ValueError, TypeError, pd.errors.ParserError) as exc:
        raise ValueError(
            f"{name}: the body must hold only 'docID wordID count' lines of integers ({exc})"
        ) from None
    if frame.shape[1] != 3:
        raise ValueError(
            f"{name}: every body line must hold exactly 3 integers (docID wordID count)"
        )
    return frame.to_numpy(dtype=np.int64)


def _have_pandas():
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def _read_vocab(source, n_words):
    fh, owned = _open_binary(source)
    try:
        raw = fh.read()
    finally:
        if owned is not None:
            owned.close()
    words = raw.decode("utf-8").splitlines()
    # Trailing newlines are not words; an empty line inside the file is (it keeps ids aligned).
    while words and words[-1] == "":
        words.pop()
    if len(words) != n_words:
        raise ValueError(
            f"vocabulary file has {len(words)} words but the docword header says W = {n_words}"
        )
    return np.asarray(words, dtype=str)


def load_uci_bow(docword, vocab=None, *, engine="auto"):
    """Load a corpus in the UCI "Bag of Words" format.

    The docword file has three header lines ``D``, ``W`` and ``NNZ`` followed by ``NNZ`` lines
    ``docID wordID count`` with 1-based ids. Files may be plain text or gzip (detected from their
    first bytes). The body is parsed in large blocks by pandas' C reader when pandas is installed,
    otherwise by NumPy's text parser, so files of tens of millions of lines load in seconds.

    Parameters
    ----------
    docword : str, path-like or binary file object
        The docword file.
    vocab : str, path-like, binary file object or None, default=None
        The vocabulary file, one word per line (line ``i`` is word id ``i``); plain or gzip.
    engine : {"auto", "pandas", "numpy"}, default="auto"
        Parser of the body; "auto" takes pandas when it can be imported. Both give the same
        result on well-formed files (the NumPy parser also rejects blank lines inside the body).

    Returns
    -------
    bunch : sklearn.utils.Bunch
        With fields

        - ``data``: scipy.sparse CSR matrix of int64 counts, shape ``(n_docs, n_words)``, in
          canonical form (sorted indices, no duplicates, no explicit zeros). Repeated
          ``(docID, wordID)`` lines are summed.
        - ``feature_names``: ndarray of str of shape ``(n_words,)``, or None without ``vocab``.
        - ``n_docs``, ``n_words``: the ``D`` and ``W`` of the header. Documents without lines are
          empty rows, so row ``i`` is always document ``i + 1`` of the file.

    Raises
    ------
    ValueError
        When the header is malformed, the number of body lines differs from ``NNZ``, a line does
        not hold three integers, an id lies outside ``1..D`` or ``1..W``, a count is negative, or
        the vocabulary does not have ``W`` words.

    Examples
    --------
    >>> import io
    >>> from sklearn_gpulda.datasets import load_uci_bow
    >>> text = b"2\\n3\\n3\\n1 1 4\\n1 3 1\\n2 2 7\\n"
    >>> bunch = load_uci_bow(io.BytesIO(text), io.BytesIO(b"apple\\nbanana\\ncherry\\n"))
    >>> bunch.data.toarray()
    array([[4, 0, 1],
           [0, 7, 0]])
    >>> bunch.feature_names.tolist()
    ['apple', 'banana', 'cherry']
    """
    if engine not in ("auto", "pandas", "numpy"):
        raise ValueError(f"engine must be 'auto', 'pandas' or 'numpy', got {engine!r}")
    if engine == "auto":
        engine = "pandas" if _have_pandas() else "numpy"
    name = _source_name(docword)
    fh, owned = _open_binary(docword)
    try:
        n_docs, n_words, nnz = _read_header(fh, name)
        parse = _parse_body_pandas if engine == "pandas" else _parse_body_numpy
        triples = parse(fh, name)
    finally:
        if owned is not None:
            owned.close()

    if triples.shape[0] != nnz:
        raise ValueError(
            f"{name}: header says NNZ = {nnz} but the body has {triples.shape[0]} lines"
        )
    doc_id, word_id, count = triples[:, 0], triples[:, 1], triples[:, 2]
    if nnz:
        for ids, limit, what in ((doc_id, n_docs, "docID"), (word_id, n_words, "wordID")):
            lo, hi = int(ids.min()), int(ids.max())
            if lo < 1 or hi > limit:
                bad = lo if lo < 1 else hi
                raise ValueError(f"{name}: {what} {bad} is outside 1..{limit} given by the header")
        if int(count.min()) < 0:
            raise ValueError(f"{name}: counts must be non-negative, found {int(count.min())}")

    # COO -> CSR is a counting sort by row, linear in NNZ; sum_duplicates then only sorts the
    # (already sorted, in UCI files) columns inside each row.
    data = sp.coo_matrix((count, (doc_id - 1, word_id - 1)), shape=(n_docs, n_words)).tocsr()
    data.sum_duplicates()
    data.eliminate_zeros()
    feature_names = None if vocab is None else _read_vocab(vocab, n_words)
    return Bunch(data=data, feature_names=feature_names, n_docs=n_docs, n_words=n_words)
