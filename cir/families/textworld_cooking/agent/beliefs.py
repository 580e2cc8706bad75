"""What the cooking agent believes after each message it was shown, and the mechanisms reading fires.

:func:`fold` reads one message into a copy of the beliefs. The agent believes what it is
shown: a room header is where it is, an inventory is what it holds, the cookbook is the
recipe. A text that does not answer its command (a stale or missing observation) misleads
it through a named mechanism, or makes it check (``reground``); a harness message may
rescue it (``harness_recheck``, ``refresh_correction``) or harm it (``over_correct``,
``interruption``). Every chance is a content-keyed draw (:mod:`.mechanisms`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace

from cir.agents.modelfree import Draws, Fired
from cir.episode.perturb import MISSING_TEXT
from cir.episode.protocol import ABLATED_TEXT, REFRESH_PREFIX, REWIND_HEADER
from cir.families.textworld_cooking.text import (
    COOKED,
    DONE_BY_WORD,
    Recipe,
    answers,
    base_name,
    closed_doors,
    command_object,
    command_verb,
    exits,
    failed,
    inventory_items,
    parse_direction,
    read_recipe,
    room_of,
)

OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
DEAD = "-"  # an exit it takes for a dead end
_EXITS_LINE = re.compile(r"\b(?:north|south|east|west)\b")


@dataclass
class Beliefs:
    """The agent's picture of the game (see the module docstring)."""

    room: str | None = None
    edges: dict[tuple[str, str], str] = field(default_factory=dict)  # (room, direction) -> room or DEAD
    exits: dict[str, tuple[str, ...]] = field(default_factory=dict)
    doors: dict[tuple[str, str], str] = field(default_factory=dict)  # closed doors: (room, dir) -> name
    seen: dict[str, str] = field(default_factory=dict)  # room -> what its description said (lower case)
    absent: frozenset[tuple[str, str]] = frozenset()  # (room, item) it believes is not there (any more)
    visits: Counter = field(default_factory=Counter)
    recipe: Recipe | None = None
    held: frozenset[str] = frozenset()
    done: frozenset[tuple[str, str]] = frozenset()  # (direction verb, ingredient)
    meal: bool = False
    looked_in_hands: bool = False  # it has read an inventory (what it starts with is only said there)
    replan: bool = False  # it wants to read the cookbook again
    pending: tuple[str, ...] = ()  # commands it decided to send next
    doubt: tuple[str, str] | None = None  # (verb, command) of a step whose text did not answer it
    last_step: tuple[str, str] | None = None  # (verb, command) of its last step, answered
    last_cmd: str | None = None
    sent: Counter = field(default_factory=Counter)  # how often each command was sent
    harness: Counter = field(default_factory=Counter)  # harness messages so far, by kind
    awaiting: bool = False  # an observation of its last command is due

    def copy(self) -> Beliefs:
        return replace(self, edges=dict(self.edges), exits=dict(self.exits), doors=dict(self.doors),
                       seen=dict(self.seen), visits=Counter(self.visits), sent=Counter(self.sent),
                       harness=Counter(self.harness))

    def has(self, room: str, item: str) -> bool:
        """Whether it believes ``item`` is in ``room`` (named by its description, not taken since)."""
        return (room, item) not in self.absent and re.search(rf"\b{re.escape(item)}\b", self.seen.get(room, "")) is not None

    def where(self, item: str) -> str | None:
        """The room it last saw ``item`` in (the current room first), or None."""
        if self.room is not None and self.has(self.room, item):
            return self.room
        return next((room for room in sorted(self.seen) if self.has(room, item)), None)

    def lose(self, room: str | None, item: str) -> None:
        """It believes ``item`` is not in ``room``."""
        if room is not None:
            self.absent = self.absent | {(room, item)}


def initial_beliefs(task_text: str) -> Beliefs:
    """What the intro says: the room it starts in (the objective names the kitchen's cookbook)."""
    b = Beliefs()
    _read_room(b, task_text, arrived=True, draws=None, params=None, fired=None)
    return b


def _read_room(b: Beliefs, text: str, *, arrived: bool, draws: Draws | None, params: dict[str, float] | None,
               fired: list[Fired] | None) -> None:
    """A room description: where it is, its exits and doors, what it lists (``overlook`` on arrival)."""
    room = room_of(text)
    if room is None:
        return
    b.room = room
    if arrived:
        b.visits[room] += 1
    b.exits[room] = tuple(exits(text))
    for direction in b.exits[room]:
        b.doors.pop((room, direction), None)
    for direction, door in closed_doors(text).items():
        b.doors[(room, direction)] = door
    sentences = re.split(r"(?<=[.!?])\s+", text.lower())
    body = " ".join(x for x in sentences if not _EXITS_LINE.search(x))  # exits name no items
    b.seen[room] = body
    b.absent = frozenset(a for a in b.absent if a[0] != room)  # what it sees now
    if b.recipe is None or draws is None or params is None or fired is None:
        return
    for name in b.recipe.ingredients:
        if (name not in b.held and b.has(room, name)
                and draws.chance("overlook", params["overlook"], name, room, b.visits[room])):
            fired.append(Fired("overlook", f"{name} in {room}"))
            b.lose(room, name)


def _take(b: Beliefs, item: str) -> None:
    b.held = b.held | {item}
    b.absent = b.absent | {(room, item) for room in b.seen}


def _read_inventory(b: Beliefs, items: list[str]) -> None:
    held, done = set(), set(b.done)
    for phrase in items:
        name = base_name(phrase)
        held.add(name)
        for word in phrase.split():
            if word in DONE_BY_WORD:
                done.add((DONE_BY_WORD[word], name))
    b.held, b.done = frozenset(held), frozenset(done)
    b.meal, b.looked_in_hands = "meal" in held, True


def _apply(b: Beliefs, verb: str, cmd: str, text: str) -> None:
    """What an answered command did."""
    obj = command_object(cmd)
    if verb == "take":
        _take(b, obj)
    elif verb == "cook":
        cooked = COOKED.match(text)
        word = {"fried": "fry", "roasted": "roast", "grilled": "grill"}[cooked.group(1).lower()] if cooked else ""
        b.done = b.done | {(word, obj)}
    elif verb == "cut":
        word = cmd.split()[0]
        b.done = b.done | {(word, obj)}
    elif verb == "examine":
        b.recipe, b.replan = read_recipe(text), False
    elif verb == "inventory":
        _read_inventory(b, inventory_items(text) or [])
    elif verb == "prepare":
        b.held, b.meal = frozenset({i for i in b.held if i == "knife"} | {"meal"}), True
    elif verb == "open":
        b.doors = {k: v for k, v in b.doors.items() if v != obj}
    elif verb == "drop":
        b.held = b.held - {obj}
        if b.room is not None:
            b.seen[b.room] = b.seen.get(b.room, "") + f"\n{obj}"
            b.absent = b.absent - {(b.room, obj)}


_MISLEAD = {"go": "stale_location", "take": "hidden_take", "cook": "hidden_cook", "cut": "hidden_cut"}


def _observation(b: Beliefs, cmd: str, text: str, draws: Draws, params: dict[str, float]) -> list[Fired]:
    """The answer to its command ``cmd``: believed, or misleading it, or checked."""
    fired: list[Fired] = []
    verb = command_verb(cmd)
    b.last_step = None
    if room_of(text) is not None:  # a room description: believed, whatever the command was
        before = b.room
        if verb == "go" and before is not None:
            direction = cmd.split()[-1]
            new = room_of(text) or ""
            b.edges[(before, direction)] = new
            if direction in OPPOSITE:
                b.edges.setdefault((new, OPPOSITE[direction]), before)
        _read_room(b, text, arrived=verb == "go", draws=draws, params=params, fired=fired)
        b.last_step = (verb, cmd) if verb == "go" else None
        if b.doubt and b.doubt[0] == "go":
            b.doubt = None
        if verb in ("take", "cook", "cut"):  # a room where its command's answer was due: unsure of it
            b.doubt = (verb, cmd)
        return fired
    if answers(verb, cmd, text):
        _apply(b, verb, cmd, text)
        b.last_step = (verb, cmd) if verb in ("take", "cook", "cut") else None
        if b.doubt and verb == "inventory":
            b.doubt = None
        return fired
    if failed(text):
        if verb == "take":  # not here after all
            b.lose(b.room, command_object(cmd))
        if draws.chance("reground", params["reground"], cmd, b.sent[cmd]):
            b.pending = ("look",)
            fired.append(Fired("reground", cmd))
        return fired
    # a text that does not answer the command: stale, missing, or of another command
    mech = _MISLEAD.get(verb)
    if mech == "stale_location" and text == MISSING_TEXT:
        mech = "missing_text"
    if mech is not None and draws.chance(mech, params[mech], cmd, b.sent[cmd]):
        fired.append(Fired(mech, cmd))
        b.doubt = (verb, cmd)
        if verb == "go" and b.room is not None:
            b.edges[(b.room, cmd.split()[-1])] = DEAD
        elif verb == "take":
            b.lose(b.room, command_object(cmd))
        return fired
    b.pending = ("look",) if verb in ("go", "look", "open") else ("inventory",)
    fired.append(Fired("reground", cmd))
    return fired


def _harness_kind(text: str) -> str:
    if text.startswith(REFRESH_PREFIX):
        return "refresh"
    if text.startswith(ABLATED_TEXT):
        return "query"
    if text.startswith("[Replan]"):
        return "replan"
    if text.startswith(REWIND_HEADER):
        return "rewind"
    return "message"


def _harness(b: Beliefs, text: str, draws: Draws, params: dict[str, float]) -> list[Fired]:
    """A harness message: a rescue or a harm may fire (chances x how much it invites reconsidering)."""
    fired: list[Fired] = []
    kind = _harness_kind(text)
    b.harness[kind] += 1
    n = b.harness[kind]
    invite = params[f"invite_{kind}"]
    if kind == "rewind":  # the env went back: re-read where it is and what it holds
        fired.append(Fired("rewind", "state restored"))
        b.seen, b.absent, b.held, b.done, b.meal = {}, frozenset(), frozenset(), frozenset(), False
        b.pending, b.doubt, b.last_step = ("look", "inventory"), None, None
        return fired
    if kind == "refresh":
        body = text[len(REFRESH_PREFIX):].strip()
        shown = room_of(body)
        if (shown is not None and shown == b.room and b.doubt is not None and b.doubt[0] == "take"
                and command_object(b.doubt[1]) not in b.held
                and not re.search(rf"\b{re.escape(command_object(b.doubt[1]))}\b", body.lower())
                and draws.chance("refresh_correction", params["refresh_correction"], b.doubt[1], n)):
            item = command_object(b.doubt[1])  # gone from where it took it: in its hands
            fired.append(Fired("refresh_correction", f"holds {item}"))
            _take(b, item)
            b.doubt = None
        if shown is not None and shown != b.room:
            if draws.chance("refresh_correction", params["refresh_correction"], shown, n):
                fired.append(Fired("refresh_correction", f"in {shown}, not {b.room}"))
                _read_room(b, body, arrived=False, draws=None, params=None, fired=None)
                if b.doubt and b.doubt[0] == "go":
                    b.doubt = None
        elif shown is not None:
            wanted = (*(b.recipe.ingredients if b.recipe else ()), "knife", "stove", "oven", "bbq", "cookbook")
            before = {i for i in wanted if b.has(shown, i)}
            kept = (b.seen.get(shown, ""), b.absent, b.exits.get(shown, ()), dict(b.doors))
            _read_room(b, body, arrived=False, draws=None, params=None, fired=None)
            now = {i for i in wanted if b.has(shown, i)}
            if now != before:  # the room holds other things than it believed
                if draws.chance("refresh_reread", params["refresh_reread"], shown, n):
                    fired.append(Fired("refresh_reread", f"{shown}: now {sorted(now)}, not {sorted(before)}"))
                else:
                    b.seen[shown], b.absent, b.exits[shown], b.doors = kept
    if b.doubt is not None and draws.chance("harness_recheck", params["harness_recheck"] * invite, b.doubt[1], n):
        fired.append(Fired("harness_recheck", b.doubt[1]))
        b.pending = ("look",) if b.doubt[0] == "go" else ("inventory",)
        b.doubt = None
        return fired
    if b.last_step is not None and draws.chance("over_correct", params["over_correct"] * invite, b.last_step[1], n):
        verb, cmd = b.last_step
        fired.append(Fired("over_correct", cmd))
        if verb in ("cook", "cut"):
            b.done = frozenset(d for d in b.done if d[1] != command_object(cmd) or _verb_of(d[0]) != verb)
        elif verb == "take":
            b.pending = (f"drop {command_object(cmd)}",)
        b.last_step = None
        return fired
    progress = len(b.held) + len(b.done)
    if (b.recipe is not None and not b.meal and progress
            and draws.chance("interruption", params["interruption"] * invite, progress, n)):
        fired.append(Fired("interruption", f"progress {progress}"))
        b.replan = True
    return fired


def _verb_of(direction: str) -> str:
    return "cut" if direction in ("slice", "dice", "chop") else "cook"


def fold(b: Beliefs, role: str, content: str, draws: Draws, params: dict[str, float]) -> tuple[Beliefs, list[Fired]]:
    """The beliefs after one more message, and what fired reading it."""
    b = b.copy()
    text = content.strip()
    if role == "assistant":
        cmd = re.sub(r"\s+", " ", text.lower())
        b.sent[cmd] += 1
        b.last_cmd, b.awaiting = cmd, True
        if b.pending and b.pending[0] == cmd:
            b.pending = b.pending[1:]
        return b, []
    if b.awaiting and b.last_cmd is not None:
        b.awaiting = False
        return b, _observation(b, b.last_cmd, text, draws, params)
    return b, _harness(b, text, draws, params)


def directions_left(b: Beliefs) -> list[tuple[str, str]]:
    """The recipe's directions (verb, ingredient) it believes are not done yet, in order."""
    if b.recipe is None:
        return []
    out = []
    for line in b.recipe.directions:
        parsed = parse_direction(line)
        if parsed is not None and parsed not in b.done:
            out.append(parsed)
    return out
