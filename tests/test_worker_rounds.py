"""Rounds of tasks on the CPU engine's worker processes (:mod:`sklearn_gpulda.backends.numpy
.worker_rounds`): results in order, work shared out, errors raised where the round was asked
for, and a pool that lost a worker replaced by the next call."""

import os
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


@pytest.fixture
def pool():
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
