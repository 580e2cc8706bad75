"""Test doubles for the harness and replayer tests: a dict-state text env with exact
snapshots and a scripted agent that believes what it is shown.

Kept in tests (not in the package). Importable by other test modules and by
subprocesses that put this folder on ``sys.path``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ARRIVE = re.compile(r"You arrive at (\w+ \d+)\.")


class FakeEnv:
    """A small ALFWorld-like world: visit receptacles, find the mug, put it on the desk."""

    def __init__(self, receptacles: list[str], mug_at: str, *, max_len: int | None = None) -> None:
        self.receptacles = receptacles
        self.mug_at = mug_at
        self.state: dict = {}
        self.steps = 0
        self.resets = 0

    def reset(self) -> str:
        self.resets += 1
        self.state = {"at": None, "mug": self.mug_at, "holding": False, "won": False}
        listing = ", ".join(f"a {r}" for r in self.receptacles)
        return (f"You are in the middle of a room. Looking quickly around you, you see {listing}.\n\n"
                "Your task is to: put some mug on desk 1.")

    def _contents(self, where: str) -> str:
        if self.state["mug"] == where:
            return f"On the {where}, you see a mug 1."
        return f"On the {where}, you see nothing."

    def step(self, action: str) -> tuple[str, bool, bool]:
        self.steps += 1
        s = self.state
        if s["won"]:
            return "Nothing happens.", True, True
        m = re.fullmatch(r"go to (\w+ \d+)", action)
        if m and m.group(1) in self.receptacles:
            s["at"] = m.group(1)
            return f"You arrive at {s['at']}. {self._contents(s['at'])}", False, False
        m = re.fullmatch(r"take mug 1 from (\w+ \d+)", action)
        if m and s["at"] == m.group(1) and s["mug"] == s["at"] and not s["holding"]:
            s["holding"], s["mug"] = True, None
            return f"You pick up the mug 1 from the {s['at']}.", False, False
        m = re.fullmatch(r"move mug 1 to (\w+ \d+)", action)
        if m and s["holding"] and s["at"] == m.group(1):
            s["holding"], s["mug"] = False, s["at"]
            if s["at"] == "desk 1":
                s["won"] = True
                return "You move the mug 1 to the desk 1.", True, True
            return f"You move the mug 1 to the {s['at']}.", False, False
        if action == "look":
            where = s["at"] or "middle of the room"
            return f"You are facing the {where}. Next to it, you see nothing.", False, False
        return "Nothing happens.", False, False

    def snapshot(self) -> dict:
        return copy.deepcopy(self.state)

    def restore(self, snap: dict) -> None:
        self.state = copy.deepcopy(snap)


class FakeAgent:
    """Believes the shown text: visits unvisited receptacles in a hashed order, takes the
    mug where it last *saw* it, carries it to the desk. Thinks once at the start."""

    name = "fake"

    def __init__(self, seed: int = 0, sleep: float = 0.0) -> None:
        self.seed = seed
        self.sleep = sleep
        self.calls = 0

    def params(self) -> dict:
        return {"name": self.name, "seed": self.seed}

    def act(self, context: list[dict[str, str]]) -> str:
        self.calls += 1
        if self.sleep:
            time.sleep(self.sleep)
        task = context[0]["content"]
        recs = re.findall(r"a (\w+ \d+)", task.split("Your task")[0])
        replies = [m["content"] for m in context if m["role"] == "assistant"]
        shown = [m["content"] for m in context[1:] if m["role"] == "user"]
        if not replies:
            return "think: I need to find a mug and put it on desk 1."
        at = None
        seen_mug = None
        visited: list[str] = []
        holding = False
        for text in shown:
            m = ARRIVE.search(text)
            if m:
                at = m.group(1)
                visited.append(at)
                if "mug 1" in text:
                    seen_mug = at
            if "You pick up the mug 1" in text:
                holding = True
            if text.startswith("[Refreshed observation]"):
                f = re.search(r"facing the (\w+ \d+)", text)
                if f:
                    at = f.group(1)
        last = shown[-1] if shown else ""
        if holding:
            return "move mug 1 to desk 1" if at == "desk 1" else "go to desk 1"
        if seen_mug and at == seen_mug and "Nothing happens" not in last:
            return f"take mug 1 from {seen_mug}"
        if last.startswith("[Replan]") or last.startswith("[Rewind]"):
            return "think: let me check the plan again."
        order = sorted(recs, key=lambda r: hashlib.sha256(f"{self.seed}{r}".encode()).hexdigest())
        todo = [r for r in order if r not in visited and r != "desk 1"]
        if "Nothing happens" in last and at:
            return f"go to {seen_mug or at}"
        if not todo:
            return "go to " + order[len(replies) % len(order)]
        return f"go to {todo[0]}"


class SamplingFakeAgent(FakeAgent):
    """:class:`FakeAgent` that samples (``cir.agents.sampling``): sample ``index`` goes to a
    receptacle of its own choice instead of the planned reply with chance ``temperature / 2``,
    keyed by the index and the context (a pure function of both); sample 0 at temperature 0
    is the FakeAgent."""

    name = "fake-sampling"

    def __init__(self, seed: int = 0, temperature: float = 0.8, index: int = 0) -> None:
        super().__init__(seed)
        self.temperature, self.index = temperature, index

    def params(self) -> dict:
        return {**super().params(), "temperature": self.temperature, "sample": self.index}

    def sample(self, index: int) -> SamplingFakeAgent:
        return SamplingFakeAgent(self.seed, self.temperature, index)

    def act(self, context: list[dict[str, str]]) -> str:
        planned = super().act(context)
        key = hashlib.sha256(json.dumps([self.index, context]).encode()).digest()
        if planned.startswith("think") or key[0] / 256 >= self.temperature / 2:
            return planned
        recs = re.findall(r"a (\w+ \d+)", context[0]["content"].split("Your task")[0])
        return f"go to {recs[key[1] % len(recs)]}"


@dataclass(frozen=True)
class FakeTask:
    """Stands in for :class:`cir.families.alfworld.tasks.TaskRef` (same fields)."""

    task_id: str
    game_file: Path
    task_type: str = "pick_and_place_simple"
    split: str = "valid_unseen"
    room: str | None = None
    plan_length: int | None = None


def fake_world(task_id: str) -> tuple[list[str], str]:
    """Receptacles and the mug's place, derived from the task id (deterministic)."""
    h = int(hashlib.sha256(task_id.encode()).hexdigest(), 16)
    n = 6 + h % 7
    recs = [f"drawer {i}" for i in range(1, n // 2 + 1)] + [f"shelf {i}" for i in range(1, n - n // 2 + 1)]
    recs.append("desk 1")
    mug = recs[(h // 7) % (len(recs) - 1)]
    return recs, mug


def make_fake_env(task: FakeTask, snapshots: str = "fast") -> FakeEnv:
    recs, mug = fake_world(task.task_id)
    return FakeEnv(recs, mug)


def make_fake_agent(spec: str = "fake", seed: int = 0) -> FakeAgent:
    sleep = float(spec.split(":", 1)[1]) if ":" in spec else 0.0
    return FakeAgent(seed=seed, sleep=sleep)


def fake_tasks(n: int, root: Path | None = None) -> list[FakeTask]:
    root = root or Path("/nonexistent")
    return [FakeTask(task_id=f"task{i:03d}", game_file=root / f"task{i:03d}" / "game.tw-pddl")
            for i in range(n)]


def dump(obj: object) -> str:
    return json.dumps(obj, sort_keys=True)


def fake_settings(replay: object = None, agent: str = "fake", **more: object):  # noqa: ANN201
    """The RunSettings of a run with the fake agent and env (``agent`` ``fake:SECONDS`` is a
    slow one); ``more`` sets any other setting (jobs, backend, ...)."""
    from cir.pairs.settings import ReplaySettings, RunSettings

    more.setdefault("agent_factory", make_fake_agent)
    more.setdefault("env_factory", make_fake_env)
    return RunSettings(replay=replay or ReplaySettings(), agent=agent, **more)  # type: ignore[arg-type]


def make_fatal_env(task: FakeTask, snapshots: str = "fast", *, kill: str = "", after: int = 3) -> FakeEnv:
    """The fake env, except that the task ``kill`` ends its process (SIGKILL, as ``kill -9``
    or the kernel's out-of-memory killer would) at its ``after``-th step: a worker that dies.
    Use as ``functools.partial(make_fatal_env, kill="task002")``."""
    env = make_fake_env(task, snapshots)
    if task.task_id == kill:
        step = env.step

        def fatal_step(action: str) -> tuple[str, bool, bool]:
            if env.steps + 1 >= after:
                os.kill(os.getpid(), signal.SIGKILL)
            return step(action)

        env.step = fatal_step  # type: ignore[method-assign]
    return env


def check_lag_arms(task, agent, make_env, settings, extractor=None) -> int:  # noqa: ANN001
    """Run ``task``'s pairs under ``settings`` (with lagK conditions) on a real family's env and
    check every lagK arm: its perturbed step shows what a fresh env, reset and sent the factual
    actions up to K env actions before the perturbed one, answers to the same command (the
    env's restore is exact there), and keeps the true observation. Returns the lag arms checked."""
    from cir.pairs.replay import run_task_pairs

    result = run_task_pairs(task, agent, make_env(task), settings, extractor=extractor)
    assert result.feasible, result.reason
    factual = next(e.transcript for e in result.episodes if e.role == "factual")
    actions = [s.action for s in factual.steps if s.action is not None]
    k_at = factual.steps_until_env_action(result.point)
    checked = 0
    for ep in result.episodes:
        if ep.role != "no_recovery" or not ep.condition.startswith("lag") or ep.transcript is None:
            continue
        k = int(ep.condition.removeprefix("lag"))
        fresh = make_env(task)
        fresh.reset()
        for a in actions[: result.point - 1 - k]:
            fresh.step(a)
        answer, _, _ = fresh.step(actions[result.point - 1])
        step = ep.transcript.steps[k_at - 1]
        assert step.shown == answer, (ep.condition, step.action, step.shown, answer)
        assert step.observation == factual.steps[k_at - 1].observation
        assert f"perturb:{ep.condition}" in step.events
        checked += 1
    return checked
