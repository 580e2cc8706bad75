"""A model-free agent for TextWorld's cooking games that reads only what it is shown.

``CookingAgent(seed=...).act(context)`` reads the context into beliefs
(:mod:`cir.families.textworld_cooking.agent.beliefs`) and answers with one TextWorld command
(:mod:`cir.families.textworld_cooking.agent.decide`): it explores the house, reads the
cookbook in the kitchen, gathers the ingredients, slices, dices, chops and cooks them as the
recipe says, prepares the meal and eats it.

Like ALFWorld's built-in agent it is deterministic and explains itself: every random choice
is keyed by the task, the seed and content (:class:`~.mechanisms.Draws`), every way it
fails, is rescued or is harmed is a named mechanism (:data:`~.mechanisms.MECHANISMS`) whose
chance is one parameter of :data:`DEFAULTS` (0 turns it off), and :meth:`act_traced` names
the mechanisms behind each reply for the episode's explanation trace. It is not a
calibrated instrument: its defaults were set once on the calibration cohort (generator
seed 1, ``benchmarks/textworld_cooking_bench.py``) and never on a study.

Beliefs are memoised by context prefix (a rolling digest of the messages), so a call reads
only the messages its longest known prefix lacks; replies are the same with ``memo=False``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cir.agents.sampling import check_temperature, sampled_builtin, sampling_settings
from cir.families.textworld_cooking.agent.beliefs import Beliefs, fold, initial_beliefs
from cir.families.textworld_cooking.agent.decide import Decider
from cir.families.textworld_cooking.agent.mechanisms import MECHANISMS, Draws, Fired
from cir.util.errors import CirError

#: how strongly each kind of harness message invites reconsidering (read from its words)
INVITE = {"invite_replan": 1.0, "invite_refresh": 0.6, "invite_query": 0.6, "invite_rewind": 0.6,
          "invite_message": 0.4}

#: the chance of each mechanism (set on the calibration cohort; PARAMETERS says what each means)
DEFAULTS: dict[str, float] = {
    "overlook": 0.15, "wrong_tool": 0.04, "reground": 0.5, "self_check": 0.25,
    "stale_location": 0.8, "hidden_take": 0.8, "hidden_cook": 0.8, "hidden_cut": 0.8, "missing_text": 0.8,
    "harness_recheck": 0.8, "refresh_correction": 0.9, "refresh_reread": 0.9, "over_correct": 0.25, "interruption": 0.3,
    **INVITE,
}

PARAMETERS: dict[str, str] = {
    **{m.parameter: f"chance: {m.meaning}" for m in MECHANISMS.values() if m.parameter},
    **{f"invite_{kind}": f"how strongly {what} invites reconsidering (scales harness_recheck, "
                         "over_correct and interruption)"
       for kind, what in (("replan", "a request to re-plan"), ("refresh", "a refreshed text"),
                          ("query", "a note that the environment was queried"),
                          ("rewind", "a note that the state was restored"), ("message", "any other harness message"))},
}

_MEMO_LIMIT = 50_000


class CookingAgent:
    """The model-free cooking agent (see the module docstring). ``act`` reads only ``context``.

    ``overrides`` sets single parameters (``{"hidden_cook": 1.0}``); they are part of
    :meth:`settings`, so they name the agent and key its replies. ``temperature`` above 0 makes
    it sample (``sampled_choice``, :mod:`cir.agents.sampling`; :meth:`sample`).
    """

    def __init__(self, seed: int = 0, *, overrides: dict[str, float] | None = None, memo: bool = True,
                 temperature: float = 0.0) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise CirError(f"agent seed {seed!r}: expected an integer")
        unknown = sorted(set(overrides or {}) - set(DEFAULTS))
        if unknown:
            raise CirError(f"agent parameter {unknown[0]!r}: unknown; expected one of {', '.join(DEFAULTS)}")
        for key, value in (overrides or {}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise CirError(f"agent parameter {key} = {value!r}: expected a chance from 0 to 1")
        self.seed = seed
        self.temperature = check_temperature(temperature)
        self.sample_index = 0  # sample 0 is the agent itself (cir.agents.sampling)
        self.params = {**DEFAULTS, **{k: float(v) for k, v in (overrides or {}).items()}}
        self.name = "builtin-cooking"
        self.memo = memo
        # draws keyed by the seed only: every override shares them (common random numbers)
        self._key = json.dumps({"agent": "builtin-cooking", "seed": seed}, sort_keys=True).encode()
        self._memo: dict[bytes, tuple[Beliefs, list[Fired]]] = {}

    def settings(self) -> dict[str, Any]:
        """The parameters and the seed: with the context they fix the reply."""
        return {"agent": "builtin-cooking", "version": 1, "seed": self.seed, **self.params,
                **sampling_settings(self.temperature, self.sample_index)}

    def sample(self, index: int) -> CookingAgent:
        """The agent drawing its ``index``-th sample (:mod:`cir.agents.sampling`): itself at
        temperature 0, else the same agent whose ``sampled_choice`` draws are keyed by ``index``."""
        return sampled_builtin(self, index)

    def act(self, context: list[dict[str, str]]) -> str:
        """The next reply: one TextWorld command."""
        return self.act_traced(context)[0]

    def act_traced(self, context: list[dict[str, str]]) -> tuple[str, list[Fired], list[Fired]]:
        """The next reply, what fired reading the last message, and what fired deciding."""
        if not context:
            return "look", [], []
        task_text = context[0].get("content") or ""
        draws = Draws(hashlib.blake2b(self._key + task_text.encode(), digest_size=16).digest())
        beliefs, read_fired = self._read(context, draws)
        decider = Decider(beliefs, self.params, draws)
        reply = decider.decide()
        if self.temperature > 0:
            reply = decider.sampled(reply, self.temperature, self.sample_index)
        return reply, read_fired, decider.fired

    def _read(self, context: list[dict[str, str]], draws: Draws) -> tuple[Beliefs, list[Fired]]:
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
            state = (initial_beliefs(context[0].get("content") or ""), [])
        beliefs, fired = state
        for i in range(start + 1, len(context)):
            beliefs, fired = fold(beliefs, context[i].get("role") or "", context[i].get("content") or "",
                                  draws, self.params)
            if self.memo:
                if len(self._memo) >= _MEMO_LIMIT:
                    self._memo.clear()
                self._memo[digests[i]] = (beliefs, fired)
        return beliefs, list(fired)


def make_cooking_agent(spec: str = "builtin", *, seed: int = 0) -> CookingAgent:
    """An ``agent_factory(spec, seed=)`` for :class:`~cir.pairs.settings.RunSettings`: the
    cooking agent for ``builtin`` (or ``builtin-cooking``)."""
    if spec not in ("builtin", "builtin-cooking"):
        raise CirError(f"agent {spec!r}: the textworld-cooking family's model-free agent is 'builtin'")
    return CookingAgent(seed=seed)
