"""The pairing driver: a framework agent's turns as the harness the paired replayer runs.

:class:`FrameworkHarness` is a :class:`~cir.episode.harness.Harness` whose turns are the
framework's (:class:`~cir.adapters.protocol.Framework`): a turn renders the transcript as
the framework's message list (:meth:`FrameworkHarness.messages_of`), runs the framework's
own loop for one turn with its env tools bound to the episode's env, and reads the
messages it added back as steps. Everything else is the harness's and the replayer's: the
budgets, the hooks, the perturbation point, the arms and branches from snapshots, the
prefix checks, the restore check, the rows. So a framework agent's study goes through
``cir run`` like any agent's and its run folder is the same.

How a transcript becomes messages. The agent's steps are the framework's own messages,
kept by the harness as the framework wrote them (content, tool call ids and arguments), with
the text the step showed as the tool's answer: the perturbed text in an arm. A harness step
is rendered in the framework's terms: a refresh (and its ablated twin) as the harness calling
the observing tool (a tool call whose id starts with ``RECOVERY_CALL_PREFIX``, answered by
the refresh's text), replan and placebo as a ``user`` message, a rewind as the message list
cut back to the checkpoint before the modified tool result, then its memory as a ``user``
message. The messages of an agent step are found by the messages before it and its reply,
so any branch of any arm is rendered exactly as the framework saw it.

:class:`FrameworkAgent` is the agent object of a run (``cir run --agent langgraph:MODULE:ATTR``):
its name and params label the run, and ``make_harness`` gives the replayer this harness.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from cir.adapters.protocol import FRAMEWORK_SAMPLES, EnvCall, EnvSession, Framework, bound, refuse
from cir.envs.base import DEFAULT_REFRESH_QUERY
from cir.episode.harness import Harness
from cir.episode.operations import OPERATIONS
from cir.episode.perturb import Perturbation
from cir.episode.protocol import RECOVERY_CALL_PREFIX
from cir.episode.transcript import (  # INVALID_CALL: what a step whose tool call's arguments are not JSON records
    AGENT,
    COMMAND_TOOLS,
    INVALID_CALL,
    Step,
    Transcript,
    tool_call_of,
    tool_call_reply,
)
from cir.util.errors import CirError
from cir.util.importing import import_module

#: What a step that ends the run without a tool call (the agent's final answer) records.
FINAL_ANSWER = "final_answer"


def _key(messages: list[dict[str, Any]], reply: str) -> str:
    payload = json.dumps({"messages": messages, "reply": reply}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _one_line(err: BaseException, limit: int = 300) -> str:
    """A framework's error as one line: its type and its text, whitespace folded, cut at ``limit``."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text if len(text) <= limit else text[:limit] + ' ...'}"


def refresh_call(tools: dict[str, tuple[str, ...]], query: str) -> tuple[str, dict[str, str]]:
    """The tool call a refresh is shown as: the tool named as the refresh query with no
    parameters (``look()``), else the one tool that takes one parameter (``act(command=QUERY)``)."""
    if query in tools and not tools[query]:
        return query, {}
    single = [name for name, params in tools.items() if len(params) == 1]
    if len(single) > 1:  # a command tool among others (Inspect's submit(answer), ...)
        single = [name for name in single if name in COMMAND_TOOLS]
    if len(single) == 1:
        return single[0], {tools[single[0]][0]: query}
    raise CirError(f"refresh: no tool of the agent sends {query!r} ({', '.join(tools) or 'no tools'}): "
                   f"give it a tool {query}() or one tool that takes the command")


def called_tools(messages: list[dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """The tools the messages' tool calls name, with their arguments (for a framework whose agent
    does not list its tools: they are a function of the messages, the same in every process)."""
    tools: dict[str, tuple[str, ...]] = {}
    for m in messages:
        for call in m.get("tool_calls") or ():
            if not str(call.get("id", "")).startswith(RECOVERY_CALL_PREFIX):
                try:
                    tools[call["function"]["name"]] = tuple(json.loads(call["function"]["arguments"] or "{}"))
                except ValueError:
                    continue  # a malformed call (the framework answered it itself) names no parameters
    return tools


class FrameworkHarness(Harness):
    """A harness whose turns are a framework's (see the module's text)."""

    def __init__(self, agent: FrameworkAgent, **options: Any) -> None:
        super().__init__(agent, **options)
        self.framework = agent.framework
        self._messages: dict[str, dict[str, Any]] = {}  # an agent step's assistant message
        self._lock_messages = threading.Lock()

    # -- the transcript as the framework's messages ------------------------------------------
    def messages_of(self, transcript: Transcript, query: str = DEFAULT_REFRESH_QUERY) -> list[dict[str, Any]]:
        """The message list the framework continues from (see the module's text)."""
        messages: list[dict[str, Any]] = [{"role": "user", "content": transcript.task_text}]
        for i, step in enumerate(transcript.visible_steps()):
            if step.actor == AGENT:
                if step.action is None and INVALID_CALL not in step.events:
                    raise CirError(f"task {transcript.task_id}: the agent ended the run at step {i}; "
                                   "nothing continues after a final answer")
                with self._lock_messages:
                    said = self._messages.get(_key(messages, step.reply))
                if said is None:
                    raise CirError(f"task {transcript.task_id}: step {i} was not taken by this framework "
                                   "agent in this process (its messages are unknown)")
                messages += [said, {"role": "tool", "tool_call_id": said["tool_calls"][0]["id"],
                                    "content": step.shown}]
            elif OPERATIONS.get(step.reply) is not None and OPERATIONS[step.reply].queries_env:
                name, args = refresh_call(self.framework.tools() or called_tools(messages), step.action or query)
                call_id = f"{RECOVERY_CALL_PREFIX}{step.reply}-{i}"
                messages += [{"role": "assistant", "content": "", "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": name, "arguments": json.dumps(args)}}]},
                    {"role": "tool", "tool_call_id": call_id, "content": step.shown}]
            else:
                messages.append({"role": "user", "content": step.shown})
        return messages

    # -- one turn --------------------------------------------------------------------------
    def turn(self, env: Any, transcript: Transcript, perturbation: Perturbation | None = None) -> Step:
        """One turn of the framework from the transcript; its steps appended (the last returned)."""
        messages = self.messages_of(transcript)
        session = EnvSession(env, transcript, perturbation, persistence=self.persistence)
        with bound(session):
            try:
                added = self.framework.turn([dict(m) for m in messages])
            except CirError:
                raise
            except Exception as err:  # the framework's own (its client's HTTP error, say): one line
                where = f"task {transcript.task_id}, step {len(transcript.steps)}"
                gone = getattr(self.agent.replies, "unreachable", "")  # the proxy knows why, when it does
                raise CirError(f"{where}: {gone}" if gone else
                               f"{where}: the {self.agent.name} agent raised {_one_line(err)}") from err
        with self._lock:
            self.costs.agent_calls += 1
        if self.on_call is not None:
            self.on_call()
        steps = self._steps(transcript, messages, added, session.calls)
        transcript.steps.extend(steps)
        return steps[-1]

    def _steps(self, transcript: Transcript, before: list[dict[str, Any]], added: list[dict[str, Any]],
               calls: list[EnvCall]) -> list[Step]:
        """The steps of a turn's messages, checked against the env calls its tools made."""
        where = f"task {transcript.task_id}, step {len(transcript.steps)}"
        if not added:
            raise CirError(f"{where}: the framework's turn added no message")
        if added[0].get("tool_calls") and len(added[0]["tool_calls"]) != 1:
            tool_call_of(added, 0)  # the refusal of parallel tool calls
        if len(added) > (2 if added[0].get("tool_calls") else 1) or added[0].get("role") != "assistant":
            roles = ", ".join(str(m.get("role")) for m in added)
            raise refuse("this turn", f"{where}: one turn added {roles}; expected one assistant message and "
                         "the answer of its one tool call (messages added at run time by the framework's "
                         "own logic are not part of the paired design)")
        said = added[0]
        if not said.get("tool_calls"):
            if calls:
                raise refuse("a tool call", f"{where}: the env was sent {calls[0].action!r} though the reply "
                             "made no tool call")
            text = said.get("content") or ""
            return [Step(AGENT, text if isinstance(text, str) else str(text), None, None, "",
                         events=[FINAL_ANSWER], done=True)]
        try:
            call = tool_call_of(added, 0)
        except CirError:
            if calls or len(added) != 2 or added[1].get("role") != "tool":
                raise
            # the model's call was malformed (its arguments not JSON) and the framework answered it
            # itself, sending nothing to the env: a reply without an env action, as cir's harness
            # records an unparsable reply, its answer what the framework showed
            raw = added[0]["tool_calls"][0]
            reply = str((raw.get("function") or {}).get("arguments") or "")
            with self._lock_messages:
                self._messages[_key(before, reply)] = {"role": "assistant", "content": said.get("content") or "",
                                                       "tool_calls": said["tool_calls"]}
            return [Step(AGENT, reply, None, None, str(added[1].get("content") or ""), events=[INVALID_CALL])]
        if call["id"].startswith(RECOVERY_CALL_PREFIX):
            raise refuse("this reply", f"{where}: the model's tool call id {call['id']!r} is the harness's")
        if len(calls) != 1:
            if not calls:
                raise refuse(f"tool {call['name']!r}", f"{where}: it answered without the env (a tool with "
                             "side effects outside the env); make each tool a thin call into env_step")
            raise refuse(f"tool {call['name']!r}", f"{where}: one call sent {len(calls)} env actions "
                         f"({', '.join(repr(c.action) for c in calls)}); one tool call is one env action")
        if len(added) != 2 or added[1].get("role") != "tool" or added[1].get("tool_call_id") != call["id"]:
            raise CirError(f"{where}: the tool call {call['id']!r} is not answered by its tool message")
        env = calls[0]
        shown = added[1].get("content")
        if shown != env.shown:
            raise refuse(f"tool {call['name']!r}", f"{where}: the framework showed {shown!r:.80} for the "
                         f"env's answer {env.shown!r:.80} (it must return env_step's text unchanged)")
        text = said.get("content")
        reply = tool_call_reply(env.action, text if isinstance(text, str) else "")
        with self._lock_messages:
            self._messages[_key(before, reply)] = {"role": "assistant", "content": said.get("content") or "",
                                                   "tool_calls": said["tool_calls"]}
        return [Step(AGENT, reply, env.action, env.observation, env.shown, events=list(env.events),
                     done=env.done, won=env.won)]


class FrameworkAgent:
    """A framework agent as ``cir`` runs it: ``framework`` (an adapter's :class:`Framework`),
    its name (``langgraph:MODULE:ATTR``) and params. It drives its own loop, so it is run
    through its harness (``make_harness``), never asked for one reply."""

    thread_safe = True  # each turn starts from its own message list

    def __init__(self, name: str, framework: Framework, params: dict[str, Any],
                 close: Callable[[], None] | None = None, replies: Any = None) -> None:
        self.name = name
        self.framework = framework
        self._params = dict(params)
        self._close = close
        self.replies = replies  # the reply proxy (cir.adapters.replies), or None
        if replies is not None:
            self.cache = replies.cache  # a run that extends another reads its replies through it

    def stats(self) -> dict[str, int] | None:
        """The requests, cache hits and tokens of the reply proxy since the last agent took them."""
        return None if self.replies is None else self.replies.take()

    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def act(self, context: list[dict[str, str]]) -> str:
        raise CirError(f"{self.name}: a framework agent drives its own loop; it runs through its "
                       "harness (cir run, run_task_pairs), not one reply at a time")

    def make_harness(self, **options: Any) -> FrameworkHarness:
        return FrameworkHarness(self, **options)

    def sample(self, index: int) -> FrameworkAgent:
        """Sample 0 is the agent itself; another is refused (``FRAMEWORK_SAMPLES`` says why)."""
        if index == 0:
            return self
        raise CirError(f"{self.name}: sample {index}: {FRAMEWORK_SAMPLES}")

    def close(self) -> None:
        if self._close is not None:
            self._close()


class AsyncLoop:
    """One event loop in a daemon thread per process, for the asynchronous frameworks (the Agents
    SDK, Inspect AI): their clients are bound to the loop they first ran on, so every run of the
    process goes to this one (``asyncio.run`` per call would break a shared client on its second
    call), and the runs of several threads overlap there."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def submit(cls, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Start ``coroutine`` on the loop; its future."""
        with cls._lock:
            if cls._loop is None:
                cls._loop = asyncio.new_event_loop()
                threading.Thread(target=cls._loop.run_forever, name="cir-async-frameworks", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coroutine, cls._loop)

    @classmethod
    def run(cls, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coroutine`` on the loop and wait for its result."""
        return cls.submit(coroutine).result()


def load_target(kind: str, target: str) -> tuple[Any, dict[str, Any]]:
    """The object ``MODULE:ATTR`` (or ``FILE.py:ATTR``) names, and what identifies it: the spec and
    a digest of its module's source (an edited agent is another agent: another label, never a
    resume of the old run)."""
    module_name, _, attr = target.rpartition(":")
    if not module_name or not attr:
        raise CirError(f"agent {kind}:{target}: expected {kind}:MODULE:ATTR (e.g. "
                       f"{kind}:examples.{kind.replace('-', '_')}_agent:agent)")
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as err:
        raise CirError(f"agent {kind}:{target}: cannot import {module_name} ({err}); run from the folder "
                       "that holds it or install it") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise CirError(f"agent {kind}:{target}: {module_name} has no attribute {attr!r}") from None
    source = getattr(module, "__file__", None)
    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16] if source else ""
    return obj, {"target": target, "source": digest}


def framework_agent_of(kind: str, target: str, make: Callable[[Any], Any], *, base_url: str | None = None,
                       api_key_env: str = "OPENAI_API_KEY", cache_dir: Any = None,
                       cache_fallback: Any = ()) -> FrameworkAgent:
    """The framework agent ``KIND:MODULE:ATTR``: its model's client pointed at ``base_url`` through the
    reply proxy (before the module is imported: it builds its model then), the object ``ATTR`` made a
    :class:`Framework` by ``make``, its params the framework's and the target's identity."""
    proxy = serve_from(base_url, api_key_env, cache_dir, cache_fallback)
    obj, identity = load_target(kind, target)
    framework = make(obj)
    return FrameworkAgent(f"{kind}:{target}", framework, {**framework.params(), **identity},
                          close=getattr(framework, "close", None), replies=proxy)


def serve_from(base_url: str | None, api_key_env: str = "OPENAI_API_KEY", cache_dir: Any = None,
               cache_fallback: Any = ()) -> Any:
    """Point the framework's OpenAI client (``OPENAI_BASE_URL``, read when the user's module builds its
    model) at ``base_url`` through this process's reply proxy (:mod:`cir.adapters.replies`, its
    replies kept in ``cache_dir``), with a placeholder key for a local server without one; the proxy."""
    from cir.adapters.replies import proxied

    proxy = proxied(base_url, cache_dir, cache_fallback)
    if proxy is not None:
        os.environ["OPENAI_BASE_URL"] = proxy.base_url
    if not os.environ.get(api_key_env):
        os.environ[api_key_env] = "not-needed"
    if api_key_env != "OPENAI_API_KEY":
        os.environ["OPENAI_API_KEY"] = os.environ[api_key_env]
    return proxy
