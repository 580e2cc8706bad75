"""A paired run: many tasks through the replayer, in parallel, into a resumable run folder.

:func:`run_experiment` checks the settings, refuses a run folder written with other
settings, runs the unfinished tasks in worker processes (:mod:`cir.util.parallel`) and, in
this process, appends each finished task to the episode store (:mod:`cir.pairs.store`) and
rewrites ``paired.csv`` and ``run.json`` (:class:`~cir.pairs.record.RunRecord`) as it arrives.
So an interrupted run loses nothing and the same call resumes it; the table does not
depend on the completion order, the number of workers or the backend.

Everything a run is given is one :class:`~cir.pairs.settings.RunSettings` (checked where it
is built), and the worker processes get it as it is. An LLM agent keeps its replies in
``RUN_DIR/agent_cache`` or in a shared ``cache_dir``.
A study grows by a new run folder: ``extend=OLD_RUN`` checks that the new settings only
add tasks, conditions, delays or operations to OLD_RUN's, and reads OLD_RUN's replies
(copying those it uses into the new folder's cache), so the part already computed costs
no model call and OLD_RUN is left as it was.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cir import __version__
from cir.agents.base import agent_params
from cir.agents.factory import AgentIdentity
from cir.episode.perturb import no_anomaly
from cir.families.registry import agent_identity, make_agent
from cir.pairs.farm import FarmRun, Job, farm
from cir.pairs.paired import paired_text, record_vouches, rows_of, text_digest
from cir.pairs.record import RunIdentity, RunRecord, Session, check_extension, foreign_member
from cir.pairs.replay import RestoreError, run_task_pairs
from cir.pairs.settings import RunSettings, agent_label, resolved, task_digest, task_files
from cir.pairs.store import AGENT_CACHE, RunStore, StoredMember
from cir.util.errors import CirError
from cir.util.parallel import WorkerLost, spawn_manager
from cir.util.progress import RunProgress, TaskReporter

log = logging.getLogger(__name__)


# -- workers --------------------------------------------------------------------------------
def make_run_agent(settings: RunSettings, cache_fallback: Sequence[str] = ()) -> Any:
    """The agent of a run's settings (its ``agent_factory``, or the spec through the family's
    ``make_agent``: its built-in agent, its LLM prompt or the settings' prompt file)."""
    if settings.agent_factory is not None:
        return settings.agent_factory(settings.agent, seed=settings.seed)
    return make_agent(settings.agent, family=settings.family, prompt_file=settings.prompt_file,
                      base_url=settings.base_url, cache_dir=settings.cache_dir,
                      cache_fallback=cache_fallback, seed=settings.seed, llm=settings.llm,
                      limits=settings.limits(settings.processes))  # this process's share


def run_agent_identity(settings: RunSettings) -> Any:
    """The name and settings of a run's agent (what its label is made of), without building it:
    checked as :func:`make_run_agent` checks them. An ``agent_factory`` is asked for an agent."""
    if settings.agent_factory is not None:
        probe = settings.agent_factory(settings.agent, seed=settings.seed)
        return AgentIdentity(probe.name, agent_params(probe), uses_cache=hasattr(probe, "cache"))
    return agent_identity(settings.agent, family=settings.family, prompt_file=settings.prompt_file,
                          base_url=settings.base_url, seed=settings.seed, llm=settings.llm)


def _make_env(task: Any, settings: RunSettings) -> Any:
    if settings.env_factory is not None:
        return settings.env_factory(task, snapshots=settings.snapshots)
    return settings.env_family().env(task, settings.family_options, snapshots=settings.snapshots)


def make_run_env(task: Any, settings: RunSettings) -> Any:
    """The env of one task of a run's settings (as its workers make it)."""
    return _make_env(task, settings)


def run_task_worker(task: Any, settings: RunSettings, cache_fallback: Sequence[str] = (),
                    channel: Any = None, *, pool: Any = None, concurrency: int = 1) -> dict[str, Any]:
    """Run one task in a worker; plain data back (summary, episodes, the agent's counters).

    ``settings.cache_dir`` is the reply cache the parent chose, ``cache_fallback`` caches
    read through (an extended run's), ``channel`` the progress queue (or None); ``pool``
    the threads its arms and branches share with the other tasks of the process (or
    ``concurrency`` threads of its own; :mod:`cir.pairs.schedule`). The worker closes the env
    and the agent (when they have ``close``) once the task is done.
    """
    agent = make_run_agent(settings, cache_fallback)
    reporter = None if channel is None else TaskReporter(channel, str(task.task_id), agent=agent)
    env = _make_env(task, settings)
    try:
        family = settings.env_family()
        result = run_task_pairs(task, agent, env, settings.replay, extractor=settings.extractor or family.extractor,
                                progress=reporter, pool=pool, concurrency=concurrency,
                                restore_check=settings.restore_check_mode(),
                                anomalous=family.anomalous or no_anomaly)
        stats = agent.stats() if callable(getattr(agent, "stats", None)) else None
    finally:
        if callable(getattr(agent, "close", None)):
            agent.close()
        if callable(getattr(env, "close", None)):
            env.close()  # the engine's library copy and facts go back at once, not at collection
    return {"summary": result.summary(), "episodes": result.episodes, "agent_stats": stats}


# -- the run ----------------------------------------------------------------------------------
def _task_ids(tasks: list[Any], tasks_source: str | None) -> list[str]:
    """The task ids; a CirError for none or a repeated one, before the run folder is touched."""
    if not tasks:
        raise CirError(f"{tasks_source or 'tasks'}: no tasks to run")
    ids = [str(t.task_id) for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise CirError(f"{tasks_source or 'tasks'}: task id {dup!r} appears twice")
    return ids


def run_experiment(tasks: Sequence[Any], out: str | Path, settings: RunSettings | None = None, *,
                   tasks_source: str | None = None, limit: int | None = None, progress: bool = True,
                   echo: Callable[[str], None] = print) -> RunRecord:
    """Run (or resume) a paired experiment of ``settings`` into RUN_DIR ``out``; the final record.

    Finished tasks are appended to the store by this (parent) process as they arrive,
    and paired.csv / run.json are rewritten after each, so an interrupted run loses
    nothing and the same call resumes it. Different settings for an existing RUN_DIR
    are refused. ``tasks_source`` (where the tasks came from) and ``limit`` are recorded
    with the run's identity; ``progress`` shows a bar, ``echo`` prints the summary lines.
    """
    return run_experiments([RunSpec(tasks, out, settings, tasks_source, limit)], progress=progress,
                           echo=echo)[0]


@dataclass
class RunSpec:
    """One run of :func:`run_experiments`: its tasks, its RUN_DIR and its settings."""

    tasks: Sequence[Any]
    out: str | Path
    settings: RunSettings | None = None
    tasks_source: str | None = None
    limit: int | None = None


def run_experiments(specs: Sequence[RunSpec], *, progress: bool = True,
                    echo: Callable[[str], None] = print) -> list[RunRecord]:
    """Run (or resume) several runs at once, each into its own RUN_DIR (as
    :func:`run_experiment` does one), their unfinished tasks in one queue, longest first,
    through one set of worker processes (:mod:`cir.pairs.farm`): the final records.

    The runs share the request settings, the parallelism and the agent of the first (a
    study's cohorts do: only their grids differ). Each run folder is locked, checked and
    written as if it ran alone, so each is complete and resumable on its own.
    """
    with ExitStack() as stack:
        opened = [_open_run(spec, stack, echo) for spec in specs]
        pending = [o for o in opened if isinstance(o, _Pending)]
        if pending:
            _run_pending(pending, progress)
        return [o if isinstance(o, RunRecord) else o.record for o in opened]


@dataclass
class _Pending:
    """A locked run folder with tasks to run: its writer, this session, the workers' settings."""

    run: _Run
    session: Session
    workers: RunSettings
    fallback: tuple[str, ...]
    record: Any = None


def _open_run(spec: RunSpec, stack: ExitStack, echo: Callable[[str], None]) -> RunRecord | _Pending:
    """Check a run's settings and lock its folder (held by ``stack``): its record when
    every task is done already, else what is left to run."""
    settings = spec.settings or RunSettings()
    tasks = list(spec.tasks)
    ids = _task_ids(tasks, spec.tasks_source)
    agent = run_agent_identity(settings)  # the agent's label and settings, first
    params = agent_params(agent)
    identity = RunIdentity.of(settings, ids, agent_label(agent), spec.tasks_source, spec.limit)
    store = RunStore(spec.out)
    fallback = _extension_cache(settings, store, identity, ids, params, uses_cache=agent.uses_cache)
    stack.enter_context(store.lock())
    old = RunRecord.resume(store, identity, params)
    if old is not None and old.restore_failed is not None:  # the same command runs on the same restore
        raise CirError(str(old.quarantine(store.dir)))
    digests = {i: task_digest(t) for i, t in zip(ids, tasks, strict=True)}
    _check_same_tasks(store, old, tasks, digests)
    if old is not None and _vouched(store, old, ids, digests, params):
        echo(f"{store.dir}: run already complete ({len(ids)} tasks, {old.counts.pairs} pairs); nothing to do")
        return old
    run = _Run(store, identity, tasks, ids, old, echo, params, digests)
    if not run.todo and old is not None:
        return run.settle()
    session = Session(started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), jobs=settings.jobs,
                      backend=settings.backend, snapshots=settings.snapshots,
                      resumed_tasks=len(run.done), family_options=dict(settings.family_options),
                      restore_check=settings.restore_check_mode(),
                      cache_dir=resolved(settings.cache_dir), extends=resolved(settings.extend),
                      requests=settings.limits().as_dict())
    workers = replace(settings, cache_dir=settings.cache_dir or str(store.dir / AGENT_CACHE))
    return _Pending(run, session, workers, fallback)


def _vouched(store: RunStore, old: RunRecord, ids: list[str], digests: dict[str, str],
             params: dict[str, Any] | None) -> bool:
    """Whether a finished run's record, written by this version of cir for these tasks (ids and
    digests) and agent params, is the one the whole way would write and still names its files
    byte for byte (the readers' check: :func:`cir.pairs.paired.record_vouches`). Then there is
    nothing to scan or rebuild, and a call on a finished study returns in seconds; anything else
    goes the whole way (:class:`_Run`), which finds and names what changed."""
    if (old.members is None or old.cir_version != __version__ or old.restore_failed is not None
            or old.inconsistency() is not None or old.task_ids != ids or old.task_digests != digests
            or old.agent_params != params or sorted(m.task_id for m in old.members) != sorted(ids)):
        return False
    return record_vouches(store, old, store.read_paired_text())


def _check_same_tasks(store: RunStore, old: RunRecord | None, tasks: list[Any], digests: dict[str, str]) -> None:
    """A resume runs on the tasks the run began with: a task whose files (or fields) changed since
    under the same id is refused, naming it, before anything is written (its rows would mix two
    versions of it). A record of an older cir has no digests: its tasks are digested from now on."""
    if old is None or old.task_digests is None:
        return
    changed = [t for t in tasks if str(t.task_id) in old.task_digests
               and old.task_digests[str(t.task_id)] != digests[str(t.task_id)]]
    if not changed:
        return
    task = changed[0]
    files = ", ".join(str(f) for f in task_files(task)) or "its fields"
    more = f" (and {len(changed) - 1} other task(s))" if len(changed) > 1 else ""
    raise CirError(f"{store.dir}: task {task.task_id} is not the one this run began with: its files ({files}) "
                   f"differ from those the run recorded{more}, so resuming would mix two versions of it; "
                   "put the task's files back, or run these tasks into a new --out folder")


def _longest_first(pending: Sequence[_Pending]) -> list[Job]:
    """Every unfinished task of the runs in one queue: the largest grids first (a task's
    work grows with its cells), in the runs' and the tasks' order within one size."""
    jobs = [(-len(p.workers.replay.cells()), i, k, Job(i, task))
            for i, p in enumerate(pending) for k, task in enumerate(p.run.todo)]
    return [job for *_, job in sorted(jobs, key=lambda j: j[:3])]


def _run_pending(pending: Sequence[_Pending], progress: bool) -> None:
    """The unfinished tasks of the runs through one farm; each run's record written after
    each of its tasks and at its end (``record`` of each)."""
    t0 = time.perf_counter()
    for p in pending:
        p.run.start(p.session)
    first = pending[0].workers
    jobs = _longest_first(pending)
    across = first.backend == "loky" and min(first.jobs, len(jobs)) > 1
    with ExitStack() as stack:
        manager = stack.enter_context(spawn_manager()) if across else None
        total = sum(len(p.run.ids) for p in pending)
        done = sum(len(p.run.ids) - len(p.run.todo) for p in pending)
        pairs = sum(len(s["rows"]) for p in pending for s in p.run.done.values())
        bar = stack.enter_context(RunProgress(
            total, done, pairs, enabled=progress, backend=first.backend, jobs=first.jobs,
            channel=manager.Queue() if manager is not None and progress else None))

        def handle(i: int, res: dict[str, Any]) -> None:
            p = pending[i]
            p.run._finished(res, p.session, bar)
            p.session.seconds = round(time.perf_counter() - t0, 3)
            p.run.flush_if_due()

        try:
            reports = farm([FarmRun(p.workers, p.fallback) for p in pending], jobs, run_task_worker,
                           handle, bar.channel, manager)
        except RestoreError as err:  # the env's fault: every run of this farm used that env
            _catch_up(pending)
            raise CirError(_quarantine(pending, err)) from None
        except WorkerLost as err:
            _catch_up(pending)
            done_now = sum(len(p.run.done) for p in pending)
            where = pending[0].run.store.dir if len(pending) == 1 else "the study's runs"
            saved = f"the {done_now} finished task(s) are saved" if done_now else "no task had finished"
            raise CirError(f"{where}: {err}; {saved}: run the same command again to resume") from None
        except BaseException:  # interrupted, or another error: the table and record catch up first
            _catch_up(pending)
            raise
    limiter = _summed_limiters(reports)
    for p in pending:
        p.session.limiter = limiter
        if not p.session.seconds:
            p.session.seconds = round(time.perf_counter() - t0, 3)
        p.record = p.run.flush(True)
        p.run.echo(p.run._summary_line(p.record, p.session))


def _catch_up(pending: Sequence[_Pending]) -> None:
    """The run stopped early: each table and record brought up to the store's finished
    tasks, as far as the disk lets (the error that stopped the run is the one reported)."""
    for p in pending:
        if p.run.unflushed:
            with suppress(CirError, OSError):
                p.run.flush(False)


def _quarantine(pending: Sequence[_Pending], err: RestoreError) -> str:
    """A restore check failed: each run folder's record marks it quarantined (every reader
    refuses it; nothing is deleted); the one line of the first folder (the failing task's)."""
    task = err.failure.get("task_id")
    own = next((p for p in pending if task in p.run.ids), pending[0])
    for p in pending:
        other = {} if p is own else {"run": str(own.run.store.dir)}
        p.run.restore_failed = {**(err.failure or {"message": str(err)}), **other}
        with suppress(CirError, OSError):
            p.run.flush(False)
    record = own.run.state(False)[1]
    return str(record.quarantine(own.run.store.dir))


def _summed_limiters(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the workers' request limiters did, summed (the smallest window any reached)."""
    out: dict[str, Any] = {}
    for report in reports:
        for key, value in (report.get("limiter") or {}).items():
            if value is None:
                continue
            if key in ("window", "window_min"):
                out[key] = value if key not in out else min(out[key], value)
            elif key == "peak_in_flight":
                out[key] = out.get(key, 0) + value  # each process's peak: their sum bounds the run's
            else:
                out[key] = round(out.get(key, 0) + value, 3)
    return out


def _extension_cache(settings: RunSettings, store: RunStore, identity: RunIdentity,
                     ids: list[str], agent_params: dict[str, Any], *, uses_cache: bool) -> tuple[str, ...]:
    """The reply cache of the run ``settings.extend`` to read through, once the new run is
    checked to extend it; () without ``extend``."""
    extend = settings.extend
    if extend is None:
        return ()
    old_store = RunStore(extend)
    if old_store.dir.resolve() == store.dir.resolve():
        raise CirError(f"--extend {extend}: is this run's own folder; extend it into a new --out "
                       "folder (the earlier run stays as it is)")
    old = RunRecord.read(old_store) if old_store.dir.is_dir() else None
    if old is None:
        raise CirError(f"--extend {extend}: not a run folder (no {old_store.run_json_path.name})")
    check_extension(old, identity, ids, str(extend), agent_params)
    cache = old_store.dir / AGENT_CACHE
    if cache.is_dir():
        return (str(cache),)
    if uses_cache and settings.cache_dir is None:
        raise CirError(f"--extend {extend}: has no {AGENT_CACHE} folder (did it use --cache-dir?); "
                       "pass the cache folder it used as --cache-dir")
    return ()


#: After a task, the table and record are rewritten only once this many times the last
#: rewrite's own duration has passed since it: a rewrite takes longer as the table grows, and
#: rewriting after every task made the parent's work quadratic in the tasks (16% of the CPU
#: of a 16-task LLM run at --concurrency 128). The store, which is the truth, is written
#: after every task; the table and record catch up at the next rewrite, at the end, and when
#: the run is interrupted.
FLUSH_SPACING = 10.0


class _Run:
    """One session on a locked run folder: the finished tasks (each in the store as it
    finishes, so an interrupted run loses nothing), and the table and record derived from
    them (:data:`FLUSH_SPACING`)."""

    def __init__(self, store: RunStore, identity: RunIdentity, tasks: list[Any], ids: list[str],
                 old: RunRecord | None, echo: Callable[[str], None],
                 agent_params: dict[str, Any] | None = None, task_digests: dict[str, str] | None = None) -> None:
        self.store, self.identity, self.ids, self.old, self.echo = store, identity, ids, old, echo
        self.agent_params = agent_params
        self.task_digests = task_digests
        self._keep_edited()
        scan = store.open(foreign_member(identity, ids), None if old is None else old.members)
        self.done = scan.summaries()
        self.members: list[StoredMember] = scan.stored()
        if old is not None and old.counts.tasks_done > len(self.done):
            log.warning("%s: the run record lists %d finished task(s), the episode store holds %d; "
                        "the others run again", store.dir, old.counts.tasks_done, len(self.done))
        self.todo = [t for t in tasks if str(t.task_id) not in self.done]
        self.sessions = list(old.sessions) if old else []
        self.unflushed = 0  # tasks in the store since the table and record were last written
        self.restore_failed: dict[str, Any] | None = None  # set when a restore check fails
        self._flushed_at, self._flush_cost = 0.0, 0.0

    def _keep_edited(self) -> None:
        """A record this writer did not write (edited: it contradicts itself; or an older
        cir's, without the store's member digests) is kept before the run rebuilds it."""
        old, store = self.old, self.store
        if old is None:
            return
        problem = old.inconsistency() or (None if old.members is not None else
                                          "written by an older cir (no digests of the store's tasks)")
        if problem:
            kept = store.keep_copy(store.run_json_path, "replaced")
            log.warning("%s: %s; rebuilt from the episode store (the old one kept as %s)",
                        store.run_json_path, problem, kept.name)

    def _keep_edited_table(self) -> None:
        """A table this writer did not write (edited, damaged) is kept before the run rewrites
        it; the writer's own (older than the store after a kill) is not."""
        old, store = self.old, self.store
        current = store.read_paired_text()
        if old is None or current is None or old.paired_sha256 in (None, text_digest(current)):
            return
        kept = store.keep_copy(store.paired_path, "replaced")
        log.warning("%s: not the table this run wrote (%s rows); rebuilt from the episode store "
                    "(the old one kept as %s)", store.paired_path, rows_of(current), kept.name)

    def state(self, complete: bool) -> tuple[str, RunRecord]:
        """The table text and the record of the tasks done so far."""
        summaries = [self.done[i] for i in self.ids if i in self.done]
        replay = self.identity.replay
        text = paired_text(summaries, replay.conditions, replay.operations)
        record = RunRecord.summarize(__version__, self.identity, self.ids, summaries,
                                     self.sessions, complete, self.agent_params, self.restore_failed,
                                     self.task_digests)
        return text, record.with_store(self.store.episodes_bytes(), text_digest(text), self.members)

    def flush(self, complete: bool) -> RunRecord:
        # the record first: a kill between the two leaves a table that readers see is
        # older than the record (and a first session that can resume)
        start = time.perf_counter()
        text, record = self.state(complete)
        self.store.write_run_json(record.to_dict())
        self.store.write_paired(text)
        self.unflushed = 0
        self._flushed_at = time.perf_counter()
        self._flush_cost = self._flushed_at - start
        return record

    def flush_if_due(self) -> None:
        """After a task: :meth:`flush` unless the last one was recent (:data:`FLUSH_SPACING`)."""
        if time.perf_counter() - self._flushed_at >= FLUSH_SPACING * self._flush_cost:
            self.flush(False)

    def settle(self) -> RunRecord:
        """Every task is in the store: bring the table and record in line with it."""
        text, record = self.state(True)
        current = self.store.read_paired_text()
        if current != text:
            kept = self.store.replace_paired(text)
            was = "missing" if current is None else f"{rows_of(current)} rows"
            self.echo(f"{self.store.paired_path}: rebuilt from the episode store (it was {was}, "
                      f"the store has {record.counts.pairs}"
                      + (f"; the old one kept as {kept.name})" if kept else ")"))
        if self.old is None or record.to_dict() != self.old.to_dict():
            self.store.write_run_json(record.to_dict())
        self.echo(f"{self.store.dir}: run already complete ({len(self.ids)} tasks, "
                  f"{record.counts.pairs} pairs); nothing to do")
        return record

    def start(self, session: Session) -> None:
        """This session begins: the table kept if it is not this writer's, the record written."""
        self.sessions.append(session)
        self._keep_edited_table()
        self.flush(False)

    def run(self, session: Session, settings: RunSettings, fallback: tuple[str, ...],
            progress: bool) -> RunRecord:
        """The unfinished tasks of this run alone (:func:`run_experiments` runs several)."""
        pending = _Pending(self, session, settings, fallback)
        _run_pending([pending], progress)
        return pending.record

    def _finished(self, res: dict[str, Any], session: Session, bar: RunProgress) -> None:
        """A task's result from a worker: into the store, the done tasks and the session."""
        summary = res["summary"]
        self.members.append(self.store.append_task(summary, res["episodes"]))
        # as the store holds it, so a resumed task and a fresh one give the same record
        self.done[summary["task_id"]] = json.loads(json.dumps({"kind": "task", **summary},
                                                              sort_keys=True))
        session.tasks_run += 1
        self.unflushed += 1
        session.add_llm(res.get("agent_stats"))
        llm = res.get("agent_stats") or {}
        bar.task_done(summary["task_id"], len(summary["rows"]),
                      summary["costs"].get("agent_calls", 0), len(res["episodes"]),
                      int(llm.get("http_requests", 0)),
                      int(llm.get("prompt_tokens", 0)) + int(llm.get("completion_tokens", 0)))

    def _summary_line(self, record: RunRecord, session: Session) -> str:
        c, costs = record.counts, record.costs
        line = (f"{self.store.dir}: {c.tasks_done} tasks ({c.tasks_feasible} prefix-feasible, "
                f"{c.tasks_infeasible} not), {c.pairs} pairs; agent calls {costs.agent_calls}, "
                f"cache hits {costs.cache_hits}, env steps {costs.env_steps}")
        if session.llm:
            llm = session.llm
            line += (f"; LLM HTTP requests {llm.get('http_requests', 0)} (retries "
                     f"{llm.get('retries', 0)}, refused {llm.get('refusals', 0)}), tokens "
                     f"{llm.get('prompt_tokens', 0)} prompt ({llm.get('cached_prompt_tokens', 0)} "
                     f"cached) + {llm.get('completion_tokens', 0)} completion, replies from the "
                     f"reply cache {llm.get('cache_hits', 0)} ({llm.get('cache_hits_disk', 0)} from disk)")
            if "unparsable" in llm:  # an LLM agent parses replies (a framework agent's framework does)
                line += f", unparsable {llm['unparsable']}"
        return line
