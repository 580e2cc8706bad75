"""The text language of the ALFWorld engine: commands, the texts that answer them, and
which later text settles what an earlier command did.

One home for this vocabulary, read by the built-in agent (to form beliefs) and by the
features (to measure what a harness could see). Everything here is a pure function of
strings; nothing reads the engine, the condition or the true observation.
"""

from __future__ import annotations

import re

from cir.episode.protocol import NOTHING_HAPPENS

#: The six task types, in ALFWorld's own spelling and order.
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
SPLITS: tuple[str, ...] = ("train", "valid_seen", "valid_unseen")
#: The line of the first observation that states the goal.
GOAL_PREFIX = "Your task is to:"

NOT_CARRYING = "You are not carrying anything."

NAME = r"[a-z]+ \d+"
_LIST = r"(.*?)\.(?=\s|$)"

RE_ARRIVE = re.compile(rf"You arrive at (?:the )?({NAME})\.")
RE_OPENED = re.compile(rf"You open the ({NAME})\.")
RE_IS_OPEN = re.compile(rf"The ({NAME}) is open\. In it, you see {_LIST}")
RE_IS_CLOSED = re.compile(rf"The ({NAME}) is closed\.")
RE_ON = re.compile(rf"On the ({NAME}), you see {_LIST}")
RE_CLOSE = re.compile(rf"You close the ({NAME})\.")
RE_PICK = re.compile(rf"You pick up the ({NAME}) from the ({NAME})\.")
RE_MOVE = re.compile(rf"You move the ({NAME}) to the ({NAME})\.")
RE_APPLY = re.compile(rf"You (heat|cool|clean) the ({NAME}) using the ({NAME})\.")
RE_TOGGLE = re.compile(rf"You turn (on|off) the ({NAME})\.")
RE_FACING = re.compile(rf"You are facing the ({NAME})\. Next to it, you see {_LIST}")
RE_MIDDLE = re.compile(rf"You are in the middle of a room\. Looking quickly around you, you see {_LIST}")
RE_CARRY = re.compile(rf"You are carrying: {_LIST}")
RE_STATE = re.compile(rf"This is a ((?:hot|cool|cold|clean|and| )+?) (?:sliced )?({NAME})\.")
RE_PLAIN = re.compile(rf"There's nothing special about ({NAME})\.")
RE_NAME = re.compile(NAME)

RE_ACT = re.compile(
    r"^(?:(go to) (.+)|(open) (.+)|(close) (.+)|(take) (.+?) from (.+)|(move) (.+?) to (.+)"
    r"|(put) (.+?) (?:in|on|into|onto|in/on) (.+)|(heat|cool|clean) (.+?) with (.+)|(use) (.+)"
    r"|(examine) (.+)|(slice) (.+?) with (.+)|(look)|(inventory)|(help))$"
)

#: how every text the engine produces begins
ENGINE_TEXT_STARTS = (
    "You arrive at ", "You open the ", "You close the ", "You pick up the ", "You move the ",
    "You put the ", "You heat the ", "You cool the ", "You clean the ", "You turn on the ",
    "You turn off the ", "You don't see any switch", "You sliced the ", "You are carrying",
    "You are not carrying anything", "You are facing the ", "You are in the middle of a room",
    "On the ", "The ", "This ", "There's nothing special", "PickupObjectFromReceptacleObject:",
    "PickupEmptyReceptacleObject:", "PickupFullReceptacleObject:", "PutObjectInReceptacleObject:",
    "PutEmptyReceptacleObjectinReceptacle:", "PutFullReceptacleObjectInReceptacle:",
    "Available commands:", NOTHING_HAPPENS,
)

Action = tuple[str, ...]


def otype(name: str) -> str:
    """``apple 1`` -> ``apple``."""
    return name.rsplit(" ", 1)[0]


def names(listing: str) -> list[str]:
    """The ``type N`` names in a listing (``a apple 1, and a mug 2``)."""
    return RE_NAME.findall(listing)


def parse_action(reply: str, older: bool = True) -> Action | None:
    """``("take", "apple 1", "countertop 1")``; ``("think",)``; None if not a command.

    The one parser of ALFWorld's commands: the built-in agent reads its replies with it,
    the features the actions a transcript shows, and the LLM agent's reply parser
    (:mod:`cir.families.alfworld.actions`) checks what it made of a model's words with it.
    Verbs are normalised: ``go to`` -> ``go``, and the older ``put X in/on Y`` is read as
    ``move`` unless ``older=False`` (ALFWorld 0.4's engine does not take it: None).
    """
    r = reply.strip().lower().rstrip(".")
    if r.startswith("think"):
        return ("think",)
    m = RE_ACT.match(r)
    if not m:
        return None
    parts = [g for g in m.groups() if g is not None]
    if parts[0] == "put" and not older:
        return None
    verb = {"go to": "go", "put": "move"}.get(parts[0], parts[0])
    return (verb, *parts[1:])


#: ALFWorld 0.4's spelling of each command, by the verb :func:`parse_action` gives it.
SPELLING = {"go": "go to {}", "open": "open {}", "close": "close {}", "take": "take {} from {}",
            "move": "move {} to {}", "heat": "heat {} with {}", "cool": "cool {} with {}",
            "clean": "clean {} with {}", "use": "use {}", "examine": "examine {}",
            "slice": "slice {} with {}", "look": "look", "inventory": "inventory", "help": "help"}
#: The kinds of command the features tell apart (heat, cool and clean are one kind).
_KINDS = {"heat": "transform", "cool": "transform", "clean": "transform", "think": "other"}


def format_action(action: Action) -> str:
    """A parsed command in ALFWorld 0.4's spelling (``("move", "apple 1", "desk 1")`` ->
    ``move apple 1 to desk 1``)."""
    return SPELLING[action[0]].format(*action[1:])


def action_kind(action: str) -> str:
    """The kind of an env action as the engine takes it: ``go``, ``take``, ``move``, ``open``,
    ``close``, ``transform``, ``use``, ``examine``, ``slice``, ``look``, ``inventory``, ``help``
    or ``other`` (the older ``put X in/on Y`` too: the engine answers it ``Nothing happens.``)."""
    act = parse_action(action, older=False)
    return "other" if act is None else _KINDS.get(act[0], act[0])


def is_engine_text(shown: str) -> bool:
    """Whether ``shown`` starts like any text the engine produces."""
    return shown.strip().startswith(ENGINE_TEXT_STARTS)


def answers(action: str | Action, shown: str) -> bool:
    """Whether ``shown`` is a plausible engine answer to ``action``.

    ``Nothing happens.`` answers every command (the engine's reply to one that does not
    apply). Otherwise the text must be of the command's kind and name its target:
    ``go to X`` is answered by ``You arrive at X.``, ``take o from r`` by ``You pick up
    the o from the r.``, and so on.
    """
    act = parse_action(action) if isinstance(action, str) else action
    low = shown.strip().lower()
    if low == NOTHING_HAPPENS.lower():
        return True
    if act is None or act[0] == "think":
        return False
    verb, args = act[0], act[1:]
    if verb == "go":
        return low.startswith(f"you arrive at {args[0]}.")
    if verb == "take":
        return low.startswith(f"you pick up the {args[0]}") or f"pick up the {args[0]}" in low
    if verb == "move":
        return low.startswith(f"you move the {args[0]} to the {args[1]}") or f"put the {args[0]}" in low
    if verb == "open":
        return low.startswith(f"you open the {args[0]}.")
    if verb == "close":
        return low.startswith(f"you close the {args[0]}.")
    if verb in ("heat", "cool", "clean"):
        return low.startswith(f"you {verb} the {args[0]} using the {args[1]}")
    if verb == "use":
        return low.startswith((f"you turn on the {args[0]}", f"you turn off the {args[0]}",
                               "you don't see any switch"))
    if verb == "examine":
        t = args[0]
        return low.startswith((f"on the {t},", f"the {t} is", f"this {t}", "this is a",
                               f"there's nothing special about {t}"))
    if verb == "slice":
        return low.startswith("you sliced the ")
    if verb == "look":
        return low.startswith(("you are facing the ", "you are in the middle of a room"))
    if verb == "inventory":
        return low.startswith(("you are carrying", "you are not carrying anything"))
    if verb == "help":
        return "available commands" in low
    return False


def settles(action: Action, shown: str) -> bool:
    """Whether a later ``shown`` text settles what ``action`` did (a doubt about it).

    A go-to is settled by an arrival at, or a view of, its target; a take or a move by
    anything that tells what the hands hold (or where the object now is); an open by a
    view of the receptacle's state; a heat/cool/clean by the object's state; any command
    by a repeat of it that is answered.
    """
    text = shown.strip()
    verb, args = action[0], action[1:]
    if not args:
        return False
    if verb == "go":
        return any(m and m.group(1) == args[0] for m in (RE_ARRIVE.search(text), RE_FACING.search(text)))
    if verb in ("take", "move"):
        if text.startswith(("You are carrying", NOT_CARRYING)):
            return True
        obj = args[0]
        return f"the {obj} from the" in text or f"You move the {obj} to" in text
    if verb in ("open", "close"):
        return any(m and m.group(1) == args[0] for m in (
            RE_OPENED.search(text), RE_IS_OPEN.search(text), RE_IS_CLOSED.search(text), RE_CLOSE.search(text)))
    if verb in ("heat", "cool", "clean"):
        state = RE_STATE.search(text)
        plain = RE_PLAIN.search(text)
        applied = RE_APPLY.search(text)
        return bool((state and state.group(2) == args[0]) or (plain and plain.group(1) == args[0])
                    or (applied and applied.group(2) == args[0]))
    return answers(action, text) and text != NOTHING_HAPPENS



def anomalous(action: str | None, shown: str) -> bool:
    """Whether a harness can see that ``shown`` is wrong for ``action`` (the family's
    :attr:`~cir.families.family.Family.anomalous`): ``Nothing happens.`` to a command of the engine's
    grammar (a command that acts; the engine answers a command outside its grammar so, rightly), a
    text no engine text begins like, or one that does not answer the command (another command's
    answer: :func:`answers`). The features see the same: ``f_suspect_noop``, ``f_suspect_unparsed``,
    ``f_suspect_mismatch``."""
    text = shown.strip()
    if text == NOTHING_HAPPENS:
        return action_kind(action or "") != "other"
    return not is_engine_text(text) or not answers(action or "", text)
