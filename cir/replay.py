"""The paired counterfactual replayer (paper, section 3.2): per task, from exactly the
same state, one continuation without recovery and one with it.

Per task, with one env (reset once) and one reply cache:

1. the factual run (clean, no recovery), with an env snapshot after every env action;
2. the perturbation point p (``cir.perturb``) and prefix-feasibility for all conditions;
3. per condition, one no-recovery arm shared by all delays: for ``clean`` it IS the
   factual run; otherwise the factual prefix up to env action p with the shown text of
   action p perturbed (the env is unchanged, so no env step is repeated), continued from
   the factual snapshot after action p;
4. per delay d and operation m, a branch from the arm's snapshot after env action p+d:
   the recovery step, then the agent continues. If the arm ended at or before p+d the
   recovery is not executed and ``y1 = y0``.

Every branch is checked to share its prefix with its arm (step dicts up to the branch
point) and every perturbed arm with the factual run (up to the perturbed step, and that
step's action and true observation); a mismatch is a :class:`ReplayError` naming the task.
Work is counted in :class:`~cir.harness.Costs` (agent calls actually made, cache hits,
env steps, restores) for run.json and the benchmark.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cir.errors import CirError
from cir.harness import DEFAULT_MAX_ACTIONS, DEFAULT_MAX_TURNS, Harness, RouterHook, SnapshotHook
from cir.paired import PAIRED_COLUMNS, outcome_of
from cir.parallel import BACKENDS, parallel_map
from cir.perturb import (
    DEFAULT_CONDITIONS,
    DEFAULT_FRACTION,
    Condition,
    Perturbation,
    feasibility,
    parse_conditions,
    perturbation_point,
)
from cir.recovery import Checkpoints, get_operation, parse_operations
from cir.transcript import Step, Transcript

DEFAULT_DELAYS = (0, 1, 2, 4)
DEFAULT_OPERATIONS = ("refresh",)


class ReplayError(CirError):
    """The two arms of a pair are not identical up to the branch point."""


@dataclass(frozen=True)
class ReplaySettings:
    """What is run per task (everything that changes the paired table)."""

    conditions: tuple[str, ...] = DEFAULT_CONDITIONS
    delays: tuple[int, ...] = DEFAULT_DELAYS
    operations: tuple[str, ...] = DEFAULT_OPERATIONS
    perturb_fraction: float = DEFAULT_FRACTION
    max_turns: int = DEFAULT_MAX_TURNS
    max_actions: int = DEFAULT_MAX_ACTIONS

    def __post_init__(self) -> None:
        conds = parse_conditions(list(self.conditions))
        parse_operations(list(self.operations))
        if not self.delays:
            raise CirError("delays: expected at least one delay (e.g. 0,1,2,4)")
        for d in self.delays:
            if isinstance(d, bool) or not isinstance(d, int) or d < 0:
                raise CirError(f"delay {d!r}: expected an integer >= 0")
        if len(set(self.delays)) != len(self.delays):
            raise CirError(f"delays: {list(self.delays)} lists a delay twice")
        if self.max_turns < 1 or self.max_actions < 1:
            raise CirError(
                f"budgets: max_turns={self.max_turns}, max_actions={self.max_actions}; expected >= 1"
            )
        perturbation_point(10, self.perturb_fraction)  # validates the fraction
        object.__setattr__(self, "conditions", tuple(c.name for c in conds))
        object.__setattr__(self, "delays", tuple(int(d) for d in self.delays))
        object.__setattr__(self, "operations", tuple(str(o).strip() for o in self.operations))

    def parsed_conditions(self) -> list[Condition]:
        return parse_conditions(list(self.conditions))

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def parse_delays(spec: str | Sequence[int]) -> tuple[int, ...]:
    """``0,1,2,4`` -> (0, 1, 2, 4); a negative or non-integer delay is a :class:`CirError`."""
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    out: list[int] = []
    for item in items:
        if item == "":
            continue
        try:
            value = int(item)
        except (TypeError, ValueError):
            raise CirError(f"delay {item!r}: expected an integer >= 0") from None
        if value < 0:
            raise CirError(f"delay {value}: expected an integer >= 0 (env actions after the perturbation)")
        out.append(value)
    if not out:
        raise CirError("delays: expected at least one delay (e.g. 0,1,2,4)")
    return tuple(out)


def agent_label(agent: Any) -> str:
    """The agent's name with a short digest of its settings (the ``agent`` column)."""
    settings = json.dumps(agent.settings(), sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(settings.encode("utf-8")).hexdigest()[:8]
    return f"{agent.name}@{digest}"


def features_available() -> bool:
    """Whether ``cir.features.extract_features`` exists (written by the policy layer)."""
    try:
        return importlib.util.find_spec("cir.features") is not None
    except (ImportError, ValueError):  # pragma: no cover
        return False


def _features(transcript: Transcript, delay: int, settings: ReplaySettings) -> dict[str, float]:
    if not features_available():
        return {}
    from cir.features import extract_features

    return dict(extract_features(transcript, delay, max_turns=settings.max_turns,
                                 max_actions=settings.max_actions))


@dataclass
class TaskResult:
    """Plain data from one task: paired rows, episodes, feasibility, costs, timing."""

    task_id: str
    split: str
    task_type: str
    agent: str
    feasible: bool
    reason: str
    factual_env_actions: int
    factual_success: bool
    point: int | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    costs: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """Everything but the episodes (the per-task line of the store)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "episodes"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class BranchingEnv:
    """An Env over a deterministic env that never repeats a transition.

    A state is identified by the env actions applied since reset (its *path*); a
    snapshot is that path (plain data) and ``restore`` only moves a pointer. ``step``
    answers from a transition memo when the same action was already taken from the same
    state (in any arm or branch), and otherwise syncs the real env (restoring its own
    snapshot of the state when it is elsewhere) and steps it once. So the real env does
    each distinct transition once: the unique env work of the whole grid.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.path: tuple[str, ...] = ()
        self._real: tuple[str, ...] | None = None  # path the real env is at
        self._intro: str | None = None
        self._memo: dict[tuple[str, ...], tuple[str, bool, bool]] = {}
        self._snaps: dict[tuple[str, ...], Any] = {}
        self.stats = {"env_steps": 0, "env_memo_hits": 0, "env_restores": 0, "env_resets": 0}

    def reset(self) -> str:
        if self._intro is None:
            self._intro = self.env.reset()
            self.stats["env_resets"] += 1
            self._real = ()
            self._snaps[()] = self.env.snapshot()
        self.path = ()
        return self._intro

    def step(self, action: str) -> tuple[str, bool, bool]:
        key = (*self.path, action)
        hit = self._memo.get(key)
        if hit is not None:
            self.stats["env_memo_hits"] += 1
            self.path = key
            return hit
        if self._real != self.path:
            self.env.restore(self._snaps[self.path])
            self.stats["env_restores"] += 1
        obs, done, won = self.env.step(action)
        self.stats["env_steps"] += 1
        result = (str(obs), bool(done), bool(won))
        self._memo[key] = result
        self.path = self._real = key
        self._snaps[key] = self.env.snapshot()
        return result

    def snapshot(self) -> tuple[str, ...]:
        return self.path

    def restore(self, snapshot: tuple[str, ...]) -> None:
        if snapshot not in self._snaps and snapshot not in self._memo:
            raise CirError(f"restore: unknown state (path of {len(snapshot)} actions)")
        self.path = tuple(snapshot)


def _episode(task_id: str, role: str, condition: str, transcript: Transcript | None, *,
             delay: int | None = None, operation: str | None = None, executed: bool = True,
             branch_step: int | None = None, same_as: str | None = None,
             won: bool | None = None) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "role": role,
        "condition": condition,
        "delay": delay,
        "operation": operation,
        "executed": executed,
        "branch_step": branch_step,
        "same_as": same_as,
        "won": bool(transcript.won) if transcript is not None else bool(won),
        "env_actions": transcript.env_actions if transcript is not None else None,
        "model_turns": transcript.model_turns if transcript is not None else None,
        "transcript": _as_dict(transcript) if transcript is not None else None,
        "trace": [e.to_dict() for e in transcript.trace] if transcript is not None else None,
    }


def _as_dict(t: Transcript) -> dict[str, Any]:
    """``t.to_dict()`` without deep copies (same keys and values)."""
    return {"task_id": t.task_id, "task_text": t.task_text,
            "steps": [{**s.__dict__, "events": list(s.events)} for s in t.steps]}


def _copy_prefix(t: Transcript, n: int) -> Transcript:
    return t.prefix(n)


def _fingerprint(t: Transcript, n: int) -> str:
    """Equal to ``t.prefix(n).fingerprint()`` (same JSON of the same step dicts)."""
    payload = json.dumps({"task_id": t.task_id, "task_text": t.task_text,
                          "steps": [dict(s.__dict__) for s in t.steps[:n]]},
                         sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _same(a: Transcript, b: Transcript, n: int) -> bool:
    return _fingerprint(a, n) == _fingerprint(b, n)


def run_task_pairs(
    task: Any,
    agent: Any,
    env: Any,
    settings: ReplaySettings | None = None,
    *,
    reply_cache: dict[str, str] | None = None,
) -> TaskResult:
    """All paired rows of one task (see the module docstring); ``env`` is reset here once.

    ``task`` needs ``task_id`` (and uses ``split``, ``task_type`` when present).
    """
    settings = settings or ReplaySettings()
    started = time.perf_counter()
    conditions = settings.parsed_conditions()
    task_id = str(task.task_id)
    harness = Harness(agent, max_turns=settings.max_turns, max_actions=settings.max_actions,
                      reply_cache=reply_cache)
    label = agent_label(agent)
    env = env if isinstance(env, BranchingEnv) else BranchingEnv(env)

    # 1. the factual run, snapshots after every env action (and after reset)
    factual = harness.reset(env, task_id)
    factual_snaps = SnapshotHook()
    factual_snaps.snapshots[0] = harness.snapshot(env)
    harness.run(env, factual, hooks=[factual_snaps])
    n = factual.env_actions
    result = TaskResult(
        task_id=task_id, split=str(getattr(task, "split", "") or ""),
        task_type=str(getattr(task, "task_type", "") or ""), agent=label, feasible=False,
        reason="", factual_env_actions=n, factual_success=bool(factual.won), point=None,
    )
    result.episodes.append(_episode(task_id, "factual", "clean", factual))

    # 2. the perturbation point
    ok, reason = feasibility(n, conditions, settings.perturb_fraction)
    result.feasible, result.reason = ok, reason
    if not ok:
        result.costs = _costs(harness, env)
        result.seconds = round(time.perf_counter() - started, 3)
        return result
    p = perturbation_point(n, settings.perturb_fraction)
    result.point = p
    k_before = factual.steps_until_env_action(p - 1)
    k_at = factual.steps_until_env_action(p)
    rewind_checkpoint = {k_before: factual_snaps.snapshots[k_before]}
    wanted = {p + d for d in settings.delays}

    operations = [get_operation(m) for m in settings.operations]
    for cond in conditions:
        # 3. the no-recovery arm of this condition
        if cond.kind == "clean":
            arm = factual
            arm_snaps = {k: s for k, s in factual_snaps.snapshots.items() if k >= k_at}
            result.episodes.append(_episode(task_id, "no_recovery", cond.name, None,
                                            same_as="factual", won=factual.won))
        else:
            arm = _copy_prefix(factual, k_at)
            perturbation = Perturbation(cond, p)
            arm.steps[-1] = perturbation.apply(_copy_prefix(factual, k_at - 1), arm.steps[-1])
            harness.restore(env, factual_snaps.snapshots[k_at])
            hook = SnapshotHook(at=wanted)
            harness.run(env, arm, hooks=[hook])
            arm_snaps = {k_at: factual_snaps.snapshots[k_at], **hook.snapshots}
            _check_arm(task_id, cond.name, factual, arm, k_at)
            result.episodes.append(_episode(task_id, "no_recovery", cond.name, arm))
        y0 = int(arm.won)

        # 4. branches per delay and operation
        for d in settings.delays:
            j = p + d
            k = arm.steps_until_env_action(j) if arm.env_actions >= j else None
            executed = k is not None and k < len(arm.steps)
            if executed:
                decision = _copy_prefix(arm, k)
                features = _features(decision, d, settings)
            else:
                reached = min(j, arm.env_actions)
                decision = _copy_prefix(arm, arm.steps_until_env_action(reached))
                features = _features(decision, reached - p, settings)
            for op in operations:
                if not executed:
                    y1, prefix_match = y0, True
                    result.episodes.append(_episode(task_id, "recovery", cond.name, None, delay=d,
                                                    operation=op.name, executed=False, won=bool(y0)))
                else:
                    assert k is not None
                    branch = _copy_prefix(arm, k)
                    harness.restore(env, arm_snaps[k])
                    checkpoints = Checkpoints(snapshots=rewind_checkpoint, anchor=k_at - 1)
                    harness.recover(env, branch, op, checkpoints)
                    harness.run(env, branch)
                    prefix_match = _same(branch, arm, k)
                    if not prefix_match:
                        raise ReplayError(
                            f"task {task_id}: the {op.name} branch at delay {d} under {cond.name} "
                            f"differs from its no-recovery arm before the branch point (step {k})"
                        )
                    y1 = int(branch.won)
                    result.episodes.append(_episode(task_id, "recovery", cond.name, branch, delay=d,
                                                    operation=op.name, branch_step=k))
                row = {
                    "task_id": task_id, "split": result.split, "task_type": result.task_type,
                    "agent": label, "condition": cond.name, "delay": d, "operation": op.name,
                    "y0": y0, "y1": y1, "executed": bool(executed),
                    "factual_success": bool(factual.won), "prefix_match": bool(prefix_match),
                    "outcome": outcome_of(y0, y1),
                }
                row.update(features)
                result.rows.append(row)
    result.costs = _costs(harness, env)
    result.seconds = round(time.perf_counter() - started, 3)
    return result


def _costs(harness: Harness, env: BranchingEnv) -> dict[str, int]:
    """Agent calls/cache hits from the harness; env work from the real env underneath."""
    costs = harness.costs.as_dict()
    costs["env_step_requests"] = costs.pop("env_steps")
    costs.pop("restores"), costs.pop("snapshots"), costs.pop("resets")
    costs.update(env.stats)
    return costs


def _check_arm(task_id: str, condition: str, factual: Transcript, arm: Transcript, k_at: int) -> None:
    """The perturbed arm shares the factual prefix and the perturbed step's action/true obs."""
    same_prefix = _same(factual, arm, k_at - 1)
    f, a = factual.steps[k_at - 1], arm.steps[k_at - 1]
    same_step = (f.actor, f.reply, f.action, f.observation, f.done, f.won) == (
        a.actor, a.reply, a.action, a.observation, a.done, a.won)
    if not (same_prefix and same_step):
        raise ReplayError(
            f"task {task_id}: the {condition} arm differs from the factual run before the "
            f"perturbed observation (step {k_at})"
        )


def run_episode(
    task_id: str,
    agent: Any,
    env: Any,
    condition: str = "clean",
    *,
    router: Any = None,
    operation: str = "refresh",
    perturb_fraction: float = DEFAULT_FRACTION,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_actions: int = DEFAULT_MAX_ACTIONS,
) -> tuple[Transcript, Transcript, dict[str, Any]]:
    """One episode under ``condition`` (optionally routed), for ``cir episode``.

    Returns ``(factual, episode, info)``; for a clean episode without router they are the
    same run. A perturbed condition needs the factual run first (to find the point).
    """
    cond = parse_conditions([condition])[0]
    harness = Harness(agent, max_turns=max_turns, max_actions=max_actions)
    factual = harness.reset(env, task_id)
    snaps = SnapshotHook()
    snaps.snapshots[0] = harness.snapshot(env)
    harness.run(env, factual, hooks=[snaps])
    n = factual.env_actions
    info: dict[str, Any] = {"factual_env_actions": n, "factual_success": factual.won,
                            "condition": cond.name, "point": None, "feasible": True, "reason": "ok"}
    if cond.kind == "clean" and router is None:
        info["costs"] = harness.costs.as_dict()
        return factual, factual, info
    ok, reason = feasibility(n, [cond], perturb_fraction)
    info["feasible"], info["reason"] = ok, reason
    if not ok:
        raise CirError(f"task {task_id}: not prefix-feasible under {cond.name}: {reason}")
    p = perturbation_point(n, perturb_fraction)
    info["point"] = p
    k_at = factual.steps_until_env_action(p)
    episode = factual.prefix(k_at)
    episode.steps[-1] = Perturbation(cond, p).apply(factual.prefix(k_at - 1), episode.steps[-1])
    harness.restore(env, snaps.snapshots[k_at])
    hooks: list[Any] = []
    if router is not None:
        hook = RouterHook(router, at=p, operation=operation)
        hooks.append(hook)
        if 0 in hook.delays:
            hook.after_env_action(harness, env, episode)
    harness.run(env, episode, hooks=hooks)
    if router is not None:
        info["router_decisions"] = [{"delay": d, "refresh": r} for d, r in hooks[0].decisions]
    info["costs"] = harness.costs.as_dict()
    return factual, episode, info


RowSorter = Callable[[dict[str, Any]], tuple]


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


# -- runs: many tasks, in parallel, resumable --------------------------------------------------


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
    from cir.agents.factory import make_agent

    return make_agent(cfg.agent, base_url=cfg.base_url, cache_dir=cfg.cache_dir, seed=cfg.seed)


def _make_env(task: Any, cfg: WorkerConfig) -> Any:
    if cfg.env_factory is not None:
        return cfg.env_factory(task, snapshots=cfg.snapshots)
    from cir.envs.alfworld import AlfworldEnv

    return AlfworldEnv(task.game_file, snapshots=cfg.snapshots)


def run_task_worker(task: Any, cfg: WorkerConfig) -> dict[str, Any]:
    """Run one task in a worker; return plain data (summary and episodes)."""
    agent = _make_agent(cfg)
    env = _make_env(task, cfg)
    result = run_task_pairs(task, agent, env, cfg.settings)
    return {"summary": result.summary(), "episodes": result.episodes}


def task_set_digest(task_ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(task_ids).encode("utf-8")).hexdigest()[:16]


def run_experiment(
    tasks: Sequence[Any],
    out: str | Any,
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
) -> dict[str, Any]:
    """Run (or resume) a paired experiment into RUN_DIR ``out``; the final run record.

    Finished tasks are appended to the store by this (parent) process as they arrive,
    and paired.csv / run.json are rewritten after each, so an interrupted run loses
    nothing and the same call resumes it. Different settings for an existing RUN_DIR
    are refused. ``jobs``/``backend``/``snapshots`` do not change results.
    """
    import sys

    from tqdm import tqdm

    from cir import __version__
    from cir.store import RunStore

    settings = settings or ReplaySettings()
    if backend not in BACKENDS:
        raise CirError(f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if jobs < 1:
        raise CirError(f"--jobs {jobs}: expected an integer >= 1")
    if snapshots not in ("fast", "replay"):
        raise CirError(f"snapshots {snapshots!r}: expected fast or replay")
    tasks = list(tasks)
    if not tasks:
        raise CirError(f"{tasks_source or 'tasks'}: no tasks to run")
    ids = [str(t.task_id) for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise CirError(f"{tasks_source or 'tasks'}: task id {dup!r} appears twice")
    cfg = WorkerConfig(agent=agent, seed=seed, settings=settings, snapshots=snapshots,
                       base_url=base_url, cache_dir=None, agent_factory=agent_factory,
                       env_factory=env_factory)
    identity = {
        "tasks": tasks_source,
        "task_set": task_set_digest(ids),
        "n_tasks": len(ids),
        "limit": limit,
        "agent": agent,
        # name@digest of the agent's settings: a changed agent never resumes another's run
        "agent_label": agent_label(_make_agent(cfg)),
        "seed": seed,
        **settings.as_dict(),
    }
    store = RunStore(out)
    old = store.check_settings(identity)
    done = store.open()
    by_id = {str(t.task_id): t for t in tasks}
    todo = [t for t in tasks if str(t.task_id) not in done]
    if not todo and old is not None:
        n_pairs = sum(len(done[i]["rows"]) for i in ids if i in done)
        if old.get("complete"):
            echo(f"{store.dir}: run already complete ({len(ids)} tasks, {n_pairs} pairs); nothing to do")
            return old
    cfg = replace(cfg, cache_dir=str(store.dir / "agent_cache"))
    session = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "jobs": jobs,
               "backend": backend, "snapshots": snapshots, "resumed_tasks": len(done),
               "tasks_run": 0}
    sessions = list(old.get("sessions", [])) if old else []
    sessions.append(session)
    t0 = time.perf_counter()
    key = row_sort_key(settings)

    def record(complete: bool) -> dict[str, Any]:
        summaries = [done[i] for i in ids if i in done]
        rows = sorted((r for s in summaries for r in s["rows"]), key=key)
        costs: dict[str, int] = {}
        for s in summaries:
            for k, v in s.get("costs", {}).items():
                costs[k] = costs.get(k, 0) + int(v)
        calls = costs.get("agent_calls", 0) + costs.get("cache_hits", 0)
        session["seconds"] = round(time.perf_counter() - t0, 3)
        feasible = [s for s in summaries if s["feasible"]]
        return {
            "cir_version": __version__,
            "settings": identity,
            "complete": complete,
            "counts": {
                "tasks": len(ids), "tasks_done": len(summaries), "tasks_feasible": len(feasible),
                "tasks_infeasible": len(summaries) - len(feasible), "pairs": len(rows),
                "factual_success": sum(1 for s in summaries if s["factual_success"]),
            },
            "feasibility": {s["task_id"]: {"feasible": s["feasible"], "reason": s["reason"],
                                           "factual_env_actions": s["factual_env_actions"],
                                           "point": s["point"]} for s in summaries},
            "costs": {**costs, "cache_hit_rate": round(costs.get("cache_hits", 0) / calls, 4) if calls else None},
            "timings": {"task_seconds_sum": round(sum(s.get("seconds", 0.0) for s in summaries), 3),
                        "sessions": sessions},
        }, rows

    def flush(complete: bool) -> dict[str, Any]:
        rec, rows = record(complete)
        store.write_paired(rows, paired_columns(rows))
        store.write_run_json(rec)
        return rec

    flush(False)
    bar = tqdm(total=len(ids), initial=len(ids) - len(todo), unit="task", disable=not progress,
               file=sys.stderr, dynamic_ncols=True, desc="tasks")
    pairs = sum(len(done[i]["rows"]) for i in ids if i in done)
    bar.set_postfix(pairs=pairs)
    try:
        for res in parallel_map(run_task_worker, todo, cfg, jobs=jobs, backend=backend,
                                scheduler=scheduler, ordered=False):
            summary = res["summary"]
            if summary["task_id"] not in by_id:  # pragma: no cover - defensive
                continue
            store.append_task(summary, res["episodes"])
            done[summary["task_id"]] = json.loads(json.dumps({"kind": "task", **summary}, sort_keys=True))
            session["tasks_run"] += 1
            pairs += len(summary["rows"])
            flush(False)
            bar.update(1)
            bar.set_postfix(pairs=pairs)
    finally:
        bar.close()
    rec = flush(True)
    c = rec["counts"]
    echo(f"{store.dir}: {c['tasks_done']} tasks ({c['tasks_feasible']} prefix-feasible, "
         f"{c['tasks_infeasible']} not), {c['pairs']} pairs; agent calls {rec['costs'].get('agent_calls', 0)}, "
         f"cache hits {rec['costs'].get('cache_hits', 0)}, env steps {rec['costs'].get('env_steps', 0)}")
    return rec
