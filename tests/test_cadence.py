"""verbose's evaluations keep to their share of a fit's time
(:mod:`sklearn_gpulda._fitting.cadence`)."""

import pytest

from sklearn_gpulda._fitting.cadence import Cadence


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _simulate(step_cost, eval_cost, n_steps, share=0.05):
    """A fit of ``n_steps`` steps that evaluates whenever the cadence allows; returns the steps
    evaluated and the share of the time evaluations took."""
    clock = _Clock()
    cadence = Cadence(share=share, clock=clock)
    evaluated = []
    for n in range(1, n_steps + 1):
        clock.now += step_cost
        if cadence.due(n):
            with cadence.timing():
                clock.now += eval_cost
            evaluated.append(n)
    return evaluated, cadence.spent / (clock.now - cadence.spent)


@pytest.mark.parametrize("eval_cost", [0.01, 0.3, 1.0, 1.5, 10.0])
def test_evaluations_never_exceed_their_share(eval_cost):
    evaluated, used = _simulate(step_cost=1.0, eval_cost=eval_cost, n_steps=1000)
    assert used <= 0.05 + 1e-12
    # ... and the share is used, not wasted (up to one evaluation's worth, and the first 19
    # steps, where none is due), unless evaluating at every step costs less than the share.
    assert used >= 0.9 * min(0.05, eval_cost) - eval_cost / 1000
    assert evaluated == sorted(set(evaluated))


def test_cheap_evaluations_run_often_and_dear_ones_rarely():
    cheap, _ = _simulate(step_cost=1.0, eval_cost=0.01, n_steps=200)
    dear, _ = _simulate(step_cost=1.0, eval_cost=1.0, n_steps=200)
    # The first is guessed at one step's cost, so neither comes before step 20.
    assert cheap[0] == dear[0] == 20
    assert len(cheap) == 181          # every step from the 20th on
    assert 8 <= len(dear) <= 10       # one per 20 steps of work


def test_a_zero_share_never_evaluates():
    evaluated, used = _simulate(step_cost=1.0, eval_cost=0.5, n_steps=100, share=0.0)
    assert evaluated == [] and used == 0.0
