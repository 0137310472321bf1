"""What one evaluation of a model being fitted found: a :class:`Score`, as ``history_`` records it
and ``verbose`` prints it."""

from dataclasses import dataclass, field

import numpy as np


def perplexity(loglik, n_tokens):
    """``exp(-loglik / n_tokens)``; NaN without tokens."""
    if n_tokens <= 0:
        return float("nan")
    return float(np.exp(-loglik / n_tokens))


@dataclass(frozen=True)
class Score:
    """One evaluation: the training perplexity, and where the evaluation gives them the
    log-likelihood per token and the chain's priors.

    Attributes
    ----------
    perplexity : float
    loglik_per_token : float or None
        None where the evaluation gives the perplexity alone (online learning's fold-in).
    priors : dict
        ``alpha_sum`` and ``beta`` of a batch fit's chain when it was scored; else empty.
    """

    perplexity: float
    loglik_per_token: float = None
    priors: dict = field(default_factory=dict)

    @classmethod
    def of_loglik(cls, loglik, n_tokens, **priors):
        """The score of a training log-likelihood ``loglik`` over ``n_tokens`` tokens."""
        return cls(perplexity(loglik, n_tokens), loglik / max(n_tokens, 1), priors)

    def figures(self):
        """The row of ``history_`` it gives, beside the iteration and the time."""
        loglik = {} if self.loglik_per_token is None else {"train_loglik": self.loglik_per_token}
        return {**loglik, "train_perplexity": self.perplexity, **self.priors}

    def text(self):
        """What ``verbose`` prints of it."""
        loglik = ([] if self.loglik_per_token is None
                  else [f"log-likelihood/token: {self.loglik_per_token:.4f}"])
        return ", ".join(loglik + [f"perplexity: {self.perplexity:.4f}"])
