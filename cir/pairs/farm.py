"""Worker processes kept for a whole session: one queue of tasks (of one run, or of all the
runs of a study), several tasks at once in each process.

Engine work takes CPU and is serialised within a process, so a run has one worker process
per ``--jobs``; an LLM agent's requests mostly wait, so each process runs several tasks at
once in threads (:func:`cir.pairs.schedule.run_tasks`), their arms and branches sharing one
pool of threads, to keep its share of the run's requests in flight (``concurrency / jobs``,
rounded up). The processes are started once (:func:`serve` is one long call per process)
and take tasks from one queue, longest first, until it is empty: no process waits for the
others at the end of a cohort, and none pays the start-up (imports, the first game load)
twice. Each finished task goes back at once (:class:`Sink`, or a queue served by a manager
process across processes), so the parent writes it to its run folder while the others run.

A farm's tasks may belong to several runs (:class:`FarmRun`: each its settings and the
reply caches it reads through); only the grid and the reply cache may differ between them,
the requests settings are the first run's. On a Dask cluster the queue cannot be reached,
so there each task is one call (:func:`run_job`), its branches in its share of threads.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cir.pairs.settings import RunSettings
from cir.util.garbage import fewer_collections
from cir.util.parallel import WorkerLost, parallel_map

#: Tasks at once in a process at most: each holds a loaded game; more than this fill no
#: more requests (after its factual run a task has up to 3 arms and 80 branches to run).
TASKS_AT_ONCE = 16


@dataclass(frozen=True)
class FarmRun:
    """What a worker needs to run a task of one run: its settings and the reply caches it
    reads through (an extended run's)."""

    settings: RunSettings
    fallback: tuple[str, ...] = ()


@dataclass(frozen=True)
class Job:
    """One task of run ``run`` (an index into the farm's runs)."""

    run: int
    task: Any


def threads_per_process(settings: RunSettings) -> int:
    """Each worker's share of the run's requests in flight (at least one)."""
    return max(1, -(-settings.requests.concurrency // settings.jobs))


#: ``work(task, settings, fallback, channel, *, pool=, concurrency=)``: one task's result
#: (:func:`cir.pairs.run.run_task_worker`; picklable, for worker processes)
Work = Callable[..., dict[str, Any]]


def _run_one(job: Job, runs: Sequence[FarmRun], work: Work, channel: Any, pool: Any,
             threads: int) -> dict[str, Any]:
    run = runs[job.run]
    if pool is None and threads > 1:  # a task alone in its call (Dask): its branches at once
        return work(job.task, run.settings, run.fallback, channel, concurrency=threads)
    return work(job.task, run.settings, run.fallback, channel, pool=pool)


def run_job(job: Job, runs: Sequence[FarmRun], work: Work, channel: Any) -> tuple[int, dict[str, Any]]:
    """One task as one call (a Dask worker): ``(run, result)``."""
    with fewer_collections():
        return job.run, _run_one(job, runs, work, channel, None, threads_per_process(runs[0].settings))


def serve(slot: int, runs: Sequence[FarmRun], work: Work, jobs: Any, results: Any,
          channel: Any, at_most: int = TASKS_AT_ONCE) -> dict[str, Any]:
    """One worker process (or thread): jobs from ``jobs`` until a None, each one's ``work``
    put on ``results`` as ``(run, result)``, ``at_most`` tasks at once (a process takes a
    task from the queue when it has room for one: with few tasks, the farm gives each
    process its share, else the first to start would take them all); what its request
    limiter did, and its CPU seconds."""
    from cir.pairs.schedule import run_tasks

    cpu0 = time.process_time()
    settings = runs[0].settings
    threads = threads_per_process(settings)
    pulled: Iterator[Job] = iter(jobs.get, None)
    with fewer_collections():
        if threads == 1:  # one request at a time: the tasks one after another, in this thread
            for job in pulled:
                results.put((job.run, _run_one(job, runs, work, channel, None, 1)))
        else:
            def one(job: Job, pool: Any) -> None:
                results.put((job.run, _run_one(job, runs, work, channel, pool, threads)))

            for _ in run_tasks(pulled, one, concurrency=threads, tasks_at_once=max(1, min(threads, at_most))):
                pass
    return {"slot": slot, "limiter": _limiter_stats(settings), "cpu_s": round(time.process_time() - cpu0, 3)}


def _limiter_stats(settings: RunSettings) -> dict[str, Any] | None:
    """What this process's limiter for the run's servers did (None for the built-in agent)."""
    if not settings.agent.startswith("openai") or not settings.base_url:
        return None
    from cir.agents.limits import shared_limiter
    from cir.agents.llm import base_urls

    # the key the agent's limiter was made under (cir.agents.factory)
    return shared_limiter(",".join(base_urls(settings.base_url)), settings.limits(settings.processes)).stats()


class Sink:
    """Results of workers in this process (threads): handed to ``handle`` under a lock."""

    def __init__(self, handle: Callable[[int, dict[str, Any]], None]) -> None:
        self._handle = handle
        self._lock = threading.Lock()

    def put(self, item: tuple[int, dict[str, Any]]) -> None:
        with self._lock:
            self._handle(*item)


def farm(runs: Sequence[FarmRun], jobs: list[Job], work: Work, handle: Callable[[int, dict[str, Any]], None],
         channel: Any = None, manager: Any = None) -> list[dict[str, Any]]:
    """Run ``work`` on ``jobs`` (in this order) in the first run's worker processes; ``handle(run,
    result)`` in this process for each finished task, as it arrives. The workers' reports
    (:func:`serve`); ``manager`` (a multiprocessing manager) carries the queues across
    processes when the workers are processes of this machine."""
    settings = runs[0].settings
    n = max(1, min(settings.jobs, len(jobs)))
    if n < settings.jobs and settings.backend != "dask":  # fewer tasks than workers: larger shares
        runs = [replace(r, settings=replace(r.settings, jobs=n)) for r in runs]
        settings = runs[0].settings
    if settings.backend == "dask":
        for run, result in parallel_map(run_job, jobs, runs, work, channel, jobs=settings.jobs,
                                        backend="dask", scheduler=settings.scheduler, ordered=False):
            handle(run, result)
        return []
    local = n == 1 or settings.backend == "threading"
    at_most = min(TASKS_AT_ONCE, -(-len(jobs) // n))  # each worker its share of a short queue
    todo: Any = queue.Queue() if local else manager.Queue()
    for job in jobs:
        todo.put(job)
    for _ in range(n):
        todo.put(None)
    if local:
        return list(parallel_map(serve, range(n), runs, work, todo, Sink(handle), channel, at_most, jobs=n,
                                 backend="threading" if n > 1 else settings.backend, ordered=False))
    return _across_processes(runs, work, n, todo, manager.Queue(), handle, channel, at_most)


def _across_processes(runs: Sequence[FarmRun], work: Work, n: int, todo: Any, done: Any,
                      handle: Callable[[int, dict[str, Any]], None], channel: Any,
                      at_most: int) -> list[dict[str, Any]]:
    """Worker processes put results on ``done``; a thread here hands them to ``handle``.
    An error there stops the workers taking new tasks (the running ones finish) and is raised."""
    failed: list[BaseException] = []

    def read() -> None:
        while True:
            try:
                item = done.get()
            except (OSError, EOFError):  # the manager process is gone: no result can come
                failed.append(_manager_lost())
                return
            if item is None:
                return
            if failed:
                continue  # after an error: drained, not written
            try:
                handle(*item)
            except BaseException as err:  # noqa: BLE001 - raised in the calling thread
                failed.append(err)
                _drain(todo, n)

    reader = threading.Thread(target=read, name="cir-results", daemon=True)
    reader.start()
    try:
        reports = list(parallel_map(serve, range(n), runs, work, todo, done, channel, at_most, jobs=n,
                                    backend=runs[0].settings.backend, ordered=False))
    except Exception:  # a worker lost the manager's queues: say that, not a broken pipe or a lost result
        if not _manager_alive(todo):
            raise _manager_lost() from None
        raise
    finally:
        try:
            done.put(None)
        except (OSError, EOFError):  # the manager is gone (interrupted, or killed)
            pass
        reader.join(timeout=None if not failed else 60)
    if failed:
        raise failed[0]
    return reports


def _manager_lost() -> WorkerLost:
    return WorkerLost("the process that passes tasks and results between the workers and this one (the "
                      "queues' manager) ended in the middle of the run: killed, or out of memory")


def _manager_alive(todo: Any) -> bool:
    try:
        todo.qsize()
    except (OSError, EOFError):
        return False
    except Exception:  # noqa: BLE001 - a queue that cannot say its size is alive
        return True
    return True


def _drain(todo: Any, n: int) -> None:
    """Take every job not yet started off the queue, and end each worker's pull."""
    try:
        while True:
            todo.get_nowait()
    except queue.Empty:
        pass
    for _ in range(n):
        todo.put(None)
