"""A progress display for fits: sweeps done, sweeps/s, Mtoken/s and time left.

:class:`FitProgress` is called once per finished sweep, ``progress(iteration, info)``, the form of
the per-sweep hook the command line asks of the estimator's fit loop. It draws with tqdm when tqdm
is installed and the stream is a terminal; otherwise it writes plain text: one line rewritten in
place on a terminal, or a new line every ``log_interval`` seconds elsewhere, so that a log file
gets a readable record instead of thousands of carriage returns. tqdm is optional: the package
depends on numpy, scipy, scikit-learn and joblib only.
"""

import sys
import time

#: Seconds between redraws on a terminal: often enough to look live, rarely enough that drawing
#: costs nothing next to a sweep.
TERMINAL_INTERVAL = 0.1

#: Seconds between lines when the stream is a file or a pipe.
LOG_INTERVAL = 10.0

_BAR_WIDTH = 24


def _seconds_text(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _load_tqdm():
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


class FitProgress:
    """Show the progress of a fit of ``total`` sweeps over ``n_tokens`` tokens.

    Parameters
    ----------
    total : int
        Sweeps the fit will run at most (``max_iter``).
    n_tokens : float
        Tokens sampled per sweep; with the sweep rate it gives Mtoken/s.
    stream : file object or None, default=None
        Where to draw; None means ``sys.stderr``, which keeps standard output for results.
    use_tqdm : bool or None, default=None
        None: tqdm when it imports and ``stream`` is a terminal. False: always the plain display.
    clock : callable, default=time.perf_counter
        Seconds since an arbitrary origin; used when a call gives no ``seconds``.
    log_interval : float, default=LOG_INTERVAL
        Seconds between lines when ``stream`` is not a terminal.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> ticks = iter([0.0, 2.0])
    >>> with FitProgress(4, 1e6, stream=out, clock=lambda: next(ticks)) as progress:
    ...     progress(4, {})
    >>> print(out.getvalue().strip())
    sweep 4/4 [========================] 100%  2.00 sweeps/s  2.00 Mtoken/s  2 s
    """

    def __init__(self, total, n_tokens, *, stream=None, use_tqdm=None, clock=time.perf_counter,
                 log_interval=LOG_INTERVAL):
        self.total = max(int(total), 1)
        self.n_tokens = float(n_tokens)
        self.stream = sys.stderr if stream is None else stream
        self.clock = clock
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = TERMINAL_INTERVAL if self.terminal else float(log_interval)
        tqdm = None
        if use_tqdm or (use_tqdm is None and self.terminal):
            tqdm = _load_tqdm()
        self._bar = None if tqdm is None else tqdm(
            total=self.total, unit="sweep", file=self.stream, dynamic_ncols=True, leave=True)
        self._start = clock()
        self._iteration = 0
        self._seconds = 0.0
        self._drawn_at = None
        self._pending = False
        self._closed = False
        self._width_drawn = 0

    # -- the per-sweep hook ------------------------------------------------------------------
    def __call__(self, iteration, info=None):
        """Record that ``iteration`` sweeps are done.

        ``info`` may carry ``seconds``, the fit's own clock since sampling began; without it the
        time since this display was created is used.
        """
        seconds = (info or {}).get("seconds")
        self._seconds = self.clock() - self._start if seconds is None else float(seconds)
        self._iteration = int(iteration)
        if self._bar is not None:
            self._bar.update(self._iteration - self._bar.n)
            self._bar.set_postfix_str(f"{self.tokens_per_second / 1e6:.2f} Mtoken/s",
                                      refresh=False)
            return
        due = self._drawn_at is None or self._seconds - self._drawn_at >= self.interval
        if due or self._iteration >= self.total:
            self._draw()
        else:
            self._pending = True

    @property
    def sweeps_per_second(self):
        """Mean sweep rate so far (0 before the first sweep)."""
        return self._iteration / self._seconds if self._seconds > 0 else 0.0

    @property
    def tokens_per_second(self):
        """Mean sampled tokens per second so far."""
        return self.sweeps_per_second * self.n_tokens

    def line(self):
        """The plain display's text for the state so far."""
        done = min(self._iteration / self.total, 1.0)
        filled = int(round(done * _BAR_WIDTH))
        bar = "=" * filled + (">" if 0 < filled < _BAR_WIDTH else "")
        text = (f"sweep {self._iteration}/{self.total} [{bar:<{_BAR_WIDTH}}] {done:4.0%}  "
                f"{self.sweeps_per_second:.2f} sweeps/s  "
                f"{self.tokens_per_second / 1e6:.2f} Mtoken/s")
        if self._iteration >= self.total or self.sweeps_per_second == 0:
            return f"{text}  {_seconds_text(self._seconds)}"
        left = (self.total - self._iteration) / self.sweeps_per_second
        return f"{text}  {_seconds_text(self._seconds)}, about {_seconds_text(left)} left"

    def _draw(self):
        text = self.line()
        if self.terminal:
            # Padded so that a shorter line fully covers the previous one.
            self.stream.write("\r" + text.ljust(self._width_drawn))
            self._width_drawn = max(self._width_drawn, len(text))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._drawn_at = self._seconds
        self._pending = False

    def close(self):
        """Draw the final state (a fit may stop before ``total``) and end the line."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
            return
        if self._pending:
            self._draw()
        if self.terminal and self._drawn_at is not None:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False
