"""The Agent contract (DESIGN.md): an agent is a pure function of its context."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Agent(Protocol):
    """``act(context) -> reply``; the same context always gives the same reply.

    ``context`` is the chat message list of :meth:`cir.episode.transcript.Transcript.context`.
    A reply is an env action (``go to desk 1``) or a thought (``think: ...``).
    ``params()`` returns the plain-data parameters that, with the context, fix the
    reply: they name the agent in tables and key the reply cache.
    """

    name: str

    def act(self, context: list[dict[str, str]]) -> str: ...

    def params(self) -> dict[str, Any]: ...
