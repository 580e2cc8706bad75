"""A chat-style harness asks the router and applies the recovery it chooses to its message list.

A harness that keeps the conversation as a message list (``system``, ``user`` and
``assistant`` messages) needs three things from ``cir`` at run time: a transcript of what
the agent was shown (:meth:`cir.episode.transcript.Transcript.from_messages`), the router's
decision (:meth:`cir.router.runtime.Router.decide`), and the recovery applied exactly as the
paired replayer applied it when the router was fitted. :func:`recover_messages` does the
last: the same operation (:mod:`cir.episode.recovery`) on the same transcript, returned as
the message list the agent sees next::

    transcript = Transcript.from_messages(task_id, messages, refresh_query=env.refresh_query)
    decision = router.decide(transcript, delay=actions_since_suspect)
    messages = recover_messages(decision, env, messages, checkpoint=before_suspect)

A ``rewind`` needs the state to return to: ``checkpoint=(messages_before, snapshot)``, the
message list before the reply whose answer is suspect and ``env.snapshot()`` taken then.
"""

from __future__ import annotations

from typing import Any, Protocol

from cir.envs.base import Env, refresh_query
from cir.episode.recovery import Checkpoints, get_operation
from cir.episode.transcript import Transcript
from cir.util.errors import CirError


class Choice(Protocol):
    """What :func:`recover_messages` reads of a decision (a :class:`~cir.router.runtime.Decision`)."""

    recover: bool
    operation: str | None


def recover_messages(decision: Choice, env: Env, messages: list[dict[str, Any]], *,
                     checkpoint: tuple[list[dict[str, Any]], Any] | None = None,
                     task_id: str = "chat") -> list[dict[str, Any]]:
    """The message list after the decision: unchanged when it does not recover, else with the
    chosen operation applied (a refresh sends the env's refresh query, a rewind restores
    ``checkpoint``'s env snapshot and context, with a memory of what was abandoned). Leading
    ``system`` messages are kept."""
    if not decision.recover:
        return list(messages)
    if not decision.operation:
        raise CirError("recover_messages: the decision recovers but names no operation")
    query = refresh_query(env)
    transcript = Transcript.from_messages(task_id, messages, refresh_query=query)
    checkpoints = Checkpoints()
    if checkpoint is not None:
        before, snapshot = checkpoint
        k = len(Transcript.from_messages(task_id, before, refresh_query=query).steps)
        checkpoints = Checkpoints(snapshots={k: snapshot}, anchor=k)
    elif decision.operation == "rewind":
        raise CirError("recover_messages: a rewind needs checkpoint=(messages before the suspect reply, "
                       "env.snapshot() taken then)")
    step = get_operation(decision.operation, query).apply(env, transcript, checkpoints)
    transcript.steps.append(step)
    n_system = next((i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages))
    return [*messages[:n_system], *transcript.context()]
