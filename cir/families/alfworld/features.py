"""Information available before a recovery decision in ALFWorld (paper, sections 4.2 and 5.1).

This is ALFWorld's feature extractor (:data:`ALFWORLD_FEATURES`, the default
:class:`cir.episode.extractor.FeatureExtractor`): another environment brings its own.

:func:`extract_features` turns the transcript prefix that ends at a decision point
into a flat ``dict`` of floats with ``f_`` keys. The replayer writes these as the
``f_*`` columns of the paired table (computed on the no-recovery arm's prefix at
each delay) and the :class:`~cir.router.runtime.Router` computes them live, so both sides
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

from cir.episode.protocol import (
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    NOTHING_HAPPENS,
    THINK_PREFIX,
)
from cir.episode.transcript import AGENT, Transcript
from cir.families.alfworld import text as tx
from cir.families.alfworld.agent.priors import CAN_HOLD, LOOKALIKES
from cir.families.alfworld.goals import UNKNOWN_SUBGOALS, Goal, parse_goal
from cir.families.alfworld.text import action_kind, answers
from cir.util.errors import CirValueError

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
    # the state of the agent's knowledge (what the mechanisms of a recovery act on)
    "f_doubts_open": "env actions whose shown text did not answer the command and that no later shown text settled",
    "f_suspect_doubt_open": "1 if the suspect text did not answer its command and nothing shown since settled it",
    "f_hands_unverified": "1 if the suspect command was a take or move and nothing shown since tells what the hands hold",
    "f_location_unverified": "1 if the suspect command was a go-to, open or close and nothing shown since shows that place",
    "f_subgoal_fetch": "1 if a goal object was shown in a listing and the hands are empty (seen, not taken)",
    "f_subgoal_transform": "1 if holding (per the shown text) with the heat/cool/clean step not yet shown",
    "f_subgoal_deliver": "1 if holding (per the shown text) with only carrying it to its target (or lamp) left",
    "f_unvisited": "receptacles of the room listing never shown arrived at, opened or examined",
    "f_subgoals_left": "sub-goals of the goal (take, transform, move) not yet shown done",
    "f_progress_since_suspect": "sub-goal texts shown after the suspect observation (what a rewind would discard)",
    "f_self_checks_since": "commands after the suspect that check the state (look, inventory, examine) or repeat it",
    # what a harness message can act on (the harm channels of a recovery)
    "f_last_progress": "1 if the latest env action was answered by a sub-goal text (take, move, heat/cool/clean, lamp)",
    "f_last_open": "1 if the latest env action was answered by an open text",
    "f_here_listed": "objects the current place holds per the shown text (its latest listing, with pickups and placements since)",
    "f_here_goal_obj": "1 if among them is an object of the goal's type",
    "f_here_lookalike": "1 if among them is an object of a type often taken for the goal's (a look-alike)",
    "f_here_could_hold": "1 if the current place (per the shown text) is of a type that can hold the goal's object",
    "f_prev_take_or_move": "1 if the env action before the suspect was answered by a pickup or placement text",
}


# -- parsing the engine's text (commands: cir.families.alfworld.text) ----------------------
_ARRIVE = re.compile(r"^You arrive at (.+?)\.")


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


def _asks(goal: Goal | None) -> tuple[bool, bool, bool, dict[str, int]]:
    """(two objects, a transform, a look task, the subgoals); a goal that fits no template
    asks for one object placed."""
    if goal is None:
        return False, False, False, UNKNOWN_SUBGOALS
    return goal.count == 2, goal.transform is not None, goal.look, goal.subgoals


def _progress(goal: Goal | None, shown_env: list[str]) -> dict[str, float]:
    """Task progress, from the shown text only."""
    pickups = placements = transforms = 0
    holding = False
    goal_seen = False
    last_progress = 0  # env actions up to the last subgoal text
    places: set[str] = set()
    obj_pattern = re.compile(rf"\b{re.escape(goal.obj)} \d") if goal is not None else None
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
    pick_two, transform, look, need = _asks(goal)
    done = (
        min(pickups, need["take"]) + min(placements, need["move"]) + min(transforms, need["transform"])
    )
    return {
        "f_task_pick_two": float(pick_two),
        "f_task_transform": float(transform),
        "f_task_look": float(look),
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
    act = tx.parse_action(a)
    kind = action_kind(a)
    post = range(k, n_act)  # 0-based indices after the suspect
    arrive = _ARRIVE.match(s)
    go = act[1] if act is not None and act[0] == "go" else None
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
        "f_suspect_arrival_mismatch": float(bool(go and arrive and arrive.group(1).lower() != go)),
        "f_suspect_unparsed": float(not tx.is_engine_text(s)),
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
        raise CirValueError(f"features: delay {delay!r}: expected an integer >= 0")
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
    goal = parse_goal(transcript.task_text)
    progress = _progress(goal, shown_env)
    f.update(progress)
    f.update(_knowledge(goal, transcript.task_text, seen, n_act - delay, progress))
    f.update(_here(goal, seen, n_act - delay))
    # Round so that values survive a CSV round trip bit-for-bit (router == offline).
    return {name: round(float(v), 6) for name, v in f.items()}


def _knowledge(goal: Goal | None, task_text: str, seen: _Shown, k: int, progress: dict[str, float]) -> dict[str, float]:
    """Doubts, verification, the sub-goal in progress and the work left (see FEATURES).

    A doubt is an env action whose shown text does not answer it; a later answered text
    that tells what it did settles it (:func:`cir.families.alfworld.text.settles`): the same
    reading as the built-in agent's, so a feature counts exactly its open doubts.
    """
    actions, shown = seen.actions, seen.shown
    pickups, placements = int(progress["f_pickups"]), int(progress["f_placements"])
    transforms, holding, goal_seen = int(progress["f_transforms"]), bool(progress["f_holding"]), bool(
        progress["f_goal_obj_seen"])
    parsed_actions = [tx.parse_action(a) for a in actions]
    doubts = [i for i, (a, s) in enumerate(zip(parsed_actions, shown, strict=True))
              if a is not None and a[0] != "think" and s != NOTHING_HAPPENS and not tx.answers(a, s)]

    def settled(i: int, after: int) -> bool:
        a = parsed_actions[i]
        assert a is not None
        return any(tx.settles(a, shown[j]) for j in range(after, len(shown))
                   if parsed_actions[j] is not None and tx.answers(parsed_actions[j], shown[j])
                   and shown[j] != NOTHING_HAPPENS)

    open_doubts = [i for i in doubts if not settled(i, i + 1)]
    f: dict[str, float] = {"f_doubts_open": float(len(open_doubts))}
    si = k - 1
    suspect = parsed_actions[si] if k >= 1 else None
    if suspect is not None and suspect[0] != "think":
        f["f_suspect_doubt_open"] = float(si in open_doubts)
        unverified = not settled(si, si + 1)
        f["f_hands_unverified"] = float(suspect[0] in ("take", "move") and unverified)
        f["f_location_unverified"] = float(suspect[0] in ("go", "open", "close") and unverified)
        after = [parsed_actions[j] for j in range(k, len(actions))]
        f["f_self_checks_since"] = float(sum(
            1 for a in after if a is not None and (a[0] in ("look", "inventory", "examine") or a == suspect)))
        f["f_progress_since_suspect"] = float(sum(1 for s in shown[k:] if _is_progress(s)))
    _, transform, _, need = _asks(goal)
    done = min(pickups, need["take"]) + min(placements, need["move"]) + min(transforms, need["transform"])
    f["f_subgoals_left"] = float(sum(need.values()) - done)
    transform_left = transforms < need["transform"]
    f["f_subgoal_fetch"] = float(goal_seen and not holding and pickups < need["take"] + placements)
    f["f_subgoal_transform"] = float(holding and transform and transform_left)
    f["f_subgoal_deliver"] = float(holding and not (transform and transform_left))
    m = tx.RE_MIDDLE.search(task_text)
    room = set(tx.names(m.group(1))) if m else set()
    seen: set[str] = set()
    for a, s in zip(parsed_actions, shown, strict=True):
        if a is not None and a[0] in ("go", "open", "examine") and len(a) > 1 and tx.answers(a, s) and s != NOTHING_HAPPENS:
            seen.add(a[1])
    f["f_unvisited"] = float(len(room - seen))
    return f


def _here(goal: Goal | None, seen: _Shown, k: int) -> dict[str, float]:
    """The current place and what its latest shown listing holds, the latest step's kind,
    and the step before the suspect (see FEATURES): what over-correction, distraction and
    an older stale text act on."""
    here: str | None = None
    listings: dict[str, list[str]] = {}
    for s in seen.shown:
        for pattern, group in ((tx.RE_ARRIVE, 1), (tx.RE_OPENED, 1), (tx.RE_FACING, 1), (tx.RE_PICK, 2),
                               (tx.RE_MOVE, 2), (tx.RE_CLOSE, 1), (tx.RE_APPLY, 3)):
            if m := pattern.search(s):
                here = m.group(group)
        for pattern in (tx.RE_ON, tx.RE_IS_OPEN):
            if m := pattern.search(s):
                listings[m.group(1)] = tx.names(m.group(2))
        if m := tx.RE_PICK.search(s):  # the shown text says what left or came to a place
            listings[m.group(2)] = [o for o in listings.get(m.group(2), []) if o != m.group(1)]
        if m := tx.RE_MOVE.search(s):
            listings[m.group(2)] = [*listings.get(m.group(2), []), m.group(1)]
        if tx.RE_MIDDLE.search(s):
            here = None
    listed = listings.get(here or "", [])
    obj = (goal.obj if goal is not None else None) or ""  # a goal of no template: no object
    alike = set(LOOKALIKES.get(obj, ()))
    last = seen.shown[-1] if seen.shown else ""
    prev = seen.shown[k - 2] if k >= 2 else ""
    return {
        "f_last_progress": float(_is_progress(last)),
        "f_last_open": float(bool(tx.RE_OPENED.search(last))),
        "f_here_listed": float(len(listed)),
        "f_here_goal_obj": float(bool(obj) and any(tx.otype(o) == obj for o in listed)),
        "f_here_lookalike": float(any(tx.otype(o) in alike for o in listed)),
        "f_here_could_hold": float(here is not None and obj in CAN_HOLD.get(tx.otype(here), ())),
        "f_prev_take_or_move": float(prev.startswith(("You pick up the ", "You move the ", "You put the "))),
    }


def _is_progress(shown: str) -> bool:
    return shown.startswith(("You pick up the ", "PickupObject", "You move the ", "PutObject", "You put the ",
                             "You heat the ", "You cool the ", "You clean the ", "You turn on the "))


def feature_names() -> list[str]:
    """The feature names in column order."""
    return list(FEATURES)


class AlfworldFeatures:
    """ALFWorld's feature extractor (:class:`cir.episode.extractor.FeatureExtractor`):
    :data:`FEATURES` by :func:`extract_features`."""

    name = "alfworld"
    features = FEATURES

    def extract(self, transcript: Transcript, delay: int, *, max_turns: int = DEFAULT_MAX_TURNS,
                max_actions: int = DEFAULT_MAX_ACTIONS) -> dict[str, float]:
        return extract_features(transcript, delay, max_turns=max_turns, max_actions=max_actions)

    def __repr__(self) -> str:
        return "AlfworldFeatures()"


#: The extractor of the paired tables and routers of ALFWorld runs (the default).
ALFWORLD_FEATURES = AlfworldFeatures()
