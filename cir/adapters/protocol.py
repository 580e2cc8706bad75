"""The fork protocol: what a framework adapter gives ``cir``, and what ``cir`` gives it.

A framework agent (a LangGraph graph, an OpenAI Agents SDK ``Agent``, an Inspect AI agent)
runs its own loop: its model calls, its tool node, its middleware. ``cir`` needs three
things of it to pair its runs exactly, and an adapter (one small module per framework,
:mod:`cir.adapters.langgraph`, ...) provides them as a :class:`Framework`:

1. ``turn(messages) -> new messages``: from a message list in OpenAI's chat format (the
   task as the first ``user`` message; the agent's tool calls as ``assistant`` messages with
   ``tool_calls``, each answered by its ``tool`` message; harness messages as ``user``
   messages), run the framework's own loop for one turn (one model call and the tool call
   it makes) and return the messages it added, in the same format. Starting a turn from a
   message list is the fork: the framework's state at any step is its message list, so a
   branch is the list up to the branch point, edited (a tool result replaced by the
   perturbed text, a recovery added), and run on.
2. ``tools()``: the agent's tool names and their parameters (so a refresh can be shown as
   the harness calling the observing tool).
3. ``params()``: plain data that, with the messages, fixes the replies (they name the
   agent in the ``agent`` column and key the run).

The agent's tools are thin calls into the env: each calls :func:`env_step` with the env
action it stands for and returns its answer::

    @tool
    def act(command: str) -> str:
        "Send one command to the environment."
        return env_step(command)

During a turn ``cir`` binds :func:`env_step` to the episode's env (restored to the exact
state of the branch point) in an :class:`EnvSession`, which records every call (the action,
the true observation, what the agent was shown). :mod:`cir.adapters.driver` turns a
:class:`Framework` into the harness the paired replayer runs (the same perturbation point,
conditions, prefix checks and restore check as for any agent), and checks each turn
against the session: a tool answer that is not what the env said (the framework changed it),
a tool that answered without the env (side effects outside it), several tool calls at once
or more than one env action per call are refused with one line, never recorded
approximately.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cir.util.errors import CirError

#: why a framework agent draws one sample (``--samples`` above 1 is refused for it)
FRAMEWORK_SAMPLES = ("a framework agent draws one sample: its framework makes its own model calls, which cir "
                     "cannot give each draw its own seed, and its replies are kept by request, so K draws of "
                     "one state would be one draw K times; run it with --samples 1 (an openai:MODEL agent "
                     "samples, each draw with its own seed)")

if TYPE_CHECKING:  # pragma: no cover
    from cir.envs.base import Env
    from cir.episode.perturb import Persistence, Perturbation
    from cir.episode.transcript import Transcript


class ForkRefused(CirError):
    """A framework feature the adapter cannot fork exactly (named in the message)."""


class EpisodeOver(BaseException):  # noqa: N818 - not an error: the run's end
    """Raised by :func:`env_step` when a run in the framework's own loop is over: the env said done
    (raised after the action, which the session has recorded) or the budget is spent (raised before
    it). A ``BaseException`` so that no framework takes it for a tool's error and shows it to the
    model; the adapter catches it and reads the messages so far."""


def refuse(feature: str, why: str) -> ForkRefused:
    """The one-line refusal of a feature that cannot be forked exactly."""
    return ForkRefused(f"cannot fork {feature} exactly: {why}")


class Framework(Protocol):
    """What an adapter implements (see the module's text)."""

    name: str

    def params(self) -> dict[str, Any]: ...

    def tools(self) -> dict[str, tuple[str, ...]]: ...

    def turn(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]: ...


@dataclass
class EnvCall:
    """One env action a tool sent: what the env answered and what the agent was shown."""

    action: str
    observation: str
    shown: str
    done: bool
    won: bool
    events: list[str] = field(default_factory=list)
    recovery: str | None = None  # the live recovery (the harness) that sent it, not the agent's tool call


class EnvSession:
    """The env of one turn, as the agent's tools reach it through :func:`env_step`.

    ``transcript`` is the episode so far (its env-action count places a ``perturbation``,
    which replaces the shown text of its env action as the harness does); ``calls`` records
    every action sent. A session is used by one turn; threads of other turns have their own.
    """

    def __init__(self, env: Env, transcript: Transcript, perturbation: Perturbation | None = None, *,
                 budget: tuple[int, int] | None = None, snapshots: bool = False,
                 persistence: Persistence | None = None) -> None:
        self.env = env
        self.transcript = transcript
        self.perturbation = perturbation
        #: how long the perturbed read lasts (the harness's: a command sent again may be shown it again)
        self.persistence = persistence
        self.calls: list[EnvCall] = []
        #: (model turns, env actions) at most, for a run in the framework's own loop (None: the
        #: harness keeps the budget, one turn at a time)
        self.budget = budget
        #: env snapshots after each env action, by the number of actions (a live rewind goes back)
        self.snapshots: dict[int, Any] | None = {0: env.snapshot()} if snapshots else None
        #: the router's decisions in a live run: (delay, operation or None)
        self.decisions: list[tuple[int, str | None]] = []
        self.recovering: str | None = None  # the live recovery calling a tool now (not the agent)
        self.model_turns = 0  # model calls of a run in the framework's own loop, where its hook counts them
        self.rewound_at: int | None = None  # a live rewind: the env actions sent before it

    def model_turn(self) -> None:
        """Count one model call of a run in the framework's own loop (its hook calls this before the
        model is asked); once the budget's model turns are spent, the run ends (EpisodeOver). A turn
        whose tool call the framework answered itself (arguments that are not JSON) sends nothing to
        the env, yet it is a model turn, as in cir's harness: counted only in :meth:`step`, Inspect's
        react loop ran past the budget on them."""
        if self.budget is None or self.recovering:
            return
        if self.model_turns >= self.budget[0]:
            raise EpisodeOver(f"budget of {self.budget[0]} model turns spent")
        self.model_turns += 1

    def step(self, action: str) -> str:
        from cir.episode.harness import send
        from cir.episode.transcript import AGENT, HARNESS, Step, Transcript

        if not isinstance(action, str):
            raise CirError(f"env_step: the action must be text, got {type(action).__name__} {action!r:.60}")
        if self.budget is not None and not self.recovering:
            turns, actions = self.budget
            agent_calls = sum(1 for c in self.calls if not c.recovery)
            if agent_calls >= turns or self.transcript.env_actions + len(self.calls) >= actions:
                raise EpisodeOver(f"budget of {turns} model turns and {actions} env actions spent")
        obs, done, won = send(self.env, action)
        step = Step(AGENT, action, action, obs, obs, done=done, won=won)
        n = self.transcript.env_actions + len(self.calls) + 1
        if self.perturbation is not None and n == self.perturbation.at:
            so_far = [Step(AGENT, c.action, c.action, c.observation, c.shown) for c in self.calls]
            step = self.perturbation.apply(Transcript(self.transcript.task_id, self.transcript.task_text,
                                                      [*self.transcript.steps, *so_far]), step)
        elif self.persistence is not None and not self.persistence.once and not self.recovering:
            # the turn's earlier calls as steps: a live recovery's query is the harness's (a refresh)
            so_far = [Step(HARNESS if c.recovery else AGENT, c.action, c.action, c.observation, c.shown,
                           events=list(c.events)) for c in self.calls]
            step = self.persistence.again([*self.transcript.steps, *so_far], step)
        self.calls.append(EnvCall(action, obs, step.shown, done, won, list(step.events), self.recovering))
        if self.snapshots is not None:
            self.snapshots[self.transcript.env_actions + len(self.calls)] = self.env.snapshot()
        if done and self.budget is not None:
            raise EpisodeOver("the env is done")  # the harness ends the episode here, as cir's does
        return step.shown


_SESSION: contextvars.ContextVar[EnvSession | None] = contextvars.ContextVar("cir_env_session", default=None)


def env_step(action: str) -> str:
    """Send ``action`` to the env of the episode running now and return what the agent is shown
    (the observation, or the perturbed text at the perturbation point). Call it from each
    env tool of a framework agent; outside a ``cir`` run it is an error."""
    session = _SESSION.get()
    if session is None:
        raise CirError("env_step: no cir episode is running in this context (run the agent through "
                       "`cir run --agent FRAMEWORK:MODULE:ATTR`, or an adapter's episode())")
    return session.step(action)


@contextmanager
def bound(session: EnvSession) -> Iterator[EnvSession]:
    """:func:`env_step` reaches ``session`` inside the block (in this context and the tasks and
    threads that copy it)."""
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


def current_session() -> EnvSession | None:
    """The session :func:`env_step` reaches here (an adapter passes it on to a thread or an event
    loop that does not copy the context)."""
    return _SESSION.get()
