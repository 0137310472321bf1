"""Rounds of tasks on the CPU engine's worker processes (:mod:`sklearn_gpulda.backends.numpy
.worker_rounds`): results in order, work shared out, errors raised where the round was asked
for, and a pool that lost a worker replaced by the next call."""

import os
import subprocess
import sys
import threading
import time

import pytest

from sklearn_gpulda.backends.numpy import processes
from sklearn_gpulda.backends.numpy.worker_rounds import RemoteTaskError, WorkerLostError


def _square_slowly(item, pause):
    time.sleep(pause)
    return item * item, os.getpid()


def _fail_on(item, bad):
    if item == bad:
        raise ValueError(f"item {item} is bad")
    return item


def _die_on(item, bad):
    if item == bad:
        os._exit(3)
    return item


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("not this one")


def _raise_unpicklable(item):
    raise _Unpicklable("held a lock")


@pytest.fixture(scope="module")
def own_pools():
    """This module's pools, apart from those other tests started: ``_pool(2)`` would take a
    larger one already running."""
    saved, processes._pools = processes._pools, {}
    yield
    for started in list(processes._pools.values()):
        started.shutdown()
    processes._pools = saved


@pytest.fixture
def pool(own_pools):
    return processes._pool(2)


def test_results_come_in_item_order_and_both_workers_take_items(pool):
    out = pool.run(_square_slowly, range(12), {"pause": 0.02})
    assert [value for value, _ in out] == [i * i for i in range(12)]
    assert len({pid for _, pid in out}) == 2
    assert os.getpid() not in {pid for _, pid in out}


def test_an_empty_round_and_a_round_of_one_item(pool):
    assert pool.run(_square_slowly, [], {"pause": 0.0}) == []
    assert [v for v, _ in pool.run(_square_slowly, [7], {"pause": 0.0})] == [49]


def test_a_task_defined_in_a_function_travels_by_value(pool):
    offset = 10

    def shifted(item):
        return item + offset

    assert pool.run(shifted, range(5), {}) == [10, 11, 12, 13, 14]


def test_a_failing_task_raises_its_error_here_and_the_pool_goes_on(pool):
    with pytest.raises(ValueError, match="item 3 is bad") as info:
        pool.run(_fail_on, range(8), {"bad": 3})
    # The worker's traceback comes along as the cause.
    assert isinstance(info.value.__cause__, RemoteTaskError)
    assert "_fail_on" in str(info.value.__cause__)
    assert not pool.broken
    assert pool.run(_fail_on, range(4), {"bad": -1}) == [0, 1, 2, 3]


def test_an_error_that_does_not_pickle_arrives_as_its_text(pool):
    with pytest.raises(RemoteTaskError, match="held a lock"):
        pool.run(_raise_unpicklable, range(2), {})
    assert pool.run(_fail_on, range(3), {"bad": -1}) == [0, 1, 2]


def test_a_worker_that_dies_is_a_clear_error_and_the_next_call_has_a_new_pool(pool):
    with pytest.raises(WorkerLostError, match="ended during a round"):
        pool.run(_die_on, range(6), {"bad": 2})
    assert pool.broken
    with pytest.raises(WorkerLostError, match="shut down"):
        pool.run(_fail_on, range(2), {"bad": -1})
    fresh = processes._pool(2)
    assert fresh is not pool
    assert fresh.run(_fail_on, range(3), {"bad": -1}) == [0, 1, 2]


def test_rounds_asked_from_two_threads_do_not_mix(pool):
    results, errors = {}, []

    def ask(name, start):
        try:
            for _ in range(5):
                got = [v for v, _ in pool.run(_square_slowly, range(start, start + 9),
                                              {"pause": 0.001})]
                assert got == [i * i for i in range(start, start + 9)]
            results[name] = True
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(n, 100 * n)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 2


def test_each_runs_once_on_every_worker(pool):
    pids = pool.each(os.getpid)
    assert len(pids) == 2 and len(set(pids)) == 2


def test_an_interrupted_round_ends_the_pool_and_the_next_call_starts_anew(pool, monkeypatch):
    # Ctrl-C while waiting: the workers' replies would come in the next round, so the pool ends.
    from sklearn_gpulda.backends.numpy import worker_rounds

    def interrupted(conns):
        raise KeyboardInterrupt

    monkeypatch.setattr(worker_rounds, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pool.run(_fail_on, range(4), {"bad": -1})
    monkeypatch.undo()
    assert pool.broken
    assert processes._pool(2).run(_fail_on, range(4), {"bad": -1}) == [0, 1, 2, 3]


def test_a_round_on_fewer_workers_and_a_smaller_team_reuses_a_larger_pool(monkeypatch):
    monkeypatch.setattr(processes, "_pools", {})
    big = processes._pool(3)
    try:
        assert processes._pool(2) is big and processes._pool(3) is big
        out = big.run(_square_slowly, range(12), {"pause": 0.02}, n_workers=2)
        assert [value for value, _ in out] == [i * i for i in range(12)]
        assert len({pid for _, pid in out}) == 2
        assert len(set(big.each(os.getpid))) == 3
        assert processes._pool(4) is not big
    finally:
        for started in processes._pools.values():
            started.shutdown()


_ORPHANED_WORKER = """
import time
from sklearn_gpulda.backends.numpy import processes
pool = processes._pool(1)
worker = pool._processes[0]
# A round whose reply finds the main process's end closed, as after Ctrl-C.
pool._conns[0].send_bytes(pool._dumps(("round", time.sleep, ([0.5], {}))))
pool._conns[0].close()
worker.join(20)
print("exit", worker.exitcode)
"""


def test_a_worker_whose_main_process_went_away_ends_quietly():
    done = subprocess.run([sys.executable, "-c", _ORPHANED_WORKER], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep
                                                       .join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert "exit 0" in done.stdout
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
