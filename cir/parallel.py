"""Run one function over many items in worker processes (joblib: loky, threading or Dask).

Why a module: task generation and the replayer both fan work out per task, and both meet
the same quirk of the engine: each game loads a copy of Fast Downward's library, which can
never be unloaded, and textworld keeps every fact it ever made. ``cir.envs.memory`` recycles
the copies and drops the facts when a game's engine closes, so a worker's memory stays flat
over hundreds of tasks. As a second line, loky replaces a worker whose memory has grown by
300 MB since its first task; it measures that with psutil (a dependency for this reason:
without it loky silently skips the check) and warns "A worker stopped while some jobs were
given to the executor"; that warning is noise to a user, so it is silenced here, and only here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import joblib

from cir.errors import CirError

BACKENDS = ("loky", "threading", "dask")
_WORKER_RESTART = "A worker stopped while some jobs were given to the executor"


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
    if jobs == 1 and backend != "dask":
        for item in items:
            yield fn(item, *args)
        return
    calls = (joblib.delayed(fn)(item, *args) for item in items)
    return_as = "generator" if ordered else "generator_unordered"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_WORKER_RESTART, category=UserWarning)
        if backend != "dask":
            yield from joblib.Parallel(n_jobs=jobs, backend=backend, return_as=return_as)(calls)
            return
        with _dask_client(jobs, scheduler), joblib.parallel_config(backend="dask"):
            yield from joblib.Parallel(n_jobs=jobs, return_as=return_as)(calls)


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
