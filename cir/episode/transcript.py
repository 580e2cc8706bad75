"""The transcript of one episode: plain data shared by the harness, the replayer,
the features, the store and the router.

A transcript is a list of steps. Each step is either the agent's (a reply: an env
action or a ``think: ...`` thought) or the harness's (a recovery operation such as
``refresh``). The context the agent sees is derived from the steps, never stored
separately, so two arms with identical steps have identical contexts by construction.

Context format (OpenAI-style chat messages)::

    [{"role": "user", "content": task_text},
     {"role": "assistant", "content": reply_1}, {"role": "user", "content": shown_1},
     ...]

A harness step adds one ``user`` message (its ``shown`` text). A ``rewind`` step
(``rewind_to`` set) cuts the context back to the first ``rewind_to`` steps before
adding its message, which carries the memory of the abandoned branch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from cir.envs.base import DEFAULT_REFRESH_QUERY
from cir.episode.operations import operation_of_text
from cir.episode.protocol import RECOVERY_CALL_PREFIX, THINK_PREFIX
from cir.util.errors import CirError, CirValueError

AGENT = "agent"
HARNESS = "harness"


@dataclass
class Step:
    """One model turn of the agent, or one harness intervention.

    actor: ``"agent"`` or ``"harness"``.
    reply: the agent's raw reply (agent steps); the operation name (harness steps).
    action: the env action sent, or None (a thought, or a harness step without env query).
    observation: the true observation the env returned for ``action`` (None without action).
    shown: the text the agent was shown after this step (differs from ``observation``
        only where the harness perturbed or hid it; ``OK.`` after a thought).
    events: harness events at this step, e.g. ``"perturb:stale2"``, ``"recovery:refresh"``.
    done, won: the env's flags after this step.
    rewind_to: for a rewind, the number of earlier steps the context is cut back to.
    """

    actor: str
    reply: str
    action: str | None
    observation: str | None
    shown: str
    events: list[str] = field(default_factory=list)
    done: bool = False
    won: bool = False
    rewind_to: int | None = None

    @property
    def is_env_action(self) -> bool:
        return self.action is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        return cls(**data)


@dataclass(frozen=True)
class TraceEvent:
    """A mechanism that fired in an episode (the explanation trace, see :class:`Transcript`).

    step: the index of the step it is about (the message read, or the reply decided).
    at: the index of the step whose decision recorded it (a prefix of ``n`` steps keeps
        the events with ``at < n``: the decision of step ``n`` is not in it).
    mechanism, about: the mechanism's name (``cir.families.alfworld.agent.mechanisms.MECHANISMS``) and what
        it was about.
    """

    step: int
    at: int
    mechanism: str
    about: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "at": self.at, "mechanism": self.mechanism, "about": self.about}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceEvent:
        return cls(int(data["step"]), int(data["at"]), str(data["mechanism"]), str(data.get("about", "")))


@dataclass
class Transcript:
    """An episode: the task text (first observation, with the goal) and the steps.

    ``trace`` is the explanation trace: which mechanisms of the agent and the harness fired
    at which step. It is kept beside the steps, never in them: it is not part of the
    context, the fingerprint or :meth:`to_dict`, and features never read it.
    """

    task_id: str
    task_text: str
    steps: list[Step] = field(default_factory=list)
    trace: list[TraceEvent] = field(default_factory=list, compare=False, repr=False)

    # -- derived counts -------------------------------------------------------------
    @property
    def model_turns(self) -> int:
        return sum(1 for s in self.steps if s.actor == AGENT)

    @property
    def env_actions(self) -> int:
        return sum(1 for s in self.steps if s.action is not None)

    @property
    def done(self) -> bool:
        return bool(self.steps) and self.steps[-1].done

    @property
    def won(self) -> bool:
        return any(s.won for s in self.steps)

    # -- what the agent sees ----------------------------------------------------------
    def visible_steps(self) -> list[Step]:
        """The steps whose messages are in the agent's current context (after rewinds)."""
        visible: list[Step] = []
        for step in self.steps:
            if step.rewind_to is not None:
                visible = visible_prefix(self.steps, step.rewind_to)
            visible.append(step)
        return visible

    def context(self) -> list[dict[str, str]]:
        """The message list the agent sees next (see module docstring)."""
        messages = [{"role": "user", "content": self.task_text}]
        for step in self.visible_steps():
            if step.actor == AGENT:
                messages.append({"role": "assistant", "content": step.reply})
            messages.append({"role": "user", "content": step.shown})
        return messages

    def env_path(self, n_steps: int | None = None) -> list[str]:
        """The env actions that reproduce, from a reset, the env state after the first
        ``n_steps`` steps (all by default): a rewind restores the env to its earlier state."""
        path: list[str] = []
        for step in self.steps[:n_steps]:
            if step.rewind_to is not None:
                path = self.env_path(step.rewind_to)
            if step.action is not None:
                path.append(step.action)
        return path

    def prefix(self, n_steps: int) -> Transcript:
        """A copy holding the first ``n_steps`` steps (and their part of the trace)."""
        return Transcript(self.task_id, self.task_text,
                          [Step(**{**s.__dict__, "events": list(s.events)}) for s in self.steps[:n_steps]],
                          [e for e in self.trace if e.at < n_steps])

    def steps_until_env_action(self, k: int) -> int:
        """Number of steps up to and including the k-th env action (1-based); 0 for k=0."""
        if k == 0:
            return 0
        seen = 0
        for i, step in enumerate(self.steps):
            if step.action is not None:
                seen += 1
                if seen == k:
                    return i + 1
        raise CirValueError(f"transcript {self.task_id} has only {seen} env actions, asked for {k}")

    def fingerprint(self) -> str:
        """A hash of everything in the transcript (for prefix checks)."""
        payload = json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    # -- plain data ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "task_text": self.task_text,
            "steps": [s.to_dict() for s in self.steps],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transcript:
        return cls(data["task_id"], data["task_text"], [Step.from_dict(s) for s in data["steps"]])

    @classmethod
    def from_messages(cls, task_id: str, messages: list[dict[str, Any]], *,
                      refresh_query: str = DEFAULT_REFRESH_QUERY,
                      action_of: Callable[[str, dict[str, Any]], str] | None = None) -> Transcript:
        """A transcript from a chat-style harness's message list (the inverse of :meth:`context`).

        Leading ``system`` messages are skipped; the first ``user`` message is the task
        text. Each ``assistant`` reply must be answered by one ``user`` (or ``tool``)
        message: the text shown after it (a reply starting with ``think:`` is a thought,
        no env action). A ``user`` message that answers no reply is the harness's: a
        recovery operation's text (:data:`cir.episode.operations.OPERATIONS`) becomes that
        operation's step, one that queries the env with ``refresh_query`` as its env action;
        any other such message is a harness step named ``message``. True observations are
        unknown to a chat list: ``observation`` is None except for a refresh's answer.

        Tool calls (OpenAI's format: an ``assistant`` message with ``tool_calls``, answered by
        the ``tool`` message of the same ``tool_call_id``) are read too. The call's env action
        is ``action_of(name, arguments)`` (default :func:`tool_action`); the step's reply is
        that action (then the message's text, if any, on the next lines). A call whose id
        starts with :data:`~cir.episode.protocol.RECOVERY_CALL_PREFIX` was made by the harness
        (a refresh done by calling the observing tool): it is that recovery's step, never an
        agent step. A message with several tool calls (parallel tool calls) is refused: the
        order in which they reach the env is not the message's, so the run cannot be forked
        exactly. A call whose arguments are not JSON (a reply cut off at the token limit), answered
        by the framework's own tool message (its error), sent nothing to the env: it is an agent
        step without an env action, its reply the arguments' text, its event ``INVALID_CALL``, as
        the pairing driver records it.
        """
        i = 0
        while i < len(messages) and _role(messages, i) == "system":
            i += 1
        if i >= len(messages) or _role(messages, i) not in _SHOWN:
            raise CirError(f"messages[{i}]: expected the task as the first user message")
        transcript = cls(task_id, _content(messages, i))
        i += 1
        while i < len(messages):
            role = _role(messages, i)
            if role == "assistant" and messages[i].get("tool_calls"):
                malformed = malformed_call(messages, i)
                if malformed is not None:  # the framework answered it itself: a reply that sent nothing
                    call_id, raw = malformed
                    if i + 1 >= len(messages) or _role(messages, i + 1) != "tool" \
                            or messages[i + 1].get("tool_call_id") != call_id:
                        raise CirError(f"messages[{i}]: the tool call {call_id!r} is not answered by the "
                                       "tool message that follows it")
                    transcript.steps.append(Step(AGENT, raw, None, None, _content(messages, i + 1),
                                                 events=[INVALID_CALL]))
                    i += 2
                    continue
                call = tool_call_of(messages, i)
                if i + 1 >= len(messages) or _role(messages, i + 1) != "tool" \
                        or messages[i + 1].get("tool_call_id") != call["id"]:
                    raise CirError(f"messages[{i}]: the tool call {call['id']!r} is not answered by the "
                                   "tool message that follows it")
                shown = _content(messages, i + 1)
                if call["id"].startswith(RECOVERY_CALL_PREFIX):  # its action: the call the harness sent
                    transcript.steps.append(_recovery_call_step(
                        shown, (action_of or tool_action)(call["name"], call["arguments"]), i))
                else:
                    action = (action_of or tool_action)(call["name"], call["arguments"])
                    text = messages[i].get("content") or ""
                    transcript.steps.append(Step(AGENT, tool_call_reply(action, text if isinstance(text, str) else ""),
                                                 action, None, shown))
                i += 2
            elif role == "assistant":
                if i + 1 >= len(messages) or _role(messages, i + 1) not in _SHOWN:
                    raise CirError(f"messages[{i}]: an assistant reply without the user message "
                                   "that answers it (ask the router after the observation is added)")
                transcript.steps.append(_agent_step(_content(messages, i), _content(messages, i + 1)))
                i += 2
            elif role in _SHOWN:
                transcript.steps.append(_harness_step(_content(messages, i), refresh_query))
                i += 1
            else:
                raise CirError(f"messages[{i}]: role {role!r}; expected system (first), user, tool "
                               "or assistant")
        return transcript


_SHOWN = ("user", "tool")


def _role(messages: list[dict[str, Any]], i: int) -> str:
    message = messages[i]
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise CirError(f"messages[{i}]: expected a dict with a 'role' and a 'content'")
    return message["role"]


def _content(messages: list[dict[str, Any]], i: int) -> str:
    content = messages[i].get("content")
    if not isinstance(content, str):
        raise CirError(f"messages[{i}]: 'content' must be text, got {type(content).__name__}")
    return content


#: The event of an agent step whose tool call's arguments were not JSON (the framework answered it
#: itself, nothing was sent to the env).
INVALID_CALL = "invalid_tool_call"


def malformed_call(messages: list[dict[str, Any]], i: int) -> tuple[str, str] | None:
    """``(id, arguments text)`` of the one tool call of ``messages[i]`` when its arguments are text
    that is not JSON; None otherwise (no such call, several calls, or arguments that parse)."""
    calls = messages[i].get("tool_calls")
    if not isinstance(calls, list) or len(calls) != 1 or not isinstance(calls[0], dict):
        return None
    function = calls[0].get("function")
    if not isinstance(function, dict) or not isinstance(calls[0].get("id"), str) \
            or not isinstance(function.get("name"), str):
        return None
    raw = function.get("arguments")
    if not isinstance(raw, str) or not raw:
        return None
    try:
        json.loads(raw)
    except ValueError:
        return calls[0]["id"], raw
    return None


#: Where ``parallel_tool_calls=False`` goes in each framework (docs/frameworks.md, "What cannot be forked is refused").
PARALLEL_OFF = ("LangGraph: ChatOpenAI(..., model_kwargs={'parallel_tool_calls': False}) for create_agent "
                "and create_react_agent, model.bind_tools(tools, parallel_tool_calls=False) in a StateGraph; "
                "Agents SDK: Agent(model_settings=ModelSettings(parallel_tool_calls=False)); "
                "Inspect: GenerateConfig(parallel_tool_calls=False) on its model")


def tool_call_of(messages: list[dict[str, Any]], i: int) -> dict[str, Any]:
    """The one tool call of ``messages[i]`` as ``{"id", "name", "arguments"}`` (arguments
    parsed from their JSON text); several calls (parallel tool calls) are refused."""
    calls = messages[i]["tool_calls"]
    if not isinstance(calls, list) or len(calls) != 1:
        n = len(calls) if isinstance(calls, list) else calls
        raise CirError(f"messages[{i}]: {n} tool calls in one message: parallel tool calls cannot be "
                       "forked exactly (the env sees them in an order the messages do not record); "
                       f"turn them off: {PARALLEL_OFF}")
    call = calls[0]
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(call.get("id"), str) \
            or not isinstance(function.get("name"), str):
        raise CirError(f"messages[{i}]: a tool call needs an 'id' and a 'function' with a 'name'")
    raw = function.get("arguments") or "{}"
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise CirError(f"messages[{i}]: the arguments of tool call {call['id']!r} are not JSON: "
                       f"{raw!r:.80}") from None
    if not isinstance(arguments, dict):
        raise CirError(f"messages[{i}]: the arguments of tool call {call['id']!r} must be a JSON object")
    return {"id": call["id"], "name": function["name"], "arguments": arguments}


def tool_action(name: str, arguments: dict[str, Any]) -> str:
    """The env action a tool call sends, by default: its one text argument (``act(command=
    "go to desk 1")``), its name when it has no arguments (``look()``), else the name and the
    argument values (``take(item="key")`` is ``take key``)."""
    values = list(arguments.values())
    if len(values) == 1 and isinstance(values[0], str) and len(arguments) == 1 and name in COMMAND_TOOLS:
        return values[0]
    return " ".join([name, *(str(v) for v in values)])


#: The tool names whose one text argument is the whole env action (a "send a command" tool).
COMMAND_TOOLS = frozenset({"act", "action", "command", "step", "send", "execute"})


def tool_call_reply(action: str, text: str = "") -> str:
    """The reply of an agent step that was a tool call: the action, then the message's text."""
    text = text.strip()
    return f"{action}\n{text}" if text else action


def _recovery_call_step(shown: str, refresh_query: str, i: int) -> Step:
    op = operation_of_text(shown)
    if op is None or not op.queries_env:
        raise CirError(f"messages[{i + 1}]: a harness tool call ({RECOVERY_CALL_PREFIX}...) must answer "
                       f"with a refresh's text, got {shown!r:.80}")
    return _harness_step(shown, refresh_query)


def _agent_step(reply: str, shown: str) -> Step:
    text = reply.strip()
    if text.lower().startswith(THINK_PREFIX):
        return Step(AGENT, reply, None, None, shown)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # the action the harness sent, as Harness.turn reads a reply
    return Step(AGENT, reply, lines[0] if lines else "", None, shown)


def _harness_step(shown: str, refresh_query: str) -> Step:
    op = operation_of_text(shown)
    if op is None:
        return Step(HARNESS, "message", None, None, shown, [])
    # the answer a refresh showed is the one true observation a chat list holds
    obs = shown[len(op.text):].strip() if op.shows_answer else None
    return Step(HARNESS, op.name, refresh_query if op.queries_env else None, obs, shown,
                [f"recovery:{op.name}"])


def visible_prefix(steps: list[Step], n: int) -> list[Step]:
    """The visible steps of the first ``n`` steps (rewinds inside them applied)."""
    return Transcript("", "", list(steps[:n])).visible_steps()


def context_hash(context: list[dict[str, str]], settings: dict[str, Any]) -> str:
    """Stable key of (agent settings, context): agent replies are cached under it."""
    payload = json.dumps({"settings": settings, "context": context}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
