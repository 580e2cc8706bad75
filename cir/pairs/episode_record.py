"""One episode of the store: which arm or branch of a task it is, its outcome and transcript.

Every task stores its episodes: the ``factual`` run; per condition the ``no_recovery``
*arm* (for ``clean`` the factual run itself, ``same_as="factual"``, with no transcript of
its own); per condition, delay and operation the ``recovery`` *branch* from the arm's state
(not ``executed``, and without a transcript, when the arm ended before the delay). An arm
and a branch of the same condition and delay are a *pair*: one row of the paired table.
With ``--samples K`` each executed branch point also has K - 1 further draws (``sample`` 1 to
K - 1) of the arm's continuation from there (role ``no_recovery`` with its ``delay``) and of
each operation's branch.

:class:`EpisodeRecord` is the typed record; :meth:`EpisodeRecord.to_dict` and
:meth:`EpisodeRecord.from_dict` are its JSON form, used only where the store writes and
reads (``cir.pairs.store``). The explanation trace is kept beside the transcript, never in
it; features never read these records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cir.episode.transcript import TraceEvent, Transcript
from cir.util.errors import CirError, CirValueError

FACTUAL, ARM, BRANCH = "factual", "no_recovery", "recovery"
ROLES = (FACTUAL, ARM, BRANCH)


@dataclass(frozen=True)
class EpisodeRecord:
    """See the module docstring. ``won``, ``env_actions`` and ``model_turns`` are the
    transcript's (``env_actions``/``model_turns`` None without one)."""

    task_id: str
    role: str
    condition: str
    transcript: Transcript | None = None
    delay: int | None = None
    operation: str | None = None
    executed: bool = True
    branch_step: int | None = None
    same_as: str | None = None
    won: bool = False
    env_actions: int | None = None
    model_turns: int | None = None
    #: which draw of a sampling agent (``--samples``): 0, the arm or branch itself; above 0, a
    #: further continuation from the branch point (an arm's, with ``delay`` and ``branch_step``)
    sample: int = 0

    @classmethod
    def of(cls, task_id: str, role: str, condition: str, transcript: Transcript | None, *,
           won: bool | None = None, **where: Any) -> EpisodeRecord:
        """The record of ``transcript`` (or of an episode without one, whose outcome is ``won``);
        ``where``: ``delay``, ``operation``, ``executed``, ``branch_step``, ``same_as``."""
        if transcript is None:
            return cls(task_id, role, condition, None, won=bool(won), **where)
        return cls(task_id, role, condition, transcript, won=bool(transcript.won),
                   env_actions=transcript.env_actions, model_turns=transcript.model_turns, **where)

    @property
    def is_arm(self) -> bool:
        return self.role == ARM

    @property
    def is_branch(self) -> bool:
        return self.role == BRANCH

    def to_dict(self) -> dict[str, Any]:
        """The store's JSON form (without the ``kind`` the store adds)."""
        t = self.transcript
        return {
            "task_id": self.task_id, "role": self.role, "condition": self.condition,
            "delay": self.delay, "operation": self.operation, "executed": self.executed,
            "branch_step": self.branch_step, "same_as": self.same_as, "won": self.won,
            "env_actions": self.env_actions, "model_turns": self.model_turns,
            # the steps as plain dicts without deep copies (Transcript.to_dict's keys and values)
            "transcript": None if t is None else {
                "task_id": t.task_id, "task_text": t.task_text,
                "steps": [{**s.__dict__, "events": list(s.events)} for s in t.steps]},
            "trace": None if t is None else [e.to_dict() for e in t.trace],
            **({"sample": self.sample} if self.sample else {}),  # a store of one draw reads as before
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "episode store") -> EpisodeRecord:
        """The record of one stored line; a CirError names the source and what is missing."""
        try:
            transcript = None
            if data.get("transcript") is not None:
                transcript = Transcript.from_dict(data["transcript"])
                transcript.trace = [TraceEvent.from_dict(e) for e in data.get("trace") or []]
            role = data["role"]
            if role not in ROLES:
                raise CirValueError(f"episode record role {role!r}: expected factual, arm or branch")
            return cls(task_id=str(data["task_id"]), role=role, condition=str(data["condition"]),
                       transcript=transcript, delay=data.get("delay"), operation=data.get("operation"),
                       executed=bool(data.get("executed", True)), branch_step=data.get("branch_step"),
                       same_as=data.get("same_as"), won=bool(data.get("won")),
                       env_actions=data.get("env_actions"), model_turns=data.get("model_turns"),
                       sample=int(data.get("sample") or 0))
        except (KeyError, TypeError, ValueError) as err:
            raise CirError(f"{source}: an episode record that is not one of this cir "
                           f"({type(err).__name__}: {err})") from None
