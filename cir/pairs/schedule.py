"""Scheduling the independent work of the replayer: the arms and branches of one task at
once, and several tasks at once in one process.

Within a task only the factual run is sequential. After it, each condition's no-recovery
arm starts from the factual run's snapshots, and each branch from its arm's: they depend
on nothing else, so :func:`run_fork` runs them in threads, each on its own cursor of the
task's branching env: the arms at once, and a branch as soon as its arm has passed the
branch point (not when the arm ends). Which branches are recorded is still decided by
the finished arm; a branch started early for a point the finished arm does not confirm
(the replayer's own test says this cannot happen) would be run again from it. An LLM
agent's requests then overlap: a small study fills a server too. Engine work stays
serialised (the branching env's lock, :data:`cir.families.alfworld.engine.ENGINE_LOCK`),
so threads only gain while they wait for replies; for the built-in agent nothing changes
but the order in which the same work is done.

Results never depend on the schedule: the replayer records arms and branches in the
settings' order once all have ended, identical contexts asked at once cost one agent call
(:class:`~cir.util.singleflight.SingleFlight` in the harness and the LLM agent), and each
env transition is computed once whoever asks first.

:func:`run_tasks` runs several tasks of one process at once, their arms and branches
sharing one :class:`JobPool`: how a process keeps many requests in flight while each task
is in its (sequential) factual run.

The first error of a task's jobs stops it: jobs not yet started are cancelled, running ones
stop at their next env action, and that one error is raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol, TypeVar

from cir.util.errors import CirError

T = TypeVar("T")
R = TypeVar("R")


def check_concurrency(concurrency: Any, what: str = "concurrency") -> int:
    """``concurrency`` as an int >= 1, else a CirError naming it."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise CirError(f"{what} {concurrency!r}: expected an integer >= 1")
    return concurrency


class Fork(Protocol):
    """What :func:`run_fork` needs of a task after its factual run (``cir.pairs.replay._Fork``)."""

    env: Any  # a CountingEnv over a BranchingEnv (it has cursor())
    operations: list[Any]

    def no_recovery_arm(self, cond: Any, env: Any = None,
                        at_branch_point: Callable[..., None] | None = None) -> tuple[Any, dict[int, Any]]: ...

    def branch_points(self, arm: Any) -> list[tuple[int, int | None, bool]]: ...

    def branch(self, cond: Any, arm: Any, arm_snaps: dict[int, Any], d: int, op: Any, k: int,
               env: Any = None, sample: int = 0) -> Any: ...

    # and, with ``samples`` above 1 (an attribute; 1 when absent), the arm's own continuation of a
    # further sample from a branch point: continuation(cond, arm, arm_snaps, d, k, sample, env)


class JobPool:
    """Threads for the arms and branches of the tasks of one process, ``concurrency`` at most.

    A job never waits for another job (a task waits for its jobs in its own thread), so
    the pool cannot deadlock whatever the number of tasks sharing it.
    """

    def __init__(self, concurrency: int) -> None:
        self.concurrency = check_concurrency(concurrency)
        self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="cir-branch")
        #: set when the process is interrupted: every job stops at its next env action
        self.stop = threading.Event()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        return self._executor.submit(fn, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> JobPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Stopped(Exception):
    """Another job of the task failed: this one stops at its next env action."""


class _Stoppable:
    """An env cursor that raises :class:`_Stopped` once its task's ``stop`` (or its pool's:
    the process was interrupted) is set."""

    def __init__(self, env: Any, stop: threading.Event, also: threading.Event | None = None) -> None:
        self.env, self._stop, self._also = env, stop, also

    def _check(self) -> None:
        if self._stop.is_set() or (self._also is not None and self._also.is_set()):
            raise _Stopped

    def reset(self) -> str:
        self._check()
        return self.env.reset()

    def step(self, action: str) -> tuple[str, bool, bool]:
        self._check()
        return self.env.step(action)

    def snapshot(self) -> Any:
        return self.env.snapshot()

    def restore(self, snapshot: Any) -> None:
        self._check()
        self.env.restore(snapshot)


#: by (delay, operation name) for the first sample; by (delay, operation name or None for the
#: arm's own continuation, sample index) for the further samples (``--samples``)
Branches = dict[tuple[Any, ...], Any]


def branch_key(d: int, op: str | None, sample: int) -> tuple[Any, ...]:
    """Where a branch (``op``) or, for ``op`` None, an arm's continuation from its branch point is
    kept in :data:`Branches`: sample 0's branches as without samples."""
    return (d, op) if sample == 0 else (d, op, sample)


def delay_jobs(fork: Fork) -> list[tuple[str | None, int]]:
    """The jobs of one branch point that the recovery runs at, as (operation name or None, sample):
    each operation's branch; then, per further sample (``fork.samples``), the arm's continuation
    from there and each operation's branch, each drawing that sample."""
    ops = [op.name for op in fork.operations]
    more = [(name, s) for s in range(1, getattr(fork, "samples", 1)) for name in (None, *ops)]
    return [*((name, 0) for name in ops), *more]


def _delay_job(fork: Fork, cond: Any, arm: Any, snaps: dict[int, Any], d: int, k: int, name: str | None,
               sample: int, env: Any = None) -> Any:
    """One job of :func:`delay_jobs`: a branch, or the arm's own continuation (``name`` None)."""
    if name is None:
        return fork.continuation(cond, arm, snaps, d, k, sample, env)  # type: ignore[attr-defined]
    op = next(o for o in fork.operations if o.name == name)
    return fork.branch(cond, arm, snaps, d, op, k, env, sample)


def run_fork(fork: Fork, conditions: list[Any], *, concurrency: int = 1, pool: JobPool | None = None,
             finished: list[int] | None = None) -> list[tuple[Any, Any, Branches]]:
    """Per condition, in order: ``(condition, arm, branches)`` (:data:`Branches`: by delay and
    operation name, and for further samples by :func:`branch_key`).

    Sequential (in the settings' order, on the task's env) with ``concurrency == 1`` and no
    ``pool``; else the arms and branches run in ``pool``'s threads (or in ``concurrency``
    threads of this call). ``finished[0]`` counts the arms and branches done (progress).
    """
    check_concurrency(concurrency)
    finished = finished if finished is not None else [0]
    if pool is None and concurrency == 1:
        return _run_in_order(fork, conditions, finished)
    if pool is not None:
        return _Concurrent(fork, pool, finished).run(conditions)
    with JobPool(concurrency) as own:
        return _Concurrent(fork, own, finished).run(conditions)


def _run_in_order(fork: Fork, conditions: list[Any], finished: list[int]) -> list[tuple[Any, Any, Branches]]:
    out = []
    for cond in conditions:
        arm, snaps = fork.no_recovery_arm(cond)
        finished[0] += 1
        branches: Branches = {}
        for d, k, executed in fork.branch_points(arm):
            if executed:
                for name, sample in delay_jobs(fork):
                    branches[branch_key(d, name, sample)] = _delay_job(fork, cond, arm, snaps, d, k, name, sample)
                    finished[0] += 1
        out.append((cond, arm, branches))
    return out


class _Concurrent:
    """One task's arms and branches in a pool's threads; waits in the calling thread.

    Branches are submitted from the arms' threads (at their branch points) and from this
    one (when an arm ends), so the table of jobs is locked.
    """

    def __init__(self, fork: Fork, pool: JobPool, finished: list[int]) -> None:
        self.fork, self.pool, self.finished = fork, pool, finished
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.jobs: dict[Future[Any], tuple[Any, ...]] = {}
        self.arms: dict[str, Any] = {}
        self.branches: dict[str, Branches] = {}
        self.early: dict[tuple[str, int], int] = {}  # (condition, delay) -> step count started at

    def _cursor(self) -> _Stoppable:
        return _Stoppable(self.fork.env.cursor(), self.stop, self.pool.stop)

    def _submit(self, what: tuple[Any, ...], fn: Callable[..., Any], *args: Any) -> None:
        with self.lock:
            if not self.stop.is_set():
                self.jobs[self.pool.submit(self._stopping_on_error, fn, *args)] = what

    def _stopping_on_error(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``; an error sets the task's stop in this thread, at once: waiting for
        the waiting thread to wake up let the other jobs take several more env actions."""
        try:
            return fn(*args)
        except _Stopped:
            raise
        except BaseException:
            self.stop.set()
            raise

    def _submit_arm(self, cond: Any) -> None:
        self.branches[cond.name] = {}

        def at_branch_point(d: int, k: int, snapshot: Any, prefix: Any, goes_on: bool) -> None:
            if goes_on:  # the arm's thread: the branches start from its copy of the prefix
                with self.lock:
                    self.early[(cond.name, d)] = k
                self._submit_delay(cond, prefix, {k: snapshot}, d, k)

        self._submit(("arm", cond), self.fork.no_recovery_arm, cond, self._cursor(), at_branch_point)

    def _submit_delay(self, cond: Any, arm: Any, snaps: dict[int, Any], d: int, k: int) -> None:
        for name, sample in delay_jobs(self.fork):
            self._submit(("branch", cond, d, name, k, sample), _delay_job, self.fork, cond, arm, snaps, d, k,
                         name, sample, self._cursor())

    def _arm_ended(self, cond: Any, arm: Any, snaps: dict[int, Any]) -> None:
        """The branches the finished arm confirms: those not started early start now."""
        for d, k, executed in self.fork.branch_points(arm):
            with self.lock:
                started = self.early.get((cond.name, d))
            if executed and started != k:
                with self.lock:
                    self.early[(cond.name, d)] = k
                self._submit_delay(cond, arm, snaps, d, k)
            elif not executed and started is not None:
                with self.lock:
                    del self.early[(cond.name, d)]

    def run(self, conditions: list[Any]) -> list[tuple[Any, Any, Branches]]:
        error: BaseException | None = None
        try:
            for cond in conditions:
                self._submit_arm(cond)
            while True:
                with self.lock:
                    pending = list(self.jobs)
                if not pending:
                    break
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for job in done:
                    with self.lock:
                        what = self.jobs.pop(job)
                    if job.cancelled():
                        continue
                    exc = job.exception()
                    if exc is not None:
                        if error is None and not isinstance(exc, _Stopped):
                            error = exc
                            self._stop_all()
                        continue
                    if error is None:
                        self._finish(what, job.result())
        except BaseException:
            self._stop_all()  # an interrupt in the waiting thread: the jobs stop too
            raise
        if error is not None:
            raise error
        if self.pool.stop.is_set():  # the process was interrupted: the task did not finish
            raise _Stopped
        return [(cond, self.arms[cond.name], self.branches[cond.name]) for cond in conditions]

    def _finish(self, what: tuple[Any, ...], value: Any) -> None:
        self.finished[0] += 1
        if what[0] == "arm":
            cond = what[1]
            arm, snaps = value
            self.arms[cond.name] = arm
            self._arm_ended(cond, arm, snaps)
            return
        _, cond, d, op, k, sample = what
        with self.lock:
            current = self.early.get((cond.name, d)) == k
        if current:  # else started for a point the finished arm does not confirm
            self.branches[cond.name][branch_key(d, op, sample)] = value

    def _stop_all(self) -> None:
        with self.lock:
            self.stop.set()
            for job in self.jobs:
                job.cancel()


_END = object()


def run_tasks(tasks: Iterable[T], run_one: Callable[[T, JobPool], R], *, concurrency: int,
              tasks_at_once: int | None = None) -> Iterator[R]:
    """``run_one(task, pool)`` for each task, ``tasks_at_once`` at a time (default
    ``concurrency``), each in its own thread, their arms and branches in one shared
    :class:`JobPool` of ``concurrency`` threads; results as they finish.

    After a task fails no new task starts; the running ones finish (their results are
    yielded) and then the first error is raised.
    """
    check_concurrency(concurrency)
    at_once = check_concurrency(tasks_at_once or concurrency, "tasks at once")
    items = iter(tasks)
    running: set[Future[R]] = set()
    error: BaseException | None = None
    with JobPool(concurrency) as pool, \
            ThreadPoolExecutor(at_once, thread_name_prefix="cir-task") as runner:
        def fill() -> None:
            while error is None and len(running) < at_once:
                task = next(items, _END)
                if task is _END:
                    return
                running.add(runner.submit(run_one, task, pool))

        try:
            fill()
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    running.discard(future)
                    exc = future.exception()
                    if exc is None:
                        yield future.result()
                    elif error is None:
                        error = exc
                fill()
        except BaseException:  # Ctrl-C, or the caller stopped: the jobs stop too, not finish
            pool.stop.set()
            raise
    if error is not None:
        raise error
