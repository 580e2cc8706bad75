"""The Agent contract (DESIGN.md): an agent is a pure function of its context.

:func:`agent_params` is the one reader of an agent's parameters: every part of ``cir`` that
keys, labels or records an agent (the harness, the run's label, the estimate, the factory's
identity) asks it, so an agent written against an earlier release reads the same on every path.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from cir.util.deprecation import defined_at, warn_former
from cir.util.errors import CirTypeError


@runtime_checkable
class Agent(Protocol):
    """``act(context) -> reply``; the same context always gives the same reply.

    ``context`` is the chat message list of :meth:`cir.episode.transcript.Transcript.context`.
    A reply is an env action (``go to desk 1``) or a thought (``think: ...``).
    ``params()`` returns the plain-data parameters that, with the context, fix the
    reply: they name the agent in tables and key the reply cache (``settings()``, its former
    name, is still read, with a deprecation warning).
    """

    name: str

    def act(self, context: list[dict[str, str]]) -> str: ...

    def params(self) -> dict[str, Any]: ...


def _former_settings(obj: Any) -> Any:
    """The ``settings`` method an object defines in place of ``params`` (a class of its own
    closer than any ``params``, or only that), else None."""
    own = getattr(obj, "__dict__", {})
    if "params" in own and callable(own["params"]):
        return None
    if "settings" in own and callable(own["settings"]):
        return own["settings"]
    for klass in type(obj).__mro__:
        if "params" in vars(klass):
            return None
        if "settings" in vars(klass):
            method = obj.settings
            return method if callable(method) else None
    return None


def agent_params(agent: Any, contract: str = "Agent") -> dict[str, Any]:
    """The agent's ``params()`` as a new dict (what keys its replies and names it): the one
    reader of the contract's parameters. An agent whose class still defines the former
    ``settings()`` (the name before cir 0.2.0) is read through it, with one deprecation warning
    naming its class and line; an agent with neither is a CirTypeError naming it.
    ``contract`` names the protocol in messages (a framework adapter's ``Framework`` too)."""
    former = _former_settings(agent)
    if former is not None:
        owner = getattr(former, "__self__", agent)
        klass = type(owner).__qualname__ if owner is not None else type(agent).__qualname__
        where = defined_at(former)
        detail = f"rename the method {klass}.settings" + (f" ({where[0]}, line {where[1]})" if where else "")
        warn_former("Agent.settings()", detail, at=where)
        return dict(former())
    params = getattr(agent, "params", None)
    if not callable(params):
        raise CirTypeError(f"agent {getattr(agent, 'name', type(agent).__name__)!r}: has no params() "
                           f"(the {contract} contract: plain data that, with the context, fixes its replies)")
    return dict(params())
