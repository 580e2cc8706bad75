"""The run record (``RUN_DIR/run.json``) as typed data: settings, counts, feasibility, costs, timings.

A run record is rebuilt from the finished tasks' summaries after every task
(:meth:`RunRecord.summarize`), written by the run folder (:mod:`cir.store`) and read back
on resume or by the study report. :meth:`RunRecord.to_dict` and
:meth:`RunRecord.from_dict` are its only JSON form::

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
                 "snapshots": ..., "resumed_tasks": ..., "tasks_run": ..., "seconds": ...}]}}
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from cir.errors import CirError
from cir.replay import ReplaySettings


def _part(data: Any, key: str, source: str) -> Any:
    """``data[key]``, or a CirError naming the run record and the missing field."""
    if not isinstance(data, dict) or key not in data:
        raise CirError(f"{source}: the run record has no field {key!r}; not a run.json of this cir?")
    return data[key]


def _build(cls: type, data: Any, source: str, where: str) -> Any:
    """A dataclass from its fields in ``data``, with a one-line error on a missing field."""
    names = [f.name for f in fields(cls)]
    return cls(**{name: _part(data, name, f"{source} ({where})") for name in names})


@dataclass(frozen=True)
class RunSettings:
    """What identifies a run: a resumed run must have the same (compared key by key)."""

    tasks: str | None  # where the tasks came from
    task_set: str  # digest of the task ids
    n_tasks: int
    limit: int | None
    agent: str  # the agent spec
    agent_label: str  # name@digest of the agent's settings: a changed agent never resumes another's run
    seed: int
    replay: ReplaySettings

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "task_set": self.task_set, "n_tasks": self.n_tasks,
                "limit": self.limit, "agent": self.agent, "agent_label": self.agent_label,
                "seed": self.seed, **self.replay.as_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str) -> RunSettings:
        replay = {f.name: _part(data, f.name, source) for f in fields(ReplaySettings)}
        replay = {k: tuple(v) if isinstance(v, list) else v for k, v in replay.items()}
        try:
            settings = ReplaySettings(**replay)
        except CirError as err:
            raise CirError(f"{source}: settings: {err}") from None
        own = {f.name: _part(data, f.name, source) for f in fields(cls) if f.name != "replay"}
        return cls(**own, replay=settings)


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
    """Work summed over the finished tasks (see :func:`cir.replay.run_task_pairs`)."""

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


@dataclass(frozen=True)
class RunRecord:
    """Everything ``run.json`` holds (module docstring)."""

    cir_version: str
    settings: RunSettings
    complete: bool
    counts: RunCounts
    feasibility: dict[str, TaskFeasibility]
    costs: RunCosts
    task_seconds_sum: float
    sessions: list[Session] = field(default_factory=list)

    @classmethod
    def summarize(cls, cir_version: str, settings: RunSettings, task_ids: list[str],
                  summaries: list[dict[str, Any]], sessions: list[Session], complete: bool) -> RunRecord:
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
                   sessions=list(sessions))

    def to_dict(self) -> dict[str, Any]:
        return {
            "cir_version": self.cir_version,
            "settings": self.settings.to_dict(),
            "complete": self.complete,
            "counts": asdict(self.counts),
            "feasibility": {task_id: asdict(f) for task_id, f in self.feasibility.items()},
            "costs": self.costs.to_dict(),
            "timings": {"task_seconds_sum": self.task_seconds_sum,
                        "sessions": [asdict(s) for s in self.sessions]},
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "run.json") -> RunRecord:
        """The record from its JSON form; a CirError names the file and the missing field."""
        timings = _part(data, "timings", source)
        feasibility = _part(data, "feasibility", source)
        return cls(
            cir_version=_part(data, "cir_version", source),
            settings=RunSettings.from_dict(_part(data, "settings", source), source),
            complete=bool(_part(data, "complete", source)),
            counts=_build(RunCounts, _part(data, "counts", source), source, "counts"),
            feasibility={task_id: _build(TaskFeasibility, f, source, f"feasibility of {task_id}")
                         for task_id, f in feasibility.items()},
            costs=RunCosts.from_dict(_part(data, "costs", source)),
            task_seconds_sum=_part(timings, "task_seconds_sum", source),
            sessions=[_build(Session, s, source, "timings.sessions")
                      for s in _part(timings, "sessions", source)],
        )
