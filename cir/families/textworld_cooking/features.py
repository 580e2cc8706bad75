"""Information available before a recovery decision in a cooking game (the family's extractor).

:data:`COOKING_FEATURES` is a :class:`cir.episode.extractor.FeatureExtractor`: the replayer
writes its ``f_*`` columns (``run_task_pairs(..., extractor=COOKING_FEATURES)``), CIR is
fitted with it and a router computes it live. Like ALFWorld's, it reads only what the agent
was shown up to the decision: the task text, its commands and each step's ``shown`` text
(never the true observation, the harness events, done/won, or anything later).

The *suspect* observation is the shown text of env action ``env_actions - delay`` (1-based),
the one that may have been stale or missing; with no such action its features are 0 and
``f_has_suspect`` is 0. Whether a text *answers* its command is the one test of
:func:`cir.families.textworld_cooking.text.answers` (a ``go`` is answered by a room, a
``take`` by "You take the X", a ``cook`` by "You fried the X", ...), which the built-in agent
uses too.
"""

from __future__ import annotations

from cir.episode.perturb import MISSING_TEXT
from cir.episode.transcript import Transcript
from cir.families.textworld_cooking.text import answers, command_verb, failed, read_recipe, room_of

# name -> one-line meaning; the order is the column order of the paired table
FEATURES: dict[str, str] = {
    "f_delay": "env actions taken since the suspect observation (the recovery delay d)",
    "f_has_suspect": "1 if the transcript holds the suspect env action (env_actions - delay >= 1)",
    "f_env_actions": "env actions used so far",
    "f_actions_left": "env actions left in the budget (max_actions - used)",
    "f_turns_left": "model turns left in the budget (max_turns - used)",
    "f_suspect_unanswered": "1 if the suspect text does not answer its command (no room after a go, "
                            "no 'You take the X' after a take, ...)",
    "f_suspect_missing": "1 if the suspect text is the harness's 'observation unavailable' text",
    "f_suspect_repeat": "1 if the suspect text repeats an earlier shown text verbatim",
    "f_suspect_go": "1 if the suspect command was a go",
    "f_suspect_take": "1 if the suspect command was a take",
    "f_suspect_prepare": "1 if the suspect command was a cook, slice, dice or chop",
    "f_unanswered_since": "commands since the suspect (excluded) whose text did not answer them",
    "f_refused_since": "commands since the suspect (excluded) the game refused",
    "f_recipe_known": "1 if a cookbook text was shown",
    "f_prepared": "cook/cut commands answered so far (what a harmful redo could burn or repeat)",
    "f_last_prepare": "1 if the last command was a cook, slice, dice or chop that the text answered",
    "f_rooms_seen": "distinct rooms named by shown texts",
    "f_action_repeats": "of the last 4 env actions, how many repeat an earlier env action",
}


class CookingFeatures:
    """What a harness of a cooking game knows before a decision (see the module docstring)."""

    name = "textworld-cooking"
    features = FEATURES

    def extract(self, transcript: Transcript, delay: int, *, max_turns: int, max_actions: int) -> dict[str, float]:
        steps = transcript.visible_steps()
        acted = [s for s in steps if s.action is not None]
        f = dict.fromkeys(FEATURES, 0.0)
        f["f_delay"] = float(delay)
        f["f_env_actions"] = float(len(acted))
        f["f_actions_left"] = float(max_actions - len(acted))
        f["f_turns_left"] = float(max_turns - sum(1 for s in steps if s.actor == "agent"))
        f["f_recipe_known"] = float(any(read_recipe(s.shown) for s in acted))
        prepared = [s for s in acted if command_verb(_cmd(s.action)) in ("cook", "cut")
                    and answers(command_verb(_cmd(s.action)), _cmd(s.action), s.shown)]
        f["f_prepared"] = float(len(prepared))
        if acted:
            last = acted[-1]
            f["f_last_prepare"] = float(bool(prepared) and prepared[-1] is last)
        rooms = {room_of(transcript.task_text)} | {room_of(s.shown) for s in acted}
        f["f_rooms_seen"] = float(len(rooms - {None}))
        recent = [s.action for s in acted[-4:]]
        earlier = [s.action for s in acted[:-4]]
        f["f_action_repeats"] = float(sum(1 for i, a in enumerate(recent) if a in earlier or a in recent[:i]))
        index = len(acted) - delay - 1
        if index < 0:
            return f
        f["f_has_suspect"] = 1.0
        suspect = acted[index]
        cmd = _cmd(suspect.action)
        verb = command_verb(cmd)
        f["f_suspect_unanswered"] = float(not answers(verb, cmd, suspect.shown))
        f["f_suspect_missing"] = float(suspect.shown == MISSING_TEXT)
        shown_before = {transcript.task_text} | {s.shown for s in acted[:index]}
        f["f_suspect_repeat"] = float(suspect.shown in shown_before)
        f["f_suspect_go"] = float(verb == "go")
        f["f_suspect_take"] = float(verb == "take")
        f["f_suspect_prepare"] = float(verb in ("cook", "cut"))
        later = acted[index + 1:]
        f["f_unanswered_since"] = float(sum(1 for s in later if not answers(command_verb(_cmd(s.action)),
                                                                            _cmd(s.action), s.shown)))
        f["f_refused_since"] = float(sum(1 for s in later if failed(s.shown)))
        return f


def _cmd(action: str | None) -> str:
    return " ".join((action or "").lower().split())


#: the family's extractor (its name is recorded in a router fitted with it)
COOKING_FEATURES = CookingFeatures()
