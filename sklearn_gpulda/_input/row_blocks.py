"""A corpus given as a sequence of row blocks, never joined into one matrix.

``fit`` takes a list or tuple of row blocks (SciPy sparse matrices or 2-d arrays with the same
columns, for example CSR matrices loaded one at a time or memory-mapped) as the documents of all
of them, in order. A :class:`BlockCorpus` reads the blocks twice: once to learn what the fit
needs of the whole (documents, tokens, each document's length, each word's frequency), keeping
only those summaries, and once more when the sampler lays the tokens out, one block at a time
(:meth:`BlockCorpus.parts`). With the GPU engine streaming its chunks (``max_device_memory``),
the host then holds the chunks and one block's counts, not the whole count matrix.

The canonical token order is the blocks' documents in order, so the chain, and the model, are
those of the same counts given as one matrix, bit for bit.
"""

import numpy as np
import scipy.sparse as sp

from .corpus import Corpus, tokens


def is_block_sequence(X):
    """Whether ``X`` is a list or tuple of row blocks (sparse matrices or 2-d ndarrays), not one
    matrix written as nested lists."""
    return (isinstance(X, (list, tuple)) and len(X) > 0
            and all(sp.issparse(b) or isinstance(b, np.ndarray) and b.ndim == 2 for b in X))


class BlockCorpus(Corpus):
    """Tokens of the documents of several row blocks of validated counts (see the module).

    Parameters
    ----------
    blocks : sequence of SciPy sparse matrices or ndarrays
        Validated, non-negative finite counts with the same number of columns.

    Attributes
    ----------
    n_docs, n_words, n_tokens, n_nonzero : int
    integral : bool
        Every count is an integer.
    doc_offsets, token_offsets : ndarray of int64, shape (n_blocks + 1,)
        Block ``i`` holds documents ``doc_offsets[i]:doc_offsets[i + 1]`` and canonical tokens
        ``token_offsets[i]:token_offsets[i + 1]``.
    """

    on_device = False

    def __init__(self, blocks):
        self.blocks = list(blocks)
        if not self.blocks:
            raise ValueError("X holds no blocks")
        self.n_words = int(self.blocks[0].shape[1])
        lengths, doc_ptrs, n_tokens, n_docs = [], [], [0], [0]
        self._word_frequencies = np.zeros(self.n_words, dtype=np.float64)
        self.n_nonzero = 0
        self.integral = True
        for block in self.blocks:
            part = tokens(block)
            lengths.append(part.doc_lengths())
            doc_ptrs.append(part.doc_ptr[1:] + n_tokens[-1])
            self._word_frequencies += part.word_frequencies()
            self.n_nonzero += int(part.indices.shape[0])
            self.integral &= part.integral
            n_docs.append(n_docs[-1] + part.n_docs)
            n_tokens.append(n_tokens[-1] + part.n_tokens)
        self._doc_lengths = np.concatenate(lengths)
        self.doc_ptr = np.concatenate([[0], *doc_ptrs]).astype(np.int64)
        self.doc_offsets = np.asarray(n_docs, dtype=np.int64)
        self.token_offsets = np.asarray(n_tokens, dtype=np.int64)
        self.n_docs, self.n_tokens = int(n_docs[-1]), int(n_tokens[-1])

    def word_frequencies(self):
        return self._word_frequencies

    def parts(self):
        """Each block as a :class:`~sklearn_gpulda._input.corpus.TokenCorpus` in turn, with its
        first
        document and first canonical token in the whole: ``(part, doc_offset, token_offset)``."""
        if self.blocks is None:
            raise RuntimeError("the corpus's blocks were released before its tokens were laid out")
        for i, block in enumerate(self.blocks):
            yield tokens(block), int(self.doc_offsets[i]), int(self.token_offsets[i])

    def doc_range(self, d0, d1):
        """Documents ``d0:d1`` as a :class:`BlockCorpus` of the blocks' rows (a block's part is
        a slice of it), with this corpus's ``integral``; the part's summaries are computed anew,
        a second pass over those rows."""
        if self.blocks is None:
            raise RuntimeError("the corpus's blocks were released before it was split")
        rows = []
        for block, start, stop in zip(self.blocks, self.doc_offsets[:-1], self.doc_offsets[1:]):
            lo, hi = max(d0, int(start)), min(d1, int(stop))
            if lo < hi:
                rows.append(block[lo - start : hi - start])
        part = BlockCorpus(rows)
        part.integral = self.integral
        return part

    def release_counts(self):
        """Forget the blocks (the caller's, which it may free), keeping the summaries."""
        self.blocks = None

    def _expand_tokens(self):
        # The whole corpus's token arrays, for the engines that read them.
        docs, words, weights = [], [], []
        for part, d_off, _ in self.parts():
            docs.append(part.doc + np.int32(d_off))
            words.append(part.word)
            if not self.integral:
                weights.append(part.weight if part.weight is not None
                               else np.ones(part.n_tokens, dtype=np.float32))
        weight = None if self.integral else np.concatenate(weights)
        return np.concatenate(docs), np.concatenate(words), weight
