"""The fit progress display (``sklearn_gpulda/_present/progress.py``), driven by a fake clock."""

import io
import sys
import types

import pytest

from sklearn_gpulda._present.progress import FitProgress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def ticking(*times):
    values = iter(times)
    return lambda: next(values)


def test_rates_count_sweeps_and_tokens():
    progress = FitProgress(100, 2_500_000, stream=io.StringIO(), clock=ticking(0.0, 4.0))
    progress(10)
    assert progress.sweeps_per_second == pytest.approx(2.5)
    assert progress.tokens_per_second == pytest.approx(6.25e6)
    assert "sweep 10/100" in progress.line()
    assert "2.50 sweeps/s  6.25 Mtoken/s  4 s, about 36 s left" in progress.line()


def test_the_fit_clock_wins_over_the_display_clock():
    progress = FitProgress(10, 1e6, stream=io.StringIO(), clock=ticking(0.0, 99.0))
    progress(5, {"seconds": 1.0})
    assert progress.sweeps_per_second == pytest.approx(5.0)


def test_a_log_gets_one_line_per_interval_and_the_last_state():
    out = io.StringIO()
    with FitProgress(50, 1e6, stream=out, use_tqdm=False, clock=ticking(0.0),
                     log_interval=10.0) as progress:
        for i in range(1, 38):
            progress(i, {"seconds": i * 0.5})  # two sweeps a second, stopped early at 37
    lines = out.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == ["1/50", "21/50", "37/50"]
    assert "\r" not in out.getvalue()
    assert lines[-1].startswith("sweep 37/50 [==================>     ]  74%  2.00 sweeps/s")


def test_a_terminal_gets_one_line_rewritten_in_place():
    out = Terminal()
    with FitProgress(3, 1e6, stream=out, use_tqdm=False, clock=ticking(0.0)) as progress:
        for i in range(1, 4):
            progress(i, {"seconds": float(i)})
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    assert text.rstrip().endswith("1.00 Mtoken/s  3 s")


def test_closing_twice_or_without_sweeps_writes_nothing_more():
    out = Terminal()
    progress = FitProgress(5, 1e6, stream=out, use_tqdm=False, clock=ticking(0.0))
    progress.close()
    progress.close()
    assert out.getvalue() == ""


def test_tqdm_draws_when_installed_on_a_terminal(monkeypatch):
    calls = []

    class FakeTqdm:
        def __init__(self, **kwargs):
            calls.append(("init", kwargs["total"], kwargs["unit"]))
            self.n = 0

        def update(self, n):
            self.n += n
            calls.append(("update", n))

        def set_postfix_str(self, text, refresh=True):
            calls.append(("postfix", text))

        def close(self):
            calls.append(("close",))

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    with FitProgress(8, 3e6, stream=Terminal(), clock=ticking(0.0)) as progress:
        progress(2, {"seconds": 1.0})
        progress(5, {"seconds": 2.0})
    assert calls == [("init", 8, "sweep"), ("update", 2), ("postfix", "6.00 Mtoken/s"),
                     ("update", 3), ("postfix", "7.50 Mtoken/s"), ("close",)]


def test_without_tqdm_a_terminal_falls_back_to_the_plain_display(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now raises ImportError
    out = Terminal()
    with FitProgress(2, 1e6, stream=out, clock=ticking(0.0)) as progress:
        progress(2, {"seconds": 1.0})
    assert "sweep 2/2" in out.getvalue()
