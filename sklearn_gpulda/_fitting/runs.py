"""Runs of sweeps: how far the fit loop can let a sampler sweep before it needs the chain.

Between two sweeps the loop may need something of the whole chain: a prior update, an
evaluation (``evaluate_every``, which also decides when the fit stops), the first averaged
sweep (whose accumulation makes the running sum, and may give way where it does not fit),
a line of progress (``verbose``) or the callback, and the end. Between those points it needs
nothing, so it hands the sampler the sweeps up to the next one as one run
(:meth:`~sklearn_gpulda.backends.base.Sampler.sweeps`). A sampler whose sweeps are driven over
the network (a Dask fit whose workers sum B among themselves) then pays one round trip per run
instead of one per sweep; any other sampler runs the sweeps one by one, as before.
"""


def run_end(first, max_iter, stops=(), per_sweep=False):
    """The last sweep of the run that starts at sweep ``first``.

    Parameters
    ----------
    first : int
        The run's first sweep (1-based).
    max_iter : int
        The fit's last sweep, which ends every run that reaches it.
    stops : sequence of callables
        ``stop(n)`` is True where the loop needs the chain after sweep ``n`` (a prior update,
        an evaluation, the first averaged sweep).
    per_sweep : bool, default=False
        The loop needs every sweep (``verbose`` progress, a callback): runs of one sweep.

    Returns
    -------
    int
        The first sweep from ``first`` on after which a stop is due, or ``max_iter``.

    Examples
    --------
    >>> run_end(1, 25, [lambda n: n % 10 == 0])
    10
    >>> run_end(11, 25, [lambda n: n % 10 == 0, lambda n: n == 13])
    13
    >>> run_end(21, 25, [lambda n: n % 10 == 0])
    25
    >>> run_end(4, 25, per_sweep=True)
    4
    """
    first, max_iter = int(first), int(max_iter)
    if first > max_iter:
        raise ValueError(f"a run cannot start at sweep {first} of {max_iter}")
    if per_sweep:
        return first
    last = first
    while last < max_iter and not any(stop(last) for stop in stops):
        last += 1
    return last
