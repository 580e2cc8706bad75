"""Information available before a recovery decision (paper, sections 4.2 and 5.1).

:func:`extract_features` turns the transcript prefix that ends at a decision point
into a flat ``dict`` of floats with ``f_`` keys. The replayer writes these as the
``f_*`` columns of the paired table (computed on the no-recovery arm's prefix at
each delay) and the :class:`~cir.router.Router` computes them live, so both sides
must see exactly the same thing.

What a feature may read, and why: only what the *agent was shown* up to the end
of the prefix -- the task text, the agent's replies and actions, and each step's
``shown`` text. Never ``Step.observation`` (the true observation the agent may not
have seen), never ``Step.events`` (they name the perturbation, i.e. the condition),
never ``done``/``won`` flags, and never anything after the decision point. A live
harness has exactly this information, so a router trained on these columns can be
used at run time.

The *suspect* observation is the shown observation of env action number
``transcript.env_actions - delay`` (1-based): the one that may have been stale or
missing. When that number is below 1 the suspect features are 0 and
``f_has_suspect`` is 0.

The functions are plain Python over short strings (a transcript holds at most 49
model turns), deterministic, and cheap: they are called thousands of times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cir.protocol import (
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    GOAL_PREFIX,
    NOTHING_HAPPENS,
    THINK_PREFIX,
)
from cir.transcript import AGENT, Transcript

# name -> one-line meaning. Order is the column order of the paired table.
FEATURES: dict[str, str] = {
    # timing and context budget
    "f_delay": "env actions taken since the suspect observation (the recovery delay d)",
    "f_has_suspect": "1 if the transcript holds the suspect env action (env_actions - delay >= 1)",
    "f_model_turns": "model turns used so far",
    "f_env_actions": "env actions used so far",
    "f_turns_left": "model turns left in the budget (max_turns - used)",
    "f_actions_left": "env actions left in the budget (max_actions - used)",
    "f_budget_used": "largest used fraction of the two budgets (turns, env actions)",
    "f_context_kchars": "length of the agent's context so far, in thousands of characters",
    # action and reasoning repetition
    "f_action_repeat_frac": "fraction of env actions that repeat an earlier env action verbatim",
    "f_recent_action_repeats": "of the last 4 env actions, how many repeat an earlier env action",
    "f_action_streak": "length of the run of identical env actions at the end of the prefix",
    "f_action_cycle": "1 if the last 4 env actions form an A-B-A-B cycle",
    "f_think_frac": "fraction of model turns that were thoughts (think: ...)",
    "f_think_repeat": "number of thoughts that repeat an earlier thought verbatim",
    "f_post_think": "thoughts after the suspect observation",
    "f_post_action_repeats": "env actions after the suspect that repeat an earlier env action",
    "f_post_suspect_action_redo": "1 if an action after the suspect repeats the suspect's action",
    # no-op behaviour
    "f_noop_frac": "fraction of env actions answered 'Nothing happens.'",
    "f_post_noops": "'Nothing happens.' answers after the suspect observation",
    "f_noop_streak": "run of 'Nothing happens.' answers at the end of the prefix",
    "f_suspect_noop": "1 if the suspect observation is 'Nothing happens.'",
    # observation novelty
    "f_suspect_seen_before": "1 if the suspect observation repeats an earlier shown observation verbatim",
    "f_suspect_repeat_lag1": "1 if the suspect observation equals the one shown one env action earlier",
    "f_suspect_repeat_lag2": "1 if the suspect observation equals the one shown two env actions earlier",
    "f_suspect_words": "length of the suspect observation in words",
    "f_obs_repeat_frac": "fraction of shown env observations that repeat an earlier one verbatim",
    "f_post_novel_frac": "fraction of observations after the suspect that are new (1 if none yet)",
    # consistency between actions and observations
    "f_suspect_mismatch": "1 if the suspect observation does not answer its action (wrong kind or target)",
    "f_suspect_arrival_mismatch": "1 if the suspect answers 'go to X' with an arrival at another receptacle",
    "f_suspect_unparsed": "1 if the suspect observation matches no engine text template",
    "f_mismatch_count": "env actions whose shown observation does not answer the action",
    "f_post_mismatches": "such mismatches after the suspect observation",
    "f_pre_mismatches": "such mismatches before the suspect observation",
    "f_suspect_go": "1 if the suspect action is a 'go to'",
    "f_suspect_take_or_move": "1 if the suspect action is a 'take' or 'move'",
    "f_suspect_open": "1 if the suspect action is an 'open' or 'close'",
    # task progress
    "f_task_pick_two": "1 if the goal asks for two objects",
    "f_task_transform": "1 if the goal asks to heat, cool or clean the object",
    "f_task_look": "1 if the goal asks to look at the object under a lamp",
    "f_progress": "fraction of the goal's subgoals the shown text says are done",
    "f_pickups": "objects picked up according to the shown text",
    "f_placements": "objects moved to a receptacle according to the shown text",
    "f_transforms": "objects heated, cooled or cleaned, or lamps switched on, per the shown text",
    "f_goal_obj_seen": "1 if the goal object has appeared in a shown observation",
    "f_holding": "1 if the agent was last shown picking something up and not putting it down",
    "f_since_progress": "env actions since the last subgoal text (all, if none yet)",
    "f_places_visited": "distinct receptacles the agent was shown arriving at",
}


# -- parsing the engine's text --------------------------------------------------------
_GO = re.compile(r"^go to (.+)$")
_TAKE = re.compile(r"^take (.+?) from (.+)$")
_MOVE = re.compile(r"^(?:move|put) (.+?) (?:to|in|on|into) (.+)$")
_OPEN = re.compile(r"^open (.+)$")
_CLOSE = re.compile(r"^close (.+)$")
_TRANSFORM = re.compile(r"^(heat|cool|clean) (.+?) with (.+)$")
_USE = re.compile(r"^use (.+)$")
_EXAMINE = re.compile(r"^examine (.+)$")
_SLICE = re.compile(r"^slice (.+?) with (.+)$")

_ARRIVE = re.compile(r"^You arrive at (.+?)\.")
_OBS_TEMPLATES = (
    "You arrive at ",
    "You open the ",
    "You close the ",
    "You pick up the ",
    "You move the ",
    "You put the ",
    "You heat the ",
    "You cool the ",
    "You clean the ",
    "You turn on the ",
    "You turn off the ",
    "You don't see any switch",
    "You sliced the ",
    "You are carrying",
    "You are not carrying anything",
    "You are facing the ",
    "You are in the middle of a room",
    "On the ",
    "The ",
    "This ",
    "There's nothing special",
    "PickupObjectFromReceptacleObject:",
    "PickupEmptyReceptacleObject:",
    "PickupFullReceptacleObject:",
    "PutObjectInReceptacleObject:",
    "PutEmptyReceptacleObjectinReceptacle:",
    "PutFullReceptacleObjectInReceptacle:",
    "Available commands:",
    NOTHING_HAPPENS,
)
_GOAL = re.compile(rf"{re.escape(GOAL_PREFIX)} (.+?)\.?\s*$", re.MULTILINE)
_GOAL_OBJ = (
    re.compile(r"^look at (\w+) under"),
    re.compile(r"^examine the (\w+) with"),
    re.compile(r"\b(?:a|an|some|two|the)\s+(?:(?:hot|cool|cold|clean)\s+)?(\w+)"),
)


def action_kind(action: str) -> str:
    """The kind of an env action (``go``, ``take``, ``move``, ..., ``other``)."""
    a = action.strip().lower()
    for kind, pattern in (
        ("go", _GO),
        ("take", _TAKE),
        ("move", _MOVE),
        ("open", _OPEN),
        ("close", _CLOSE),
        ("transform", _TRANSFORM),
        ("use", _USE),
        ("examine", _EXAMINE),
        ("slice", _SLICE),
    ):
        if pattern.match(a):
            return kind
    if a in {"look", "inventory", "help"}:
        return a
    return "other"


def answers(action: str, shown: str) -> bool:
    """Whether ``shown`` is a plausible engine answer to ``action``.

    ``Nothing happens.`` answers every action (the engine's reply to an action that
    does not apply). Otherwise the text must be of the action's kind and name its
    target: ``go to X`` is answered by ``You arrive at X.``, ``take o from r`` by
    ``You pick up the o from the r.``, and so on.
    """
    a = action.strip().lower()
    s = shown.strip()
    if s == NOTHING_HAPPENS:
        return True
    low = s.lower()
    if m := _GO.match(a):
        return low.startswith(f"you arrive at {m.group(1)}.")
    if m := _TAKE.match(a):
        return low.startswith(f"you pick up the {m.group(1)}") or "pick up the " + m.group(1) in low
    if m := _MOVE.match(a):
        return low.startswith(f"you move the {m.group(1)} to the {m.group(2)}") or (
            "put the " + m.group(1) in low
        )
    if m := _OPEN.match(a):
        return low.startswith(f"you open the {m.group(1)}.")
    if m := _CLOSE.match(a):
        return low.startswith(f"you close the {m.group(1)}.")
    if m := _TRANSFORM.match(a):
        return low.startswith(f"you {m.group(1)} the {m.group(2)} using the {m.group(3)}")
    if m := _USE.match(a):
        return (
            low.startswith(f"you turn on the {m.group(1)}")
            or low.startswith(f"you turn off the {m.group(1)}")
            or low.startswith("you don't see any switch")
        )
    if m := _EXAMINE.match(a):
        target = m.group(1)
        return (
            low.startswith(f"on the {target},")
            or low.startswith(f"the {target} is")
            or low.startswith(f"this {target}")
            or low.startswith("this is a")
            or low.startswith(f"there's nothing special about {target}")
        )
    if m := _SLICE.match(a):
        return low.startswith("you sliced the ")
    if a == "look":
        return low.startswith("you are facing the ") or low.startswith("you are in the middle of a room")
    if a == "inventory":
        return low.startswith("you are carrying") or low.startswith("you are not carrying anything")
    if a == "help":
        return "available commands" in low
    return False  # an unknown command is answered by "Nothing happens." only


def parsed(shown: str) -> bool:
    """Whether ``shown`` starts like any text the engine produces."""
    s = shown.strip()
    return any(s.startswith(t) for t in _OBS_TEMPLATES)


@dataclass(frozen=True)
class Goal:
    """What the goal sentence asks, as far as features need it."""

    text: str
    obj: str | None
    pick_two: bool
    transform: bool
    look: bool

    @property
    def subgoals(self) -> dict[str, int]:
        """How many of each subgoal text the goal needs (take, move, transform)."""
        if self.look:
            return {"take": 1, "move": 0, "transform": 1}
        return {"take": 2 if self.pick_two else 1, "move": 2 if self.pick_two else 1,
                "transform": 1 if self.transform else 0}


def parse_goal(task_text: str) -> Goal:
    """The goal of ``task_text`` (the ``Your task is to: ...`` line)."""
    m = _GOAL.search(task_text)
    text = m.group(1).strip().lower() if m else ""
    obj = None
    for pattern in _GOAL_OBJ:
        if g := pattern.search(text):
            obj = g.group(1)
            break
    look = text.startswith("look at ") or (text.startswith("examine the ") and " with the " in text)
    transform = bool(re.search(r"\b(heat|hot|cool|cold|clean)\b", text)) and not look
    pick_two = bool(re.search(r"\btwo\b", text))
    return Goal(text=text, obj=obj, pick_two=pick_two, transform=transform, look=look)


# -- features ----------------------------------------------------------------------------
def _streak(values: list[bool]) -> int:
    n = 0
    for v in reversed(values):
        if not v:
            break
        n += 1
    return n


def _repeats(values: list[str]) -> list[bool]:
    """For each value, whether it occurred earlier in the list."""
    seen: set[str] = set()
    out = []
    for v in values:
        out.append(v in seen)
        seen.add(v)
    return out


@dataclass
class _Shown:
    """What a prefix showed the agent, read in one pass over the steps."""

    actions: list[str]  # env actions (lowercased), in order
    shown: list[str]  # shown text answering each env action
    thoughts: list[tuple[int, str]]  # (number of env actions before it, text)
    model_turns: int
    context_chars: int


def _read(transcript: Transcript) -> _Shown:
    """One pass over the steps, reading only actor, reply, action and shown."""
    out = _Shown([], [], [], 0, len(transcript.task_text))
    for step in transcript.steps:
        out.context_chars += len(step.shown) + (len(step.reply) if step.actor == AGENT else 0)
        if step.actor == AGENT:
            out.model_turns += 1
            if step.action is None and step.reply.strip().lower().startswith(THINK_PREFIX):
                out.thoughts.append((len(out.actions), step.reply.strip()))
        if step.action is not None:
            out.actions.append(step.action.strip().lower())
            out.shown.append(step.shown.strip())
    return out


def _progress(goal: Goal, shown_env: list[str]) -> dict[str, float]:
    """Task progress, from the shown text only."""
    pickups = placements = transforms = 0
    holding = False
    goal_seen = False
    last_progress = 0  # env actions up to the last subgoal text
    places: set[str] = set()
    obj_pattern = re.compile(rf"\b{re.escape(goal.obj)} \d") if goal.obj else None
    for i, s in enumerate(shown_env):
        progress = False
        if s.startswith("You pick up the ") or s.startswith("PickupObject"):
            pickups += 1
            holding = True
            progress = True
        elif s.startswith("You move the ") or s.startswith("PutObject") or s.startswith("You put the "):
            placements += 1
            holding = False
            progress = True
        elif s.startswith(("You heat the ", "You cool the ", "You clean the ", "You turn on the ")):
            transforms += 1
            progress = True
        if progress:
            last_progress = i + 1
        if m := _ARRIVE.match(s):
            places.add(m.group(1))
        if obj_pattern is not None and not goal_seen and obj_pattern.search(s):
            goal_seen = True
    need = goal.subgoals
    done = (
        min(pickups, need["take"]) + min(placements, need["move"]) + min(transforms, need["transform"])
    )
    return {
        "f_task_pick_two": float(goal.pick_two),
        "f_task_transform": float(goal.transform),
        "f_task_look": float(goal.look),
        "f_progress": done / max(1, sum(need.values())),
        "f_pickups": float(pickups),
        "f_placements": float(placements),
        "f_transforms": float(transforms),
        "f_goal_obj_seen": float(goal_seen),
        "f_holding": float(holding),
        "f_since_progress": float(len(shown_env) - last_progress),
        "f_places_visited": float(len(places)),
    }


def _suspect(seen: _Shown, delay: int, action_repeat: list[bool], obs_repeat: list[bool],
             noop: list[bool], fits: list[bool]) -> dict[str, float]:
    """The suspect observation and what came after it (the prefix holds the suspect)."""
    actions, shown_env, n_act = seen.actions, seen.shown, len(seen.actions)
    k = n_act - delay  # 1-based number of the suspect env action
    si = k - 1  # its 0-based index
    s = shown_env[si]
    a = actions[si]
    kind = action_kind(a)
    post = range(k, n_act)  # 0-based indices after the suspect
    arrive = _ARRIVE.match(s)
    go = _GO.match(a)
    return {
        "f_post_think": float(sum(1 for n_before, _ in seen.thoughts if n_before >= k)),
        "f_post_action_repeats": float(sum(action_repeat[i] for i in post)),
        "f_post_suspect_action_redo": float(any(actions[i] == a for i in post)),
        "f_post_noops": float(sum(noop[i] for i in post)),
        "f_suspect_noop": float(noop[si]),
        "f_suspect_seen_before": float(obs_repeat[si]),
        "f_suspect_repeat_lag1": float(si >= 1 and shown_env[si - 1] == s),
        "f_suspect_repeat_lag2": float(si >= 2 and shown_env[si - 2] == s),
        "f_suspect_words": float(len(s.split())),
        "f_post_novel_frac": sum(not obs_repeat[i] for i in post) / delay if delay else 1.0,
        "f_suspect_mismatch": float(not fits[si]),
        "f_suspect_arrival_mismatch": float(bool(go and arrive and arrive.group(1).lower() != go.group(1))),
        "f_suspect_unparsed": float(not parsed(s)),
        "f_post_mismatches": float(sum(not fits[i] for i in post)),
        "f_pre_mismatches": float(sum(not fits[i] for i in range(si))),
        "f_suspect_go": float(kind == "go"),
        "f_suspect_take_or_move": float(kind in {"take", "move"}),
        "f_suspect_open": float(kind in {"open", "close"}),
    }


def extract_features(
    transcript: Transcript, delay: int, *, max_turns: int = DEFAULT_MAX_TURNS,
    max_actions: int = DEFAULT_MAX_ACTIONS,
) -> dict[str, float]:
    """Features of the decision at the end of ``transcript`` (see module docstring).

    ``delay`` is the number of env actions since the suspect observation. The result
    has exactly the keys of :data:`FEATURES`, in that order, all finite floats.
    """
    if delay < 0:
        raise ValueError(f"delay must be >= 0, got {delay}")
    seen = _read(transcript)
    actions, shown_env, model_turns = seen.actions, seen.shown, seen.model_turns
    n_act = len(actions)
    action_repeat = _repeats(actions)
    obs_repeat = _repeats(shown_env)
    noop = [s == NOTHING_HAPPENS for s in shown_env]
    fits = [answers(a, s) for a, s in zip(actions, shown_env, strict=True)]
    cycle = (
        n_act >= 4
        and actions[-1] == actions[-3]
        and actions[-2] == actions[-4]
        and actions[-1] != actions[-2]
    )

    f: dict[str, float] = dict.fromkeys(FEATURES, 0.0)
    f["f_delay"] = float(delay)
    f["f_has_suspect"] = float(n_act - delay >= 1)
    f["f_model_turns"] = float(model_turns)
    f["f_env_actions"] = float(n_act)
    f["f_turns_left"] = float(max_turns - model_turns)
    f["f_actions_left"] = float(max_actions - n_act)
    f["f_budget_used"] = max(model_turns / max_turns, n_act / max_actions)
    f["f_context_kchars"] = seen.context_chars / 1000.0
    f["f_action_repeat_frac"] = sum(action_repeat) / n_act if n_act else 0.0
    f["f_recent_action_repeats"] = float(sum(action_repeat[-4:]))
    f["f_action_streak"] = float(_streak([a == actions[-1] for a in actions]))
    f["f_action_cycle"] = float(cycle)
    f["f_think_frac"] = len(seen.thoughts) / model_turns if model_turns else 0.0
    f["f_think_repeat"] = float(sum(_repeats([t for _, t in seen.thoughts])))
    f["f_noop_frac"] = sum(noop) / n_act if n_act else 0.0
    f["f_noop_streak"] = float(_streak(noop))
    f["f_obs_repeat_frac"] = sum(obs_repeat) / n_act if n_act else 0.0
    f["f_mismatch_count"] = float(sum(not x for x in fits))
    f["f_post_novel_frac"] = 1.0
    if n_act - delay >= 1:  # the prefix holds the suspect env action
        f.update(_suspect(seen, delay, action_repeat, obs_repeat, noop, fits))
    f.update(_progress(parse_goal(transcript.task_text), shown_env))
    # Round so that values survive a CSV round trip bit-for-bit (router == offline).
    return {name: round(float(v), 6) for name, v in f.items()}


def feature_names() -> list[str]:
    """The feature names in column order."""
    return list(FEATURES)
