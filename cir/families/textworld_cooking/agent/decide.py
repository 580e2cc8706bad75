"""The cooking agent's next command from its beliefs: read the cookbook, gather, prepare, eat.

In order: a command it decided on while reading (a check, a redo); ``inventory`` first
(some ingredients are in its hands from the start, and only an inventory says so); ``eat meal`` once it
holds the meal; the cookbook in the kitchen while it knows no recipe (or wants to re-read
it); each ingredient, taken where it saw it or searched for room by room; each direction
of the recipe (the knife for cutting, the appliance for cooking, where it saw them); then
``prepare meal`` in the kitchen. It moves along the exits it knows (a breadth-first path,
opening a closed door on the way) and explores the nearest exit it has not taken. Only
``wrong_tool`` and ``self_check`` are drawn here; everything else fired while reading (:mod:`.beliefs`).
"""

from __future__ import annotations

from collections import deque

from cir.agents.modelfree import Draws, Fired
from cir.families.textworld_cooking.agent.beliefs import DEAD, Beliefs, directions_left
from cir.families.textworld_cooking.text import DIRECTION_VERBS

KITCHEN = "kitchen"
#: the appliance it takes instead, when ``wrong_tool`` fires
_WRONG = {"stove": "oven", "oven": "stove", "bbq": "stove"}


class Decider:
    """One decision: ``decide()`` returns the command; ``fired`` what was drawn deciding it."""

    def __init__(self, beliefs: Beliefs, params: dict[str, float], draws: Draws) -> None:
        self.b, self.params, self.draws = beliefs, params, draws
        self.fired: list[Fired] = []

    def decide(self) -> str:
        b = self.b
        if b.pending:
            return b.pending[0]
        if not b.looked_in_hands:  # some ingredients are in its hands from the start
            return "inventory"
        if b.meal:
            return "eat meal"
        if b.recipe is None or b.replan:
            return "examine cookbook" if b.room == KITCHEN else self._go_to(KITCHEN)
        for ingredient in b.recipe.ingredients:
            if ingredient not in b.held:
                return self._fetch(ingredient)
        for verb, ingredient in directions_left(b):
            command, tool = DIRECTION_VERBS[verb]
            if tool == "knife":
                if "knife" not in b.held:
                    return self._fetch("knife")
                return f"{command} {ingredient} with knife"
            if self.draws.chance("wrong_tool", self.params["wrong_tool"], ingredient, verb):
                self.fired.append(Fired("wrong_tool", f"{ingredient}: {tool} -> {_WRONG[tool]}"))
                tool = _WRONG[tool]
            place = b.where(tool)
            if place is None:
                return self._explore()
            return f"cook {ingredient} with {tool}" if place == b.room else self._go_to(place)
        return "prepare meal" if b.room == KITCHEN else self._go_to(KITCHEN)

    # -- sampling (at a temperature: cir.agents.modelfree's sampled_choice) ---------------------
    @property
    def turn(self) -> int:
        """How many commands it has sent (a sampled choice is drawn afresh each turn)."""
        return sum(self.b.sent.values())

    def alternatives(self, reply: str) -> list[str]:
        """What else it might plausibly say instead of ``reply``: look, check its hands, or take
        the room's first exit."""
        return ["look", "inventory", *(f"go {d}" for d in self.b.exits.get(self.b.room or "", ())[:1])]

    def _fetch(self, item: str) -> str:
        place = self.b.where(item)
        if place is None:
            return self._explore()
        return f"take {item}" if place == self.b.room else self._go_to(place)

    # -- moving ---------------------------------------------------------------------------------
    def _neighbours(self, room: str) -> list[tuple[str, str]]:
        return sorted((d, r) for (src, d), r in self.b.edges.items() if src == room and r != DEAD)

    def _path_first(self, goal: callable) -> tuple[str, str] | None:  # type: ignore[valid-type]
        """(the room where the path starts, its first direction) toward the nearest room
        ``goal(room)`` accepts, over the exits it knows; None when there is none."""
        start = self.b.room
        if start is None:
            return None
        first: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            room = queue.popleft()
            if goal(room) and first[room] is not None:
                return start, first[room]  # type: ignore[return-value]
            for direction, nxt in self._neighbours(room):
                if nxt not in first:
                    first[nxt] = first[room] or direction
                    queue.append(nxt)
        return None

    def _step(self, direction: str) -> str:
        door = self.b.doors.get((self.b.room or "", direction))
        return f"open {door}" if door else f"go {direction}"

    def _go_to(self, target: str) -> str:
        found = self._path_first(lambda room: room == target)
        return self._step(found[1]) if found else self._explore()

    def _untried(self, room: str) -> list[str]:
        return [d for d in self.b.exits.get(room, ()) if (room, d) not in self.b.edges]

    def _explore(self) -> str:
        """The nearest exit it has not taken; else, perhaps (``self_check``), a look in its hands;
        else back to the room it has seen least."""
        b = self.b
        if b.room is not None and self._untried(b.room):
            return self._step(self._untried(b.room)[0])
        found = self._path_first(lambda room: bool(self._untried(room)))
        if found:
            return self._step(found[1])
        if b.sent["inventory"] < 2 and self.draws.chance("self_check", self.params["self_check"], b.room):
            self.fired.append(Fired("self_check", "searched everywhere"))
            return "inventory"  # perhaps it holds it already
        others = sorted((b.visits[r], r) for r in b.seen if r != b.room)
        for _visits, room in others:
            path = self._path_first(lambda r, room=room: r == room)
            if path:
                return self._step(path[1])
        return "look"
