"""A counter whose reads a stale cache can serve again, and an agent that reads it on a script: the
test double of a persistent perturbation (tests/episode/test_persistence.py, tests/pairs/test_persistence_runs.py)."""

from __future__ import annotations

import re

_SHOWS = re.compile(r"The counter shows (\d+)\.")


class Tally:
    """A counter: ``inc`` adds one, ``read`` shows it (the refresh query too), ``submit N`` ends the
    episode, won when N is the count."""

    refresh_query = "read"

    def __init__(self) -> None:
        self.n, self.over = 0, False

    def reset(self) -> str:
        self.n, self.over = 0, False
        return "A counter at 0.\n\nYour task is to: count the increments, then submit the count."

    def step(self, action: str) -> tuple[str, bool, bool]:
        if self.over:
            return "Nothing happens.", True, False
        if action == "inc":
            self.n += 1
            return "Click.", False, False
        if action == "read":
            return f"The counter shows {self.n}.", False, False
        if action.startswith("submit "):
            self.over = True
            won = action == f"submit {self.n}"
            return ("Right." if won else "Wrong."), True, won
        return "Nothing happens.", False, False

    def snapshot(self) -> tuple[int, bool]:
        return self.n, self.over

    def restore(self, snapshot: tuple[int, bool]) -> None:
        self.n, self.over = snapshot


class Scripted:
    """read, inc, read, inc, read, inc, read, then submit what it last read: a pure function of its
    context (its own replies there say where it is in the script; a rewind cuts them back)."""

    name = "scripted"
    SCRIPT = ("read", "inc", "read", "inc", "read", "inc", "read")

    def params(self) -> dict:
        return {"name": self.name}

    def act(self, context: list[dict[str, str]]) -> str:
        said = sum(1 for m in context if m["role"] == "assistant")
        if said < len(self.SCRIPT):
            return self.SCRIPT[said]
        read = [int(m.group(1)) for c in context if c["role"] == "user" and (m := _SHOWS.search(c["content"]))]
        return f"submit {read[-1] if read else 0}"
