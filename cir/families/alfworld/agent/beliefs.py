"""What the built-in agent believes: a fold over its context, one message at a time.

The agent keeps no state between calls (DESIGN.md: an agent is a pure function of its
context); :func:`fold` reads one message into a copy of the beliefs, so the beliefs after
any prefix of a context can be memoised and extended (:mod:`cir.families.alfworld.agent.builtin` does).

It believes what it is shown. A text that answers its command updates the picture of
the world; a text that does not answer it (a stale text) leaves a *doubt* about that
command and, unless the agent notices at once, is believed too (the error mechanisms
``stale_location``, ``hidden_pickup``, ``hidden_placement``); an unreadable text leaves a
doubt and is taken to mean the command worked (``missing_text``). Misled either way, it may
lose track and go round its last two commands (``lost_track``, acted on by the decider). A
doubt is settled by a later text that tells what the command did
(:func:`cir.families.alfworld.text.settles`).

A believed stale text that was last shown two or more commands earlier may take the
agent back to its hands of that moment (``stale_rollback``): a two-step-old text is further
from the truth than a one-step-old one, which describes the state just before the command.

A harness message (a user message that follows no reply of the agent's) is read for what
it says: a refreshed text may correct where the agent believes it is
(``refresh_correction``), be misread (``misread_refresh``) or pull it to a place it names
(``distraction``); a message that invites reconsidering may make it doubt its last step
although that step was right (``over_correct``); any harness message leaves
``harness_pending`` so the next decision may react to it (:mod:`cir.families.alfworld.agent.decide`).
Nothing else about beliefs changes with a harness message, so an extra message with
nothing to say leaves the next reply as it was unless one of these fires.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

from cir.agents.modelfree import Draws, Fired
from cir.families.alfworld import text as tx
from cir.families.alfworld.agent.goals import Goal, parse_goal
from cir.families.alfworld.agent.priors import CAN_HOLD, LOOKALIKES, prior
from cir.families.alfworld.text import Action, otype

Params = dict[str, float]

#: the profile parameter that says how strongly each kind of harness message invites the
#: agent to reconsider (it scales every reaction to the message)
INVITE_PARAMETERS = {"replan": "invite_replan", "refresh": "invite_refresh", "query": "invite_query",
                     "rewind": "invite_rewind", "message": "invite_message"}

#: how much an over-correction doubts each kind of right step: one that changed the world
#: (a pickup, a transform, a placement) more than one that only looked (a search)
OVERCORRECT_WEIGHT = {"take": 1.0, "move": 1.0, "transform": 1.0, "open": 0.6, "search": 0.4}

#: its own env commands after which a harness message derails it at full ``fatigue``
FATIGUE_HORIZON = 40

_HISTORY = 4  # how many of its last shown texts it compares a stale text with


def invitation(kind: str, p: Params) -> float:
    """How strongly a harness message of ``kind`` invites reconsidering (a profile parameter)."""
    return p[INVITE_PARAMETERS.get(kind, "invite_message")]


def fatigue(b: Beliefs, p: Params) -> float:
    """How much more a harness message derails it the longer the episode has run (>= 1):
    ``1 + fatigue x min(1, its env commands so far / FATIGUE_HORIZON)``."""
    return 1.0 + p["fatigue"] * min(1.0, b.clock / FATIGUE_HORIZON)


def harness_kind(text: str) -> str:
    """What a harness message is, read from its words (any harness's message, not only ours).

    ``refresh`` (it carries an engine text), ``replan`` (it asks to reconsider or plan),
    ``rewind`` (it says the state was restored), ``query`` (it says the environment was
    queried), else ``message``.
    """
    if _refreshed_body(text) is not None:
        return "refresh"
    low = text.lower()
    if "reconsider" in low or "replan" in low or "re-plan" in low:
        return "replan"
    if "rewind" in low or "restored" in low or "earlier point" in low:
        return "rewind"
    if "queried" in low:
        return "query"
    return "message"


def _refreshed_body(text: str) -> str | None:
    """The engine text inside a harness message (after a leading ``[...]`` tag), if any."""
    body = text.strip()
    if body.startswith("["):
        body = body.split("]", 1)[1].strip() if "]" in body else ""
    return body if body and tx.is_engine_text(body) and body != tx.NOTHING_HAPPENS else None


@dataclass(frozen=True)
class Doubt:
    """A command whose shown text did not answer it (``unreadable``: no text at all)."""

    action: Action
    reply: str  # the command as sent (lower case): with ``attempt`` it keys draws
    attempt: int
    unreadable: bool


@dataclass(frozen=True)
class LastStep:
    """The agent's own last step: its reply, the parsed command and how it was answered.

    ``kind``: ok, nothing (``Nothing happens.``), unanswered (another text), unreadable,
    think, bad (not a command).
    """

    reply: str
    action: Action | None
    kind: str


@dataclass
class Beliefs:
    """The agent's picture of the world after reading its context so far."""

    goal: Goal | None
    receptacles: list[str]
    location: str | None = None
    contents: dict[str, list[str]] = field(default_factory=dict)
    searched: set[str] = field(default_factory=set)
    assumed: set[str] = field(default_factory=set)  # counted as searched without seeing inside
    seen_at: dict[str, int] = field(default_factory=dict)  # clock of the last look inside
    opened: dict[str, bool] = field(default_factory=dict)
    holding: str | None = None
    states: dict[str, set[str]] = field(default_factory=dict)
    lamps_on: set[str] = field(default_factory=set)
    placed: list[tuple[str, str]] = field(default_factory=list)
    visits: dict[str, int] = field(default_factory=dict)  # arrivals per receptacle
    attempts: dict[str, int] = field(default_factory=dict)  # times each command was sent
    failed: dict[str, int] = field(default_factory=dict)  # times it got "Nothing happens."
    clock: int = 0  # the agent's own env commands read so far (harness steps do not count)
    fail_streak: int = 0
    doubts: list[Doubt] = field(default_factory=list)
    thoughts: set[str] = field(default_factory=set)
    last: LastStep | None = None
    check: str | None = None  # a command to check a text it noticed was wrong (next reply)
    harness_seen: dict[str, int] = field(default_factory=dict)
    harness_pending: tuple[str, int] | None = None  # (kind, ordinal) of an unanswered harness message
    pending_reply: str | None = None  # an assistant message waiting for its answer
    prev_command: str | None = None  # its last env command before the one being read
    lost: tuple[str, ...] | None = None  # the commands it cycles through, having lost track
    lost_next: int = 0  # which of them comes next
    history: tuple[tuple[str, str | None], ...] = ()  # (shown text, hands after it) of its last commands
    doubting: bool = False  # the harness message just read made it doubt its last step (over_correct)
    lure: str | None = None  # what a refreshed text made it take for the goal's object (or target place)

    # -- queries ---------------------------------------------------------------------
    def cycle_next(self) -> str | None:
        """The next command of the cycle it goes round, if it has lost track."""
        return None if self.lost is None else self.lost[self.lost_next % len(self.lost)]

    def where_is(self, obj_type: str) -> list[tuple[str, str]]:
        """(object, receptacle) pairs of that type it believes it has seen."""
        return [(o, r) for r, objs in self.contents.items() for o in objs if otype(o) == obj_type]

    def of_type(self, rtype: str) -> list[str]:
        """The receptacles of a type, lowest number first (as people and LLMs pick them)."""
        return sorted((r for r in self.receptacles if otype(r) == rtype), key=_number)

    def copy(self) -> Beliefs:
        """An independent copy (the containers copied, the immutable values shared)."""
        new = copy.copy(self)
        new.contents = {r: list(v) for r, v in self.contents.items()}
        new.searched, new.assumed = set(self.searched), set(self.assumed)
        new.seen_at, new.opened = dict(self.seen_at), dict(self.opened)
        new.states = {o: set(v) for o, v in self.states.items()}
        new.lamps_on, new.placed = set(self.lamps_on), list(self.placed)
        new.visits, new.attempts, new.failed = dict(self.visits), dict(self.attempts), dict(self.failed)
        new.doubts, new.thoughts = list(self.doubts), set(self.thoughts)
        new.harness_seen = dict(self.harness_seen)
        return new


def _number(name: str) -> tuple[str, int]:
    t, _, n = name.rpartition(" ")
    return (t, int(n) if n.isdigit() else 0)


def initial_beliefs(task_text: str) -> Beliefs:
    """The beliefs after reading the task text (room listing and goal)."""
    m = tx.RE_MIDDLE.search(task_text)
    return Beliefs(goal=parse_goal(task_text), receptacles=tx.names(m.group(1)) if m else [])


def fold(b: Beliefs, role: str, content: str, draws: Draws, p: Params) -> tuple[Beliefs, list[Fired]]:
    """The beliefs after reading one more message (``b`` is not changed) and what fired."""
    b = b.copy()
    fired: list[Fired] = []
    if role == "assistant":
        b.pending_reply = content
        b.check = None  # the reply answered any pending check or harness message
        b.harness_pending = None
        b.doubting = False
        nxt = b.cycle_next()
        if nxt is not None:
            # going round the cycle keeps it lost; any other reply means it broke out
            if content.strip().lower() == nxt.lower():
                b.lost_next += 1
            else:
                b.lost, b.lost_next = None, 0
        return b, fired
    reply, b.pending_reply = b.pending_reply, None
    if reply is None:
        _Reader(b, draws, p, fired).harness(content)
    else:
        _Reader(b, draws, p, fired).agent_step(reply, content)
    return b, fired


def read_context(context: list[dict[str, str]], draws: Draws, p: Params,
                 on_fired: Callable[[int, list[Fired]], None] | None = None) -> Beliefs:
    """The beliefs after the whole context (without memo; ``on_fired(i, fired)`` per message)."""
    b = initial_beliefs(context[0].get("content") or "" if context else "")
    for i in range(1, len(context)):
        b, fired = fold(b, context[i].get("role", ""), context[i].get("content") or "", draws, p)
        if on_fired is not None and fired:
            on_fired(i, fired)
    return b


class _Reader:
    """Reads one answered step or one harness message into ``b`` (in place)."""

    def __init__(self, b: Beliefs, draws: Draws, p: Params, fired: list[Fired]) -> None:
        self.b, self.draws, self.p, self.fired = b, draws, p, fired
        self.before: str | None = None  # the env command before the step being read

    def chance(self, name: str, prob: float, *about: object) -> bool:
        if self.draws.chance(name, prob, *about):
            self.fired.append(Fired(name, " | ".join(str(a) for a in about)))
            return True
        return False

    # -- the agent's own steps -----------------------------------------------------------
    def agent_step(self, reply: str, text: str) -> None:
        b = self.b
        act = tx.parse_action(reply)
        if act is not None and act[0] == "think":
            b.thoughts.add(reply.strip())
            b.last = LastStep(reply, act, "think")
            return
        key = reply.strip().lower()
        b.attempts[key] = attempt = b.attempts.get(key, 0) + 1
        b.clock += 1
        self.before, b.prev_command = b.prev_command, reply.strip()
        if text.strip() == tx.NOTHING_HAPPENS or (tx.NOTHING_HAPPENS in text and len(text) < 40):
            b.fail_streak += 1
            # both wordings of a placement count as one command
            said = f"move {act[1]} to {act[2]}" if act is not None and act[0] == "move" else key
            b.failed[said] = b.failed.get(said, 0) + 1
            self._failed(act)
            b.last = LastStep(reply, act, "nothing" if act else "bad")
        else:
            b.fail_streak = 0
            self._answered(reply, act, key, attempt, text)
        b.history = (*b.history, (text.strip(), b.holding))[-_HISTORY:]

    def _answered(self, reply: str, act: Action | None, key: str, attempt: int, text: str) -> None:
        """A step answered by something other than ``Nothing happens.``."""
        b = self.b
        if act is None:
            self.see(text, None)
            b.last = LastStep(reply, None, "bad")
        elif tx.answers(act, text):
            self.see(text, act)
            self._settle(text)
            b.last = LastStep(reply, act, "ok")
        elif tx.is_engine_text(text):
            self._stale(act, key, attempt, text)
            b.last = LastStep(reply, act, "unanswered")
        else:
            self._unreadable(act, key, attempt, text)
            b.last = LastStep(reply, act, "unreadable")

    def _stale(self, act: Action, key: str, attempt: int, text: str) -> None:
        """Another text than the command's answer: believed, unless noticed at once."""
        b = self.b
        b.doubts.append(Doubt(act, key, attempt, unreadable=False))
        mech = {"take": "hidden_pickup", "move": "hidden_placement"}.get(act[0], "stale_location")
        if not self.chance(mech, self.p[mech], key, attempt):
            b.check = _check_command(act, b, doubted_now=True)
            return
        self._lose_track(key, attempt, text)
        self.see(text, act)
        target = act[1] if act[0] == "go" else None
        if target in b.receptacles and target != b.location and target not in b.searched:
            # "I went there, so I must have seen it": counted searched without looking inside
            b.searched.add(target)
            b.assumed.add(target)
            b.seen_at[target] = b.clock
        self._roll_back(key, attempt, text)

    def _roll_back(self, key: str, attempt: int, text: str) -> None:
        """A believed text last shown two or more commands ago describes that moment: it
        may take its hands to be as they were then (``stale_rollback``). A one-step-old text
        describes the state just before this command, which the error above covers."""
        b = self.b
        shown = text.strip()
        lag = next((j for j, (t, _) in enumerate(reversed(b.history), 1) if t == shown), None)
        if lag is None or lag < 2:
            return
        held_then = b.history[-lag][1]
        if held_then == b.holding or not self.chance("stale_rollback", self.p["stale_rollback"], key, attempt, lag):
            return
        if held_then is not None:  # the placement since is undone in belief: still in its hands
            for o, r in reversed(b.placed):
                if o == held_then:
                    b.placed.remove((o, r))
                    b.contents[r] = [x for x in b.contents.get(r, []) if x != o]
                    break
        b.holding = held_then

    def _unreadable(self, act: Action, key: str, attempt: int, text: str) -> None:
        b = self.b
        b.doubts.append(Doubt(act, key, attempt, unreadable=True))
        if not self.chance("missing_text", self.p["missing_text"], key, attempt):
            b.check = _check_command(act, b, doubted_now=True, unreadable=True)
            return
        self._lose_track(key, attempt, text)
        self._assume_worked(act)

    def _lose_track(self, key: str, attempt: int, text: str) -> None:
        """Misled by a text that did not answer it, it may lose track of its plan and go
        round its last two commands (an LLM copying its own recent turns) until it
        notices, a harness message makes it reconsider, or the budget ends. Whether it
        does is a draw about the command and the text that misled it: two different
        misleading texts are two different chances to lose the thread."""
        b = self.b
        if self.chance("lost_track", self.p["lost_track"], key, attempt, text.strip()):
            now = b.prev_command or key
            b.lost = (self.before, now) if self.before and self.before.lower() != now.lower() else (now,)
            b.lost_next = 0

    def _settle(self, text: str) -> None:
        self.b.doubts = [d for d in self.b.doubts if not tx.settles(d.action, text)]

    def _failed(self, act: Action | None) -> None:
        """``Nothing happens.``: the belief behind the command was wrong somewhere."""
        b = self.b
        if not act:
            return
        verb = act[0]
        if verb == "take" and act[1] in b.contents.get(act[2], ()):
            b.contents[act[2]] = [x for x in b.contents[act[2]] if x != act[1]]
        elif verb == "open":
            b.opened[act[1]] = True
        elif verb == "examine" and act[1] in b.receptacles:
            b.searched.add(act[1])
            b.seen_at.setdefault(act[1], 0)

    def _assume_worked(self, act: Action) -> None:
        """No readable text: assume the command did what it was meant to do."""
        b = self.b
        verb = act[0]
        if verb == "go" and act[1] in b.receptacles:
            b.location = act[1]
            if act[1] not in b.searched:
                b.searched.add(act[1])
                b.assumed.add(act[1])
                b.seen_at[act[1]] = b.clock
        elif verb == "open":
            b.opened[act[1]] = True
            b.location = act[1]
            if act[1] not in b.searched:  # opened it to look inside: nothing caught the eye
                b.searched.add(act[1])
                b.assumed.add(act[1])
                b.seen_at[act[1]] = b.clock
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

    # -- harness messages ------------------------------------------------------------------
    def harness(self, text: str) -> None:
        b = self.b
        kind = harness_kind(text)
        b.harness_seen[kind] = n = b.harness_seen.get(kind, 0) + 1
        b.harness_pending = (kind, n)
        body = _refreshed_body(text)
        if body is not None:
            self._refreshed(body, n)
            self._distracted(body, n)
        self._over_correct(kind, n)

    def _refreshed(self, body: str, n: int) -> None:
        """What a refreshed text says about where it is and what is here."""
        b = self.b
        facing = tx.RE_FACING.search(body)
        if facing:
            place, listing = facing.group(1), facing.group(2).strip()
            if b.location != place:
                if self.chance("refresh_correction", self.p["refresh_correction"], place, b.location, n):
                    b.location = place
                    if place in b.assumed:  # I never saw inside it after all
                        b.searched.discard(place)
                        b.assumed.discard(place)
                    self._settle(body)
            elif listing == "nothing" and b.contents.get(place):
                # "Next to it, you see nothing" read hastily as "it holds nothing"
                if self.chance("misread_refresh", self.p["misread_refresh"], place, n):
                    b.contents[place] = []
        elif tx.RE_MIDDLE.search(body) and b.location is not None:
            if self.chance("refresh_correction", self.p["refresh_correction"], "middle", b.location, n):
                b.location = None

    def _distracted(self, body: str, n: int) -> None:
        """A refreshed text that names places or objects pulls its attention (an LLM is easily
        distracted by context that does not bear on the task): what the text names fills the
        slot it is about to fill. Carrying the goal's object to its target, a named place
        that could hold it is taken for the target; looking for the object, a look-alike it
        knows is at a named place (or that is named itself) is taken for the object, else a
        named place it had ruled out is searched again. One draw, about the most tempting."""
        b, g = self.b, self.b.goal
        if g is None or b.lure is not None:
            return
        named = tx.names(body)
        if b.holding is not None and otype(b.holding) == g.obj:
            if not g.recep or (g.transform and g.transform not in b.states.get(b.holding, set())):
                return  # a lamp or an appliance to find: no place it names will do instead
            places = [r for r in named if r in b.receptacles and otype(r) != g.recep and g.obj in CAN_HOLD.get(otype(r), ())]
            if places and self.chance("distraction", self.p["distraction"], "target", places[0], n):
                b.lure = places[0]
            return
        alike = set(LOOKALIKES.get(g.obj, ()))
        lures = [o for r in named for o in b.contents.get(r, []) if otype(o) in alike]
        lures += [o for o in named if o not in b.receptacles and otype(o) in alike]
        if lures:
            if self.chance("distraction", self.p["distraction"], "object", lures[0], n):
                b.lure = lures[0]
            return
        ruled_out = [r for r in named if r in b.searched and r not in b.assumed
                     and not any(otype(o) == g.obj for o in b.contents.get(r, []))]
        if ruled_out:
            place = max(ruled_out, key=lambda r: (prior(g.obj, otype(r)), r))
            if self.chance("distraction", self.p["distraction"], "search", place, n):
                b.searched.discard(place)  # "did I look properly?"

    def _over_correct(self, kind: str, n: int) -> None:
        """A message that invites reconsidering makes it doubt its last step although the
        text answered it, and undo and redo it, round and round (asked "are you sure?", an
        LLM flips a right answer, and flips again), until it notices (``notice_loop``),
        a later harness message makes it reconsider, or the budget ends. Only while no
        step of its is in doubt: a doubted step is what it re-checks first."""
        b, last = self.b, self.b.last
        if b.goal is None or b.doubts or b.lost is not None or last is None or last.kind != "ok" or not last.action:
            return
        act, verb = last.action, last.action[0]
        cycle: tuple[str, ...]
        if verb == "take" and b.holding == act[1]:  # "is this the right one?": put it back, take it again
            case, cycle = "take", (f"move {act[1]} to {act[2]}", last.reply.strip())
        elif verb == "move" and (act[1], act[2]) in b.placed and b.holding is None:  # "the right place?"
            case, cycle = "move", (f"take {act[1]} from {act[2]}", last.reply.strip())
        elif verb in ("heat", "cool", "clean") and verb in b.states.get(act[1], set()):  # "did it work?"
            case, cycle = "transform", (last.reply.strip(),)
        elif verb == "open" and b.opened.get(act[1]):  # "did I see it all?": close it, open it again
            case, cycle = "open", (f"close {act[1]}", last.reply.strip())
        elif verb in ("go", "examine") and b.location == act[1]:  # "did I look properly?": back and forth
            now = last.reply.strip()
            before = self._previous_place(act[1]) if verb == "go" else None
            case, cycle = "search", (before, now) if before and before.lower() != now.lower() else (now,)
        else:
            return
        prob = self.p["over_correct"] * OVERCORRECT_WEIGHT[case] * invitation(kind, self.p) * fatigue(b, self.p)
        if self.chance("over_correct", prob, case, last.reply.strip().lower(),
                       b.attempts.get(last.reply.strip().lower(), 0), kind, n):
            b.lost, b.lost_next, b.doubting = cycle, 0, True

    def _previous_place(self, here: str) -> str | None:
        """The go-to before the one that brought it ``here`` (the place it doubts it left right)."""
        places = [t for t, _ in self.b.history]
        for text in reversed(places[:-1]):
            m = tx.RE_ARRIVE.search(text)
            if m and m.group(1) != here:
                return f"go to {m.group(1)}"
        return None

    # -- text -> beliefs -------------------------------------------------------------------
    def see(self, text: str, act: Action | None) -> None:
        """Update the picture of the world from an engine text the agent believes."""
        b = self.b
        if act is not None and act[0] == "examine" and act[1] in b.receptacles and act[1] in text:
            b.location = act[1]  # only what is here can be examined
        if m := tx.RE_ARRIVE.search(text):
            b.location = m.group(1)
            b.visits[m.group(1)] = b.visits.get(m.group(1), 0) + 1
        if m := tx.RE_OPENED.search(text):
            b.location = m.group(1)
            b.opened[m.group(1)] = True
        if m := tx.RE_IS_OPEN.search(text):
            b.opened[m.group(1)] = True
            self._look_inside(m.group(1), m.group(2))
        if m := tx.RE_IS_CLOSED.search(text):
            self._closed(m.group(1), act)
        if m := tx.RE_ON.search(text):
            self._look_inside(m.group(1), m.group(2))
        if m := tx.RE_CLOSE.search(text):
            b.opened[m.group(1)] = False
            b.location = m.group(1)
        if m := tx.RE_PICK.search(text):
            o, r = m.group(1), m.group(2)
            b.holding, b.location = o, r
            if o in b.contents.get(r, ()):
                b.contents[r] = [x for x in b.contents[r] if x != o]
        if m := tx.RE_MOVE.search(text):
            o, r = m.group(1), m.group(2)
            b.holding, b.location = None, r
            if o not in b.contents.setdefault(r, []):
                b.contents[r] = [*b.contents[r], o]
            b.placed.append((o, r))
        if m := tx.RE_APPLY.search(text):
            verb, o, r = m.groups()
            b.states.setdefault(o, set()).add(verb)
            b.location = r
        if m := tx.RE_TOGGLE.search(text):
            (b.lamps_on.add if m.group(1) == "on" else b.lamps_on.discard)(m.group(2))
        if m := tx.RE_FACING.search(text):
            place = m.group(1)
            if b.location != place and place in b.assumed:
                # my own look says I am here: I never saw inside this place after all
                b.searched.discard(place)
                b.assumed.discard(place)
            b.location = place
        if tx.RE_MIDDLE.search(text):
            b.location = None
        if m := tx.RE_CARRY.search(text):
            held = tx.names(m.group(1))
            b.holding = held[0] if held else None
        if tx.NOT_CARRYING in text:
            b.holding = None
        if m := tx.RE_STATE.search(text):
            for w in m.group(1).replace("cold", "cool").split():
                if w in ("hot", "cool", "clean"):
                    b.states.setdefault(m.group(2), set()).add({"hot": "heat", "cool": "cool"}.get(w, "clean"))

    def _look_inside(self, recep: str, listing: str) -> None:
        b = self.b
        objs = tx.names(listing)
        visit = b.visits.get(recep, 0)
        wanted = _wanted(b.goal)
        if len(objs) >= 3:
            prob = min(0.9, self.p["overlook"] * len(objs) / 4.0)
            objs = [o for o in objs
                    if not (otype(o) in wanted and self.chance("overlook", prob, recep, o, visit))]
        b.contents[recep] = objs
        b.searched.add(recep)
        b.assumed.discard(recep)
        b.seen_at[recep] = b.clock

    def _closed(self, recep: str, act: Action | None) -> None:
        b = self.b
        b.opened[recep] = False
        if act is None or act[0] != "go" or (recep in b.searched and recep not in b.assumed):
            return
        # a closed place glanced at on arrival: taken as searched (never opened), or not
        if self.chance("forget_open", self.p["forget_open"], recep, b.visits.get(recep, 0)):
            b.searched.add(recep)
            b.assumed.add(recep)
            b.seen_at[recep] = b.clock
        else:
            b.searched.discard(recep)
            b.assumed.discard(recep)


def _wanted(goal: Goal | None) -> set[str]:
    return {t for t in (goal.obj, goal.toggle) if t} if goal is not None else set()


def _check_command(act: Action, b: Beliefs, *, doubted_now: bool, unreadable: bool = False) -> str:
    """The command that checks what ``act`` did (answered, it settles the doubt)."""
    verb = act[0]
    if verb == "go" and unreadable:
        # I took it that I arrived: see what is inside, or go there again
        return f"examine {act[1]}" if b.location == act[1] else f"go to {act[1]}"
    if verb == "go":
        # still where the odd text left me: look; since moved on: go there again
        return "look" if doubted_now else f"go to {act[1]}"
    if verb in ("take", "move"):
        return "inventory"
    if verb in ("heat", "cool", "clean"):
        return f"examine {act[1]}"
    if verb in ("open", "close") and b.location == act[1]:
        return f"examine {act[1]}"
    return "look"


def recheck_command(doubt: Doubt, b: Beliefs) -> str:
    """How the agent re-checks a doubted step later (e.g. prompted by a harness message)."""
    last = b.last
    doubted_now = last is not None and last.reply.strip().lower() == doubt.reply and b.attempts.get(
        doubt.reply) == doubt.attempt
    return _check_command(doubt.action, b, doubted_now=doubted_now, unreadable=doubt.unreadable)
