"""The Env contract (DESIGN.md): what the harness needs from an environment.

Any text environment with exact snapshots can be studied: :func:`cir.pairs.replay.run_task_pairs`
runs the paired replayer on it (``examples/counter.py`` is a complete one, not ALFWorld).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from cir.util.errors import CirError

#: ALFWorld's refresh query: ``look`` describes where the agent is. It is what a refresh
#: sends to an env that declares no ``refresh_query`` of its own.
DEFAULT_REFRESH_QUERY = "look"


@runtime_checkable
class Env(Protocol):
    """A text environment with exact snapshots.

    ``restore(snapshot())`` must make every later ``step`` return exactly the
    observations the original run would have given from that point.

    What a refresh sends: the ``refresh`` recovery (and the content-ablated
    ``refresh_ablated``) sends the env its *refresh query*, one action that re-reads
    the current state, as an ordinary ``step`` (it spends one env action of the budget),
    and shows the agent the answer. An env declares its query as an attribute
    ``refresh_query`` (for example ``refresh_query = "read counter"``); ALFWorld's is
    ``look`` (:data:`DEFAULT_REFRESH_QUERY`), which is also what an env that declares
    none is sent. :func:`refresh_query` reads it (through wrappers).

    An env may also define ``refresh_for(suspect_action) -> str | None``: the action that
    re-reads what the suspect observation (the answer to ``suspect_action``) was about, or None.
    A refresh then sends that action instead of the refresh query: a tool world
    (:mod:`cir.tools.env`) re-runs the read-only call that produced the suspect result. An env
    without it (ALFWorld, the cooking games) is sent its refresh query, as before;
    :func:`refresh_for` reads it (through wrappers).

    An env may also define ``reads(action) -> bool``: whether ``action`` only reads the state
    (a tool world's read-only call; ``finish``, a change or a bad call is not a read). A harness's
    cache serves reads, and a change's answer comes from the primary, so for such an env the
    perturbation point is the first read at or after the protocol's point
    (:func:`cir.episode.perturb.find_point`); an env without it (ALFWorld, the cooking games) is
    perturbed at the protocol's point, as before. :func:`env_reads` reads it (through wrappers).
    """

    def reset(self) -> str:
        """Start the episode; return the first observation (intro text with the goal)."""
        ...

    def step(self, action: str) -> tuple[str, bool, bool]:
        """Send one action; return ``(observation, done, won)``."""
        ...

    def snapshot(self) -> Any:
        """An opaque handle on the current state."""
        ...

    def restore(self, snapshot: Any) -> None:
        """Return to the state captured by ``snapshot``."""
        ...


def refresh_query(env: Any) -> str:
    """The action a refresh sends to ``env``: its ``refresh_query``, else ``look`` (ALFWorld's).

    A wrapper that declares none and holds the env it wraps as ``.env`` (the counting and
    branching envs of :mod:`cir.envs`) is asked for the wrapped env's query.
    """
    while not hasattr(env, "refresh_query") and hasattr(env, "env"):
        env = env.env
    query = getattr(env, "refresh_query", DEFAULT_REFRESH_QUERY)
    if not isinstance(query, str) or not query.strip():
        raise CirError(f"{type(env).__name__}.refresh_query: expected a non-empty action text, got {query!r}")
    return query


def refresh_for(env: Any, suspect_action: str | None) -> str | None:
    """The action ``env`` says a refresh sends after the suspect observation of ``suspect_action``
    (its ``refresh_for``, read through wrappers as the query is), or None: the env has no
    ``refresh_for``, or it names no action (a refresh sends the refresh query then)."""
    inner = env
    while not hasattr(inner, "refresh_for") and hasattr(inner, "env"):
        inner = inner.env
    method = getattr(inner, "refresh_for", None)
    if not callable(method) or suspect_action is None:
        return None
    action = method(suspect_action)
    if action is not None and (not isinstance(action, str) or not action.strip()):
        raise CirError(f"{type(inner).__name__}.refresh_for({suspect_action!r:.60}): expected an action text or "
                       f"None, got {action!r:.60}")
    return action


def env_reads(env: Any) -> Callable[[str], bool] | None:
    """``env``'s test of which actions are reads (its ``reads``, found through wrappers as the
    refresh query is), or None when it has none (then every env action may be perturbed). The
    test answers a bool or raises a CirError naming the env and the action."""
    inner = env
    while not hasattr(inner, "reads") and hasattr(inner, "env"):
        inner = inner.env
    method = getattr(inner, "reads", None)
    if not callable(method):
        return None
    name = type(inner).__name__

    def reads(action: str) -> bool:
        answer = method(action)
        if not isinstance(answer, bool):
            raise CirError(f"{name}.reads({action!r:.60}): expected True or False, got {answer!r:.60}")
        return answer

    return reads
