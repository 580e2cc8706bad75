"""The paired counterfactual replayer (paper, section 3.2): per task, from exactly the
same state, one continuation without recovery and one with it.

Per task, with one env (reset once) and one reply cache:

1. the factual run (clean, no recovery), with an env snapshot after every env action;
2. the perturbation point p (``cir.episode.perturb.find_point``: for an env with reads, its first
   read at or after the protocol's point) and prefix-feasibility for all conditions;
3. per condition, one no-recovery arm shared by all delays: for ``clean`` it IS the
   factual run; otherwise the factual prefix up to env action p with the shown text of
   action p perturbed (the env is unchanged, so no env step is repeated; a ``lagK`` text is
   the env's answer to action p from the factual state K env actions earlier, one more env
   step), continued from the factual snapshot after action p;
4. per delay d and operation m, a branch from the arm's snapshot after env action p+d:
   the recovery step, then the agent continues. If the arm ended at or before p+d the
   recovery is not executed and ``y1 = y0``.

5. with ``samples`` K above 1 (``--samples``), at each branch point the recovery runs at,
   K - 1 further draws of the arm's continuation and of each operation's branch, each by the
   agent drawing that sample (:mod:`cir.agents.sampling`) from the same restored state; the
   row gains their counts (:mod:`cir.pairs.samples`, :func:`sample_pairs`).

Every branch is checked to share its prefix with its arm (step dicts up to the branch
point) and every perturbed arm with the factual run (up to the perturbed step, and that
step's action and true observation); a mismatch is a :class:`ReplayError` naming the task.

The env is wrapped twice: a :class:`~cir.envs.branching.BranchingEnv` does each distinct
transition once, and a :class:`~cir.envs.counting.CountingEnv` in front of it counts what
the harness and the operations asked for. A task's costs are the agent's work (the
harness), the env step requests (the counting env) and the env work actually done (the
branching env), for run.json and the benchmark. Many tasks in parallel, into a run
folder, are :mod:`cir.pairs.run`.

After the factual run, the arms and branches are independent of each other: with
``concurrency > 1`` (or a shared :class:`~cir.pairs.schedule.JobPool`) they run at once in
threads (:mod:`cir.pairs.schedule`), each on its own cursor of the branching env, and are
recorded afterwards in the order above, so rows, episodes and costs are those of the
sequential run (only ``env_restores`` and the timing depend on the interleaving).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from cir.agents.sampling import sample_agent
from cir.envs.base import Env, refresh_query
from cir.envs.branching import BranchingEnv
from cir.envs.counting import CountingEnv
from cir.episode.extractor import FeatureExtractor, extract
from cir.episode.fork import ForkPoint
from cir.episode.harness import Harness, SnapshotHook, harness_for
from cir.episode.perturb import (
    ONCE,
    SHOWN_TRUE,
    Anomalous,
    Condition,
    find_point,
    no_anomaly,
    shown_kind,
)
from cir.episode.recovery import Operation, get_operation
from cir.episode.transcript import Transcript
from cir.families.registry import resolve_anomalous, resolve_extractor
from cir.pairs.episode_record import ARM, BRANCH, FACTUAL, EpisodeRecord
from cir.pairs.paired import outcome_of
from cir.pairs.record import sent_text
from cir.pairs.samples import sample_columns
from cir.pairs.schedule import JobPool, run_fork
from cir.pairs.settings import RESTORE_CHECKS, ReplaySettings, agent_label
from cir.util.errors import CirError, ReplayError, RestoreError
from cir.util.usercode import note_where

__all__ = ["RESTORE_CHECKS", "ReplayError", "ReplaySettings", "RestoreError", "check_branch_points",
           "check_restore", "TaskResult", "agent_label", "check_arm", "run_task_pairs"]


def _features(extractor: FeatureExtractor, transcript: Transcript, delay: int,
              settings: ReplaySettings) -> dict[str, float]:
    return extract(extractor, transcript, delay, max_turns=settings.max_turns,
                   max_actions=settings.max_actions)


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
    episodes: list[EpisodeRecord] = field(default_factory=list)
    costs: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: how long a perturbed read lasted (ReplaySettings.persistence); in the summary only when not
    #: ``once``, so a one-shot run's store is as it was
    persistence: str = ONCE

    def summary(self) -> dict[str, Any]:
        """Everything but the episodes (the per-task line of the store)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__
                if k != "episodes" and not (k == "persistence" and self.persistence == ONCE)}


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
    env: Env,
    settings: ReplaySettings | None = None,
    *,
    reply_cache: dict[str, str] | None = None,
    extractor: FeatureExtractor | None = None,
    progress: Callable[[int, int], None] | None = None,
    concurrency: int = 1,
    pool: JobPool | None = None,
    restore_check: str = "branches",
    anomalous: Anomalous | None = None,
) -> TaskResult:
    """All paired rows of one task (see the module docstring); ``env`` is reset here once.

    ``task`` needs ``task_id`` (and uses ``split``, ``task_type`` when present). ``env`` is
    any :class:`~cir.envs.base.Env` (refresh sends its refresh query); ``extractor`` writes
    the ``f_*`` columns (:mod:`cir.episode.extractor`; default ALFWorld's).
    ``progress(agent_calls, episodes)`` is called with the task's counts so far (agent
    calls, finished episodes) after every agent call; it cannot change the result.
    ``concurrency``: arms and branches run at once at most (threads of this task), or
    ``pool``: the threads shared by the tasks of a process; neither changes the result.
    ``restore_check`` (:data:`RESTORE_CHECKS`): how the env's restore is checked: once, where
    the arms start (``task``), at every branch point (``branches``: :func:`check_branch_points`),
    or there with every later env action (``full``); a restore that is not exact is a
    :class:`RestoreError` before the task returns a row, and the check changes neither the rows
    nor the costs. ``anomalous(action, shown)``: the family's test of a visibly anomalous text, which
    the ``shown`` column reads (:func:`cir.episode.perturb.shown_kind`); by default the default
    family's (ALFWorld's) when ``extractor`` is its too (None), else none: only the missing text.
    """
    try:
        return _task_pairs(task, agent, env, settings, reply_cache=reply_cache, extractor=extractor,
                           progress=progress, concurrency=concurrency, pool=pool, restore_check=restore_check,
                           anomalous=anomalous)
    except BaseException as err:  # the task it happened in, for a user code's error (cir.util.usercode)
        note_where(err, task=getattr(task, "task_id", None))
        raise


def _task_pairs(task: Any, agent: Any, env: Env, settings: ReplaySettings | None, *,
                reply_cache: dict[str, str] | None, extractor: FeatureExtractor | None,
                progress: Callable[[int, int], None] | None, concurrency: int, pool: JobPool | None,
                restore_check: str, anomalous: Anomalous | None) -> TaskResult:
    if restore_check not in RESTORE_CHECKS:
        raise CirError(f"restore_check {restore_check!r}: expected one of {', '.join(RESTORE_CHECKS)}")
    settings = settings or ReplaySettings()
    if settings.samples > 1:
        sample_agent(agent, 1)  # an agent that cannot sample is refused before any work
    started = time.perf_counter()
    conditions = settings.parsed_conditions()
    task_id = str(task.task_id)
    finished = [0]  # episodes finished so far, for progress reports (run_fork counts its own)
    harness = harness_for(agent, max_turns=settings.max_turns, max_actions=settings.max_actions,
                          reply_cache=reply_cache, on_call=None if progress is None else
                          lambda: progress(harness.costs.agent_calls, finished[0]),
                          **({} if settings.persistence == ONCE else {"persistence": settings.persistence}))
    branching = env if isinstance(env, BranchingEnv) else BranchingEnv(env)
    counted = CountingEnv(branching)

    # 1. the factual run, snapshots after every env action (and after reset)
    factual, snapshots = harness.episode_with_snapshots(counted, task_id)
    n = factual.env_actions
    result = TaskResult(
        task_id=task_id, split=str(getattr(task, "split", "") or ""),
        task_type=str(getattr(task, "task_type", "") or ""), agent=agent_label(agent), feasible=False,
        reason="", factual_env_actions=n, factual_success=bool(factual.won), point=None,
        persistence=settings.persistence,
    )
    result.episodes.append(EpisodeRecord.of(task_id, FACTUAL, "clean", factual))
    finished[0] = 1

    # 2. the perturbation point; 3. and 4. per condition
    # (an env that says which actions are reads is perturbed at its first read at or after the point)
    point = find_point(factual, conditions, settings.perturb_fraction, settings.point_at(task_id), counted)
    result.feasible, result.reason = point.feasible, point.reason
    if point.at is not None:
        result.point = point.at
        checked = check_restore(task_id, branching, snapshots, factual, result.point)
        fork = _Fork(harness, counted, settings, result, factual, snapshots, result.point,
                     resolve_extractor(extractor),
                     resolve_anomalous(anomalous) if extractor is None else anomalous or no_anomaly)
        arms, draws = [], []
        for cond, arm, branches in run_fork(fork, conditions, concurrency=concurrency, pool=pool,
                                            finished=finished):
            fork.record(cond, arm, branches)
            arms.append((cond.name, arm))
            # the arm's further draws (--samples): (condition, delay, sample, the draw)
            draws += [(cond.name, key[0], key[2], t) for key, t in branches.items() if len(key) == 3 and key[1] is None]
        if restore_check != "task":
            check_branch_points(task_id, branching, fork, arms, checked={checked}, full=restore_check == "full",
                                draws=draws)
    result.costs = _costs(harness, counted, branching)
    result.seconds = round(time.perf_counter() - started, 3)
    return result


class _Fork:
    """One feasible task after its factual run: the state every arm and branch starts from.

    ``snapshots`` are the factual run's env snapshots by step count; ``point`` is the
    perturbation point. ``no_recovery_arm`` and ``branch`` run an arm or a branch (on
    ``env``, or on a cursor of it in another thread: :mod:`cir.pairs.schedule`);
    ``record`` puts a condition's episodes and rows into ``result``, in order.
    """

    def __init__(self, harness: Harness, env: CountingEnv, settings: ReplaySettings, result: TaskResult,
                 factual: Transcript, snapshots: dict[int, Any], point: int,
                 extractor: FeatureExtractor, anomalous: Anomalous | None = None) -> None:
        self.harness, self.env, self.settings, self.result = harness, env, settings, result
        self.extractor, self.anomalous = extractor, anomalous
        self.factual, self.snapshots, self.point = factual, snapshots, point
        self.start = ForkPoint(factual, snapshots, point)  # the perturbed prefix and its rewind checkpoints
        self.k_at, self.rewind = self.start.k_at, self.start.rewind
        self.operations = [get_operation(m, refresh_query(env)) for m in settings.operations]
        self.samples = settings.samples  # draws per arm and branch from each branch point

    def no_recovery_arm(self, cond: Condition, env: CountingEnv | None = None,
                        at_branch_point: BranchPointCall | None = None) -> tuple[Transcript, dict[int, Any]]:
        """3. The condition's arm and its snapshots from the perturbed step on.

        ``at_branch_point(d, k, snapshot, prefix, goes_on)`` is told when the arm reaches
        each delay's branch point, so that its branches may start before the arm ends.
        """
        task_id, factual, k_at = self.result.task_id, self.factual, self.k_at
        env = env or self.env
        if cond.kind == "clean":
            return factual, {k: s for k, s in self.snapshots.items() if k >= k_at}
        arm = self.start.episode(cond, env)  # lagK: env work
        env.restore(self.start.snapshot)
        hook = SnapshotHook(at={self.point + d for d in self.settings.delays})
        hooks: list[Any] = [hook]
        if at_branch_point is not None:
            hooks.append(_BranchPoints(self.point, hook, at_branch_point))
            if 0 in self.settings.delays:  # delay 0 branches where the arm starts
                at_branch_point(0, k_at, self.snapshots[k_at], arm.prefix(k_at),
                                self.harness.can_continue(arm))
        self.harness.play(env, arm, hooks=hooks)
        check_arm(task_id, cond.name, factual, arm, k_at)
        return arm, {k_at: self.snapshots[k_at], **hook.snapshots}

    def branch_points(self, arm: Transcript) -> list[tuple[int, int | None, bool]]:
        """Per delay ``d``: the arm's step count at env action p+d (None if it never got
        there), and whether the recovery runs there (the arm goes on after it)."""
        out = []
        for d in self.settings.delays:
            j = self.point + d
            k = arm.steps_until_env_action(j) if arm.env_actions >= j else None
            out.append((d, k, k is not None and k < len(arm.steps)))
        return out

    def record(self, cond: Condition, arm: Transcript,
               branches: dict[tuple[int, str], Transcript]) -> None:
        """The condition's arm episode, then per delay and operation its branch (``branches``
        by delay and operation name) and paired row, in the order of the settings."""
        task_id, factual = self.result.task_id, self.factual
        if cond.kind == "clean":
            self.result.episodes.append(EpisodeRecord.of(task_id, ARM, cond.name, None,
                                                         same_as=FACTUAL, won=factual.won))
        else:
            self.result.episodes.append(EpisodeRecord.of(task_id, ARM, cond.name, arm))
        self.recovery_pairs(cond, arm, branches)

    def recovery_pairs(self, cond: Condition, arm: Transcript,
                       branches: dict[tuple[int, str], Transcript]) -> None:
        """4. A branch per delay and operation, and its paired row."""
        task_id, settings, result = self.result.task_id, self.settings, self.result
        y0 = int(arm.won)
        shown = self.shown(cond, arm)
        for d, k, executed in self.branch_points(arm):
            j = self.point + d
            if executed:
                features = _features(self.extractor, arm.prefix(k), d, settings)
            else:  # the arm ended before the delay: the features where it ended
                reached = min(j, arm.env_actions)
                decision = arm.prefix(arm.steps_until_env_action(reached))
                features = _features(self.extractor, decision, reached - self.point, settings)
            if self.samples > 1:
                sampled, sample_episodes = sample_pairs(task_id, cond.name, arm, branches, d, k, executed,
                                                        [op.name for op in self.operations], self.samples)
            for op in self.operations:
                if k is not None and executed:
                    branch = branches[(d, op.name)]
                    y1 = int(branch.won)
                    result.episodes.append(EpisodeRecord.of(task_id, BRANCH, cond.name, branch, delay=d,
                                                            operation=op.name, branch_step=k))
                else:
                    y1 = y0
                    result.episodes.append(EpisodeRecord.of(task_id, BRANCH, cond.name, None, delay=d,
                                                            operation=op.name, executed=False, won=bool(y0)))
                row = {
                    "task_id": task_id, "split": result.split, "task_type": result.task_type,
                    "agent": result.agent, "condition": cond.name, "delay": d, "operation": op.name,
                    "y0": y0, "y1": y1, "executed": bool(executed),
                    # a branch that differs from its arm before the branch point raised above
                    "factual_success": bool(self.factual.won), "prefix_match": True,
                    "outcome": outcome_of(y0, y1), "shown": shown,
                }
                if self.samples > 1:
                    row.update(sampled[op.name])
                row.update(features)
                result.rows.append(row)
            if self.samples > 1:
                result.episodes += sample_episodes

    def shown(self, cond: Condition, arm: Transcript) -> str:
        """What the arm's perturbed observation showed (the ``shown`` column): ``true`` for clean."""
        if cond.kind == "clean":
            return SHOWN_TRUE
        step = arm.steps[self.k_at - 1]
        return shown_kind(step.action, step.observation, step.shown, self.anomalous)

    def branch(self, cond: Condition, arm: Transcript, arm_snaps: dict[int, Any], d: int,
               op: Operation, k: int, env: CountingEnv | None = None, sample: int = 0) -> Transcript:
        """The arm's first ``k`` steps, the recovery, then the agent (drawing ``sample``: 0 is the
        agent itself) to the end; prefix checked."""
        env = env or self.env
        harness = self.harness.sampled(sample)
        branch = arm.prefix(k)
        env.restore(arm_snaps[k])
        harness.recover(env, branch, op, self.rewind)
        harness.play(env, branch)
        if not _same(branch, arm, k):
            raise ReplayError(
                f"task {self.result.task_id}: the {op.name} branch at delay {d} under {cond.name} "
                f"{_of_sample(sample)}differs from its no-recovery arm before the branch point (step {k})"
            )
        return branch

    def continuation(self, cond: Condition, arm: Transcript, arm_snaps: dict[int, Any], d: int, k: int,
                     sample: int, env: CountingEnv | None = None) -> Transcript:
        """A further draw of the arm from its branch point at delay ``d`` (``--samples``): its first
        ``k`` steps, then the agent drawing ``sample`` to the end, without recovery; prefix checked."""
        env = env or self.env
        draw = arm.prefix(k)
        env.restore(arm_snaps[k])
        self.harness.sampled(sample).play(env, draw)
        if not _same(draw, arm, k):
            raise ReplayError(
                f"task {self.result.task_id}: the no-recovery continuation at delay {d} under {cond.name} "
                f"{_of_sample(sample)}differs from its arm before the branch point (step {k})")
        return draw


def _of_sample(sample: int) -> str:
    return f"(sample {sample}) " if sample else ""


def sample_pairs(task_id: str, condition: str, arm: Transcript, branches: dict[tuple[Any, ...], Transcript],
                 d: int, k: int | None, executed: bool, operations: list[str],
                 samples: int) -> tuple[dict[str, dict[str, Any]], list[EpisodeRecord]]:
    """The sample columns of each operation's row at delay ``d`` (:func:`cir.pairs.samples.sample_columns`)
    and the episodes of the further draws (the arm's continuation, then each operation's branch,
    sample by sample). An arm that ended before the delay has nothing to draw: every sample is its
    outcome, and no episode is added."""
    y0 = int(arm.won)
    if k is None or not executed:
        return {op: sample_columns([y0] * samples, [y0] * samples) for op in operations}, []
    episodes: list[EpisodeRecord] = []
    arm_draws, branch_draws = [y0], {op: [int(branches[(d, op)].won)] for op in operations}
    for s in range(1, samples):
        draw = branches[(d, None, s)]
        episodes.append(EpisodeRecord.of(task_id, ARM, condition, draw, delay=d, branch_step=k, sample=s))
        arm_draws.append(int(draw.won))
        for op in operations:
            branch = branches[(d, op, s)]
            episodes.append(EpisodeRecord.of(task_id, BRANCH, condition, branch, delay=d, operation=op,
                                             branch_step=k, sample=s))
            branch_draws[op].append(int(branch.won))
    return {op: sample_columns(arm_draws, branch_draws[op]) for op in operations}, episodes


#: ``(delay, step count, snapshot, the arm's first steps, whether the arm goes on)``
BranchPointCall = Callable[[int, int, Any, Transcript, bool], None]


class _BranchPoints:
    """A harness hook (after the arm's SnapshotHook): at each branch point, the call.

    ``goes_on`` is whether the arm takes another turn there (the harness's own test), which
    is whether the recovery is executed at that delay; the prefix is a copy made in the
    arm's thread. The final arm still decides what is recorded (:meth:`_Fork.branch_points`).
    """

    def __init__(self, point: int, snaps: SnapshotHook, call: BranchPointCall) -> None:
        self.point, self.snaps, self.call = point, snaps, call

    def after_env_action(self, harness: Harness, env: Any, transcript: Transcript) -> None:
        k = len(transcript.steps)
        if k in self.snaps.snapshots:
            self.call(transcript.env_actions - self.point, k, self.snaps.snapshots[k],
                      transcript.prefix(k), harness.can_continue(transcript))


def check_restore(task_id: str, env: BranchingEnv, snapshots: dict[int, Any], factual: Transcript,
                  point: int) -> tuple[str, ...]:
    """Every arm and branch starts from a restored snapshot: check, once per task, that the
    env's restore is exact where the arms start. The real env is restored to the factual state
    after env action ``point`` (the last before it when the run ends there) and sent the
    factual run's next action; its answer must be the factual one. A :class:`RestoreError`
    otherwise (before any arm runs, so no wrong label is written). The path checked."""
    j = min(point + 1, factual.env_actions)
    path = snapshots[factual.steps_until_env_action(j)]
    differs = env.verify_restore(path)
    if differs is not None:
        raise restore_error(task_id, len(path) - 1, path, *differs, "where the arms start",
                            "the run that state was saved in")
    return tuple(path)


def check_branch_points(task_id: str, env: BranchingEnv, fork: _Fork, arms: list[tuple[str, Transcript]],
                        checked: Collection[tuple[str, ...]] = (), *, full: bool = False,
                        draws: Collection[tuple[str, int, int, Transcript]] = ()) -> None:
    """The restore checked at every branch point, after the task's arms and branches ran and
    before its rows are returned: wherever an arm or a branch started from a restored snapshot
    (each arm where it starts, its branches at each delay whose recovery ran, a rewind where it
    returns to), the real env is restored there and sent the next env action of the episode
    that passed there (the arm's; the factual run's before the perturbation), whose recorded
    answer (observation, done, won) it must give; ``full``: every later env action of that
    episode, one after another, each answer the recorded one. A restore that forgets a field
    which matters only later (a counter, an item in hand) is met where it matters, not only at
    the first branch point. ``draws`` (``--samples``: condition, delay, sample, the arm's further
    draw from that delay's branch point) are episodes that passed a branch point too: each
    draw's own next env action (``full``: and those after it) is sent from there as well. States in ``checked`` (:func:`check_restore`'s, with its one action)
    and repeats are sent once; the checks are not counted in the costs. A
    :class:`RestoreError` at the first answer that differs."""
    #: by the state and the actions sent from it: (the state, what is sent, where, who)
    checks: dict[tuple[tuple[str, ...], tuple[str, ...]],
                 tuple[tuple[str, ...], list[tuple[str, tuple[str, bool, bool]]], str, str]] = {}

    def sent_after(t: Transcript, j: int, where: str, who: str) -> None:
        """Env action ``j`` of ``t`` (``full``: and those after it), sent from the state after its
        first ``j - 1``."""
        acted = [s for s in t.steps if s.action is not None]
        # an empty action is an env action of the budget that never reached the env (the harness)
        state = tuple(str(s.action) for s in acted[: j - 1] if s.action)
        sent = [(str(s.action), (str(s.observation), bool(s.done), bool(s.won))) for s in acted[j - 1:] if s.action]
        sent = sent if full else sent[:1]
        if not sent:
            return  # the episode ended there: nothing was sent from that state
        key = (state, tuple(a for a, _ in sent))
        if key not in checks and (full or (*state, *key[1]) not in checked):
            checks[key] = (state, sent, where, who)

    p = fork.point
    if "rewind" in fork.settings.operations:  # a rewind returns to the state before action p
        sent_after(fork.factual, p, "where a rewind returns to", "the factual run")
    for name, arm in arms:
        sent_after(arm, p + 1, f"where the {name} arm starts", f"the {name} arm")
        for d, _, executed in fork.branch_points(arm):
            if executed:
                sent_after(arm, p + d + 1, f"where the {name} arm's delay-{d} branches start", f"the {name} arm")
    for name, d, sample, draw in draws:
        sent_after(draw, p + d + 1, f"where the {name} arm's delay-{d} branches start",
                   f"sample {sample} of the {name} arm")
    listed = list(checks.values())
    differs = env.verify_restores([(state, sent) for state, sent, *_ in listed])
    if differs is not None:
        index, path, want, got = differs
        raise restore_error(task_id, len(listed[index][0]), path, want, got, *listed[index][2:])


def restore_error(task_id: str, restored: int, path: tuple[str, ...], want: tuple[str, bool, bool],
                  got: tuple[str, bool, bool], where: str, who: str) -> RestoreError:
    """The one line of a restore that answered otherwise than the episode that passed there
    (``who``, which answered ``want``; ``where``: which episodes start from that state): the env
    restored to the state after env action ``restored`` and sent the rest of ``path``, whose last
    action answered ``got``. Its parts as plain data in :attr:`RestoreError.failure` (what
    run.json's quarantine holds)."""
    (obs, done, won), (got_obs, got_done, got_won) = want, got
    failure = {"task_id": task_id, "after_env_action": restored, "where": where, "sent": path[-1],
               "answered": [got_obs, got_done, got_won], "recorded": [obs, done, won], "by": who}
    if len(path) - restored > 1:  # a full check: the env action that differed came later
        failure["env_action"] = len(path)
    return RestoreError(
        f"task {task_id}: the env's restore is not exact: restored to the state after env action "
        f"{restored} ({where}) and sent {sent_text(failure)}, it answered {got_obs!r:.160} (done {got_done}, "
        f"won {got_won}); {who} answered {obs!r:.160} (done {done}, won {won}). A restore must bring "
        "back every part of the state: `cir check-env` finds which step differs", failure)


def _costs(harness: Harness, env: CountingEnv, branching: BranchingEnv) -> dict[str, int]:
    """Agent calls/cache hits, env step requests, and the env work actually done."""
    return {**harness.costs.as_dict(), "env_step_requests": env.counts.steps, **branching.stats}


def check_arm(task_id: str, condition: str, factual: Transcript, arm: Transcript, k_at: int) -> None:
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
