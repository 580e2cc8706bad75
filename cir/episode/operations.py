"""The recovery operations by name: the one registry of what each is called, shows and costs.

The harness applies an operation (:mod:`cir.episode.recovery` implements each entry), the
replayer and the command line check the names a run asks for, a transcript read back from a
chat list recognises an operation by the text it showed (:meth:`Transcript.from_messages
<cir.episode.transcript.Transcript.from_messages>`), and the router names the one it was fitted
for: all of them read this table, so a name is written here once. A new operation is an
entry here and a class in :mod:`cir.episode.recovery` (an import-time check keeps the two
in step).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cir.episode.protocol import (
    ABLATED_TEXT,
    PLACEBO_TEXT,
    REFRESH_PREFIX,
    REPLAN_TEXT,
    REWIND_HEADER,
)
from cir.util.errors import CirError


@dataclass(frozen=True)
class OperationInfo:
    """One recovery operation as the rest of the package knows it.

    ``queries_env``: it sends the env's refresh query (an env action of the budget).
    ``text``: the harness text it shows, or how that text begins (``shows_answer``: the
    refresh query's answer follows it; ``rewind``: the memory of the abandoned branch does).
    """

    name: str
    queries_env: bool
    text: str
    meaning: str
    shows_answer: bool = False

    def recognises(self, shown: str) -> bool:
        """Whether a harness message shown to the agent is this operation's."""
        return shown.startswith(self.text) if self.shows_answer or self.name == "rewind" else shown == self.text


#: Every operation, in display order (the order of tables, help texts and figures).
OPERATIONS: dict[str, OperationInfo] = {op.name: op for op in (
    OperationInfo("refresh", True, REFRESH_PREFIX,
                  "the env's refresh query (ALFWorld's look), its answer shown", shows_answer=True),
    OperationInfo("refresh_ablated", True, ABLATED_TEXT, "the same query, its answer hidden"),
    OperationInfo("replan", False, REPLAN_TEXT, "the agent is asked to reconsider, no env query"),
    OperationInfo("rewind", False, REWIND_HEADER,
                  "context and env restored to before the modified observation, with a short memory"),
    OperationInfo("placebo", False, PLACEBO_TEXT, "a content-free harness message: the interruption alone"),
)}


def operation_info(name: str) -> OperationInfo:
    """The registry entry of ``name``; an unknown name is a :class:`CirError` listing the known."""
    try:
        return OPERATIONS[str(name).strip()]
    except KeyError:
        raise CirError(f"unknown operation {name!r}: expected one of {', '.join(OPERATIONS)}") from None


def check_operations(names: str | Iterable[str]) -> tuple[str, ...]:
    """The operation names of a comma list (or a sequence), each known and listed once."""
    items = names.split(",") if isinstance(names, str) else [str(n) for n in names]
    checked = tuple(operation_info(n).name for n in (s.strip() for s in items) if n)
    if not checked:
        raise CirError(f"operations: expected at least one of {', '.join(OPERATIONS)}")
    if len(set(checked)) != len(checked):
        dup = next(n for n in checked if checked.count(n) > 1)
        raise CirError(f"operations: {dup!r} is listed twice")
    return checked


def operation_of_text(shown: str) -> OperationInfo | None:
    """The operation whose harness text ``shown`` is, or None (some other harness message)."""
    return next((op for op in OPERATIONS.values() if op.recognises(shown)), None)
