"""Rounds of tasks on worker processes, at a small fixed cost per round.

A CPU sweep is three rounds of tasks (draws, counts, tables), each waiting for the last, so
the fixed cost of a round counts three times a sweep. Through loky's executor every task
crosses two threads of the main process and two shared queues, which at many jobs costs a good
part of a sweep of a small corpus. So the workers are plain processes, started the way loky
starts its own (a fresh interpreter that does not run the user's ``__main__``), each running
:func:`_serve`: it connects back to this process over a Unix socket of its own and then runs
rounds until told to stop.

A round: this process sets a shared counter to 0 and sends every worker the same message (the
task, the items, the arguments); each worker takes the next item by incrementing the counter
under a file lock, until none is left, and sends back its items' results. So a worker that
finishes early takes more, as with one future per item, and the round costs one message each
way per worker.
"""

import atexit
import os
import pickle
import shutil
import signal
import socket
import tempfile
import threading
import traceback
from multiprocessing.connection import Connection, wait

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the CPU engine stays on threads there
    fcntl = None

#: Whether this platform has what the pool needs (Unix sockets and file locks).
SUPPORTED = fcntl is not None and hasattr(socket, "AF_UNIX")

#: Seconds the pool waits for its workers to connect after starting them.
CONNECT_TIMEOUT_S = 120.0

_STOP = b"stop"


class WorkerLostError(RuntimeError):
    """A worker process of the CPU engine ended during a round (killed, out of memory)."""


class RemoteTaskError(RuntimeError):
    """A task failed in a worker process and its exception could not be sent back as it was."""


def _take(fd):
    """The next item's index from the round's counter (a file every worker shares)."""
    fcntl.lockf(fd, fcntl.LOCK_EX)
    try:
        i = int.from_bytes(os.pread(fd, 8, 0), "little")
        os.pwrite(fd, (i + 1).to_bytes(8, "little"), 0)
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN)
    return i


def _reply_error(conn, exc):
    """Send ``exc`` and its traceback's text (an exception that does not pickle goes as
    :class:`RemoteTaskError` holding that text)."""
    text = "".join(traceback.format_exception(exc))
    try:
        data = pickle.dumps(("error", (exc, text)))
    except Exception:  # noqa: BLE001 - any pickling failure
        data = pickle.dumps(("error", (RemoteTaskError(text), text)))
    conn.send_bytes(data)


def _serve(address, counter_path, prepare, resolve):
    """A worker's loop: connect to ``address``, then for each message run a round (or, for
    ``("each", fn, args)``, ``fn(*args)`` once) until the stop message or the end of the
    connection. ``prepare()`` runs before every message's work (dropping stale maps), and
    ``resolve(value)`` turns each argument into what the task takes (a handle into its
    array)."""
    # Ctrl-C reaches every process of the terminal's group: the caller handles it (and ends
    # the pool), so a worker waiting for its next message does not die with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address)
        fd = os.open(counter_path, os.O_RDWR)
    except OSError:
        # The pool was shut down (or its process ended) before this worker connected.
        sock.close()
        return
    conn = Connection(sock.detach())
    try:
        _rounds(conn, fd, prepare, resolve)
    except (EOFError, ConnectionError):
        # The main process closed its end (an interrupt, or it ended) while this worker was
        # working or replying: nobody is left to tell, so the worker ends without a traceback.
        pass
    finally:
        os.close(fd)
        conn.close()


def _rounds(conn, fd, prepare, resolve):
    """:func:`_serve`'s loop over messages on ``conn``; ``fd`` is the round counter's file."""
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if message == _STOP:
            return
        try:
            kind, fn, payload = pickle.loads(message)
            prepare()
            if kind == "each":
                conn.send_bytes(pickle.dumps(("ok", fn(*payload))))
                continue
            items, arguments = payload
            arguments = {k: resolve(v) for k, v in arguments.items()}
            done = []
            while (i := _take(fd)) < len(items):
                done.append((i, fn(items[i], **arguments)))
            conn.send_bytes(pickle.dumps(("ok", done)))
        except BaseException as exc:  # noqa: BLE001 - sent back and raised there
            _reply_error(conn, exc)


class RoundPool:
    """``n_workers`` worker processes serving rounds (see the module's docstring).

    Parameters
    ----------
    n_workers : int
    prepare, resolve : callable
        Module functions, run in a worker: ``prepare()`` before each message's work,
        ``resolve(value)`` on each argument of a round's task.
    """

    def __init__(self, n_workers, prepare, resolve):
        try:  # joblib needs it from 1.6 on; earlier versions carry their own copy
            import cloudpickle
        except ImportError:  # pragma: no cover
            from joblib.externals import cloudpickle

        self.n_workers = int(n_workers)
        self._dumps = cloudpickle.dumps
        self._lock = threading.Lock()
        self.broken = False
        self._folder = tempfile.mkdtemp(prefix="sklearn-gpulda-rounds-")
        address = os.path.join(self._folder, "socket")
        counter_path = os.path.join(self._folder, "counter")
        with open(counter_path, "wb") as f:
            f.write(bytes(8))
        self._counter = os.open(counter_path, os.O_RDWR)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(address)
        server.listen(self.n_workers)
        server.settimeout(CONNECT_TIMEOUT_S)
        from joblib.externals.loky.backend.context import get_context

        context = get_context("loky")
        self._processes = [context.Process(target=_serve, daemon=True,
                                           args=(address, counter_path, prepare, resolve))
                           for _ in range(self.n_workers)]
        self._conns = []
        try:
            for process in self._processes:
                process.start()
            for _ in range(self.n_workers):
                client, _ = server.accept()
                client.setblocking(True)
                self._conns.append(Connection(client.detach()))
        except BaseException:
            self._close(kill=True)
            raise
        finally:
            server.close()
        _open_pools.add(self)

    def run(self, task, items, arguments, n_workers=None):
        """``[task(item, **arguments) for item in items]`` over the first ``n_workers``
        workers (all by default), in order; an exception a task raised is raised here once the
        round is over. Which workers take which items changes no result."""
        items = list(items)
        results = [None] * len(items)
        for done in self._round(("round", task, (items, arguments)), n_workers):
            for i, value in done:
                results[i] = value
        return results

    def each(self, fn, *args):
        """``fn(*args)`` once on every worker; the results, one per worker."""
        return self._round(("each", fn, args))

    def _round(self, message, n_workers=None):
        """Send ``message`` to the first ``n_workers`` workers (all by default); their replies'
        values, in the order they came."""
        with self._lock:
            if self.broken:
                raise WorkerLostError("the CPU engine's worker pool is shut down")
            os.pwrite(self._counter, bytes(8), 0)
            data = self._dumps(message)
            replies, error = [], None
            try:
                pending = self._conns[:n_workers]
                for conn in pending:
                    conn.send_bytes(data)
                pending = list(pending)
                while pending:
                    for conn in wait(pending):
                        pending.remove(conn)
                        status, value = pickle.loads(conn.recv_bytes())
                        if status == "error":
                            error = error or value
                        else:
                            replies.append(value)
            except (EOFError, OSError) as exc:
                self._break()
                raise WorkerLostError(
                    "a worker process of the CPU engine ended during a round (killed, or out of "
                    "memory?); the pool is shut down and the next fit starts a new one") from exc
            except BaseException:
                # Interrupted: the workers' replies would come in the next round.
                self._break()
                raise
        if error is not None:
            exc, text = error
            raise exc from RemoteTaskError(f"in a worker process:\n{text}")
        return replies

    def _break(self):
        self.broken = True
        self._close(kill=True)

    def shutdown(self):
        """Stop the workers' loops and wait for the processes to end."""
        with self._lock:
            self.broken = True
            self._close(kill=False)

    def _close(self, kill):
        for conn in self._conns:
            try:
                if not kill:
                    conn.send_bytes(_STOP)
                conn.close()
            except OSError:
                pass
        self._conns = []
        for process in self._processes:
            if process.pid is None:  # never started
                continue
            if kill:
                process.terminate()
            process.join(timeout=None if kill else 10)
            if process.is_alive():
                process.kill()
                process.join()
        self._processes = []
        if self._counter is not None:
            os.close(self._counter)
            self._counter = None
        shutil.rmtree(self._folder, ignore_errors=True)
        _open_pools.discard(self)


_open_pools = set()


def _shutdown_open_pools():
    for pool in list(_open_pools):
        try:
            pool.shutdown()
        except Exception:  # noqa: BLE001 - at exit, a pool that fails to stop is left
            pass


# Before multiprocessing's own exit hook (registered when it was imported, so run later), which
# would terminate the workers rather than let them stop.
atexit.register(_shutdown_open_pools)
