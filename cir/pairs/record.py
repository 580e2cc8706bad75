"""The run record (``RUN_DIR/run.json``) as typed data: the one reader and writer of run.json.

A run record is rebuilt from the finished tasks' summaries after every task
(:meth:`RunRecord.summarize`), written by the run folder (:mod:`cir.pairs.store`) and read back
on resume, by every reader of the paired table and by the study report.
:meth:`RunRecord.to_dict` and :meth:`RunRecord.from_dict` are its only JSON form::

    {"cir_version": "0.1.0", "complete": true,
     "settings": {"tasks": ..., "task_set": ..., "n_tasks": ..., "limit": ..., "agent": ...,
                  "agent_label": ..., "seed": ..., "conditions": [...], "delays": [...],
                  "operations": [...], "perturb_fraction": ..., "max_turns": ..., "max_actions": ...},
     "counts": {"tasks": ..., "tasks_done": ..., "tasks_feasible": ..., "tasks_infeasible": ...,
                "pairs": ..., "factual_success": ...},
     "feasibility": {TASK_ID: {"feasible": ..., "reason": ..., "factual_env_actions": ...,
                               "point": ...}},
     "costs": {"agent_calls": ..., "cache_hits": ..., "env_step_requests": ..., "env_steps": ...,
               "env_memo_hits": ..., "env_restores": ..., "env_resets": ..., "cache_hit_rate": ...},
     "timings": {"task_seconds_sum": ..., "sessions": [{"started": ..., "jobs": ..., "backend": ...,
                 "snapshots": ..., "restore_check": ..., "resumed_tasks": ..., "tasks_run": ..., "seconds": ...,
                 "cache_dir": ..., "extends": ...,
                 "requests": {"concurrency": ..., "rpm": ..., "tpm": ..., "timeout": ...,
                              "retries": ..., "patience": ...},
                 "limiter": {"requests": ..., "refusals": ..., "shrinks": ..., "pauses": ...,
                             "waited_s": ..., "paused_s": ..., "window_min": ...},
                 "llm": {"http_requests": ..., "cache_hits_disk": ..., "cache_hits_memory": ...,
                         "retries": ..., "refusals": ..., "unparsable": ..., "model_calls": ...,
                         "prompt_tokens": ..., "completion_tokens": ...,
                         "cached_prompt_tokens": ..., "replies_with_usage": ...}}]},
     "task_ids": [...],
     "agent_params": {...},
     "restore_failed": {"task_id": ..., "after_env_action": ..., "where": ..., "sent": ...,
                        "env_action": ..., "answered": [...], "recorded": [...], "by": ..., "run": ...},
     "store": {"episodes_bytes": ..., "paired_sha256": ...,
               "members": [{"task_id": ..., "bytes": ..., "sha256": ...}, ...]}}

``settings`` is what identifies the run (:class:`RunIdentity`): a resumed run must have the
same, key by key. ``task_ids`` (the run's tasks in order) and ``store`` (the episode store's
members as written, each with its size and digest, and the digest of the paired table written
with them) let a reader check a table against its store without decompressing it
(:mod:`cir.pairs.paired`): every byte of the store is verified, not only its size. Records of
older versions lack them and are checked the slow way. A session's ``llm`` holds the LLM
agent's counters in that session (empty for agents without any), summed over its tasks:
requests, retries and the tokens the server reported; a rerun served from the
cache shows ``http_requests: 0``; ``requests`` its request settings and ``limiter`` what the
workers' request limiters did; its ``cache_dir`` is the reply cache it used (None: the run
folder's own) and ``extends`` the run whose replies it reused (:func:`check_extension`).
``agent_params`` are the agent's params in words (the digest in ``agent_label`` is of
these), for readers (``agent_settings`` in records of earlier versions). ``restore_failed`` (only in a run that failed a restore check) quarantines
the folder: the env's restore answered otherwise than the episode it was checked against
(:class:`cir.pairs.replay.RestoreError`), so no row written with that env can be trusted, the
earlier tasks' neither (the fault is the env's, not the task's); every reader refuses the
folder (:meth:`RunRecord.quarantine`), a resume too, and nothing is deleted.

:func:`foreign_member` says when a task in the store is another run's (another agent, seed or
grid, or a task this run does not have): such a member is refused like damage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

from cir.episode.perturb import ONCE
from cir.families.registry import DEFAULT_FAMILY
from cir.pairs.settings import ReplaySettings, RunSettings, task_set_digest
from cir.pairs.store import RUN_JSON, RunStore, StoredMember
from cir.util.errors import CirError


def _part(data: Any, key: str, source: str) -> Any:
    """``data[key]``, or a CirError naming the run record and the missing field."""
    if not isinstance(data, dict) or key not in data:
        raise CirError(f"{source}: the run record has no field {key!r}; not a run.json of this cir?")
    return data[key]


def _build(cls: type, data: Any, source: str, where: str) -> Any:
    """A dataclass from its fields in ``data``, with a one-line error on a missing field
    (a field with a default may be missing: records of older versions lack it)."""
    values = {}
    for f in fields(cls):
        optional = f.default is not MISSING or f.default_factory is not MISSING
        if optional and isinstance(data, dict) and f.name not in data:
            continue
        values[f.name] = _part(data, f.name, f"{source} ({where})")
    try:
        return cls(**values)
    except TypeError as err:
        raise CirError(f"{source} ({where}): {err}") from None


@dataclass(frozen=True)
class RunIdentity:
    """What identifies a run (``settings`` of run.json): a resumed run must have the same."""

    tasks: str | None  # where the tasks came from
    task_set: str  # digest of the task ids
    n_tasks: int
    limit: int | None
    agent: str  # the agent spec
    agent_label: str  # name@digest of the agent's params: a changed agent never resumes another's run
    seed: int
    replay: ReplaySettings
    #: the environment family (a name or MODULE:ATTR); recorded only when not ALFWorld, so a
    #: record without it (every record written before families) is ALFWorld's
    family: str = DEFAULT_FAMILY

    @property
    def env(self) -> str:
        """The family to resolve again (``cir explain``, ``cir episode``)."""
        return self.family

    @classmethod
    def of(cls, settings: RunSettings, task_ids: Sequence[str], agent_label: str,
           tasks: str | None = None, limit: int | None = None) -> RunIdentity:
        """The identity of a run of ``settings`` over these tasks, whose agent is ``agent_label``."""
        return cls(tasks=tasks, task_set=task_set_digest(task_ids), n_tasks=len(task_ids), limit=limit,
                   agent=settings.agent, agent_label=agent_label, seed=settings.seed,
                   replay=settings.replay, family=settings.family_spec())

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "task_set": self.task_set, "n_tasks": self.n_tasks,
                "limit": self.limit, "agent": self.agent, "agent_label": self.agent_label,
                "seed": self.seed, **self.replay.as_dict(),
                **({} if self.family == DEFAULT_FAMILY else {"family": self.family})}

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str) -> RunIdentity:
        # a setting added later (with a default) is absent from older records
        replay = {f.name: _part(data, f.name, source) for f in fields(ReplaySettings)
                  if f.name in data or f.default is MISSING}
        replay = {k: tuple(v) if isinstance(v, list) else v for k, v in replay.items()}
        try:
            settings = ReplaySettings(**replay)
        except CirError as err:
            raise CirError(f"{source}: settings: {err}") from None
        own = {f.name: _part(data, f.name, source) for f in fields(cls)
               if f.name != "replay" and (f.name in data or f.default is MISSING)}
        return cls(**own, replay=settings)


def foreign_member(identity: RunIdentity, task_ids: Sequence[str] | None) -> Callable[[dict[str, Any]], str | None]:
    """What makes a stored task's summary another run's, or None for one of this run.

    A member of this run has a task of ``task_ids`` (None: a record of an older version,
    which does not list them), this run's agent (name, settings digest, seed: all in
    ``agent_label``) on every row, and one row per cell of the grid when its factual run was
    prefix-feasible (none otherwise).
    """
    ids, label, cells = None if task_ids is None else set(task_ids), identity.agent_label, identity.replay.cells()

    def problem(summary: dict[str, Any]) -> str | None:
        task, rows = summary.get("task_id"), summary.get("rows") or []
        if ids is not None and task not in ids:
            return "from another run (a task this run does not have)"
        agents = {summary.get("agent"), *(r.get("agent") for r in rows)} - {None}
        if agents != {label}:
            other = sorted(str(a) for a in agents - {label}) or ["none"]
            return f"from another run (agent {', '.join(other)}; this run's is {label})"
        persistence = summary.get("persistence", ONCE)
        if persistence != identity.replay.persistence:
            return (f"from another run (its perturbed reads last {persistence!r}, this run's "
                    f"{identity.replay.persistence!r})")
        got = [(r.get("condition"), r.get("delay"), r.get("operation")) for r in rows]
        want = cells if summary.get("feasible") else set()
        if set(got) != want or len(got) != len(want) or any(r.get("task_id") != task for r in rows):
            return (f"from another run (its {len(got)} rows do not fill this run's grid of "
                    f"{len(want)} conditions x delays x operations)")
        return None

    return problem


@dataclass(frozen=True)
class TaskFeasibility:
    """Whether a task's factual run reached the perturbation point (and where it is)."""

    feasible: bool
    reason: str
    factual_env_actions: int
    point: int | None


@dataclass(frozen=True)
class RunCounts:
    tasks: int
    tasks_done: int
    tasks_feasible: int
    tasks_infeasible: int
    pairs: int
    factual_success: int


@dataclass(frozen=True)
class RunCosts:
    """Work summed over the finished tasks (see :func:`cir.pairs.replay.run_task_pairs`)."""

    agent_calls: int = 0  # agent replies actually computed (cache misses)
    cache_hits: int = 0
    env_step_requests: int = 0  # env steps the harness and the operations asked for
    env_steps: int = 0  # env steps actually taken (each distinct transition once)
    env_memo_hits: int = 0
    env_restores: int = 0
    env_resets: int = 0

    @property
    def cache_hit_rate(self) -> float | None:
        calls = self.agent_calls + self.cache_hits
        return round(self.cache_hits / calls, 4) if calls else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cache_hit_rate": self.cache_hit_rate}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunCosts:
        return cls(**{f.name: int(data.get(f.name, 0)) for f in fields(cls)})


@dataclass
class Session:
    """One call of ``run_experiment`` on the run folder (a resume is another session)."""

    started: str
    jobs: int
    backend: str
    snapshots: str
    resumed_tasks: int
    tasks_run: int = 0
    seconds: float = 0.0
    #: the family's own options this session was given (Family.options; older records: engine_savings)
    family_options: dict[str, Any] = field(default_factory=dict)
    restore_check: str | None = None  # how the replayer checked the env's restore (None: older records)
    llm: dict[str, int] = field(default_factory=dict)  # the LLM agent's counters, summed over tasks
    cache_dir: str | None = None  # the reply cache, when not the run folder's own
    extends: str | None = None  # the run folder whose replies this session reused
    #: the request settings (concurrency, rpm, tpm, timeout, retries, patience): never the table's
    requests: dict[str, Any] = field(default_factory=dict)
    #: what the workers' request limiters did (requests, refusals, shrinks, pauses, waits);
    #: in a study, over all the runs that shared the workers
    limiter: dict[str, Any] = field(default_factory=dict)

    def add_llm(self, stats: dict[str, Any] | None) -> None:
        """Add one task's agent counters (integers only; rates are derived)."""
        for key, value in (stats or {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.llm[key] = self.llm.get(key, 0) + value


@dataclass(frozen=True)
class RunRecord:
    """Everything ``run.json`` holds (module docstring)."""

    cir_version: str
    settings: RunIdentity
    complete: bool
    counts: RunCounts
    feasibility: dict[str, TaskFeasibility]
    costs: RunCosts
    task_seconds_sum: float
    sessions: list[Session] = field(default_factory=list)
    task_ids: list[str] | None = None  # None in records of older versions
    episodes_bytes: int | None = None
    paired_sha256: str | None = None
    agent_params: dict[str, Any] | None = None  # None in records of older versions
    members: tuple[StoredMember, ...] | None = None  # None in records of older versions
    #: the restore check that failed (task, state, action, both answers): the folder is quarantined
    restore_failed: dict[str, Any] | None = None

    def quarantine(self, run_dir: Any) -> str | None:
        """The one line every reader (and a resume) refuses a quarantined folder with, or None.

        It names the task, the state and both answers, and what to do: not the same command
        again (that runs on the same restore), but the restore fixed and a new folder."""
        failed = self.restore_failed
        if failed is None:
            return None
        spec, done = self.settings.family, self.counts.tasks_done
        if failed.get("task_id") is None:  # a failure without its parts: its message
            what = f"({failed.get('message', 'no detail recorded')})"
        elif failed.get("differs") is not None:  # a tool world's state found its own restore inexact
            task = failed["task_id"] if not failed.get("run") else f"{failed['task_id']} of {failed['run']}"
            what = (f"in task {task} (restored to the state after env action {failed.get('after_env_action')}, "
                    f"its {failed.get('kind', '')} state's content was not the snapshot's: {failed['differs']})")
        else:
            task = failed["task_id"] if not failed.get("run") else f"{failed['task_id']} of {failed['run']}"
            where = f" ({failed['where']})" if failed.get("where") else ""
            what = (f"in task {task} (restored to the state after env action {failed.get('after_env_action')}"
                    f"{where} and sent {sent_text(failed)}, it answered {_answer_text(failed.get('answered'))}; "
                    f"{failed.get('by') or 'the episode'} had {_answer_text(failed.get('recorded'))})")
        return (f"{run_dir}: quarantined: the env's restore failed its check {what}, so no row of its "
                f"{done} stored task(s) is read, --allow-partial or not: the fault is the env's, not the "
                f"task's. Fix the family's restore (`cir check-env --family {spec} --run {run_dir}` walks this "
                f"run's episodes), then run into a new --out folder (--extend {run_dir} reuses its agent "
                "replies); nothing here was deleted")

    @classmethod
    def read(cls, store: RunStore) -> RunRecord | None:
        """The record of a run folder (None if it has none yet)."""
        data = store.read_run_json()
        return None if data is None else cls.from_dict(data, source=str(store.run_json_path))

    @classmethod
    def resume(cls, store: RunStore, identity: RunIdentity) -> RunRecord | None:
        """The record of an earlier run in this folder with this identity (None if the folder
        is new); a folder written with other settings is refused, key by key."""
        data = store.read_run_json()
        if data is None:
            store.check_unused()
            return None
        source = str(store.run_json_path)
        previous = _part(data, "settings", source)
        settings = identity.to_dict()
        for key in sorted(set(previous) | set(settings)):
            if previous.get(key) != settings.get(key):
                raise CirError(
                    f"{store.dir}: was written with {key}={previous.get(key)!r}, this command has "
                    f"{key}={settings.get(key)!r}; rerun with the same settings to resume, "
                    "or use a new --out folder (with --extend to reuse this run's agent replies)")
        return cls.from_dict(data, source=source)

    def with_store(self, episodes_bytes: int, paired_sha256: str,
                   members: Sequence[StoredMember]) -> RunRecord:
        """This record, naming the store (size, members) and table digest it was written with."""
        return replace(self, episodes_bytes=episodes_bytes, paired_sha256=paired_sha256,
                       members=tuple(members))

    @classmethod
    def summarize(cls, cir_version: str, settings: RunIdentity, task_ids: list[str],
                  summaries: list[dict[str, Any]], sessions: list[Session], complete: bool,
                  agent_params: dict[str, Any] | None = None,
                  restore_failed: dict[str, Any] | None = None) -> RunRecord:
        """The record of a run whose finished tasks have these summaries (in task order)."""
        costs: dict[str, int] = {}
        for s in summaries:
            for k, v in s.get("costs", {}).items():
                costs[k] = costs.get(k, 0) + int(v)
        feasible = sum(1 for s in summaries if s["feasible"])
        counts = RunCounts(
            tasks=len(task_ids), tasks_done=len(summaries), tasks_feasible=feasible,
            tasks_infeasible=len(summaries) - feasible, pairs=sum(len(s["rows"]) for s in summaries),
            factual_success=sum(1 for s in summaries if s["factual_success"]),
        )
        feasibility = {s["task_id"]: TaskFeasibility(s["feasible"], s["reason"], s["factual_env_actions"],
                                                     s["point"]) for s in summaries}
        return cls(cir_version=cir_version, settings=settings, complete=complete, counts=counts,
                   feasibility=feasibility, costs=RunCosts.from_dict(costs),
                   task_seconds_sum=round(sum(s.get("seconds", 0.0) for s in summaries), 3),
                   sessions=list(sessions), task_ids=list(task_ids), agent_params=agent_params,
                   restore_failed=restore_failed)

    def inconsistency(self) -> str | None:
        """What in the record contradicts the rest of it (an edited count, say), or None."""
        c, n = self.counts, self.settings.n_tasks
        facts = [
            (c.tasks == n, f"counts.tasks is {c.tasks}, settings.n_tasks {n}"),
            (self.task_ids is None or len(self.task_ids) == n,
             f"it lists {len(self.task_ids or [])} task ids, settings.n_tasks is {n}"),
            (self.task_ids is None or task_set_digest(self.task_ids) == self.settings.task_set,
             "its task ids do not match settings.task_set"),
            (c.tasks_done == len(self.feasibility), f"counts.tasks_done is {c.tasks_done}, "
                                                    f"it has {len(self.feasibility)} finished tasks"),
            (c.tasks_feasible + c.tasks_infeasible == c.tasks_done,
             f"counts.tasks_feasible + tasks_infeasible is not tasks_done ({c.tasks_done})"),
            (c.tasks_feasible == sum(f.feasible for f in self.feasibility.values()),
             f"counts.tasks_feasible is {c.tasks_feasible}, its feasibility lists "
             f"{sum(f.feasible for f in self.feasibility.values())}"),
            (c.pairs == c.tasks_feasible * len(self.settings.replay.cells()),
             f"counts.pairs is {c.pairs}, {c.tasks_feasible} feasible tasks x "
             f"{len(self.settings.replay.cells())} cells make {c.tasks_feasible * len(self.settings.replay.cells())}"),
            (not self.complete or c.tasks_done == c.tasks,
             f"it says complete with {c.tasks_done} of {c.tasks} tasks done"),
            (self.task_ids is None or set(self.feasibility) <= set(self.task_ids),
             "it has finished tasks that are not among its task ids"),
            (self.members is None or sorted(m.task_id for m in self.members) == sorted(self.feasibility),
             "its store members are not its finished tasks"),
        ]
        return next((what for holds, what in facts if not holds), None)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "cir_version": self.cir_version,
            "settings": self.settings.to_dict(),
            "complete": self.complete,
            "counts": asdict(self.counts),
            "feasibility": {task_id: asdict(f) for task_id, f in self.feasibility.items()},
            "costs": self.costs.to_dict(),
            "timings": {"task_seconds_sum": self.task_seconds_sum,
                        "sessions": [asdict(s) for s in self.sessions]},
        }
        if self.task_ids is not None:
            out["task_ids"] = list(self.task_ids)
        if self.agent_params is not None:
            out["agent_params"] = self.agent_params
        if self.restore_failed is not None:
            out["restore_failed"] = dict(self.restore_failed)
        if self.episodes_bytes is not None or self.paired_sha256 is not None:
            out["store"] = {"episodes_bytes": self.episodes_bytes, "paired_sha256": self.paired_sha256}
            if self.members is not None:
                out["store"]["members"] = [asdict(m) for m in self.members]
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = RUN_JSON) -> RunRecord:
        """The record from its JSON form; a CirError names the file and the missing field."""
        timings = _part(data, "timings", source)
        feasibility = _part(data, "feasibility", source)
        store = data.get("store") or {}
        members = store.get("members") if isinstance(store, dict) else None
        return cls(
            cir_version=_part(data, "cir_version", source),
            settings=RunIdentity.from_dict(_part(data, "settings", source), source),
            complete=bool(_part(data, "complete", source)),
            counts=_build(RunCounts, _part(data, "counts", source), source, "counts"),
            feasibility={task_id: _build(TaskFeasibility, f, source, f"feasibility of {task_id}")
                         for task_id, f in _mapping(feasibility, source, "feasibility").items()},
            costs=RunCosts.from_dict(_part(data, "costs", source)),
            task_seconds_sum=_part(timings, "task_seconds_sum", source),
            sessions=[_build(Session, s, source, "timings.sessions")
                      for s in _part(timings, "sessions", source)],
            task_ids=_strings(data.get("task_ids"), source, "task_ids"),
            episodes_bytes=store.get("episodes_bytes") if isinstance(store, dict) else None,
            paired_sha256=store.get("paired_sha256") if isinstance(store, dict) else None,
            agent_params=data.get("agent_params", data.get("agent_settings")),  # its former name
            restore_failed=_restore_failed(data.get("restore_failed"), source),
            members=None if members is None else tuple(
                _build(StoredMember, m, source, "store.members") for m in members),
        )


def _restore_failed(value: Any, source: str) -> dict[str, Any] | None:
    """The record's restore failure; any value but an object is refused (a quarantine is never
    lifted by editing it into something else)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CirError(f"{source}: the run record's restore_failed must be an object (the restore "
                       "check that quarantined the run folder)")
    return value


def sent_text(failure: dict[str, Any]) -> str:
    """What a failed restore check sent (:attr:`cir.pairs.replay.RestoreError.failure`): the
    action, or (a full check) the actions up to the env action whose answer differed."""
    if failure.get("env_action") is None:
        return repr(failure.get("sent"))
    return f"the actions after it, to env action {failure['env_action']} ({failure.get('sent')!r})"


def _answer_text(answer: Any) -> str:
    """An answer ``[observation, done, won]`` as the replayer's messages say it."""
    if isinstance(answer, (list, tuple)) and len(answer) == 3:
        obs, done, won = answer
        return f"{str(obs)!r:.160} (done {done}, won {won})"
    return repr(answer)


def _mapping(value: Any, source: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CirError(f"{source}: the run record's {where} must be an object")
    return value


def _strings(value: Any, source: str, where: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CirError(f"{source}: the run record's {where} must be a list of strings")
    return value


def check_extension(old: RunRecord, new: RunIdentity, new_ids: Sequence[str], source: str,
                    agent_params: dict[str, Any] | None = None) -> None:
    """Refuse a run that would not extend the run ``old`` (read from ``source``).

    An extension has the same agent (so the replies ``old``'s agent gave are the ones this
    run needs), seed, perturbation point and budgets, and every task, condition, delay and
    operation of ``old``; it may add tasks, conditions, delays and operations.
    """
    head = f"--extend {source}"
    was = old.settings
    if was.agent_label != new.agent_label:
        there, here = old.agent_params or {}, agent_params or {}
        diff = [f"{k} {there.get(k)!r} there, {here.get(k)!r} here"
                for k in sorted(set(there) | set(here)) if there.get(k) != here.get(k)]
        raise CirError(f"{head}: its agent is {was.agent_label}, this run's is {new.agent_label}"
                       f"{' (' + '; '.join(diff) + ')' if diff and there else ''}; an extension "
                       "needs the same agent, or none of its replies can be reused")
    old_replay, new_replay = was.replay, new.replay
    for name in ("perturb_fraction", "perturb_at", "perturb_between", "max_turns", "max_actions", "persistence"):
        if getattr(old_replay, name) != getattr(new_replay, name):
            raise CirError(f"{head}: it has {name}={getattr(old_replay, name)!r}, this run "
                           f"{getattr(new_replay, name)!r}; an extension keeps it")
    if was.seed != new.seed:
        raise CirError(f"{head}: it has seed={was.seed!r}, this run {new.seed!r}; an extension keeps it")
    if was.family != new.family:
        raise CirError(f"{head}: it ran family {was.family!r}, this run {new.family!r}; an extension keeps it")
    if new_replay.samples < old_replay.samples:
        raise CirError(f"{head}: it has samples={old_replay.samples}, this run {new_replay.samples}; an "
                       "extension keeps every draw and may add more")
    for name in ("conditions", "delays", "operations"):
        dropped = [v for v in getattr(old_replay, name) if v not in getattr(new_replay, name)]
        if dropped:
            raise CirError(f"{head}: this run drops its {name} {', '.join(map(str, dropped))}; an "
                           f"extension keeps every one and may add more")
    missing = [t for t in (old.task_ids or []) if t not in set(new_ids)]
    if missing:
        raise CirError(f"{head}: this run lacks {len(missing)} of its {len(old.task_ids or [])} "
                       f"tasks (first: {missing[0]}); an extension keeps every task and may add more")
