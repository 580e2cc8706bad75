"""Observation perturbations: what the harness shows instead of the true observation.

The environment is never changed: a perturbation only replaces the *shown* text of one
env action (the perturbation point), so any later difference between arms comes from
what the agent believed, not from a different world.

Conditions (DESIGN.md):

- ``clean``: the true observation (no change, no event).
- ``staleK`` (K >= 1): the TRUE observation of the env action K actions earlier.
- ``missing``: the fixed text :data:`MISSING_TEXT`.

The perturbation point of a task is the env action after ``fraction`` (0.25) of the
factual run's N env actions: number ``ceil(fraction * N) + 1`` (1-based), the paper's
protocol. That point depends on the factual run's length, which a live harness never
knows (and ``f_env_actions - f_delay`` then encodes it); the other protocol, ``at``, is a
fixed env-action number for every task, so the decision point says nothing about the
factual run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from cir.episode.protocol import DEFAULT_FRACTION
from cir.episode.transcript import Step, Transcript
from cir.util.errors import CirError

MISSING_TEXT = "[Observation unavailable.]"

_STALE = re.compile(r"^stale(\d+)$")


@dataclass(frozen=True)
class Condition:
    """A parsed observation condition: ``kind`` in clean/stale/missing, ``k`` for stale."""

    name: str
    kind: str
    k: int = 0

    @property
    def lookback(self) -> int:
        """Earlier env actions needed to build the shown text (K for staleK, else 0)."""
        return self.k if self.kind == "stale" else 0


def parse_condition(name: str) -> Condition:
    """``clean``, ``missing`` or ``staleK`` with K >= 1; anything else is a :class:`CirError`."""
    text = str(name).strip()
    if text in ("clean", "missing"):
        return Condition(text, text)
    match = _STALE.match(text)
    if match:
        k = int(match.group(1))
        if k < 1 or match.group(1) != str(k):
            raise CirError(
                f"condition {name!r}: staleK needs an integer K >= 1 without leading zeros "
                "(e.g. stale1, stale2)"
            )
        return Condition(text, "stale", k)
    raise CirError(f"unknown condition {name!r}: expected clean, missing or staleK with K >= 1 (e.g. stale2)")


def parse_conditions(spec: str | list[str] | tuple[str, ...]) -> list[Condition]:
    """A comma-separated list (or sequence) of condition names, parsed, duplicates refused."""
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s) for s in spec]
    names = [n for n in names if n]
    if not names:
        raise CirError("conditions: expected at least one of clean, missing, staleK")
    parsed = [parse_condition(n) for n in names]
    seen: set[str] = set()
    for cond in parsed:
        if cond.name in seen:
            raise CirError(f"conditions: {cond.name!r} is listed twice")
        seen.add(cond.name)
    return parsed


def perturbation_point(n_env_actions: int, fraction: float = DEFAULT_FRACTION, at: int | None = None) -> int:
    """1-based number of the perturbed env action: ``at`` when given, else ``ceil(fraction * N) + 1``."""
    if at is not None:
        if isinstance(at, bool) or not isinstance(at, int) or at < 1:
            raise CirError(f"perturbation point {at!r}: expected an env-action number >= 1")
        return at
    if not 0.0 <= fraction < 1.0:
        raise CirError(f"perturbation fraction {fraction!r}: expected a number in [0, 1)")
    # round() first so that e.g. 0.25 * 12 = 3.0000000000000004 does not become 4
    return math.ceil(round(fraction * n_env_actions, 9)) + 1


def feasibility(
    n_env_actions: int, conditions: list[Condition], fraction: float = DEFAULT_FRACTION, at: int | None = None
) -> tuple[bool, str]:
    """Whether a factual run of N env actions is prefix-feasible for all ``conditions``.

    Feasible when the perturbed env action (:func:`perturbation_point`) exists in the
    factual run and at least K earlier env actions exist for the largest staleK. Returns
    ``(ok, reason)``.
    """
    point = perturbation_point(n_env_actions, fraction, at)
    if point > n_env_actions:
        return False, (
            f"factual run has {n_env_actions} env actions; the perturbation point "
            f"(env action {point}) is not reached"
        )
    need = max((c.lookback for c in conditions), default=0)
    if point - 1 < need:
        worst = max(conditions, key=lambda c: c.lookback)
        return False, (
            f"{worst.name} needs {need} env actions before the perturbation point "
            f"(env action {point}); only {point - 1} exist"
        )
    return True, "ok"


@dataclass(frozen=True)
class Perturbation:
    """Replace the shown observation of env action ``at`` (1-based) under ``condition``."""

    condition: Condition
    at: int

    def shown_text(self, transcript: Transcript, true_observation: str) -> str:
        """The text shown for env action ``at`` given the steps before it."""
        cond = self.condition
        if cond.kind == "clean":
            return true_observation
        if cond.kind == "missing":
            return MISSING_TEXT
        earlier = [s.observation for s in transcript.steps if s.action is not None]
        index = self.at - cond.k  # 1-based number of the env action whose observation is used
        if index < 1 or index > len(earlier):
            raise CirError(
                f"task {transcript.task_id}: {cond.name} at env action {self.at} needs "
                f"{cond.k} earlier env actions; only {len(earlier)} exist"
            )
        return str(earlier[index - 1])

    def apply(self, transcript: Transcript, step: Step) -> Step:
        """``step`` (env action number ``at`` of ``transcript``+step) with its shown text perturbed.

        ``transcript`` holds the steps before ``step``. Clean leaves the step unchanged
        (so the clean arm is the factual run, byte for byte).
        """
        if self.condition.kind == "clean":
            return step
        shown = self.shown_text(transcript, step.observation or "")
        return Step(
            actor=step.actor,
            reply=step.reply,
            action=step.action,
            observation=step.observation,
            shown=shown,
            events=[*step.events, f"perturb:{self.condition.name}"],
            done=step.done,
            won=step.won,
            rewind_to=step.rewind_to,
        )
