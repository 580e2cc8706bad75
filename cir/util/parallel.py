"""Run one function over many items in worker processes (joblib: loky, threading or Dask).

Why a module: task generation and the replayer both fan work out per task, and both meet
the same quirk of the engine: each game loads a copy of Fast Downward's library, which can
never be unloaded, and textworld keeps every fact it ever made. ``cir.families.alfworld.memory`` recycles
the copies and drops the facts when a game's engine closes, so a worker's memory stays flat
over hundreds of tasks. As a second line, loky replaces a worker whose memory has grown by
300 MB since its first task; it measures that with psutil (a dependency for this reason:
without it loky silently skips the check) and warns "A worker stopped while some jobs were
given to the executor"; that warning is noise to a user, so it is silenced here, and only here,
as is joblib's note that finished results went unused when the caller stops early (its own
error, Ctrl-C), which would come before the caller's error line.

Two guards against runaway processes: ``jobs`` is bounded by the machine's cores
(:func:`check_jobs`; a remote Dask cluster is not bounded), and every helper process a run
starts ends when the process that started it dies (killed with ``kill -9``, say): a local
worker instead of finishing its task for nobody (:class:`_EndWithParent`), and the manager
process that serves the queues between them (:func:`spawn_manager`), which would otherwise
wait for its parent forever. Each checks every :data:`_PARENT_POLL` seconds that its parent
is alive; the resource trackers of multiprocessing and loky end on their own once every
process holding them is gone.
"""

from __future__ import annotations

import os
import pickle  # only to test that an error can travel back: never loads a file
import re
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from multiprocessing import get_context
from multiprocessing.managers import SyncManager
from typing import Any

import joblib

from cir.util.deprecation import quiet
from cir.util.errors import CirError
from cir.util.usercode import user_code_error

BACKENDS = ("loky", "threading", "dask")
_WORKER_RESTART = "A worker stopped while some jobs were given to the executor"
#: what joblib says when the caller stops early (an error in the caller, Ctrl-C): noise
#: printed before the caller's own error line
_STOPPED_EARLY = r"\d+ tasks (have been successfully executed|which were still being processed)"
#: Local workers per core at most: more only queue for the CPU (and each holds an engine).
MAX_JOBS_PER_CORE = 4
_PARENT_POLL = 0.5  # seconds between a worker's checks that its parent is alive


class WorkerLost(CirError):
    """A worker process ended in the middle of its work (killed, or out of memory)."""


class WorkerError(Exception):
    """An error raised in a worker process that cannot travel back to its parent as itself (a
    framework's ``APIError`` holding its HTTP response, say): its type, message and traceback as
    text. Without it the pool reports only that a result failed to un-serialize, which read as a
    worker killed."""

    def __init__(self, kind: str, message: str, trace: str) -> None:
        super().__init__(kind, message, trace)
        self.kind, self.message, self.trace = kind, message, trace

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


def _travelling(err: BaseException) -> BaseException:
    """``err`` if it survives pickling both ways, else a :class:`WorkerError` of it."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 - any failure to round-trip means it cannot travel
        if isinstance(err, CirError):  # a user's error stays one line (SettingError's constructor takes parts)
            return CirError(str(err))
        trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        return WorkerError(type(err).__name__, str(err), trace)


def _lost(err: BaseException) -> CirError:
    """One line for a worker that died, naming the signal that ended it when the pool says."""
    if "serialize" in str(err):  # alive, but what it sent back could not be read
        return CirError(f"a worker's result could not be sent back to this process ({err})")
    listed = re.search(r"\{(.*?)\}", str(err))  # loky: "The exit codes of the workers are {SIGKILL(-9)}"
    codes = re.findall(r"-?\d+", listed.group(1)) if listed else []
    names = []
    for code in codes:
        try:
            names.append(signal.Signals(-int(code)).name if int(code) < 0 else f"exit code {code}")
        except ValueError:
            names.append(f"exit code {code}")
    how = f" ({', '.join(sorted(set(names)))})" if names else ""
    return WorkerLost(f"a worker process ended in the middle of a task{how}: killed, or out of memory")


@contextmanager
def one_thread_each() -> Iterator[None]:
    """BLAS and OpenMP (numpy's matrix products, scikit-learn's solvers) on one thread in this
    process while inside. The analysis solves thousands of small problems: a second thread gains
    nothing on them, and where the cores are busy (other work, or worker processes beside it)
    the threads of a product wait for each other: a paired router's fit took 432 s with two BLAS
    threads and 34 s with one on a 2-core host at load 22 (the same numbers)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def check_jobs(jobs: int, backend: str = "loky", scheduler: str | None = None) -> None:
    """Refuse a number of workers this machine cannot hold (a CirError naming the limit)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise CirError(f"--jobs {jobs!r}: expected an integer >= 1")
    if backend == "dask" and scheduler:
        return  # workers of a running cluster, on its machines
    limit = MAX_JOBS_PER_CORE * cores()
    if jobs > limit:
        raise CirError(f"--jobs {jobs}: at most {limit} local workers on this machine "
                       f"({MAX_JOBS_PER_CORE} per core, {cores()} cores); for more, run on a Dask "
                       "cluster (--backend dask --scheduler ADDRESS)")


class _EndWithParent:
    """``fn`` in a local worker process that exits as soon as its parent is gone."""

    def __init__(self, fn: Callable[..., Any], parent: int) -> None:
        self.fn = fn
        self.parent = parent

    def __call__(self, *args: Any) -> Any:
        _watch_parent(self.parent)
        quiet()  # the parent says each former name the work meets; a worker repeats none
        try:
            return self.fn(*args)
        except (Exception, SystemExit) as err:
            # the user's code's error as text (its frames, the task and step it was at): a traceback
            # cannot cross to the parent, and loky's _RemoteTraceback would bury it in cir's frames
            user = user_code_error(err)
            if user is not None:
                raise user from None
            if isinstance(err, SystemExit):
                raise
            travelling = _travelling(err)
            if travelling is err:
                raise
            raise travelling from None


_watching: set[int] = set()


def _watch_parent(parent: int) -> None:
    """In a worker process of ``parent`` (a direct child): a daemon thread that ends the
    process when the parent dies (the child is then adopted, so its parent pid changes).
    Called when the worker starts (loky's initializer: an idle worker ends too) and again
    before each call; a worker that finds its parent already gone ends at once (it was still
    loading its first task when the parent was killed)."""
    if parent in _watching or os.getpid() == parent:
        return
    if os.getppid() != parent:
        os._exit(1)
    _watching.add(parent)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL)
        os._exit(1)

    threading.Thread(target=watch, name="cir-end-with-parent", daemon=True).start()


def spawn_manager() -> SyncManager:
    """A started manager process for the queues of worker processes (spawned: this process may
    run threads, which fork does not copy safely) that ends within :data:`_PARENT_POLL` seconds
    of this process's death, by any signal (``kill -9`` included): use it as a context manager,
    which shuts it down at the end."""
    manager = SyncManager(ctx=get_context("spawn"))
    manager.start(initializer=_manager_started, initargs=(os.getpid(),))
    return manager


def _manager_started(parent: int) -> None:
    """In the manager process: end with the parent, and say nothing on the user's terminal. It only
    serves queues; when its parent is interrupted while it starts (Ctrl-C, SIGTERM), its address
    can no longer be sent, and Python would print that broken pipe under the parent's one line.
    Whatever goes wrong in it reaches the parent as a lost manager (cir.pairs.farm)."""
    _watch_parent(parent)
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process


def parallel_map(fn: Callable[..., Any], items: Iterable[Any], *args: Any, jobs: int = 1,
                 backend: str = "loky", scheduler: str | None = None,
                 ordered: bool = True) -> Iterator[Any]:
    """Yield ``fn(item, *args)`` for each item, in order or (``ordered=False``) as finished.

    ``jobs == 1`` runs in this process (no pickling, plain tracebacks), except on Dask.
    ``scheduler`` is the address of a running Dask scheduler; without it, Dask starts a
    local cluster of ``jobs`` processes.
    """
    if backend not in BACKENDS:
        raise CirError(f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    check_jobs(jobs, backend, scheduler)
    if jobs == 1 and backend != "dask":
        for item in items:
            yield fn(item, *args)
        return
    if backend == "loky":
        fn = _EndWithParent(fn, os.getpid())
    calls = (joblib.delayed(fn)(item, *args) for item in items)
    return_as = "generator" if ordered else "generator_unordered"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_WORKER_RESTART, category=UserWarning)
        warnings.filterwarnings("ignore", message=_STOPPED_EARLY, category=UserWarning)
        try:
            if backend == "loky":  # each worker watches for its parent from its start
                with joblib.parallel_config(backend="loky", initializer=_watch_parent, initargs=(os.getpid(),)):
                    yield from joblib.Parallel(n_jobs=jobs, return_as=return_as)(calls)
                return
            if backend != "dask":
                yield from joblib.Parallel(n_jobs=jobs, backend=backend, return_as=return_as)(calls)
                return
            with _dask_client(jobs, scheduler), joblib.parallel_config(backend="dask"):
                yield from joblib.Parallel(n_jobs=jobs, return_as=return_as)(calls)
        except BrokenProcessPool as err:
            raise _lost(err) from None


@contextmanager
def _dask_client(jobs: int, scheduler: str | None) -> Iterator[Any]:
    """A Dask client on ``scheduler``, or on a local cluster of ``jobs`` processes."""
    try:  # an optional extra, imported only for this backend
        from dask.distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - depends on the installation
        raise CirError("--backend dask needs dask[distributed]: pip install 'cir[dask]'") from None
    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout="20s")
        else:
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
    except OSError as err:
        raise CirError(f"--scheduler {scheduler!r}: cannot connect to the Dask scheduler ({err})") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
