"""A paired run: many tasks through the replayer, in parallel, into a resumable run folder.

:func:`run_experiment` checks the settings, refuses a run folder written with other
settings, runs the unfinished tasks in worker processes (:mod:`cir.parallel`) and, in
this process, appends each finished task to the episode store (:mod:`cir.store`) and
rewrites ``paired.csv`` and ``run.json`` (:class:`~cir.record.RunRecord`) as it arrives.
So an interrupted run loses nothing and the same call resumes it; the table does not
depend on the completion order, the number of workers or the backend.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from cir import __version__
from cir.agents.factory import make_agent
from cir.envs.alfworld import AlfworldEnv
from cir.errors import CirError
from cir.paired import PAIRED_COLUMNS
from cir.parallel import BACKENDS, parallel_map
from cir.record import RunRecord, RunSettings, Session
from cir.replay import ReplaySettings, agent_label, run_task_pairs
from cir.store import RunStore

RowSorter = Callable[[dict[str, Any]], tuple]
SNAPSHOT_MODES = ("fast", "replay")


def row_sort_key(settings: ReplaySettings) -> RowSorter:
    """Deterministic row order: task, then conditions/operations in settings order, delay."""
    cond_index = {c: i for i, c in enumerate(settings.conditions)}
    op_index = {m: i for i, m in enumerate(settings.operations)}

    def key(row: dict[str, Any]) -> tuple:
        return (str(row["task_id"]), cond_index.get(row["condition"], len(cond_index)),
                row["condition"], int(row["delay"]), op_index.get(row["operation"], len(op_index)),
                row["operation"])

    return key


def paired_columns(rows: list[dict[str, Any]]) -> list[str]:
    """PAIRED_COLUMNS then the feature columns in first-seen order."""
    extra: list[str] = []
    for row in rows:
        for key in row:
            if key not in PAIRED_COLUMNS and key not in extra:
                extra.append(key)
    return [*PAIRED_COLUMNS, *extra]


def task_set_digest(task_ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(task_ids).encode("utf-8")).hexdigest()[:16]


# -- workers --------------------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs to rebuild the agent and env for a task (plain, picklable)."""

    agent: str
    seed: int
    settings: ReplaySettings
    snapshots: str = "fast"
    base_url: str | None = None
    cache_dir: str | None = None
    agent_factory: Callable[..., Any] | None = None
    env_factory: Callable[..., Any] | None = None


def _make_agent(cfg: WorkerConfig) -> Any:
    if cfg.agent_factory is not None:
        return cfg.agent_factory(cfg.agent, seed=cfg.seed)
    return make_agent(cfg.agent, base_url=cfg.base_url, cache_dir=cfg.cache_dir, seed=cfg.seed)


def _make_env(task: Any, cfg: WorkerConfig) -> Any:
    if cfg.env_factory is not None:
        return cfg.env_factory(task, snapshots=cfg.snapshots)
    return AlfworldEnv(task.game_file, snapshots=cfg.snapshots)


def run_task_worker(task: Any, cfg: WorkerConfig) -> dict[str, Any]:
    """Run one task in a worker; return plain data (summary and episodes)."""
    result = run_task_pairs(task, _make_agent(cfg), _make_env(task, cfg), cfg.settings)
    return {"summary": result.summary(), "episodes": result.episodes}


# -- the run ----------------------------------------------------------------------------------
def _check_arguments(tasks: list[Any], tasks_source: str | None, jobs: int, backend: str,
                     snapshots: str) -> list[str]:
    """The task ids; a CirError for a bad argument, before the run folder is touched."""
    if backend not in BACKENDS:
        raise CirError(f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if jobs < 1:
        raise CirError(f"--jobs {jobs}: expected an integer >= 1")
    if snapshots not in SNAPSHOT_MODES:
        raise CirError(f"snapshots {snapshots!r}: expected {' or '.join(SNAPSHOT_MODES)}")
    if not tasks:
        raise CirError(f"{tasks_source or 'tasks'}: no tasks to run")
    ids = [str(t.task_id) for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise CirError(f"{tasks_source or 'tasks'}: task id {dup!r} appears twice")
    return ids


def run_experiment(
    tasks: Sequence[Any],
    out: str | Path,
    *,
    agent: str = "builtin",
    seed: int = 0,
    settings: ReplaySettings | None = None,
    jobs: int = 1,
    backend: str = "loky",
    scheduler: str | None = None,
    snapshots: str = "fast",
    base_url: str | None = None,
    tasks_source: str | None = None,
    limit: int | None = None,
    agent_factory: Callable[..., Any] | None = None,
    env_factory: Callable[..., Any] | None = None,
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> RunRecord:
    """Run (or resume) a paired experiment into RUN_DIR ``out``; the final run record.

    Finished tasks are appended to the store by this (parent) process as they arrive,
    and paired.csv / run.json are rewritten after each, so an interrupted run loses
    nothing and the same call resumes it. Different settings for an existing RUN_DIR
    are refused. ``jobs``/``backend``/``snapshots`` do not change results.
    """
    settings = settings or ReplaySettings()
    tasks = list(tasks)
    ids = _check_arguments(tasks, tasks_source, jobs, backend, snapshots)
    cfg = WorkerConfig(agent=agent, seed=seed, settings=settings, snapshots=snapshots,
                       base_url=base_url, cache_dir=None, agent_factory=agent_factory,
                       env_factory=env_factory)
    identity = RunSettings(tasks=tasks_source, task_set=task_set_digest(ids), n_tasks=len(ids),
                           limit=limit, agent=agent, agent_label=agent_label(_make_agent(cfg)),
                           seed=seed, replay=settings)
    store = RunStore(out)
    old = store.resume(identity)
    done = store.open()
    todo = [t for t in tasks if str(t.task_id) not in done]
    if not todo and old is not None and old.complete:
        n_pairs = sum(len(done[i]["rows"]) for i in ids if i in done)
        echo(f"{store.dir}: run already complete ({len(ids)} tasks, {n_pairs} pairs); nothing to do")
        return old
    cfg = replace(cfg, cache_dir=str(store.dir / "agent_cache"))
    session = Session(started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), jobs=jobs,
                      backend=backend, snapshots=snapshots, resumed_tasks=len(done))
    sessions = [*(old.sessions if old else []), session]
    t0 = time.perf_counter()
    key = row_sort_key(settings)

    def flush(complete: bool) -> RunRecord:
        summaries = [done[i] for i in ids if i in done]
        rows = sorted((r for s in summaries for r in s["rows"]), key=key)
        session.seconds = round(time.perf_counter() - t0, 3)
        record = RunRecord.summarize(__version__, identity, ids, summaries, sessions, complete)
        store.write_paired(rows, paired_columns(rows))
        store.write_record(record)
        return record

    flush(False)
    bar = tqdm(total=len(ids), initial=len(ids) - len(todo), unit="task", disable=not progress,
               file=sys.stderr, dynamic_ncols=True, desc="tasks")
    pairs = sum(len(done[i]["rows"]) for i in ids if i in done)
    bar.set_postfix(pairs=pairs)
    try:
        for res in parallel_map(run_task_worker, todo, cfg, jobs=jobs, backend=backend,
                                scheduler=scheduler, ordered=False):
            summary = res["summary"]
            store.append_task(summary, res["episodes"])
            # as the store holds it, so a resumed task and a fresh one give the same record
            done[summary["task_id"]] = json.loads(json.dumps({"kind": "task", **summary}, sort_keys=True))
            session.tasks_run += 1
            pairs += len(summary["rows"])
            flush(False)
            bar.update(1)
            bar.set_postfix(pairs=pairs)
    finally:
        bar.close()
    record = flush(True)
    c, costs = record.counts, record.costs
    echo(f"{store.dir}: {c.tasks_done} tasks ({c.tasks_feasible} prefix-feasible, "
         f"{c.tasks_infeasible} not), {c.pairs} pairs; agent calls {costs.agent_calls}, "
         f"cache hits {costs.cache_hits}, env steps {costs.env_steps}")
    return record
