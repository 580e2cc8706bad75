"""Observation perturbations: what the harness shows instead of the true observation.

The environment is never changed: a perturbation only replaces the *shown* text of one
env action (the perturbation point), so any later difference between arms comes from
what the agent believed, not from a different world.

Conditions (DESIGN.md):

- ``clean``: the true observation (no change, no event).
- ``staleK`` (K >= 1): the TRUE observation of the env action K actions earlier (the answer
  to another command, so a check of text against command can see it);
- ``lagK`` (K >= 1): the answer the SAME command would have got K env actions earlier (a
  stale cache or a lagging replica): the env restored to the state K env actions back, the
  command sent, the env restored (:func:`lagged_answer`). The text answers the command it is
  shown for, so a check of text against command does not see it (yet it is often the true text,
  when the answer had not changed in K env actions, or one a harness sees is wrong otherwise, such
  as ALFWorld's ``Nothing happens.``: :func:`shown_kind` says which); it is computed with the env's
  exact snapshots, and its env work is counted like any other;
- ``missing``: the fixed text :data:`MISSING_TEXT`.

How long a perturbed read lasts (:class:`Persistence`, the run's ``persistence`` setting): ``once``
(the default: only the perturbation point's text is modified; a later read of the same command gets
the env's true answer), a number N (a stale cache: for the next N env actions, the same command
text, sent again, is shown the perturbed text again) or ``refresh`` (the same, for as long as the
episode lasts). Either ends at the first recovery that queries the env afresh (``refresh``,
``refresh_ablated``: the harness re-read the env, so its cache no longer serves the stale answer);
a ``rewind`` or a ``replan`` does not, so the command redone after them meets the stale answer
again, as it would behind a real stale cache. The env still runs every command (as at the point);
only the text shown is the cached one, and the step carries the event ``perturb:<condition>:again``.

What a perturbed observation *showed* (:func:`shown_kind`, the paired table's ``shown`` column):
``true`` (the text equals the true observation: no error at all, e.g. a ``lagK`` read whose answer
had not changed in K env actions), ``anomalous`` (a text a harness can see is wrong: the missing
text always, and whatever the environment family's ``anomalous(action, shown)`` says, e.g.
ALFWorld's ``Nothing happens.`` to a command of its grammar or a text that does not answer its
command) or ``looks_right`` (wrong, and it looks like a valid answer). ``clean`` is ``true``.

The perturbation point of a task is the env action after ``fraction`` (0.25) of the
factual run's N env actions: number ``ceil(fraction * N) + 1`` (1-based), the paper's
protocol. That point depends on the factual run's length, which a live harness never
knows (and ``f_env_actions - f_delay`` then encodes it); the other protocols, ``at``, are a
fixed env-action number for every task, or one drawn per task from a range by a digest of
its id (:func:`random_point`), so the decision point says nothing about the factual run.
An env that says which of its actions are reads (the Env contract's optional ``reads``,
:func:`cir.envs.base.env_reads`: a tool world's read-only calls) is perturbed at its first read
at or after the protocol's point: a harness's cache serves reads, while a change's answer comes
from the primary (a tool world perturbed at a change would show a stale answer to the agent's own
write, a record that differs only in when it was written). A factual run with no read there is
not prefix-feasible. :func:`find_point` is the one home of that rule, for the replayer and every
live path.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cir.envs.base import env_reads
from cir.episode.protocol import DEFAULT_FRACTION
from cir.episode.transcript import AGENT, Step, Transcript
from cir.util.errors import CirError, SettingError

MISSING_TEXT = "[Observation unavailable.]"

#: What a perturbed observation showed (the ``shown`` column): the true text, a visibly anomalous
#: text, or a wrong text that looks like a valid answer.
SHOWN_TRUE, SHOWN_ANOMALOUS, SHOWN_LOOKS_RIGHT = "true", "anomalous", "looks_right"
SHOWN_VALUES = (SHOWN_TRUE, SHOWN_ANOMALOUS, SHOWN_LOOKS_RIGHT)

#: A family's test of a shown text: (the env action, the text shown for it) -> visibly anomalous?
Anomalous = Callable[[str | None, str], bool]


#: How long a perturbed read lasts: the perturbation point only (the default), or until a refresh.
ONCE, UNTIL_REFRESH = "once", "refresh"
#: The event of the perturbation point (``perturb:stale2``), not of a read served again.
_POINT_EVENT = re.compile(r"^perturb:[^:]+$")


@dataclass(frozen=True)
class Persistence:
    """How long a perturbed read lasts (module docstring): ``actions`` None and ``until_refresh``
    False is ``once``; ``actions`` N: the next N env actions (a refresh ends it sooner);
    ``until_refresh``: until a refresh (or the episode's end). Built by :func:`parse_persistence`."""

    actions: int | None = None
    until_refresh: bool = False

    @property
    def once(self) -> bool:
        return self.actions is None and not self.until_refresh

    @property
    def text(self) -> str:
        """``once``, ``refresh`` or the number N: what a run records and a command line takes."""
        return ONCE if self.once else UNTIL_REFRESH if self.until_refresh else str(self.actions)

    def again(self, before: list[Step], step: Step) -> Step:
        """``step`` (the env's answer to an agent's command, after the steps ``before``) with the
        perturbed text shown again when the cache still serves it: the same command text as the
        perturbation point's, no recovery that queried the env since, and within N env actions of
        the point (counted over every step since, those a rewind discarded too: a cache's clock does
        not go back)."""
        if self.once or step.action is None:
            return step
        at = next((i for i, s in enumerate(before) if any(_POINT_EVENT.match(e) for e in s.events)), None)
        if at is None or before[at].action != step.action:
            return step
        since = before[at + 1:]
        if any(s.actor != AGENT and s.action is not None for s in since):
            return step  # the harness queried the env afresh (a refresh): the cache is renewed
        if self.actions is not None and sum(1 for s in since if s.action is not None) + 1 > self.actions:
            return step
        event = next(e for e in before[at].events if _POINT_EVENT.match(e))
        return Step(actor=step.actor, reply=step.reply, action=step.action, observation=step.observation,
                    shown=before[at].shown, events=[*step.events, f"{event}:again"], done=step.done,
                    won=step.won, rewind_to=step.rewind_to)


def parse_persistence(value: str | int | Persistence | None) -> Persistence:
    """``once`` (or None), ``refresh``, or a number N >= 1 of env actions (text or int); anything
    else is a :class:`CirError` saying what is expected."""
    if isinstance(value, Persistence):
        return value
    if value is None:
        return Persistence()
    text = str(value).strip().lower() if not isinstance(value, bool) else ""
    if text == ONCE:
        return Persistence()
    if text == UNTIL_REFRESH:
        return Persistence(until_refresh=True)
    if text.isdigit() and int(text) >= 1 and text == str(int(text)):
        return Persistence(actions=int(text))
    raise SettingError("persistence", value, "once (the perturbed read is shown once), refresh (the same command "
                       "is shown it again until a refresh) or a number N >= 1 of env actions it lasts")


def missing_text(shown: str | None) -> bool:
    """Whether ``shown`` is no observation at all (None, blank, or :data:`MISSING_TEXT`): anomalous to
    any harness, whatever its family says."""
    return shown is None or not str(shown).strip() or str(shown).strip() == MISSING_TEXT


def no_anomaly(action: str | None, shown: str) -> bool:
    """The test of a family without its own: no text but the missing one is anomalous."""
    return False


def shown_kind(action: str | None, observation: str | None, shown: str | None,
               anomalous: Anomalous | None = None) -> str:
    """What a step showed (:data:`SHOWN_VALUES`): ``true`` when ``shown`` is the true ``observation``;
    else ``anomalous`` when it is the missing text (:func:`missing_text`) or ``anomalous(action,
    shown)`` says so (a family's test: :attr:`cir.families.family.Family.anomalous`; without one only
    the missing text is anomalous); else ``looks_right``."""
    if shown == observation:
        return SHOWN_TRUE
    if missing_text(shown) or (anomalous is not None and bool(anomalous(action, str(shown)))):
        return SHOWN_ANOMALOUS
    return SHOWN_LOOKS_RIGHT

#: the conditions with a K: their name's prefix is their kind
_WITH_K = re.compile(r"^(stale|lag)(\d+)$")


@dataclass(frozen=True)
class Condition:
    """A parsed observation condition: ``kind`` in clean/stale/lag/missing, ``k`` for stale and lag."""

    name: str
    kind: str
    k: int = 0

    @property
    def lookback(self) -> int:
        """Earlier env actions needed to build the shown text (K for staleK and lagK, else 0)."""
        return self.k if self.kind in ("stale", "lag") else 0


def parse_condition(name: str) -> Condition:
    """``clean``, ``missing``, ``staleK`` or ``lagK`` with K >= 1; anything else is a :class:`CirError`."""
    text = str(name).strip()
    if text in ("clean", "missing"):
        return Condition(text, text)
    match = _WITH_K.match(text)
    if match:
        kind, digits = match.groups()
        k = int(digits)
        if k < 1 or digits != str(k):
            raise CirError(
                f"condition {name!r}: {kind}K needs an integer K >= 1 without leading zeros "
                f"(e.g. {kind}1, {kind}2)"
            )
        return Condition(text, kind, k)
    raise CirError(f"unknown condition {name!r}: expected clean, missing, staleK or lagK with K >= 1 "
                   "(e.g. stale2, lag2)")


def parse_conditions(spec: str | list[str] | tuple[str, ...]) -> list[Condition]:
    """A comma-separated list (or sequence) of condition names, parsed, duplicates refused."""
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s) for s in spec]
    names = [n for n in names if n]
    if not names:
        raise CirError("conditions: expected at least one of clean, missing, staleK, lagK")
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


def random_point(task_id: str, low: int, high: int) -> int:
    """An env-action number from ``low`` to ``high`` drawn for a task by a digest of its id alone
    (never of its factual run, so the point says nothing about the run's length; the same task
    always gets the same point)."""
    if isinstance(low, bool) or isinstance(high, bool) or not isinstance(low, int) \
            or not isinstance(high, int) or not 1 <= low <= high:
        raise CirError(f"perturbation points {low!r} to {high!r}: expected env-action numbers 1 <= LO <= HI")
    digest = hashlib.sha256(f"perturbation point\x1f{task_id}".encode()).digest()
    return low + int.from_bytes(digest[:8], "big") % (high - low + 1)


def feasibility(
    n_env_actions: int, conditions: Sequence[Condition], fraction: float = DEFAULT_FRACTION, at: int | None = None
) -> tuple[bool, str]:
    """Whether a factual run of N env actions is prefix-feasible for all ``conditions``.

    Feasible when the perturbed env action (:func:`perturbation_point`) exists in the
    factual run and at least K earlier env actions exist for the largest staleK or lagK. Returns
    ``(ok, reason)``. This is the rule of an env without reads; :func:`find_point` is the whole
    rule (an env with reads is perturbed at its first read at or after that point).
    """
    point = perturbation_point(n_env_actions, fraction, at)
    if point > n_env_actions:
        return False, _not_reached(n_env_actions, point)
    reason = _lookback(point, conditions)
    return reason == "ok", reason


#: How the reason of a factual run without a read at or after the protocol's point begins.
NO_READ = "no read at or after"


@dataclass(frozen=True)
class Point:
    """Where a factual run is perturbed (:func:`find_point`): ``protocol``, the protocol's env
    action (the fraction rule, ``at``); ``at``, the perturbed env action (the protocol's, or for an
    env with reads the first read at or after it), None when the run is not prefix-feasible, and
    then ``reason`` says why (``"ok"`` otherwise)."""

    protocol: int
    at: int | None
    reason: str = "ok"

    @property
    def feasible(self) -> bool:
        return self.at is not None


def find_point(factual: Transcript, conditions: Sequence[Condition], fraction: float = DEFAULT_FRACTION,
               at: int | None = None, env: Any = None) -> Point:
    """The perturbation point of ``factual`` under ``conditions`` (module docstring): the protocol's
    point (:func:`perturbation_point`); for an ``env`` that says which actions are reads
    (:func:`cir.envs.base.env_reads`, read through wrappers), the first env action at or after it
    whose action is a read; then, as :func:`feasibility`, at least K env actions before it for the
    largest staleK or lagK."""
    n = factual.env_actions
    protocol = perturbation_point(n, fraction, at)
    if protocol > n:
        return Point(protocol, None, _not_reached(n, protocol))
    point = protocol
    reads = env_reads(env) if env is not None else None
    if reads is not None:
        actions = [step.action for step in factual.steps if step.action is not None]
        point = next((i for i in range(protocol, n + 1) if reads(str(actions[i - 1]))), 0)
        if not point:
            return Point(protocol, None, (
                f"{NO_READ} the perturbation point (env action {protocol}): env actions {protocol} "
                f"to {n} of the factual run are none of them reads (the env's reads(action)), and a harness's "
                "cache serves only reads"))
    reason = _lookback(point, conditions)
    return Point(protocol, point if reason == "ok" else None, reason)


def _not_reached(n: int, point: int) -> str:
    return f"factual run has {n} env actions; the perturbation point (env action {point}) is not reached"


def _lookback(point: int, conditions: Sequence[Condition]) -> str:
    need = max((c.lookback for c in conditions), default=0)
    if point - 1 < need:
        worst = max(conditions, key=lambda c: c.lookback)
        return (f"{worst.name} needs {need} env actions before the perturbation point "
                f"(env action {point}); only {point - 1} exist")
    return "ok"


def lagged_answer(env: Any, snapshots: dict[int, Any], factual: Transcript, at: int, k: int) -> str:
    """What the command of env action ``at`` of ``factual`` would have got K env actions earlier.

    ``snapshots`` are the env's snapshots of ``factual`` by step count (after the reset: 0, after
    each env action: its step count), as :meth:`cir.episode.harness.Harness.episode_with_snapshots`
    keeps them. The env is restored to the state after env action ``at - 1 - k``, sent the
    command, and restored to the state after env action ``at``: the env's own exact restore, so
    the answer is the one that state gives, and the step is env work like any other (a
    :class:`~cir.envs.counting.CountingEnv` counts it; a branching env does it once).
    """
    if k < 1 or at - 1 - k < 0:
        raise CirError(f"task {factual.task_id}: lag{k} at env action {at} needs {k} earlier env actions; "
                       f"only {max(at - 1, 0)} exist")
    step = factual.steps[factual.steps_until_env_action(at) - 1]
    env.restore(snapshots[factual.steps_until_env_action(at - 1 - k)])
    obs, _, _ = env.step(str(step.action))
    env.restore(snapshots[factual.steps_until_env_action(at)])
    return str(obs)


@dataclass(frozen=True)
class Perturbation:
    """Replace the shown observation of env action ``at`` (1-based) under ``condition``.

    ``lagged``: for a ``lagK`` condition, the answer the command got K env actions earlier
    (:func:`lagged_answer`, which needs the env and its snapshots, so the caller computes it).
    """

    condition: Condition
    at: int
    lagged: str | None = None

    def shown_text(self, transcript: Transcript, true_observation: str) -> str:
        """The text shown for env action ``at`` given the steps before it."""
        cond = self.condition
        if cond.kind == "clean":
            return true_observation
        if cond.kind == "missing":
            return MISSING_TEXT
        if cond.kind == "lag":
            if self.lagged is None:
                raise CirError(
                    f"task {transcript.task_id}: {cond.name} needs the answer the command got {cond.k} env "
                    "actions earlier, from the env's snapshots (lagged_answer); the paired replayer and "
                    "`cir episode` compute it, a plain harness run cannot")
            return self.lagged
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


def perturbed_step(condition: Condition, at: int, factual: Transcript, snapshots: dict[int, Any],
                   env: Any) -> Step:
    """Env action ``at`` of the factual run as it is shown under ``condition``: the step the
    paired replayer's arms and ``cir episode`` start from. A ``lagK`` answer is computed on
    ``env`` from the factual run's ``snapshots`` (:func:`lagged_answer`), which leaves the env in
    the state after env action ``at``; the other conditions do not touch the env."""
    k_at = factual.steps_until_env_action(at)
    lagged = lagged_answer(env, snapshots, factual, at, condition.k) if condition.kind == "lag" else None
    return Perturbation(condition, at, lagged).apply(factual.prefix(k_at - 1), factual.steps[k_at - 1])
