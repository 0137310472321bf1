"""A constant-time draw by Metropolis-Hastings: the oracle of an O(1) sampler (issue 37).

The two-branch rule (:mod:`.sparse_rule`) draws each token exactly from its collapsed conditional
with the counts of the last M-step held fixed,

    pi(k) ∝ (A[d,k] - [k = z] + alpha_k) * Bhat'[v,k]

(``doc/algorithm.md``), at a cost that grows with the document's non-zero topics. Here the same
``pi`` is the stationary distribution of a short Markov chain per token, started from its
current topic ``z``, whose every step costs the same whatever K: a cycle of two
Metropolis-Hastings steps whose proposals are drawn in constant time from what the last sweep
left, as in LightLDA (Yuan et al., WWW 2015) and WarpLDA (Chen et al., VLDB 2016):

- a *document proposal*, ``q_d(k) ∝ A[d,k] - [k = z] + alpha_k``: the topic of another token of
  the document taken at random (mass ``L_d - 1``), or a topic drawn from ``alpha`` (mass
  ``sum alpha``). ``q_d`` is ``pi``'s first factor, so the step accepts with
  ``min(1, Bhat'[v,k'] / Bhat'[v,k])``;
- a *word proposal*, ``q_w(k) ∝ B[v,k] - [k = z] + beta``: the topic of another token of the
  word (mass ``N_v - 1``), or a uniform topic (mass ``K beta``), accepted with
  ``min(1, pi(k') q_w(k) / (pi(k) q_w(k')))``.

Each step leaves ``pi`` invariant, so the chain's stationary distribution is the exact
conditional (tested: ``tests/test_mh_rule.py``); a finite number of cycles draws from it only
approximately, which is the price of constant time. Four Philox words per step (stream
``random.STREAM_MH``, the step's number as the fourth counter word) make a token's draw a pure
function of the seed, the iteration and the token, as every engine's draws are.

Unit token weights only (a random token of the document stands for ``A``'s counts). This module
is a reference: vectorised over all tokens on one thread, with the dense A of the NumPy engine.
"""

import numpy as np

from ..random import STREAM_MH, bits_topic, bits_uniform, philox4x32
from .tables import own_bhat

#: Cycles (a document and a word step each) per token and sweep by default.
DEFAULT_CYCLES = 2


class TokenContext:
    """What a token's chain reads of its own place, one entry per chain.

    Attributes
    ----------
    token : ndarray of int64
        Canonical token index: the Philox counter of the chain's random numbers.
    doc, word, topic : ndarray of int
        The token's document, word and current topic ``z``.
    doc_rank, word_rank : ndarray of int64
        Its place among its document's tokens and among its word's tokens (``by_word`` order).
    """

    def __init__(self, token, doc, word, topic, doc_rank, word_rank):
        self.token = np.asarray(token, dtype=np.int64)
        self.doc = np.asarray(doc, dtype=np.int64)
        self.word = np.asarray(word, dtype=np.int64)
        self.topic = np.asarray(topic, dtype=np.int64)
        self.doc_rank = np.asarray(doc_rank, dtype=np.int64)
        self.word_rank = np.asarray(word_rank, dtype=np.int64)


class FrozenState:
    """The last M-step's state every chain reads.

    Parameters
    ----------
    z : ndarray of int
        Every token's current topic, document-major (canonical order).
    doc_ptr : ndarray of int64
        Token offsets of the documents.
    by_word, word_ptr : ndarray of int64
        Tokens sorted by word (stable) and the words' offsets in that order.
    doc_topic : ndarray of float32, shape (n_docs, n_topics)
        A.
    tables : WordTables
        Bhat and its word side ``(B, n + V beta, beta)`` (training tables, not fixed topics).
    alpha : ndarray of float64, shape (n_topics,)
    """

    def __init__(self, z, doc_ptr, by_word, word_ptr, doc_topic, tables, alpha):
        if tables.word_side is None:
            raise ValueError("the Metropolis-Hastings rule needs the counts B behind Bhat "
                             "(training), not fixed topics")
        self.z = np.asarray(z)
        self.doc_ptr = np.asarray(doc_ptr, dtype=np.int64)
        self.by_word = np.asarray(by_word, dtype=np.int64)
        self.word_ptr = np.asarray(word_ptr, dtype=np.int64)
        self.a = doc_topic
        self.tables = tables
        self.counts, _, self.beta = tables.word_side
        self.alpha = np.asarray(alpha, dtype=np.float64)
        self.alpha_cumsum = np.cumsum(self.alpha)
        self.n_topics = self.alpha.size


def _words(ctx, stream, step, seed, iteration):
    lo = (ctx.token & 0xFFFFFFFF).astype(np.uint32)
    hi = (ctx.token >> 32).astype(np.uint32)
    return philox4x32(lo, hi, np.uint32(stream), np.uint32(step), seed, iteration)


def _uniform(bits):
    """Every engine's uniform of a Philox word, in float64 for the proposals' arithmetic (the
    conversion is exact)."""
    return bits_uniform(bits).astype(np.float64)


def _other(bits, n_others, own_rank):
    """A uniform index among ``n_others`` items that skips ``own_rank`` (0 where none)."""
    j = (bits.astype(np.uint64) % np.maximum(n_others, 1).astype(np.uint64)).astype(np.int64)
    return j + (j >= own_rank)


class _Target:
    """``pi``'s two factors and the word proposal's weight at any topic, per chain."""

    def __init__(self, state, ctx):
        self.state, self.ctx = state, ctx
        z = ctx.topic
        self.own = own_bhat(state.tables.bhat, state.tables.word_side, ctx.word, z, None,
                            state.tables.cells).astype(np.float64)

    def word_side(self, k):
        s, c = self.state, self.ctx
        return np.where(k == c.topic, self.own, s.tables.bhat[c.word, k].astype(np.float64))

    def doc_side(self, k):
        s, c = self.state, self.ctx
        return s.a[c.doc, k].astype(np.float64) - (k == c.topic) + s.alpha[k]

    def word_proposal(self, k):
        s, c = self.state, self.ctx
        return s.counts[c.word, k].astype(np.float64) - (k == c.topic) + s.beta


def run_chains(state, ctx, start, seed, iteration, n_cycles, first_step=0):
    """Run each chain of ``ctx`` for ``n_cycles`` cycles from ``start``; its final topics.

    Step ``first_step + 2 c`` is cycle c's document step and ``first_step + 2 c + 1`` its word
    step (the Philox counter's fourth word).
    """
    k = np.asarray(start, dtype=np.int64).copy()
    target = _Target(state, ctx)
    n_topics = state.n_topics
    doc_len = state.doc_ptr[ctx.doc + 1] - state.doc_ptr[ctx.doc]
    word_len = state.word_ptr[ctx.word + 1] - state.word_ptr[ctx.word]
    alpha_sum = state.alpha_cumsum[-1]
    for cycle in range(n_cycles):
        step = first_step + 2 * cycle
        # Document step: another token's topic, or a draw from alpha (with a uniform of its
        # own: the branch's uniform, scaled by the document's length, is too coarse for it).
        w0, w1, w2, w3 = _words(ctx, STREAM_MH, step, seed, iteration)
        others = doc_len - 1
        from_doc = _uniform(w0) * (others + alpha_sum) < others
        j = state.doc_ptr[ctx.doc] + _other(w1, others, ctx.doc_rank)
        from_alpha = np.minimum(np.searchsorted(state.alpha_cumsum, _uniform(w3) * alpha_sum,
                                                side="right"), n_topics - 1)
        proposal = np.where(from_doc, state.z[np.where(from_doc, j, 0)], from_alpha)
        ratio = target.word_side(proposal) / target.word_side(k)
        k = np.where(_uniform(w2) < ratio, proposal, k)
        # Word step: another token's topic of the word, or a uniform topic.
        w0, w1, w2, w3 = _words(ctx, STREAM_MH, step + 1, seed, iteration)
        others = word_len - 1
        from_word = _uniform(w0) * (others + n_topics * state.beta) < others
        j = state.word_ptr[ctx.word] + _other(w1, others, ctx.word_rank)
        picked = state.z[state.by_word[np.where(from_word, j, 0)]]
        proposal = np.where(from_word, picked, bits_topic(w3, n_topics))
        ratio = ((target.doc_side(proposal) * target.word_side(proposal)
                  * target.word_proposal(k))
                 / (target.doc_side(k) * target.word_side(k) * target.word_proposal(proposal)))
        k = np.where(_uniform(w2) < ratio, proposal, k)
    return k


def conditional(state, ctx):
    """``pi`` of each chain's token over the K topics, normalised: shape (chains, K)."""
    target = _Target(state, ctx)
    topics = np.arange(state.n_topics)
    p = np.stack([target.doc_side(np.full(ctx.token.size, k)) *
                  target.word_side(np.full(ctx.token.size, k)) for k in topics], axis=1)
    return p / p.sum(axis=1, keepdims=True)


def word_ranks(by_word, word_ptr, word):
    """Each token's place among its word's tokens in ``by_word`` order."""
    rank = np.empty(by_word.size, dtype=np.int64)
    rank[by_word] = np.arange(by_word.size, dtype=np.int64) - word_ptr[word[by_word]]
    return rank


def draw_topics_mh(state, doc, word, seed, iteration, offset=0, n_cycles=DEFAULT_CYCLES,
                   word_rank=None):
    """Every token's new topic: its chain run for ``n_cycles`` cycles from its current topic.

    Parameters
    ----------
    state : FrozenState
    doc, word : ndarray of int
        Every token's document and word (canonical order, as ``state.z``).
    seed, iteration : int
        The Philox key, as every draw of the sweep.
    offset : int, default=0
        Canonical index of the first token (a shard's place in the corpus).
    n_cycles : int, default=DEFAULT_CYCLES
    word_rank : ndarray of int64, optional
        :func:`word_ranks` of the tokens (computed when not given).

    Returns
    -------
    ndarray of int32
    """
    n = state.z.size
    index = np.arange(n, dtype=np.int64)
    doc = np.asarray(doc, dtype=np.int64)
    if word_rank is None:
        word_rank = word_ranks(state.by_word, state.word_ptr, np.asarray(word, dtype=np.int64))
    ctx = TokenContext(index + int(offset), doc, word, state.z, index - state.doc_ptr[doc],
                       word_rank)
    return run_chains(state, ctx, state.z, seed, iteration, n_cycles).astype(np.int32)
