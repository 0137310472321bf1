"""Where a fit's time goes, stage by stage, for benchmarks.

The fit code marks its stages (``with stage("layout"): ...``). Outside :func:`recording` a mark
costs one global lookup and records nothing, so fits are not slowed. Inside it, each stage's wall
time is added to a dictionary; the device's queue is drained at both ends of a stage (``sync``),
so that asynchronous GPU work is charged to the stage that queued it rather than to the next one
that waits. Draining the queue costs a little, which is why it happens only while recording.

Usage::

    pool = cupy.get_default_memory_pool()
    with recording(sync=cupy.cuda.Device(0).synchronize, in_use=pool.used_bytes) as log:
        lda.fit(X)
    log.seconds    # {'validate': 0.21, 'tokens': 0.43, ...}
    log.in_use     # bytes in use at the end of each stage (the last time it ran)
"""

import time
from contextlib import contextmanager

_active = None  # the StageLog being recorded into, if any


class StageLog:
    """What :func:`recording` collects: ``seconds`` per stage (added up over repeats),
    ``durations`` (each run's seconds, in order) and ``in_use``, the bytes its ``in_use``
    callable reported at the end of each stage."""

    def __init__(self, sync, in_use):
        self.sync = sync or (lambda: None)
        self.measure = in_use
        self.seconds = {}
        self.in_use = {}
        self.durations = {}  # every run's seconds, in order


@contextmanager
def recording(sync=None, in_use=None):
    """Record the stages run inside the block; yields the :class:`StageLog`.

    Parameters
    ----------
    sync : callable, optional
        Called at both ends of every stage (e.g. a CUDA device's ``synchronize``).
    in_use : callable, optional
        Returns the bytes in use (e.g. a CuPy memory pool's ``used_bytes``).
    """
    global _active
    previous = _active
    log = _active = StageLog(sync, in_use)
    try:
        yield log
    finally:
        _active = previous


@contextmanager
def stage(name):
    """Charge the block's wall time to ``name`` while recording."""
    log = _active
    if log is None:
        yield
        return
    log.sync()
    tic = time.perf_counter()
    try:
        yield
    finally:
        log.sync()
        elapsed = time.perf_counter() - tic
        log.seconds[name] = log.seconds.get(name, 0.0) + elapsed
        log.durations.setdefault(name, []).append(elapsed)
        if log.measure is not None:
            log.in_use[name] = int(log.measure())
