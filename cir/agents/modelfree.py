"""The shared parts of a model-free agent that explains itself: named mechanisms, draws keyed
by content, and the memoised fold of a context into beliefs.

A family's built-in agent (ALFWorld's, the cooking family's, or one a user writes for their
own family, ``docs/own-environment.md``) is an instrument: it believes what it is shown, every
way it fails, is rescued or is harmed is a named :class:`Mechanism`, and every random choice is
a :class:`Draws` call keyed by the task and by *content* (the mechanism's name and what it is
about), never by a message's position. So an extra harness message changes an episode only
through what it says and through the mechanisms whose role a recovery can reach
(:data:`DIVERGENCE_ROLES`), which ``cir explain`` checks.

At a ``temperature`` above 0 such an agent samples the way a language model does
(:mod:`cir.agents.sampling`): after deciding, a softmax draws among the decided command and a
few plausible alternatives its decider names, keyed by the sample index, the command and the
decider's ``turn`` (the ``sampled_choice`` mechanism, :func:`sampled_choice`); ``sample(i)``
is the same agent drawing its ``i``-th sample. At temperature 0 it is unchanged.

:class:`ModelFreeAgent` holds what such agents share: ``act``/``act_traced`` read the context
into beliefs one message at a time (the family's ``fold``), memoised by context prefix (a
rolling digest of the messages, so a call reads only the messages its longest known prefix
lacks), and answer from the beliefs (the family's ``Decider``); a family's agent gives those
parts, its mechanisms and its params.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cir.agents.sampling import check_temperature, sampling_params, softmax_choice, twin
from cir.util.deprecation import former_method
from cir.util.errors import CirError

#: what a mechanism is: a slip of a plain run, a self-correction, an error a stale or missing
#: text causes, a rescue or a harm a harness message causes, a draw of a sampling agent, or
#: something the harness does
ROLES = ("slip", "self_correction", "error", "rescue", "harm", "sampling", "harness")
#: the roles through which a recovery operation can change an episode (and, at a temperature,
#: the sampled choices through which two draws of one state part)
DIVERGENCE_ROLES = ("rescue", "harm", "sampling", "harness")

_MEMO_LIMIT = 50_000


@dataclass(frozen=True)
class Mechanism:
    """One named mechanism: its role (:data:`ROLES`), the agent parameter that sets its chance
    (None when the harness, not the agent, decides it) and what it does, in one line."""

    name: str
    role: str
    parameter: str | None
    meaning: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise CirError(f"mechanism {self.name!r}: role {self.role!r}; expected one of {', '.join(ROLES)}")


#: the mechanism every agent's episodes have, which the harness fires (``cir.episode.harness``)
BUDGET = Mechanism("budget", "harness", None,
                   "the episode stopped on the model-turn or env-action budget, which recovery steps also spend")


def sampled_choice(alternatives: str) -> Mechanism:
    """The mechanism of a sampling agent's draws (only at a temperature above 0), naming the
    ``alternatives`` its decider offers (``"a look, the inventory, an exit of the room"``)."""
    return Mechanism("sampled_choice", "sampling", None,
                     f"at a temperature, a draw of its softmax picks a plausible alternative ({alternatives}) "
                     "instead of its decided command; keyed by the sample index and the command, so two "
                     "samples of one state part only here")


def mechanism_table(mechanisms: Iterable[Mechanism]) -> dict[str, Mechanism]:
    """The mechanisms by name (a name given twice is a CirError)."""
    table: dict[str, Mechanism] = {}
    for m in mechanisms:
        if m.name in table:
            raise CirError(f"mechanism {m.name!r}: named twice")
        table[m.name] = m
    return table


def divergence_mechanisms(mechanisms: Iterable[Mechanism]) -> frozenset[str]:
    """The names of the mechanisms through which a recovery can change an episode (a family's
    ``Family.mechanisms``)."""
    return frozenset(m.name for m in mechanisms if m.role in DIVERGENCE_ROLES)


@dataclass(frozen=True)
class Fired:
    """A mechanism that fired, and what it was about (``"fridge 1"``, ``"red potato"``)."""

    mechanism: str
    about: str


class Draws:
    """Numbers in [0, 1) keyed by a task key, a mechanism name and what it is about."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def u(self, name: str, *about: object) -> float:
        salt = "\x1f".join([name, *(str(a) for a in about)]).encode("utf-8")
        return int.from_bytes(hashlib.blake2b(self.key + b"\x1e" + salt, digest_size=8).digest(), "big") / 2**64

    def chance(self, name: str, prob: float, *about: object) -> bool:
        """True with probability ``prob`` (clipped to [0, 1]); always False at 0."""
        return prob > 0 and self.u(name, *about) < min(prob, 1.0)


class ModelFreeAgent:
    """An agent that folds its context into beliefs and answers from them, naming the mechanisms
    behind each reply (the harness keeps them in the episode's explanation trace).

    A subclass sets ``name`` and ``mechanisms`` (:func:`mechanism_table`), supplies
    :meth:`params` and calls ``super().__init__(key, params, start=, fold=, decider=, memo=)``
    with its belief functions: ``start(task_text) -> beliefs``, ``fold(beliefs, role, content,
    draws, params) -> (beliefs, fired)`` and ``decider(beliefs, params, draws)``, an object whose
    ``decide()`` is the reply and whose ``fired`` is what fired deciding (and, for an agent that
    samples, whose ``alternatives(reply)`` are the plausible other commands and ``turn`` how far
    into the episode it is, so each turn draws afresh). ``key`` keys the draws together
    with the task text; it holds the agent's name and seed, never its parameters, so every
    profile and override shares one set of draws (common random numbers: changing a parameter
    changes only the choices that parameter decides). The memo is per instance, so its digests
    may leave the parameters out. ``temperature`` (0: no sampling) makes it sample; a subclass's
    settings add :meth:`sampling_params`.
    """

    name: str = "modelfree"
    mechanisms: Mapping[str, Mechanism] = {}

    def __init__(self, key: Mapping[str, Any], params: dict[str, float], *, start: Callable[[str], Any],
                 fold: Callable[..., tuple[Any, list[Fired]]], decider: Callable[..., Any], memo: bool = True,
                 temperature: float = 0.0) -> None:
        self.skill = params  # the skill profile: each mechanism's chance
        self.temperature = check_temperature(temperature)
        self.sample_index = 0  # sample 0 is the agent itself (cir.agents.sampling)
        self.memo = memo
        self._start, self._fold, self._decider = start, fold, decider
        self._key = json.dumps(dict(key), sort_keys=True).encode()
        self._memo: dict[bytes, tuple[Any, list[Fired]]] = {}

    def params(self) -> dict[str, Any]:  # pragma: no cover - every agent has its own
        raise NotImplementedError

    def sampling_params(self) -> dict[str, Any]:
        """What its params add when it samples: the temperature and the sample index (nothing at
        temperature 0, so the agent's label is unchanged)."""
        return sampling_params(self.temperature, self.sample_index)

    sampling_settings = former_method("ModelFreeAgent.sampling_settings()", sampling_params)  # before cir 0.2.0

    def sample(self, index: int) -> Any:
        """The agent drawing its ``index``-th sample (:mod:`cir.agents.sampling`): at temperature 0
        (its replies do not depend on the index) or for its own index the agent itself, else its
        twin whose ``sampled_choice`` draws are keyed by ``index``; reading a context does not
        sample, so the twin shares this agent's memo of beliefs."""
        if self.temperature == 0 or index == self.sample_index:
            return self
        return twin(self, index)

    # -- the shared part --------------------------------------------------------------------
    def act(self, context: list[dict[str, str]]) -> str:
        """The next reply."""
        return self.act_traced(context)[0]

    def act_traced(self, context: list[dict[str, str]]) -> tuple[str, list[Fired], list[Fired]]:
        """The next reply, what fired reading the last message, and what fired deciding."""
        if not context:
            return "look", [], []
        task_text = context[0].get("content") or ""
        draws = Draws(hashlib.blake2b(self._key + task_text.encode(), digest_size=16).digest())
        beliefs, read_fired = self._read(context, draws)
        decider = self._decider(beliefs, self.skill, draws)
        reply = decider.decide()
        if self.temperature > 0:
            reply = self._sampled(decider, draws, reply)
        decided = decider.fired
        for f in (*read_fired, *decided):
            if f.mechanism not in self.mechanisms:
                raise CirError(f"agent {self.name}: fired {f.mechanism!r}, which is not one of its mechanisms "
                               f"({', '.join(self.mechanisms)})")
        return reply, read_fired, decided

    def _sampled(self, decider: Any, draws: Draws, reply: str) -> str:
        """The command a softmax at the temperature draws among ``reply`` and the decider's
        alternatives (``sampled_choice``), keyed by the sample index, the command and the turn."""
        u = draws.u("sampled_choice", self.sample_index, reply, decider.turn)
        chosen = softmax_choice(reply, decider.alternatives(reply), self.temperature, u)
        if chosen != reply:
            decider.fired.append(Fired("sampled_choice", f"{reply} -> {chosen}"))
        return chosen

    def _read(self, context: list[dict[str, str]], draws: Draws) -> tuple[Any, list[Fired]]:
        """Beliefs after the whole context and what fired at its last message (memoised)."""
        digests = [hashlib.blake2b(draws.key, digest_size=16).digest()]
        for msg in context[1:]:
            h = hashlib.blake2b(digests[-1], digest_size=16)
            h.update((msg.get("role") or "").encode() + b"\x1f" + (msg.get("content") or "").encode())
            digests.append(h.digest())
        start, state = 0, None
        if self.memo:
            for i in range(len(digests) - 1, -1, -1):
                if digests[i] in self._memo:
                    start, state = i, self._memo[digests[i]]
                    break
        if state is None:
            state = (self._start(context[0].get("content") or ""), [])
        beliefs, fired = state
        for i in range(start + 1, len(context)):
            beliefs, fired = self._fold(beliefs, context[i].get("role") or "", context[i].get("content") or "",
                                        draws, self.skill)
            if self.memo:
                if len(self._memo) >= _MEMO_LIMIT:
                    self._memo.clear()
                self._memo[digests[i]] = (beliefs, fired)
        return beliefs, list(fired)
