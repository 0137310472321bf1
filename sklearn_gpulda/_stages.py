"""Where a fit's time goes, stage by stage, for benchmarks.

The fit code marks its stages (``with stage("layout"): ...``). Outside :func:`recording` a mark
costs one global lookup and records nothing, so fits are not slowed. Inside it, each stage's wall
time is added to a dictionary; the device's queue is drained at both ends of a stage (``sync``),
so that asynchronous GPU work is charged to the stage that queued it rather than to the next one
that waits. Draining the queue costs a little, which is why it happens only while recording.

Usage::

    with recording(sync=cupy.cuda.Device(0).synchronize) as seconds:
        lda.fit(X)
    print(seconds)   # {'validate': 0.21, 'tokens': 0.43, ...}
"""

import time
from contextlib import contextmanager

_active = None  # (seconds dict, sync callable) while recording


@contextmanager
def recording(sync=None):
    """Record the stages run inside the block; yields the dict of seconds per stage name.

    Parameters
    ----------
    sync : callable, optional
        Called at both ends of every stage (e.g. a CUDA device's ``synchronize``).
    """
    global _active
    previous = _active
    seconds = {}
    _active = (seconds, sync or (lambda: None))
    try:
        yield seconds
    finally:
        _active = previous


@contextmanager
def stage(name):
    """Charge the block's wall time to ``name`` (added up over repeats) while recording."""
    active = _active
    if active is None:
        yield
        return
    seconds, sync = active
    sync()
    tic = time.perf_counter()
    try:
        yield
    finally:
        sync()
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - tic
