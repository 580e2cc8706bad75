"""Check an environment's snapshots before a study relies on them (in the spirit of gymnasium's ``check_env``).

The paired replayer forks every arm and branch from restored snapshots, so a restore that
forgets part of the state gives wrong outcomes that nothing else notices (every row still
says ``prefix_match``: that compares what the agent was shown, not the state).
:func:`check_env` walks a few tasks at random, seeded, and checks:

- **reset**: a new env of the task, reset, says the same first observation, and the same
  walk on it answers the same (the env is deterministic);
- **restore**: after the walk, the state before each step is restored (in a shuffled order,
  so the env comes from elsewhere every time) and that step's action sent again: the
  observation, ``done`` and ``won`` must be those of the uninterrupted walk;
- **the env's own check**: an env whose restore checks itself (a tool world's state compares
  the content's digest with the snapshot's, :mod:`cir.tools.state`) and raises a
  :class:`~cir.util.errors.RestoreError` is a failure line naming what differs;
- **refresh**: the refresh query, sent twice in a row from a restored state, answers the
  same both times (it reads the state without changing what it reads; when the second ends
  the episode, as a move budget may, or the world changes on its own between the two, as an
  env whose ``moves_on_its_own()`` says so, the pair is not compared).

Each failure is one line naming the task, the step and what differed. The walk's actions
are ``actions(env, observation)`` (a family's ``walk_actions``), else the env's
``admissible_commands()``; when they come as a mapping of action to weight, the walk draws
by those weights, so a family can send it toward the actions that change the state.

A random walk alone can miss a field the restore forgets when the field matters only late:
a key-and-door corridor whose restore drops the key fails only where a walk has taken the key
and then opens the door, which a uniform walk over five commands rarely does in 20 steps.
So a task is also walked where agents walk (``walks``): the family's built-in agent's episode
(:meth:`cir.families.family.Family.check`) and a run folder's factual runs (``cir check-env
--run``), each checked the same way (a new env walked the same, every step restored and sent
again, the refresh query twice) and, for a run's, each answer against the one the run recorded.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cir.envs.base import refresh_query
from cir.util.errors import CirError, RestoreError

Actions = Callable[[Any, str], Sequence[str] | Mapping[str, float]]
Answer = tuple[str, bool, bool]
#: A walk of one task: drives ``env`` (reset, then steps, as an agent or a recorded run does)
#: and returns the answers a recorded run got for those steps (checked against the walk's),
#: or None.
Walk = Callable[[Any], Sequence[Answer] | None]
#: The walks of a task besides the random one: ``[(label, walk), ...]`` (e.g. ``"the built-in
#: agent's walk"``), none for a task without.
Walks = Callable[[Any], Sequence[tuple[str, Walk]]]


@dataclass
class EnvCheck:
    """What :func:`check_env` found: one line per failure, and how much it checked."""

    tasks: int = 0
    steps: int = 0
    restores: int = 0
    failures: list[str] = field(default_factory=list)
    #: walk steps by kind of walk ("random", and each label of the walks besides)
    walked: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        verdict = "ok" if self.ok else f"{len(self.failures)} failure(s)"
        kinds = "" if set(self.walked) <= {"random"} else " (" + ", ".join(
            f"{kind} {n}" for kind, n in self.walked.items()) + ")"
        return (f"check_env: {self.tasks} tasks, {self.steps} walk steps{kinds}, {self.restores} restores "
                f"checked: {verdict}")

    def add_steps(self, kind: str, n: int) -> None:
        self.steps += n
        self.walked[kind] = self.walked.get(kind, 0) + n


def _answer(result: Any) -> tuple[str, bool, bool]:
    obs, done, won = result
    return str(obs), bool(done), bool(won)


def _say(answer: tuple[str, bool, bool]) -> str:
    obs, done, won = answer
    return f"{obs!r:.120} (done {done}, won {won})"


def _restore_text(err: RestoreError) -> str:
    """What an env's own restore check found, without the task its message may start with."""
    differs = err.failure.get("differs")
    kind = err.failure.get("kind")
    return f"the {kind} state's restore is not exact: {differs}" if differs and kind else str(err)


def _walk_actions(env: Any, observation: str, actions: Actions | None) -> list[str] | dict[str, float]:
    if actions is not None:
        found = actions(env, observation)
    elif callable(getattr(env, "admissible_commands", None)):
        found = env.admissible_commands()
    else:
        raise CirError(f"check_env: {type(env).__name__} has no admissible_commands(); pass "
                       "actions=(env, observation) -> [actions] (a Family's walk_actions)")
    if isinstance(found, Mapping):
        weights = {str(a): float(w) for a, w in found.items()}
        if any(not w >= 0 for w in weights.values()) or not any(w > 0 for w in weights.values()):
            raise CirError(f"check_env: walk actions {found!r:.120}: weights must be >= 0, one > 0")
        return weights
    found = [str(a) for a in found]
    if not found:
        raise CirError(f"check_env: no action to take after {observation!r:.80}")
    return found


def _choose(rng: random.Random, found: list[str] | dict[str, float]) -> str:
    """One action: uniformly from a list, by weight from a mapping (both seeded, in sorted order)."""
    if isinstance(found, dict):
        names = sorted(found)
        return rng.choices(names, weights=[found[a] for a in names])[0]
    return rng.choice(sorted(found))


class _Recorder:
    """An env that takes a snapshot before every step and keeps the actions and answers."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.refresh_query = refresh_query(env)
        self.first: str | None = None
        self.taken: list[str] = []
        self.answers: list[Answer] = []
        self.snaps: list[Any] = []

    def reset(self) -> str:
        if self.first is not None:
            raise CirError("check_env: a walk reset its env twice")
        self.first = str(self.env.reset())
        return self.first

    def step(self, action: str) -> Answer:
        self.snaps.append(self.env.snapshot())
        answer = _answer(self.env.step(action))
        self.taken.append(action)
        self.answers.append(answer)
        return answer

    def snapshot(self) -> Any:
        return self.env.snapshot()

    def restore(self, snapshot: Any) -> None:
        raise CirError("check_env: a walk restored its env (a walk is one uninterrupted run)")


def _random_walk(rng: random.Random, steps: int, actions: Actions | None) -> Walk:
    """A walk of ``steps`` actions drawn by ``rng`` (it stops when the episode ends)."""

    def walk(env: _Recorder) -> None:
        obs = str(env.reset())
        for _ in range(steps):
            action = _choose(rng, _walk_actions(env.env, obs, actions))
            obs, done, _ = env.step(action)
            if done:
                break

    return walk


def check_task(make_env: Callable[[Any], Any], task: Any, *, steps: int = 20, seed: int = 0,
               actions: Actions | None = None, report: EnvCheck | None = None,
               walks: Sequence[tuple[str, Walk]] = ()) -> EnvCheck:
    """Check one task (see the module docstring): its random walk of ``steps`` (none when 0),
    then each of ``walks``; failures go into ``report``."""
    report = report or EnvCheck()
    name = str(getattr(task, "task_id", task))
    report.tasks += 1
    rng = random.Random(f"{seed}:{name}")
    if steps:
        _check_walk(make_env, task, name, "random", "", _random_walk(rng, steps, actions), rng, report)
    for label, walk in walks:
        _check_walk(make_env, task, name, label, f"{label}: ", walk, random.Random(f"{seed}:{name}:{label}"),
                    report)
    return report


def _check_walk(make_env: Callable[[Any], Any], task: Any, name: str, kind: str, head: str, walk: Walk,
                rng: random.Random, report: EnvCheck) -> None:
    """One walk on a new env, then the checks of the module docstring on what it did."""
    env = make_env(task)
    try:
        recorder = _Recorder(env)
        try:
            recorded = walk(recorder)
        except RestoreError as err:  # a reset is a restore too (a tool world's reset restores its initial state)
            report.failures.append(f"task {name}: {head}the walk's reset failed: {_restore_text(err)}")
            return
        first, taken, answers, snaps = recorder.first, recorder.taken, recorder.answers, recorder.snaps
        if first is None:
            return  # nothing to walk (e.g. a run without this task's factual run)
        report.add_steps(kind, len(taken))
        for t, want in enumerate(recorded or ()):
            if t < len(answers) and tuple(want) != answers[t]:
                report.failures.append(f"task {name}: {head}step {t + 1} ({taken[t]!r}) on a new env answered "
                                       f"{_say(answers[t])}; the run recorded {_say(tuple(want))}")
                break
        _check_reset(make_env, task, f"{name}: {head}reset" if head else f"{name}: reset", first, taken,
                     answers, report)
        order = list(range(len(taken)))
        rng.shuffle(order)
        for t in order:
            report.restores += 1
            try:
                env.restore(snaps[t])
            except RestoreError as err:  # the env's own check of its restore (a tool world's digest)
                report.failures.append(f"task {name}: {head}step {t + 1} ({taken[t]!r}): restoring the state "
                                       f"before it failed: {_restore_text(err)}")
                continue
            got = _answer(env.step(taken[t]))
            if got != answers[t]:
                report.failures.append(
                    f"task {name}: {head}step {t + 1} ({taken[t]!r}) after restore answered {_say(got)}; "
                    f"the uninterrupted walk answered {_say(answers[t])}")
        _check_refresh(env, f"{name}: {head[:-2]}" if head else name, snaps, answers, rng, report)
    finally:
        if callable(getattr(env, "close", None)):
            env.close()


def _check_reset(make_env: Callable[[Any], Any], task: Any, name: str, first: str, taken: list[str],
                 answers: list[tuple[str, bool, bool]], report: EnvCheck) -> None:
    """``name`` is ``TASK: reset`` (or ``TASK: LABEL: reset`` for a walk besides the random one)."""
    other = make_env(task)
    try:
        again = str(other.reset())
        if again != first:
            report.failures.append(f"task {name}: a new env's first observation {again!r:.120} "
                                   f"differs from {first!r:.120}")
            return
        for t, action in enumerate(taken):
            got = _answer(other.step(action))
            if got != answers[t]:
                report.failures.append(f"task {name}: step {t + 1} ({action!r}) of the same walk on a "
                                       f"new env answered {_say(got)}; the first walk {_say(answers[t])}")
                return
    finally:
        if callable(getattr(other, "close", None)):
            other.close()


def _check_refresh(env: Any, name: str, snaps: list[Any], answers: list[tuple[str, bool, bool]],
                   rng: random.Random, report: EnvCheck) -> None:
    if not snaps:
        return
    query = refresh_query(env)
    at = [t for t in range(len(snaps)) if t == 0 or not answers[t - 1][1]]
    for t in sorted(rng.sample(at, min(3, len(at)))):
        report.restores += 1
        try:
            env.restore(snaps[t])
        except RestoreError as err:
            report.failures.append(f"task {name}: refresh before step {t + 1}: restoring the state failed: "
                                   f"{_restore_text(err)}")
            continue
        # a world that changes on its own between two actions (a tool world's events) is not compared there
        moves = getattr(env, "moves_on_its_own", None)
        quiet = not (callable(moves) and moves())
        one, two = _answer(env.step(query)), _answer(env.step(query))
        # an env whose query spends a move of a budget may end on the second: not compared
        if quiet and not (one[1] or two[1]) and one != two:
            report.failures.append(f"task {name}: refresh before step {t + 1}: {query!r} answered "
                                   f"{_say(one)}, then {_say(two)}; it must read the state, not change it")


def check_env(make_env: Callable[[Any], Any], tasks: Iterable[Any], *, steps: int = 20, seed: int = 0,
              actions: Actions | None = None, walks: Walks | None = None) -> EnvCheck:
    """Check every task of ``tasks`` (a few are enough) with ``make_env(task)`` envs: a random
    walk of ``steps`` actions (0: none) and the task's ``walks(task)`` (the walks of an agent, a
    run's factual runs); the report lists one line per failure (:attr:`EnvCheck.ok` when
    there is none)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0 or (steps == 0 and walks is None):
        raise CirError(f"check_env steps={steps!r}: expected an integer >= 1")
    report = EnvCheck()
    for task in tasks:
        check_task(make_env, task, steps=steps, seed=seed, actions=actions, report=report,
                   walks=walks(task) if walks is not None else ())
    if report.tasks == 0:
        raise CirError("check_env: no tasks to check")
    return report
