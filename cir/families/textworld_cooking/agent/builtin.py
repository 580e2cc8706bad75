"""A model-free agent for TextWorld's cooking games that reads only what it is shown.

``CookingAgent(seed=...).act(context)`` reads the context into beliefs
(:mod:`cir.families.textworld_cooking.agent.beliefs`) and answers with one TextWorld command
(:mod:`cir.families.textworld_cooking.agent.decide`): it explores the house, reads the
cookbook in the kitchen, gathers the ingredients, slices, dices, chops and cooks them as the
recipe says, prepares the meal and eats it.

Like ALFWorld's built-in agent it is deterministic and explains itself: every random choice
is keyed by the task, the seed and content (:class:`cir.agents.modelfree.Draws`), every way it
fails, is rescued or is harmed is a named mechanism (:data:`~.mechanisms.MECHANISMS`) whose
chance is one parameter of :data:`DEFAULTS` (0 turns it off), and :meth:`act_traced` names
the mechanisms behind each reply for the episode's explanation trace. It is not a
calibrated instrument: its defaults were set once on the calibration cohort (generator
seed 1, ``benchmarks/textworld_cooking_bench.py``) and never on a study.

Beliefs are memoised by context prefix (:class:`cir.agents.modelfree.ModelFreeAgent`, the fold
every model-free agent shares), so a call reads only the messages its longest known prefix
lacks; replies are the same with ``memo=False``.
"""

from __future__ import annotations

from typing import Any

from cir.agents.modelfree import ModelFreeAgent
from cir.families.textworld_cooking.agent.beliefs import fold, initial_beliefs
from cir.families.textworld_cooking.agent.decide import Decider
from cir.families.textworld_cooking.agent.mechanisms import MECHANISMS
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


class CookingAgent(ModelFreeAgent):
    """The model-free cooking agent (see the module docstring). ``act`` reads only ``context``.

    ``overrides`` sets single parameters (``{"hidden_cook": 1.0}``); they are part of
    :meth:`settings`, so they name the agent and key its replies. ``temperature`` above 0 makes
    it sample (``sampled_choice``, :mod:`cir.agents.sampling`; :meth:`sample`).
    """

    name = "builtin-cooking"
    mechanisms = MECHANISMS

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
        # draws keyed by the seed only: every override shares them (common random numbers)
        params = {**DEFAULTS, **{k: float(v) for k, v in (overrides or {}).items()}}
        super().__init__({"agent": "builtin-cooking", "seed": seed}, params, start=initial_beliefs, fold=fold,
                         decider=Decider, memo=memo, temperature=temperature)

    def params(self) -> dict[str, Any]:
        """The parameters and the seed (and, when it samples, the temperature and the sample
        index): with the context they fix the reply."""
        return {"agent": "builtin-cooking", "version": 1, "seed": self.seed, **self.skill,
                **self.sampling_params()}
