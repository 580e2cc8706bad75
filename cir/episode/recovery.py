"""Recovery operations: what the harness may do at a decision point.

Each operation is a small object with a ``name`` and
``apply(env, transcript, checkpoints) -> Step`` returning one harness step
(``actor="harness"``) that the harness appends (:meth:`cir.episode.harness.Harness.recover`).
An operation reaches the env directly (the harness's env, a
:class:`~cir.envs.counting.CountingEnv` when the work is counted), never through the
harness. Operations spend budget like anything else: a refresh ``look`` is an env
action; a rewind keeps everything already spent. Each class implements one entry of the
registry :data:`cir.episode.operations.OPERATIONS` (its name, text and cost are read from
there); a new operation is an entry there and a subclass here.

- ``refresh``: send the env's refresh query (one env action; ALFWorld's is ``look``, see
  :class:`cir.envs.base.Env`) and show the result as a refreshed observation
  (:data:`REFRESH_PREFIX` + the env's text).
- ``refresh_ablated``: the same env query, the content hidden behind
  :data:`ABLATED_TEXT` (separates "the env was queried" from "the agent read the answer").
- ``replan``: no env query; :data:`REPLAN_TEXT` asks the agent to reconsider.
- ``placebo``: no env query, no content: :data:`PLACEBO_TEXT` only. The control that
  isolates what an extra harness message alone does to the agent.
- ``rewind`` (AgentRewind, ReTRAIL): restore the agent context and the env to the
  checkpoint before the perturbed observation, and add a short memory of the abandoned
  branch (:data:`REWIND_HEADER` + the actions it took).

The texts are constants of :mod:`cir.episode.protocol` (imported here) so that agents, features and
:meth:`cir.episode.transcript.Transcript.from_messages` can recognise them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cir.envs.base import DEFAULT_REFRESH_QUERY, refresh_for
from cir.episode.operations import OPERATIONS, OperationInfo, check_operations, operation_info
from cir.episode.protocol import REWIND_HEADER
from cir.episode.transcript import HARNESS, Step, Transcript
from cir.util.errors import CirError

if TYPE_CHECKING:  # pragma: no cover
    from cir.envs.base import Env

REWIND_MEMORY_ACTIONS = 8  # at most this many abandoned actions are listed


@dataclass
class Checkpoints:
    """Env snapshots an operation may return to.

    ``snapshots`` maps a transcript step count n to the env snapshot taken right after
    the first n steps. ``anchor`` is the index (0-based) of the perturbed step: a rewind
    goes back to the latest checkpoint strictly before it.
    """

    snapshots: dict[int, Any] = field(default_factory=dict)
    anchor: int | None = None

    def before(self, index: int) -> tuple[int, Any]:
        """The latest checkpoint taken after at most ``index`` steps."""
        keys = [k for k in self.snapshots if k <= index]
        if not keys:
            raise CirError(f"rewind: no checkpoint before step {index}")
        k = max(keys)
        return k, self.snapshots[k]


class Operation:
    """Base of recovery operations: a registry entry (``info``) and :meth:`apply`."""

    info: OperationInfo

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def queries_env(self) -> bool:
        return self.info.queries_env

    def apply(self, env: Env, transcript: Transcript, checkpoints: Checkpoints) -> Step:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Refresh(Operation):
    """Send ``query`` (the env's refresh query, :func:`cir.envs.base.refresh_query`) and show
    the answer. An env that says which action re-reads what a suspect observation was about
    (``refresh_for``, :func:`cir.envs.base.refresh_for`: a tool world re-runs the read-only call
    that produced the suspect result) is sent that action instead; the suspect step is the one
    ``checkpoints.anchor`` indexes (the perturbed step)."""

    info = OPERATIONS["refresh"]

    def __init__(self, query: str = DEFAULT_REFRESH_QUERY) -> None:
        self.query = query

    def shown(self, obs: str) -> str:
        return f"{self.info.text} {obs}"

    def action(self, env: Env, transcript: Transcript, checkpoints: Checkpoints) -> str:
        """What this refresh sends: the env's ``refresh_for`` of the suspect step's action when it
        gives one, else :attr:`query`."""
        anchor = checkpoints.anchor
        suspect = transcript.steps[anchor].action if anchor is not None and 0 <= anchor < len(transcript.steps) \
            else None
        found = refresh_for(env, suspect)
        return self.query if found is None else found

    def apply(self, env: Env, transcript: Transcript, checkpoints: Checkpoints) -> Step:
        query = self.action(env, transcript, checkpoints)
        obs, done, won = env.step(query)
        return Step(actor=HARNESS, reply=self.name, action=query, observation=obs,
                    shown=self.shown(obs), events=[f"recovery:{self.name}"], done=done, won=won)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(query={self.query!r})"


class RefreshAblated(Refresh):
    """The same env query as :class:`Refresh`, its answer hidden."""

    info = OPERATIONS["refresh_ablated"]

    def shown(self, obs: str) -> str:
        return self.info.text


class Message(Operation):
    """An operation that only shows its fixed text (no env query)."""

    def apply(self, env: Env, transcript: Transcript, checkpoints: Checkpoints) -> Step:
        return Step(actor=HARNESS, reply=self.name, action=None, observation=None,
                    shown=self.info.text, events=[f"recovery:{self.name}"])


class Replan(Message):
    info = OPERATIONS["replan"]


class Placebo(Message):
    info = OPERATIONS["placebo"]


class Rewind(Operation):
    info = OPERATIONS["rewind"]

    def apply(self, env: Env, transcript: Transcript, checkpoints: Checkpoints) -> Step:
        anchor = checkpoints.anchor
        if anchor is None:
            raise CirError(f"task {transcript.task_id}: rewind needs the perturbed step as anchor")
        target, snap = checkpoints.before(anchor)
        env.restore(snap)
        abandoned = [s for s in transcript.steps[target:] if s.action is not None and s.actor != HARNESS]
        return Step(actor=HARNESS, reply=self.name, action=None, observation=None,
                    shown=rewind_memory(abandoned), events=[f"recovery:{self.name}"],
                    rewind_to=target)


def rewind_memory(abandoned: list[Step]) -> str:
    """The short memory of the abandoned branch carried into the restored context."""
    actions = [s.action for s in abandoned if s.action]
    if not actions:
        return f"{REWIND_HEADER} No actions were lost."
    shown = actions[-REWIND_MEMORY_ACTIONS:]
    more = len(actions) - len(shown)
    listed = "; ".join(shown)
    prefix = f"(and {more} earlier) " if more else ""
    return (
        f"{REWIND_HEADER} In the abandoned attempt you took {len(actions)} action(s): "
        f"{prefix}{listed}. Some observations in that attempt may have been unreliable; "
        "check what you see now before relying on them."
    )


#: The implementation of each registry entry.
IMPLEMENTATIONS: dict[str, type[Operation]] = {
    cls.info.name: cls for cls in (Refresh, RefreshAblated, Replan, Rewind, Placebo)
}
if list(IMPLEMENTATIONS) != list(OPERATIONS):  # pragma: no cover - a new entry without a class
    raise ImportError(f"cir.episode.recovery implements {list(IMPLEMENTATIONS)}, the registry "
                      f"lists {list(OPERATIONS)}")


def register_operation(implementation: type[Operation]) -> type[Operation]:
    """Add a harness's own recovery as an operation (usable as a class decorator): ``implementation``
    is an :class:`Operation` subclass whose ``info`` (an :class:`OperationInfo`) names it, says what it
    shows and whether it queries the env; a subclass of :class:`Refresh` sends the env's refresh query
    and shows its answer after its own text. From then on every part of the package knows it: the
    grid (``--operations NAME``), the transcript read back from messages, a framework's rendering of
    it (a query as the harness's tool call), the tables and the router. Register it where the agent
    is defined (a framework agent's module: ``cir run`` imports it before it reads the grid), in
    every process. A name or a text another operation has is refused."""
    info = getattr(implementation, "info", None)
    if not (isinstance(implementation, type) and issubclass(implementation, Operation)
            and isinstance(info, OperationInfo)):
        raise CirError("register_operation: expected an Operation subclass with an OperationInfo as its info")
    known = OPERATIONS.get(info.name)
    if known is not None:
        if IMPLEMENTATIONS.get(info.name) is implementation:
            return implementation  # the same module imported again
        raise CirError(f"register_operation: {info.name!r} is already an operation ({known.meaning})")
    clash = next((op for op in OPERATIONS.values() if op.recognises(info.text) or info.recognises(op.text)), None)
    if clash is not None or not info.text.strip():
        raise CirError(f"register_operation: the text {info.text!r} of {info.name!r} cannot be told from "
                       f"{clash.name if clash else 'no text'}'s; give it a text of its own")
    OPERATIONS[info.name] = info
    IMPLEMENTATIONS[info.name] = implementation
    return implementation


def get_operation(name: str, refresh_query: str = DEFAULT_REFRESH_QUERY) -> Operation:
    """The operation named ``name`` (the refresh operations send ``refresh_query``); an
    unknown name is a :class:`CirError`."""
    cls = IMPLEMENTATIONS[operation_info(name).name]
    return cls(refresh_query) if issubclass(cls, Refresh) else cls()


def parse_operations(spec: str | list[str] | tuple[str, ...]) -> list[Operation]:
    """A comma-separated list (or sequence) of operation names, duplicates refused."""
    return [get_operation(n) for n in check_operations(spec)]
