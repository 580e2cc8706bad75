"""A paired run: many tasks through the replayer, in parallel, into a resumable run folder.

:func:`run_experiment` checks the settings, refuses a run folder written with other
settings, runs the unfinished tasks in worker processes (:mod:`cir.util.parallel`) and, in
this process, appends each finished task to the episode store (:mod:`cir.pairs.store`) and
rewrites ``paired.csv`` and ``run.json`` (:class:`~cir.pairs.record.RunRecord`) as it arrives.
So an interrupted run loses nothing and the same call resumes it; the table does not
depend on the completion order, the number of workers or the backend.

An LLM agent keeps its replies in ``RUN_DIR/agent_cache`` or in a shared ``cache_dir``.
A study grows by a new run folder: ``extend=OLD_RUN`` checks that the new settings only
add tasks, conditions, delays or operations to OLD_RUN's, and reads OLD_RUN's replies
(copying those it uses into the new folder's cache), so the part already computed costs
no model call and OLD_RUN is left as it was.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cir import __version__
from cir.agents.factory import LLMConfig, make_agent
from cir.families.alfworld.env import AlfworldEnv
from cir.pairs.paired import MAX_DELAY, paired_text, text_digest
from cir.pairs.record import RunRecord, RunSettings, Session, check_extension
from cir.pairs.replay import ReplaySettings, agent_label, run_task_pairs
from cir.pairs.store import AGENT_CACHE, RunStore
from cir.util.errors import CirError
from cir.util.parallel import BACKENDS, check_jobs, parallel_map
from cir.util.progress import RunProgress, TaskReporter

SNAPSHOT_MODES = ("fast", "replay")
log = logging.getLogger(__name__)


def task_set_digest(task_ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(task_ids).encode("utf-8")).hexdigest()[:16]


# -- workers --------------------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs to rebuild the agent and env for a task (plain, picklable).

    ``env_factory(task, snapshots=...)`` builds a fresh env for one task; the worker closes
    it (when it has ``close``) once the task is done, as it closes the agent.
    """

    agent: str
    seed: int
    settings: ReplaySettings
    snapshots: str = "fast"
    base_url: str | None = None
    cache_dir: str | None = None
    cache_fallback: tuple[str, ...] = ()
    llm: LLMConfig = LLMConfig()
    agent_factory: Callable[..., Any] | None = None
    env_factory: Callable[..., Any] | None = None
    engine_savings: bool = True
    extractor: Any = None  # a cir.episode.extractor.FeatureExtractor; None: ALFWorld's
    progress: Any = None  # a queue for progress reports (cir.util.progress), or None


def _make_agent(cfg: WorkerConfig) -> Any:
    if cfg.agent_factory is not None:
        return cfg.agent_factory(cfg.agent, seed=cfg.seed)
    return make_agent(cfg.agent, base_url=cfg.base_url, cache_dir=cfg.cache_dir,
                      cache_fallback=cfg.cache_fallback, seed=cfg.seed, llm=cfg.llm)


def _make_env(task: Any, cfg: WorkerConfig) -> Any:
    if cfg.env_factory is not None:
        return cfg.env_factory(task, snapshots=cfg.snapshots)
    return AlfworldEnv(task.game_file, snapshots=cfg.snapshots, savings=cfg.engine_savings)


def run_task_worker(task: Any, cfg: WorkerConfig) -> dict[str, Any]:
    """Run one task in a worker; return plain data (summary, episodes, the agent's counters)."""
    agent = _make_agent(cfg)
    reporter = None if cfg.progress is None else TaskReporter(cfg.progress, str(task.task_id))
    env = _make_env(task, cfg)
    try:
        result = run_task_pairs(task, agent, env, cfg.settings, extractor=cfg.extractor,
                                progress=reporter)
        stats = agent.stats() if callable(getattr(agent, "stats", None)) else None
    finally:
        if callable(getattr(agent, "close", None)):
            agent.close()
        if callable(getattr(env, "close", None)):
            env.close()  # the engine's library copy and facts go back at once, not at collection
    return {"summary": result.summary(), "episodes": result.episodes, "agent_stats": stats}


# -- the run ----------------------------------------------------------------------------------
def _check_arguments(tasks: list[Any], tasks_source: str | None, jobs: int, backend: str,
                     scheduler: str | None, snapshots: str, settings: ReplaySettings) -> list[str]:
    """The task ids; a CirError for a bad argument, before the run folder is touched."""
    if backend not in BACKENDS:
        raise CirError(f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    check_jobs(jobs, backend, scheduler)
    if max(settings.delays) > MAX_DELAY:
        raise CirError(f"delay {max(settings.delays)}: expected at most {MAX_DELAY} env actions")
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
    llm: LLMConfig | None = None,
    cache_dir: str | Path | None = None,
    extend: str | Path | None = None,
    tasks_source: str | None = None,
    limit: int | None = None,
    agent_factory: Callable[..., Any] | None = None,
    env_factory: Callable[..., Any] | None = None,
    engine_savings: bool = True,
    extractor: Any = None,
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> RunRecord:
    """Run (or resume) a paired experiment into RUN_DIR ``out``; the final run record.

    Finished tasks are appended to the store by this (parent) process as they arrive,
    and paired.csv / run.json are rewritten after each, so an interrupted run loses
    nothing and the same call resumes it. Different settings for an existing RUN_DIR
    are refused. ``jobs``/``backend``/``snapshots``/``engine_savings`` do not change
    results (``engine_savings=False`` runs textworld's engine unmodified, to check that).
    ``extractor`` computes the ``f_*`` columns (a :class:`cir.episode.extractor.FeatureExtractor`;
    ALFWorld's by default); it must be picklable for worker processes.

    ``llm`` sets how an LLM agent asks its server; its replies are kept in ``cache_dir``
    (default ``RUN_DIR/agent_cache``). ``extend`` names an earlier run folder that this
    run extends (module docstring).
    """
    settings = settings or ReplaySettings()
    tasks = list(tasks)
    ids = _check_arguments(tasks, tasks_source, jobs, backend, scheduler, snapshots, settings)
    cfg = WorkerConfig(agent=agent, seed=seed, settings=settings, snapshots=snapshots,
                       base_url=base_url, cache_dir=None, llm=llm or LLMConfig(),
                       agent_factory=agent_factory, env_factory=env_factory,
                       engine_savings=engine_savings, extractor=extractor)
    probe = _make_agent(cfg)  # the agent's label and settings, before any folder is touched
    agent_settings = dict(probe.settings())
    identity = RunSettings(tasks=tasks_source, task_set=task_set_digest(ids), n_tasks=len(ids),
                           limit=limit, agent=agent, agent_label=agent_label(probe),
                           seed=seed, replay=settings)
    store = RunStore(out)
    fallback = _extension_cache(extend, store, identity, ids, agent_settings,
                                uses_cache=hasattr(probe, "cache"), cache_dir=cache_dir)
    with store.lock():
        old = RunRecord.resume(store, identity)
        done = store.open()
        if old is not None and old.counts.tasks_done > len(done):
            log.warning("%s: the run record lists %d finished task(s), the episode store holds %d; "
                        "the others run again", store.dir, old.counts.tasks_done, len(done))
        run = _Run(store, identity, tasks, ids, done, old, echo, agent_settings)
        if not run.todo and old is not None:
            return run.settle()
        cfg = replace(cfg, cache_dir=str(cache_dir or store.dir / AGENT_CACHE),
                      cache_fallback=fallback)
        session = Session(started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), jobs=jobs,
                          backend=backend, snapshots=snapshots, resumed_tasks=len(done),
                          engine_savings=engine_savings,
                          cache_dir=str(Path(cache_dir).resolve()) if cache_dir else None,
                          extends=str(Path(extend).resolve()) if extend else None)
        return run.run(session, cfg, jobs=jobs, backend=backend, scheduler=scheduler,
                       progress=progress)


def _extension_cache(extend: str | Path | None, store: RunStore, identity: RunSettings,
                     ids: list[str], agent_settings: dict[str, Any], *, uses_cache: bool,
                     cache_dir: str | Path | None) -> tuple[str, ...]:
    """The reply cache of the run ``extend`` to read through, once the new run is checked
    to extend it; () without ``extend``."""
    if extend is None:
        return ()
    old_store = RunStore(extend)
    if old_store.dir.resolve() == store.dir.resolve():
        raise CirError(f"--extend {extend}: is this run's own folder; extend it into a new --out "
                       "folder (the earlier run stays as it is)")
    old = RunRecord.read(old_store) if old_store.dir.is_dir() else None
    if old is None:
        raise CirError(f"--extend {extend}: not a run folder (no {old_store.run_json_path.name})")
    check_extension(old, identity, ids, str(extend), agent_settings)
    cache = old_store.dir / AGENT_CACHE
    if cache.is_dir():
        return (str(cache),)
    if uses_cache and cache_dir is None:
        raise CirError(f"--extend {extend}: has no {AGENT_CACHE} folder (did it use --cache-dir?); "
                       "pass the cache folder it used as --cache-dir")
    return ()


class _Run:
    """One session on a locked run folder: the finished tasks, and the table and record
    written after each task (so an interrupted run loses nothing)."""

    def __init__(self, store: RunStore, identity: RunSettings, tasks: list[Any], ids: list[str],
                 done: dict[str, dict[str, Any]], old: RunRecord | None,
                 echo: Callable[[str], None], agent_settings: dict[str, Any] | None = None) -> None:
        self.store = store
        self.identity = identity
        self.agent_settings = agent_settings
        self.ids = ids
        self.done = done
        self.old = old
        self.echo = echo
        self.todo = [t for t in tasks if str(t.task_id) not in done]
        self.sessions = list(old.sessions) if old else []

    def state(self, complete: bool) -> tuple[str, RunRecord]:
        """The table text and the record of the tasks done so far."""
        summaries = [self.done[i] for i in self.ids if i in self.done]
        replay = self.identity.replay
        text = paired_text(summaries, replay.conditions, replay.operations)
        record = RunRecord.summarize(__version__, self.identity, self.ids, summaries,
                                     self.sessions, complete, self.agent_settings)
        return text, record.with_store(self.store.episodes_bytes(), text_digest(text))

    def flush(self, complete: bool) -> RunRecord:
        # the record first: a kill between the two leaves a table that readers see is
        # older than the record (and a first session that can resume)
        text, record = self.state(complete)
        self.store.write_run_json(record.to_dict())
        self.store.write_paired(text)
        return record

    def settle(self) -> RunRecord:
        """Every task is in the store: bring the table and record in line with it."""
        text, record = self.state(True)
        current = self.store.read_paired_text()
        if current != text:
            was = "missing" if current is None else f"{max(0, current.count(chr(10)) - 1)} rows"
            self.store.write_paired(text)
            self.echo(f"{self.store.paired_path}: rebuilt from the episode store (it was {was}, "
                      f"the store has {record.counts.pairs})")
        if self.old is None or record.to_dict() != self.old.to_dict():
            self.store.write_run_json(record.to_dict())
        self.echo(f"{self.store.dir}: run already complete ({len(self.ids)} tasks, "
                  f"{record.counts.pairs} pairs); nothing to do")
        return record

    def run(self, session: Session, cfg: WorkerConfig, *, jobs: int, backend: str,
            scheduler: str | None, progress: bool) -> RunRecord:
        self.sessions.append(session)
        t0 = time.perf_counter()

        def flush(complete: bool) -> RunRecord:
            session.seconds = round(time.perf_counter() - t0, 3)
            return self.flush(complete)

        flush(False)
        ids, done = self.ids, self.done
        pairs = sum(len(done[i]["rows"]) for i in ids if i in done)
        with RunProgress(len(ids), len(ids) - len(self.todo), pairs, enabled=progress,
                         backend=backend, jobs=jobs) as bar:
            cfg = replace(cfg, progress=bar.channel)
            for res in parallel_map(run_task_worker, self.todo, cfg, jobs=jobs, backend=backend,
                                    scheduler=scheduler, ordered=False):
                summary = res["summary"]
                self.store.append_task(summary, res["episodes"])
                # as the store holds it, so a resumed task and a fresh one give the same record
                done[summary["task_id"]] = json.loads(json.dumps({"kind": "task", **summary},
                                                                 sort_keys=True))
                session.tasks_run += 1
                session.add_llm(res.get("agent_stats"))
                flush(False)
                bar.task_done(summary["task_id"], len(summary["rows"]),
                              summary["costs"].get("agent_calls", 0), len(res["episodes"]))
        record = flush(True)
        c, costs = record.counts, record.costs
        line = (f"{self.store.dir}: {c.tasks_done} tasks ({c.tasks_feasible} prefix-feasible, "
                f"{c.tasks_infeasible} not), {c.pairs} pairs; agent calls {costs.agent_calls}, "
                f"cache hits {costs.cache_hits}, env steps {costs.env_steps}")
        if session.llm:
            llm = session.llm
            line += (f"; LLM HTTP requests {llm.get('http_requests', 0)} (retries "
                     f"{llm.get('retries', 0)}), replies from the disk cache "
                     f"{llm.get('cache_hits_disk', 0)}, unparsable {llm.get('unparsable', 0)}")
        self.echo(line)
        return record
