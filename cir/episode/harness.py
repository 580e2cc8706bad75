"""One episode: the agent acts on what the harness shows it, within the paper's budgets.

The harness owns the loop between an :class:`~cir.agents.base.Agent` and an
:class:`~cir.envs.base.Env`. It records every step in a
:class:`~cir.episode.transcript.Transcript` (the action, the true observation, the shown
observation, harness events) and is the only place where perturbations and recovery
operations touch an episode. The agent sees nothing but ``transcript.context()``.

Runs are resumable: :meth:`Harness.run` continues an existing transcript on an env
that is in the matching state, and can stop when the transcript reaches a given
number of env actions. The replayer uses that to branch from snapshots.

Budgets: at most ``max_turns`` model turns (agent replies, thoughts included) and
``max_actions`` env actions (harness queries such as a refresh ``look`` included).

The harness uses the env it is given and counts only the agent's work (:class:`Costs`);
to count env work, give it a :class:`~cir.envs.counting.CountingEnv`, which the
recovery operations then use too. Hooks (:class:`Hook`) are how other layers act
during a run: :class:`SnapshotHook` here, the router's hook in :mod:`cir.router.runtime`.

Threads: the replayer may run several branches of one task at once with one harness
(:mod:`cir.pairs.schedule`). Its reply cache then answers a context that two branches ask
for at once with one agent call (:class:`~cir.util.singleflight.SingleFlight`), so the
costs are those of a sequential run, and an agent is called from one thread at a time
unless it declares ``thread_safe = True`` (the LLM agent does: its requests overlap).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cir.agents.sampling import sample_agent
from cir.envs.base import refresh_query
from cir.episode.perturb import Persistence, parse_persistence
from cir.episode.protocol import (
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    NOTHING_HAPPENS,
    THINK_ACK,
    THINK_PREFIX,
)
from cir.episode.recovery import Checkpoints, Operation, get_operation
from cir.episode.transcript import AGENT, Step, TraceEvent, Transcript, context_hash
from cir.util.errors import CirValueError
from cir.util.singleflight import SingleFlight

if TYPE_CHECKING:  # pragma: no cover
    from cir.agents.base import Agent
    from cir.envs.base import Env
    from cir.episode.perturb import Perturbation


@dataclass
class Costs:
    """The agent's work actually done: calls (cache misses) and cache hits."""

    agent_calls: int = 0
    cache_hits: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Hook(Protocol):
    """Called after every env action of the agent (not after harness steps)."""

    def after_env_action(self, harness: Harness, env: Env, transcript: Transcript) -> None: ...


class Harness:
    """Runs episodes of one agent with fixed budgets; replies cached by context hash.

    ``reply_cache`` (a dict, possibly shared between harnesses of the same agent)
    maps ``context_hash(context, agent.params())`` to the reply, so identical
    contexts in different arms cost one agent call. ``on_call`` is called after each
    agent call (for progress reports; it cannot change the episode). ``persistence`` (a
    :class:`~cir.episode.perturb.Persistence` or its text: ``once``, ``refresh``, N): how long a
    perturbed read lasts; beyond ``once``, a command sent again after the perturbation point is
    shown the perturbed text again while the stale cache lasts (:meth:`Persistence.again`).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        max_turns: int = DEFAULT_MAX_TURNS,
        max_actions: int = DEFAULT_MAX_ACTIONS,
        reply_cache: dict[str, str] | None = None,
        on_call: Callable[[], None] | None = None,
        persistence: Persistence | str | int | None = None,
    ) -> None:
        if max_turns < 1 or max_actions < 1:
            raise CirValueError(f"harness budgets max_turns={max_turns!r}, max_actions={max_actions!r}: "
                                "expected integers >= 1")
        self.agent = agent
        self.max_turns = int(max_turns)
        self.max_actions = int(max_actions)
        self.reply_cache: dict[str, Any] = {} if reply_cache is None else reply_cache
        self.agent_params: dict[str, Any] = dict(agent.params())  # they key the reply cache
        self.costs = Costs()
        self.on_call = on_call
        self.persistence = parse_persistence(persistence)
        self._lock = threading.Lock()  # the costs
        self._in_flight: SingleFlight[tuple[Any, bool]] = SingleFlight()
        self._samples: dict[int, Harness] = {}  # this harness for other samples of the agent
        # an agent that does not say it is thread-safe is called by one thread at a time
        self._agent_lock = None if getattr(agent, "thread_safe", False) is True else threading.Lock()

    def sampled(self, index: int) -> Harness:
        """This harness for sample ``index`` of its agent (:mod:`cir.agents.sampling`): the same
        budgets, reply cache, costs, locks and calls in flight, with the agent drawing that
        sample, whose settings key its replies apart. Sample 0 is this harness."""
        if index == 0:
            return self
        with self._lock:
            twin = self._samples.get(index)
            if twin is None:
                twin = object.__new__(type(self))  # a framework's harness stays one
                twin.__dict__.update(self.__dict__)  # shared parts, not copies
                twin.agent = sample_agent(self.agent, index)
                twin.agent_params = dict(twin.agent.params())
                self._samples[index] = twin
        return twin

    def reset(self, env: Env, task_id: str) -> Transcript:
        """Reset ``env`` and start a transcript whose task text is the reset text."""
        return Transcript(task_id=task_id, task_text=env.reset())

    # -- the agent -----------------------------------------------------------------------
    def reply(self, transcript: Transcript) -> str:
        """The agent's next reply for the transcript's context (from the cache if seen)."""
        return self._reply_traced(transcript)[0]

    def _reply_traced(self, transcript: Transcript) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
        """The reply and, for an agent that explains itself (``act_traced``), the
        mechanisms that fired reading the last message and deciding the reply."""
        context = transcript.context()
        key = context_hash(context, self.agent_params)
        cached = self.reply_cache.get(key)
        if cached is None:  # ask (or wait for the branch that is asking right now)
            (cached, asked), shared = self._in_flight.do(key, lambda: self._ask(key, context))
            if asked and not shared:
                return cached
        with self._lock:
            self.costs.cache_hits += 1
        return cached if isinstance(cached, tuple) else (cached, (), ())

    def _ask(self, key: str, context: list[dict[str, str]]) -> tuple[Any, bool]:
        """The cached reply (and False), or the agent's reply, cached (and True)."""
        cached = self.reply_cache.get(key)
        if cached is not None:
            return cached, False
        traced = getattr(self.agent, "act_traced", None)
        with self._agent_lock or _NO_LOCK:
            if traced is not None:
                reply, read, decided = traced(context)
            else:
                reply, read, decided = self.agent.act(context), (), ()
        if not isinstance(reply, str):
            reply = "" if reply is None else str(reply)
        with self._lock:
            self.costs.agent_calls += 1
        result = (reply, tuple(read), tuple(decided))
        self.reply_cache[key] = result
        if self.on_call is not None:
            self.on_call()
        return result, True

    # -- budgets ---------------------------------------------------------------------------
    def can_continue(self, transcript: Transcript) -> bool:
        """Not done and both budgets left."""
        return (
            not transcript.done
            and transcript.model_turns < self.max_turns
            and transcript.env_actions < self.max_actions
        )

    # -- one model turn -------------------------------------------------------------------
    def turn(self, env: Env, transcript: Transcript, perturbation: Perturbation | None = None) -> Step:
        """Ask the agent once and append the resulting step (a thought or an env action)."""
        reply, read, decided = self._reply_traced(transcript)
        at = len(transcript.steps)
        transcript.trace += [TraceEvent(at - 1, at, f.mechanism, f.about) for f in read]
        transcript.trace += [TraceEvent(at, at, f.mechanism, f.about) for f in decided]
        text = reply.strip()
        if text.lower().startswith(THINK_PREFIX):
            step = Step(actor=AGENT, reply=reply, action=None, observation=None, shown=THINK_ACK)
        else:
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            action = lines[0] if lines else ""
            obs, done, won = send(env, action)
            step = Step(actor=AGENT, reply=reply, action=action, observation=obs, shown=obs,
                        done=done, won=won)
            if perturbation is not None and transcript.env_actions + 1 == perturbation.at:
                step = perturbation.apply(transcript, step)
            else:  # a stale cache serves the same command the perturbed text again
                step = self.persistence.again(transcript.steps, step)
        transcript.steps.append(step)
        return step

    def play(
        self,
        env: Env,
        transcript: Transcript,
        *,
        until_env_actions: int | None = None,
        perturbation: Perturbation | None = None,
        hooks: list[Hook] | tuple[Hook, ...] = (),
    ) -> Transcript:
        """Play ``transcript`` on until done, a budget is spent, or ``until_env_actions``.

        ``env`` must be in the state the transcript left it in (fresh after
        :meth:`reset`, or restored from a snapshot taken at this point). With
        ``until_env_actions`` play stops right after that env action, before the
        agent's next reply, so a branch can start there. ``perturbation`` replaces the
        shown text of its env action when the run reaches it. ``hooks`` are called
        after each env action of the agent.
        """
        while self.can_continue(transcript):
            if until_env_actions is not None and transcript.env_actions >= until_env_actions:
                break
            step = self.turn(env, transcript, perturbation)
            if step.action is not None:
                for hook in hooks:
                    hook.after_env_action(self, env, transcript)
        if not transcript.done and not self.can_continue(transcript):
            spent = (f"model turns {transcript.model_turns}/{self.max_turns}"
                     if transcript.model_turns >= self.max_turns
                     else f"env actions {transcript.env_actions}/{self.max_actions}")
            last = len(transcript.steps) - 1
            transcript.trace.append(TraceEvent(last, last + 1, "budget", spent))
        return transcript

    def recover(
        self,
        env: Env,
        transcript: Transcript,
        operation: Operation | str,
        checkpoints: Checkpoints | None = None,
    ) -> Step:
        """Apply a recovery operation now and append its harness step."""
        op = get_operation(operation, refresh_query(env)) if isinstance(operation, str) else operation
        step = op.apply(env, transcript, checkpoints or Checkpoints())
        at = len(transcript.steps)
        if step.rewind_to is not None:
            lost = sum(1 for s in transcript.steps[step.rewind_to:] if s.action is not None)
            transcript.trace.append(TraceEvent(at, at, "rewind", f"{lost} env actions discarded"))
        transcript.steps.append(step)
        return step

    def episode(
        self,
        env: Env,
        task_id: str,
        *,
        perturbation: Perturbation | None = None,
        hooks: list[Hook] | tuple[Hook, ...] = (),
    ) -> Transcript:
        """A whole episode from reset."""
        transcript = self.reset(env, task_id)
        return self.play(env, transcript, perturbation=perturbation, hooks=hooks)

    def episode_with_snapshots(self, env: Env, task_id: str) -> tuple[Transcript, dict[int, Any]]:
        """A whole episode from reset, and an env snapshot after the reset and after every env
        action, keyed by the step count (so any prefix can be continued or branched)."""
        transcript = self.reset(env, task_id)
        hook = SnapshotHook()
        hook.snapshots[0] = env.snapshot()
        self.play(env, transcript, hooks=[hook])
        return transcript, hook.snapshots


_NO_LOCK = contextlib.nullcontext()


def harness_for(agent: Agent, **options: Any) -> Harness:
    """The harness that runs ``agent``: a :class:`Harness`, or the agent's own when it drives its
    own loop (a framework agent, :mod:`cir.adapters`, gives one by ``make_harness(**options)``)."""
    make = getattr(agent, "make_harness", None)
    return make(**options) if callable(make) else Harness(agent, **options)


def send(env: Env, action: str) -> tuple[str, bool, bool]:
    """Send one action (empty text gets ``Nothing happens.`` without an env call)."""
    if not action.strip():
        return NOTHING_HAPPENS, False, False
    obs, done, won = env.step(action)
    return str(obs), bool(done), bool(won)


class SnapshotHook:
    """Take an env snapshot after chosen env actions (all when ``at`` is None).

    ``snapshots`` maps the transcript's step count at that moment to the snapshot, so a
    branch starts from ``transcript.prefix(n)`` and ``env.restore(snapshots[n])``.
    """

    def __init__(self, at: set[int] | None = None) -> None:
        self.at = at
        self.snapshots: dict[int, Any] = {}

    def after_env_action(self, harness: Harness, env: Env, transcript: Transcript) -> None:
        if self.at is None or transcript.env_actions in self.at:
            self.snapshots[len(transcript.steps)] = env.snapshot()
