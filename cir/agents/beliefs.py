"""What the built-in agent believes, rebuilt from its context on every call.

The agent keeps no state between calls (DESIGN.md: an agent is a pure function of
its context), so :func:`read_context` replays the whole message list: the task text,
the agent's own replies and the texts it was shown, and any harness messages. It
believes the text: an arrival text names where it is, a contents list says what is
in a receptacle. A stale text therefore plants a false belief and a missing one
(any text it cannot parse) leaves a gap. A few beliefs are formed with a slip
(overlooking an item in a long list, misreading a ``look`` text as "X holds
nothing", assuming a place was searched); each slip is decided by a caller-supplied
``slip(name, key)`` so the decision is a deterministic function of the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from cir.agents.goals import Goal, parse_goal

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
RE_NAME = re.compile(NAME)
NOTHING = "Nothing happens."
NOT_CARRYING = "You are not carrying anything."

RE_ACT = re.compile(
    r"^(?:(go to) (.+)|(open) (.+)|(close) (.+)|(take) (.+?) from (.+)|(move) (.+?) to (.+)"
    r"|(put) (.+?) (?:in|on|into|onto|in/on) (.+)|(heat|cool|clean) (.+?) with (.+)|(use) (.+)"
    r"|(examine) (.+)|(look)|(inventory))$"
)

Slip = Callable[[str, str], bool]


def otype(name: str) -> str:
    """``apple 1`` -> ``apple``."""
    return name.rsplit(" ", 1)[0]


def parse_action(reply: str) -> tuple[str, ...] | None:
    """``("take", "apple 1", "countertop 1")``; ``("think",)``; None if not an action."""
    r = reply.strip().lower().rstrip(".")
    if r.startswith("think"):
        return ("think",)
    m = RE_ACT.match(r)
    if not m:
        return None
    parts = [g for g in m.groups() if g is not None]
    verb = parts[0]
    if verb == "go to":
        verb = "go"
    elif verb == "put":
        verb = "move"
    return (verb, *parts[1:])


@dataclass
class StepView:
    """One message pair as the agent reads it back."""

    reply: str | None  # None for a harness message
    action: tuple[str, ...] | None
    kind: str  # ok, nothing, gap, think, harness, harness_gap, bad
    text: str
    mismatch: str | None = None  # go-to target when the arrival named another place


@dataclass
class Beliefs:
    """The agent's picture of the world after reading the context."""

    goal: Goal | None
    receptacles: list[str]
    location: str | None = None
    contents: dict[str, list[str]] = field(default_factory=dict)
    searched: set[str] = field(default_factory=set)
    assumed: set[str] = field(default_factory=set)  # taken as searched without seeing inside
    observed_at: dict[str, int] = field(default_factory=dict)
    opened: dict[str, bool] = field(default_factory=dict)
    holding: str | None = None
    states: dict[str, set[str]] = field(default_factory=dict)
    lamps_on: set[str] = field(default_factory=set)
    placed: list[tuple[str, str]] = field(default_factory=list)
    steps: list[StepView] = field(default_factory=list)
    env_actions: int = 0
    turns: int = 0
    failures: int = 0
    thoughts: int = 0

    # -- queries ---------------------------------------------------------------------
    def where_is(self, obj_type: str) -> list[tuple[str, str]]:
        """(object, receptacle) pairs of that type the agent believes it has seen."""
        found = []
        for r, objs in self.contents.items():
            for o in objs:
                if otype(o) == obj_type:
                    found.append((o, r))
        return found

    def of_type(self, rtype: str) -> list[str]:
        """The receptacles of a type, in the order the room description lists them reversed
        (``cabinet 1`` before ``cabinet 2``, as people and LLMs pick them)."""
        return sorted((r for r in self.receptacles if otype(r) == rtype), key=_num)

    @property
    def last(self) -> StepView | None:
        return self.steps[-1] if self.steps else None

    def last_env_reply(self) -> str | None:
        for s in reversed(self.steps):
            if s.action is not None and s.action[0] != "think":
                return s.reply
        return None


def _num(name: str) -> tuple[str, int]:
    t, _, n = name.rpartition(" ")
    return (t, int(n) if n.isdigit() else 0)


def _names(listing: str) -> list[str]:
    return RE_NAME.findall(listing)


def read_context(
    context: list[dict[str, str]],
    slip: Slip | None = None,
    interesting: Callable[[str], bool] | None = None,
) -> Beliefs:
    """Rebuild the beliefs from the whole message list (see module docstring).

    ``interesting(obj_type)`` marks the types the agent looks for; only those can be
    overlooked in a contents list (the ``overlook`` slip).
    """
    slip = slip or (lambda name, key: False)
    task_text = context[0]["content"] if context else ""
    goal = parse_goal(task_text)
    m = RE_MIDDLE.search(task_text)
    receptacles = _names(m.group(1)) if m else []
    b = Beliefs(goal=goal, receptacles=receptacles)
    if interesting is None and goal is not None:
        wanted = {goal.obj, goal.toggle}
        interesting = wanted.__contains__
    reader = _Reader(b, slip, interesting or (lambda t: False))
    pending: str | None = None
    for i in range(1, len(context)):
        msg = context[i]
        if msg.get("role") == "assistant":
            pending = msg.get("content") or ""
            b.turns += 1
            continue
        reader.observe(pending, msg.get("content") or "", i)
        pending = None
    return b


class _Reader:
    def __init__(self, b: Beliefs, slip: Slip, interesting: Callable[[str], bool]) -> None:
        self.b = b
        self.slip = slip
        self.interesting = interesting

    def _see(self, recep: str, listing: str, i: int) -> None:
        b = self.b
        objs = _names(listing)
        if objs and len(objs) >= 3:
            kept = []
            for o in objs:
                if self.interesting(otype(o)) and self.slip("overlook", f"{i}|{o}|{len(objs)}"):
                    continue
                kept.append(o)
            objs = kept
        b.contents[recep] = objs
        b.searched.add(recep)
        b.assumed.discard(recep)
        b.observed_at[recep] = i

    def observe(self, reply: str | None, text: str, i: int) -> None:
        b = self.b
        if reply is None:
            if b.assumed and self.slip("harness_react", f"{i}|doubt"):
                # a harness message makes me doubt what I only assumed: places I never
                # saw inside go back on the list
                b.searched -= b.assumed
                b.assumed.clear()
            kind = self._events(text, i, None, harness=True)
            b.steps.append(StepView(None, None, "harness" if kind else "harness_gap", text))
            return
        act = parse_action(reply)
        if act is not None and act[0] == "think":
            b.thoughts += 1
            b.steps.append(StepView(reply, act, "think", text))
            return
        b.env_actions += 1
        if text.strip() == NOTHING or (NOTHING in text and len(text) < 40):
            b.failures += 1
            self._failed(act)
            b.steps.append(StepView(reply, act, "nothing" if act else "bad", text))
            return
        step = StepView(reply, act, "ok", text)
        found = self._events(text, i, act, harness=False)
        if not found:
            step.kind = "gap"
            self._trust(act, i)
        elif act and act[0] == "go" and (m := RE_ARRIVE.search(text)) and m.group(1) != act[1]:
            step.mismatch = act[1]
            if act[1] in b.receptacles and act[1] not in b.searched and self.slip("mismatch_visited", f"{i}|{act[1]}"):
                b.searched.add(act[1])
                b.assumed.add(act[1])
                b.observed_at.setdefault(act[1], i)
        b.steps.append(step)

    # -- text -> beliefs ---------------------------------------------------------------
    def _events(self, text: str, i: int, act: tuple[str, ...] | None, harness: bool) -> bool:
        b = self.b
        found = False
        if act is not None and act[0] == "examine" and act[1] in b.receptacles and act[1] in text:
            b.location = act[1]  # only what is here can be examined
        if "You arrive at" in text:
            m = RE_ARRIVE.search(text)
            if m:
                b.location = m.group(1)
                found = True
        if "You open the" in text:
            m = RE_OPENED.search(text)
            if m:
                b.location = m.group(1)
                b.opened[m.group(1)] = True
                found = True
        if " is open. In it" in text:
            m = RE_IS_OPEN.search(text)
            if m:
                b.opened[m.group(1)] = True
                self._see(m.group(1), m.group(2), i)
                found = True
        if " is closed." in text:
            m = RE_IS_CLOSED.search(text)
            if m:
                r = m.group(1)
                b.opened[r] = False
                found = True
                # a closed place glanced at and taken as checked (forgetting to open it)
                if (
                    not harness
                    and act is not None
                    and act[0] == "go"
                    and r not in b.searched
                    and self.slip("forget_open", f"{i}|{r}")
                ):
                    b.searched.add(r)
                    b.assumed.add(r)
                    b.observed_at[r] = i
        if "On the " in text:
            m = RE_ON.search(text)
            if m:
                self._see(m.group(1), m.group(2), i)
                found = True
        if "You close the" in text:
            m = RE_CLOSE.search(text)
            if m:
                b.opened[m.group(1)] = False
                b.location = m.group(1)
                found = True
        if "You pick up the" in text:
            m = RE_PICK.search(text)
            if m:
                o, r = m.group(1), m.group(2)
                b.holding = o
                b.location = r
                if o in b.contents.get(r, ()):
                    b.contents[r] = [x for x in b.contents[r] if x != o]
                found = True
        if "You move the" in text:
            m = RE_MOVE.search(text)
            if m:
                o, r = m.group(1), m.group(2)
                b.holding = None
                b.location = r
                b.contents.setdefault(r, [])
                if o not in b.contents[r]:
                    b.contents[r] = [*b.contents[r], o]
                b.placed.append((o, r))
                found = True
        if " using the " in text:
            m = RE_APPLY.search(text)
            if m:
                verb, o, r = m.groups()
                b.states.setdefault(o, set()).add(verb)
                b.location = r
                found = True
        if "You turn " in text:
            m = RE_TOGGLE.search(text)
            if m:
                if m.group(1) == "on":
                    b.lamps_on.add(m.group(2))
                else:
                    b.lamps_on.discard(m.group(2))
                found = True
        if "You are facing the" in text:
            m = RE_FACING.search(text)
            if m:
                r = m.group(1)
                if harness and b.location != r and r in b.assumed:
                    # told where I really am: I never saw inside this place after all
                    b.searched.discard(r)
                    b.assumed.discard(r)
                b.location = r
                found = True
                # The look text lists what lies next to the receptacle, not its contents;
                # read hastily, "you see nothing" sounds like "it holds nothing".
                if m.group(2).strip() == "nothing" and self.slip("misread_refresh", f"{i}|{r}"):
                    b.contents[r] = []
                    b.searched.add(r)
                    b.observed_at[r] = i
        if "You are in the middle of a room" in text:
            b.location = None
            found = True
        if "You are carrying:" in text:
            m = RE_CARRY.search(text)
            if m:
                names = _names(m.group(1))
                b.holding = names[0] if names else None
                found = True
        if NOT_CARRYING in text:
            b.holding = None
            found = True
        if "This is a " in text:
            m = RE_STATE.search(text)
            if m:
                words = m.group(1).replace("cold", "cool").split()
                for w in words:
                    if w in ("hot", "cool", "clean"):
                        b.states.setdefault(m.group(2), set()).add(
                            {"hot": "heat", "cool": "cool", "clean": "clean"}[w]
                        )
                found = True
        if " is on." in text or " is off." in text:
            found = True
        return found

    def _failed(self, act: tuple[str, ...] | None) -> None:
        """``Nothing happens.``: the belief behind the action was wrong somewhere."""
        b = self.b
        if not act:
            return
        verb = act[0]
        if verb == "take":
            o, r = act[1], act[2]
            if o in b.contents.get(r, ()):
                b.contents[r] = [x for x in b.contents[r] if x != o]
        elif verb == "open":
            b.opened[act[1]] = True
        elif verb == "examine" and act[1] in b.receptacles:
            b.searched.add(act[1])
            b.observed_at.setdefault(act[1], 0)

    def _trust(self, act: tuple[str, ...] | None, i: int) -> None:
        """No readable text: assume the action did what it was meant to do."""
        b = self.b
        if not act:
            return
        verb = act[0]
        if verb == "go" and act[1] in b.receptacles:
            b.location = act[1]
            if act[1] not in b.searched and self.slip("gap_visited", f"{i}|{act[1]}"):
                b.searched.add(act[1])
                b.assumed.add(act[1])
                b.observed_at.setdefault(act[1], i)
        elif verb == "open":
            b.opened[act[1]] = True
            b.location = act[1]
        elif verb == "take":
            b.holding = act[1]
            r = act[2]
            if act[1] in b.contents.get(r, ()):
                b.contents[r] = [x for x in b.contents[r] if x != act[1]]
        elif verb == "move":
            b.holding = None
            b.placed.append((act[1], act[2]))
            b.contents[act[2]] = [*b.contents.get(act[2], []), act[1]]
        elif verb in ("heat", "cool", "clean"):
            b.states.setdefault(act[1], set()).add(verb)
        elif verb == "use":
            b.lamps_on.add(act[1])
