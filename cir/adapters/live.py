"""A framework agent in its own loop at run time: the router as its hook, one live episode.

The paired study runs a framework one turn at a time (:mod:`cir.adapters.driver`); a harness in
production runs the framework's whole loop. Each adapter's native hook (LangGraph middleware,
an Agents SDK hook, an Inspect AI solver step) asks :class:`LiveRouting` before each model call
and applies the :class:`Recovery` it returns in the framework's terms. It reads the message list
as a transcript (:meth:`~cir.episode.transcript.Transcript.from_messages`), decides at the
router's candidate delays after the suspect observation, once, and builds the recovery as the
replayer did when the router was fitted: a refresh shows the observing tool's answer after
:data:`~cir.episode.protocol.REFRESH_PREFIX` (as the harness's tool call), a replan or placebo
its text, a rewind the messages before the suspect reply (the env restored) and its memory.

:func:`live_episode` runs one episode of a framework in its own loop as ``cir episode`` runs
any agent: the factual run, then the run under a condition whose tool answer at the
perturbation point is the perturbed text, with the router (in the framework's hook) deciding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cir.adapters.driver import refresh_call
from cir.adapters.protocol import EnvCall, EnvSession, EpisodeOver, bound, current_session
from cir.envs.base import DEFAULT_REFRESH_QUERY, refresh_for, refresh_query
from cir.episode.operations import operation_info
from cir.episode.perturb import (
    Perturbation,
    find_point,
    lagged_answer,
    parse_conditions,
    parse_persistence,
)
from cir.episode.protocol import (
    DEFAULT_FRACTION,
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    RECOVERY_CALL_PREFIX,
)
from cir.episode.recovery import Checkpoints, Refresh, get_operation
from cir.episode.transcript import AGENT, HARNESS, Step, Transcript, tool_call_of, tool_call_reply
from cir.util.errors import CirError


@dataclass(frozen=True)
class Recovery:
    """A recovery to write into the framework's state: ``text`` as a user message, or as the
    answer of the harness's tool ``call`` (name, arguments, id), or (a rewind) after the first
    ``cut`` messages of the list. A refresh decided where the tool cannot be called at once (an
    asynchronous framework) has ``pending`` set: the adapter calls the tool and gives the answer to
    :meth:`LiveRouting.answered`."""

    operation: str
    text: str
    call: tuple[str, dict[str, Any], str] | None = None
    cut: int | None = None
    pending: bool = False


#: Which env action's answer is suspect in a run outside ``cir``: its number (1 for the first), or a
#: function of each env action and the text it showed that says whether that one is (the first it
#: says so of is the suspect: a read served from a cache, a replica that lags, a call that timed out).
Suspect = int | Callable[[str, str], bool]


class LiveRouting:
    """The router's decisions in a framework's loop (see the module's text). ``tools`` are the
    agent's tool names and parameters, ``call_tool(name, args)`` runs one of them (a refresh
    re-calls the observing tool); each adapter gives both. ``suspect_at``: which env action's answer
    is suspect (:data:`Suspect`; None: the perturbation point of the episode ``cir`` runs).
    ``typed``: the agent's typed tools (:class:`cir.adapters.typed.TypedTools`), whose calls are
    read as the study recorded them and whose refresh re-runs the suspect read, in a ``cir`` episode
    and in production alike."""

    def __init__(self, router: Any, suspect_at: Suspect | None = None, *, typed: Any = None) -> None:
        if suspect_at is not None and not callable(suspect_at) and (
                isinstance(suspect_at, bool) or not isinstance(suspect_at, int) or suspect_at < 1):
            raise CirError(f"router: suspect_at={suspect_at!r}; expected an env action number >= 1 or a function "
                           "(action, shown) -> bool")
        self.router = router
        self.suspect_at = suspect_at
        self.typed = typed
        self.tools: dict[str, tuple[str, ...]] = {}
        self.call_tool: Callable[[str, dict[str, Any]], str] | None = None
        #: every decision so far, (delay, operation or None), in any run (a cir episode's are its session's too)
        self.decisions: list[tuple[int, str | None]] = []

    def decide(self, messages: list[dict[str, Any]]) -> Recovery | None:
        session = current_session()
        if session is not None and session.budget is None:
            return None  # a turn of the paired replayer, which applies the recoveries of its grid itself
        env = session.env if session is not None else None
        query = refresh_query(env) if env is not None else DEFAULT_REFRESH_QUERY
        system = [m for m in messages if m.get("role") == "system"]
        transcript = Transcript.from_messages("live", messages, refresh_query=query,
                                              action_of=self.typed.action_of if self.typed is not None else None)
        at = self._suspect(transcript, session)
        if at is None:
            return None
        steps = transcript.steps
        if not steps or steps[-1].action is None or steps[-1].actor != AGENT:
            return None
        delay = transcript.env_actions - at
        if delay not in self.router.delays or any(s.actor == HARNESS for s in steps):
            return None
        decision = self.router.decide(transcript, delay)
        operation = decision.operation if decision.recover else None
        self.decisions.append((delay, operation))
        if session is not None:
            session.decisions.append((delay, operation))
        if operation is None:
            return None
        # a tool world re-runs the suspect call (the env's refresh_for, or production's typed tools'
        # by the world's rule); other envs get their query
        suspect = transcript.steps[transcript.steps_until_env_action(at) - 1].action
        if env is not None:
            again = refresh_for(env, suspect) or query
        elif self.typed is not None:
            again = self.typed.refresh_for(suspect) or self.typed.refresh_query
        else:
            again = query
        return self._recovery(operation, transcript, at, session, again, len(system))

    def _suspect(self, transcript: Transcript, session: EnvSession | None) -> int | None:
        """The env action whose answer is suspect (1-based), or None (none yet)."""
        if self.suspect_at is None:
            return session.perturbation.at if session is not None and session.perturbation is not None else None
        if not callable(self.suspect_at):
            return self.suspect_at
        acted = [s for s in transcript.steps if s.action is not None]
        return next((k for k, s in enumerate(acted, start=1) if s.actor == AGENT and self.suspect_at(s.action, s.shown)),
                    None)

    def _recovery(self, operation: str, transcript: Transcript, at: int, session: EnvSession | None,
                  query: str | None, n_system: int) -> Recovery:
        info = operation_info(operation)
        index = len(transcript.visible_steps())
        if info.queries_env:
            if query is None:
                raise CirError("router: a refresh has no call to send: the typed tools were given without their "
                               "world (typed_tools(WORLD, ...) knows its refresh query)")
            name, args = refresh_call(self.tools, query)
            pending = Recovery(operation, "", call=(name, args, f"{RECOVERY_CALL_PREFIX}{operation}-{index}"),
                               pending=True)
            if self.call_tool is None:
                return pending
            with recovering(session, operation):
                return self.answered(pending, self.call_tool(name, args))
        if operation == "rewind":
            if session is None or session.snapshots is None:
                raise CirError("router: a rewind needs the env's snapshot from before the suspect observation "
                               "(run the episode through cir: the adapter's episode())")
            k_before = transcript.steps_until_env_action(at - 1)
            checkpoints = Checkpoints(snapshots={k_before: session.snapshots[at - 1]},
                                      anchor=transcript.steps_until_env_action(at) - 1)
            step = get_operation("rewind").apply(session.env, transcript, checkpoints)
            session.rewound_at = len(session.calls)  # the env actions before it that the rewind abandons
            # the messages of the first k_before steps: the task, then two per agent step
            return Recovery(operation, step.shown, cut=n_system + 1 + 2 * k_before)
        return Recovery(operation, info.text)


    def answered(self, pending: Recovery, answer: str) -> Recovery:
        """The refresh ``pending`` with the observing tool's ``answer`` shown as the replayer shows it."""
        op = get_operation(pending.operation)
        text = op.shown(answer) if isinstance(op, Refresh) else operation_info(pending.operation).text
        return Recovery(pending.operation, text, call=pending.call)


@contextmanager
def recovering(session: EnvSession | None, operation: str) -> Iterator[None]:
    """Inside the block, the env actions the tools send are the live recovery's, not the agent's."""
    if session is not None:
        session.recovering = operation
    try:
        yield
    finally:
        if session is not None:
            session.recovering = None


def transcript_of(task_id: str, messages: list[dict[str, Any]], calls: list[EnvCall], query: str,
                  rewound_at: int | None = None) -> Transcript:
    """A live run's transcript: its messages read as steps, each env action's true observation and
    flags from the session's record of it (an unanswered tool call at the end, cut by the
    budget, is not a step). After a live rewind (``rewound_at``: the env actions sent before it) the
    messages no longer hold the abandoned steps: they are the session's calls between the kept
    prefix and the rewind, as the replayer's branch keeps them before its rewind step."""
    last = None  # an answer the run did not write: the env said done (recorded), or the budget (not sent)
    if messages and messages[-1].get("role") == "assistant" and messages[-1].get("tool_calls"):
        last, messages = messages[-1], messages[:-1]
    final = messages[-1] if messages and messages[-1].get("role") == "assistant" else None
    transcript = Transcript.from_messages(task_id, messages[:-1] if final else messages, refresh_query=query)
    rewind = next((i for i, s in enumerate(transcript.steps) if s.reply == "rewind" and s.actor == HARNESS), None)
    if rewind is not None and rewound_at is not None:
        kept = transcript.steps[:rewind]
        start = sum(1 for s in kept if s.action is not None)
        lost = [Step(AGENT, c.action, c.action, c.observation, c.shown) for c in calls[start:rewound_at]]
        transcript.steps[rewind].rewind_to = rewind
        transcript.steps = [*kept, *lost, *transcript.steps[rewind:]]
    acted = [s for s in transcript.steps if s.action is not None]
    if len(calls) == len(acted) + 1 and calls[-1].recovery is not None and final is None:
        # a live refresh whose answer ended the episode (the hook's messages were never written)
        op = get_operation(calls[-1].recovery, query)
        transcript.steps.append(Step(HARNESS, op.name, query, None, op.shown(calls[-1].shown),
                                     [f"recovery:{op.name}"]))
        acted.append(transcript.steps[-1])
    elif len(calls) == len(acted) + 1 and final is None:
        # the agent's action that ended the episode, whose answer the run did not write (a framework
        # that drops the turn on EpisodeOver keeps no message of it: the reply is the action then)
        text = ""
        if last is not None:
            tool_call_of([last], 0)  # one call (parallel calls are refused)
            text = last.get("content") or ""
        transcript.steps.append(Step(AGENT, tool_call_reply(calls[-1].action, text), calls[-1].action, None,
                                     calls[-1].shown))
        acted.append(transcript.steps[-1])
    if len(acted) != len(calls):
        raise CirError(f"task {task_id}: the messages hold {len(acted)} env actions, the env was sent "
                       f"{len(calls)}: a tool answered without the env, or one sent several actions")
    for step, call in zip(acted, calls, strict=True):
        step.action, step.observation, step.done, step.won = call.action, call.observation, call.done, call.won
        step.events = [*step.events, *call.events]
    if final is not None:
        text = final.get("content") or ""
        transcript.steps.append(Step(AGENT, text if isinstance(text, str) else str(text), None, None, "",
                                     events=["final_answer"], done=True))
    return transcript


def live_episode(run: Callable[[str, int], list[dict[str, Any]]], tools: dict[str, tuple[str, ...]], env: Any,
                 task_id: str, condition: str = "clean", *, perturb_fraction: float = DEFAULT_FRACTION,
                 perturb_at: int | None = None, max_turns: int = DEFAULT_MAX_TURNS,
                 max_actions: int = DEFAULT_MAX_ACTIONS,
                 persistence: str | int | None = None) -> tuple[Transcript, Transcript, dict[str, Any]]:
    """``(factual, episode, info)`` of one task (as :func:`cir.router.live.run_episode`), the
    framework in its own loop: ``run(task_text, max_turns)`` runs it from the task to its end and
    returns its messages. The router is the framework's hook (in the agent ``run`` runs); its
    decisions are ``info["router_decisions"]``. ``persistence``: how long the perturbed read lasts
    (:class:`~cir.episode.perturb.Persistence`)."""
    cond = parse_conditions([condition])[0]
    query = refresh_query(env)
    lasting = parse_persistence(persistence)

    def once(perturbation: Perturbation | None) -> tuple[Transcript, EnvSession]:
        task_text = env.reset()
        session = EnvSession(env, Transcript(task_id, task_text), perturbation,
                             budget=(max_turns, max_actions), snapshots=True,
                             persistence=lasting if perturbation is not None else None)
        with bound(session):
            messages = run(task_text, max_turns)
        return transcript_of(task_id, messages, session.calls, query, session.rewound_at), session

    factual, seen = once(None)
    n = factual.env_actions
    info: dict[str, Any] = {"factual_env_actions": n, "factual_success": factual.won, "condition": cond.name}
    point = find_point(factual, [cond], perturb_fraction, perturb_at, env)
    if point.at is None:
        raise CirError(f"task {task_id}: not prefix-feasible under {cond.name}: {point.reason}")
    p = point.at
    lagged = None
    if cond.kind == "lag":  # the answer the command got K env actions earlier, from the factual run's snapshots
        by_step = {factual.steps_until_env_action(a): snap for a, snap in (seen.snapshots or {}).items() if a <= n}
        lagged = lagged_answer(env, by_step, factual, p, cond.k)
    episode, session = once(Perturbation(cond, p, lagged))
    info.update(point=p, router_decisions=[{"delay": d, "recover": op is not None, "operation": op}
                                           for d, op in session.decisions])
    return factual, episode, info


__all__ = ["EpisodeOver", "LiveRouting", "Recovery", "live_episode", "recovering", "transcript_of"]
