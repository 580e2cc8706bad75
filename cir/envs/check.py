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
- **refresh**: the refresh query, sent twice in a row from a restored state, answers the
  same both times (it reads the state without changing what it reads; when the second ends
  the episode, as a move budget may, the pair is not compared).

Each failure is one line naming the task, the step and what differed. The walk's actions
are ``actions(env, observation)`` (a family's ``walk_actions``), else the env's
``admissible_commands()``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cir.envs.base import refresh_query
from cir.util.errors import CirError

Actions = Callable[[Any, str], Sequence[str]]


@dataclass
class EnvCheck:
    """What :func:`check_env` found: one line per failure, and how much it checked."""

    tasks: int = 0
    steps: int = 0
    restores: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        verdict = "ok" if self.ok else f"{len(self.failures)} failure(s)"
        return (f"check_env: {self.tasks} tasks, {self.steps} walk steps, {self.restores} restores "
                f"checked: {verdict}")


def _answer(result: Any) -> tuple[str, bool, bool]:
    obs, done, won = result
    return str(obs), bool(done), bool(won)


def _say(answer: tuple[str, bool, bool]) -> str:
    obs, done, won = answer
    return f"{obs!r:.120} (done {done}, won {won})"


def _walk_actions(env: Any, observation: str, actions: Actions | None) -> list[str]:
    if actions is not None:
        found = actions(env, observation)
    elif callable(getattr(env, "admissible_commands", None)):
        found = env.admissible_commands()
    else:
        raise CirError(f"check_env: {type(env).__name__} has no admissible_commands(); pass "
                       "actions=(env, observation) -> [actions] (a Family's walk_actions)")
    found = [str(a) for a in found]
    if not found:
        raise CirError(f"check_env: no action to take after {observation!r:.80}")
    return found


def _walk(env: Any, rng: random.Random, steps: int, actions: Actions | None) -> tuple[
        str, list[str], list[tuple[str, bool, bool]], list[Any]]:
    """A random walk: its first observation, actions, answers, and the snapshot before each step."""
    first = str(env.reset())
    obs, taken, answers, snaps = first, [], [], []
    for _ in range(steps):
        action = rng.choice(sorted(_walk_actions(env, obs, actions)))
        snaps.append(env.snapshot())
        answer = _answer(env.step(action))
        taken.append(action)
        answers.append(answer)
        obs = answer[0]
        if answer[1]:
            break
    return first, taken, answers, snaps


def check_task(make_env: Callable[[Any], Any], task: Any, *, steps: int = 20, seed: int = 0,
               actions: Actions | None = None, report: EnvCheck | None = None) -> EnvCheck:
    """Check one task (see the module docstring); failures go into ``report``."""
    report = report or EnvCheck()
    name = str(getattr(task, "task_id", task))
    rng = random.Random(f"{seed}:{name}")
    env = make_env(task)
    try:
        first, taken, answers, snaps = _walk(env, rng, steps, actions)
        report.tasks += 1
        report.steps += len(taken)
        _check_reset(make_env, task, name, first, taken, answers, report)
        order = list(range(len(taken)))
        rng.shuffle(order)
        for t in order:
            env.restore(snaps[t])
            got = _answer(env.step(taken[t]))
            report.restores += 1
            if got != answers[t]:
                report.failures.append(
                    f"task {name}: step {t + 1} ({taken[t]!r}) after restore answered {_say(got)}; "
                    f"the uninterrupted walk answered {_say(answers[t])}")
        _check_refresh(env, name, snaps, answers, rng, report)
    finally:
        if callable(getattr(env, "close", None)):
            env.close()
    return report


def _check_reset(make_env: Callable[[Any], Any], task: Any, name: str, first: str, taken: list[str],
                 answers: list[tuple[str, bool, bool]], report: EnvCheck) -> None:
    other = make_env(task)
    try:
        again = str(other.reset())
        if again != first:
            report.failures.append(f"task {name}: reset: a new env's first observation {again!r:.120} "
                                   f"differs from {first!r:.120}")
            return
        for t, action in enumerate(taken):
            got = _answer(other.step(action))
            if got != answers[t]:
                report.failures.append(f"task {name}: reset: step {t + 1} ({action!r}) of the same walk on a "
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
        env.restore(snaps[t])
        one, two = _answer(env.step(query)), _answer(env.step(query))
        report.restores += 1
        # an env whose query spends a move of a budget may end on the second: not compared
        if not (one[1] or two[1]) and one != two:
            report.failures.append(f"task {name}: refresh before step {t + 1}: {query!r} answered "
                                   f"{_say(one)}, then {_say(two)}; it must read the state, not change it")


def check_env(make_env: Callable[[Any], Any], tasks: Iterable[Any], *, steps: int = 20, seed: int = 0,
              actions: Actions | None = None) -> EnvCheck:
    """Check every task of ``tasks`` (a few are enough) with ``make_env(task)`` envs; the report
    lists one line per failure (:attr:`EnvCheck.ok` when there is none)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise CirError(f"check_env steps={steps!r}: expected an integer >= 1")
    report = EnvCheck()
    for task in tasks:
        check_task(make_env, task, steps=steps, seed=seed, actions=actions, report=report)
    if report.tasks == 0:
        raise CirError("check_env: no tasks to check")
    return report
