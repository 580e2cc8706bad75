"""A model-free ReAct-style agent for ALFWorld that errs like an LLM, deterministically.

``BuiltinAgent(profile, seed).act(context)`` reads its context into beliefs
(:mod:`cir.families.alfworld.agent.beliefs`), picks the next sub-goal of the parsed goal
(:mod:`cir.families.alfworld.agent.goals`), searches unseen receptacles in order of a common-sense prior
(:mod:`cir.families.alfworld.agent.priors`) and answers with one ALFWorld command or a ``think: ...``
thought (:mod:`cir.families.alfworld.agent.decide`). It believes what it is shown, so stale and missing
observations mislead it the way they mislead a language model.

It is a scientific instrument: every way it fails, is rescued or is harmed is a named
mechanism (:data:`cir.families.alfworld.agent.mechanisms.MECHANISMS`) whose chance is a parameter of the
profile (0 turns it off), and every random choice is keyed by the task and by content,
never by a message's position (:class:`cir.agents.modelfree.Draws`). So an extra
harness message changes an episode only through what it says and through the recovery
mechanisms, and :meth:`BuiltinAgent.act_traced` names the mechanisms behind each reply
for the episode's explanation trace.

Beliefs are memoised by context prefix (:class:`cir.agents.modelfree.ModelFreeAgent`, the
fold every model-free agent shares), so a call reads only the messages its longest known
prefix lacks; replies are the same with the memo off (``memo=False``).

``PROFILES`` holds named skill levels (``weak``, ``default``, ``strong``), calibrated with
``benchmarks/agent_calibration.py`` (numbers in ``benchmarks/README.md``).
"""

from __future__ import annotations

from typing import Any

from cir.agents.modelfree import ModelFreeAgent
from cir.families.alfworld.agent.beliefs import fold, initial_beliefs
from cir.families.alfworld.agent.decide import Decider
from cir.families.alfworld.agent.mechanisms import MECHANISMS
from cir.util.errors import CirError

#: how strongly each kind of harness message invites reconsidering (the same in every profile:
#: it is read from the message's words, not a skill)
_INVITE = {"invite_replan": 1.0, "invite_refresh": 0.6, "invite_query": 0.6, "invite_rewind": 0.6,
           "invite_message": 0.4}

#: chances per skill profile; PARAMETERS says what each means, MECHANISMS what it names
PROFILES: dict[str, dict[str, float]] = {
    "weak": {
        "prior_noise": 3.0, "overlook": 0.25, "forget_open": 0.3, "repeat": 0.08, "think": 0.65,
        "loop": 0.55, "give_up": 0.95, "forget_transform": 0.35, "close_after": 0.2, "confuse": 0.35,
        "old_syntax": 0.3, "reground": 0.25, "self_check": 0.01, "notice_loop": 0.03,
        "stale_location": 0.95, "hidden_pickup": 0.95, "hidden_placement": 0.95, "missing_text": 0.95,
        "lost_track": 0.55, "harness_recheck": 0.6, "refresh_correction": 0.6, "interruption": 0.5, "misread_refresh": 0.6,
        "stale_rollback": 0.8, "over_correct": 0.6, "distraction": 0.55, "fatigue": 1.5, **_INVITE,
    },
    "default": {
        "prior_noise": 2.4, "overlook": 0.16, "forget_open": 0.12, "repeat": 0.04, "think": 0.6,
        "loop": 0.3, "give_up": 0.9, "forget_transform": 0.15, "close_after": 0.15, "confuse": 0.22,
        "old_syntax": 0.1, "reground": 0.45, "self_check": 0.02, "notice_loop": 0.05,
        "stale_location": 0.9, "hidden_pickup": 0.9, "hidden_placement": 0.9, "missing_text": 0.9,
        "lost_track": 0.4, "harness_recheck": 0.85, "refresh_correction": 0.8, "interruption": 0.35, "misread_refresh": 0.3,
        "stale_rollback": 0.6, "over_correct": 0.45, "distraction": 0.4, "fatigue": 1.0, **_INVITE,
    },
    "strong": {
        "prior_noise": 0.8, "overlook": 0.03, "forget_open": 0.03, "repeat": 0.01, "think": 0.4,
        "loop": 0.08, "give_up": 0.3, "forget_transform": 0.04, "close_after": 0.1, "confuse": 0.02,
        "old_syntax": 0.0, "reground": 0.75, "self_check": 0.2, "notice_loop": 0.2,
        "stale_location": 0.6, "hidden_pickup": 0.6, "hidden_placement": 0.6, "missing_text": 0.6,
        "lost_track": 0.15, "harness_recheck": 0.95, "refresh_correction": 0.95, "interruption": 0.15, "misread_refresh": 0.1,
        "stale_rollback": 0.3, "over_correct": 0.15, "distraction": 0.15, "fatigue": 0.5, **_INVITE,
    },
}

#: one line per profile parameter (the mechanism of the same name says what fires)
PARAMETERS: dict[str, str] = {
    "prior_noise": "noise on the common-sense search prior (higher: poorer search order)",
    **{m.parameter: f"chance: {m.meaning}" for m in MECHANISMS.values() if m.parameter},
}
PARAMETERS["overlook"] = "chance (x list length / 4) to overlook a wanted item in a list of 3+ items"
PARAMETERS["self_check"] = "chance per consecutive failed command to check its hands with 'inventory'"
PARAMETERS["notice_loop"] = "chance per reply, while it goes round in circles, to notice and return to its plan"
PARAMETERS["harness_recheck"] = ("chance (x how strongly the message invites reconsidering) that a harness "
                                 "message makes it re-check the step it is least sure of")
PARAMETERS["interruption"] = ("chance (x sub-goal weight x how strongly the message invites reconsidering "
                              "x fatigue factor) that a harness message makes it redo or drop the sub-goal in progress")
PARAMETERS["over_correct"] = ("chance (x step weight x how strongly the message invites reconsidering x fatigue "
                              "factor) that a harness message makes it doubt its last, right step and undo or redo it")
PARAMETERS["distraction"] = ("chance that a refreshed text pulls it to what the text names: a look-alike of the "
                             "goal's object known there, or a place it had ruled out")
PARAMETERS["stale_rollback"] = ("chance that a believed text last shown two or more commands earlier takes it "
                                "back to its hands of that moment")
PARAMETERS["fatigue"] = ("how much more a harness message derails it late in an episode: interruption and "
                         "over_correct chances x (1 + fatigue x min(1, its env commands so far / 40))")
PARAMETERS.update({
    f"invite_{kind}": f"how strongly {what} invites reconsidering (scales every reaction to it)"
    for kind, what in (("replan", "a request to reconsider or re-plan"),
                       ("refresh", "a refreshed text (an engine text in a harness message)"),
                       ("query", "a note that the environment was queried"),
                       ("rewind", "a note that the state was restored (a rewind memory)"),
                       ("message", "any other harness message"))
})

class BuiltinAgent(ModelFreeAgent):
    """The model-free agent (see module docstring). ``act`` reads only ``context``.

    ``overrides`` sets single parameters of the profile (``{"hidden_pickup": 1.0}``); they
    are part of :meth:`settings`, so they name the agent and key its replies. ``temperature``
    (0: the agent as calibrated) makes it sample (:mod:`cir.agents.sampling`): a softmax
    draw may replace a command by a plausible alternative (``sampled_choice``), keyed by the
    command and the sample index (:meth:`sample`).
    """

    mechanisms = MECHANISMS

    def __init__(self, profile: str = "default", seed: int = 0, *,
                 overrides: dict[str, float] | None = None, memo: bool = True,
                 temperature: float = 0.0) -> None:
        if profile not in PROFILES:
            raise CirError(
                f"agent profile {profile!r}: unknown; expected one of {', '.join(sorted(PROFILES))}"
            )
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise CirError(f"agent seed {seed!r}: expected an integer")
        unknown = sorted(set(overrides or {}) - set(PARAMETERS))
        if unknown:
            raise CirError(f"agent parameter {unknown[0]!r}: unknown; expected one of {', '.join(PARAMETERS)}")
        self.profile = profile
        self.seed = seed
        self.name = f"builtin:{profile}"
        # draws keyed by the seed, never by the profile's parameters (ModelFreeAgent): every
        # profile and override shares one set, so two profiles are compared pair by pair
        super().__init__({"agent": "builtin", "seed": self.seed}, {**PROFILES[profile], **(overrides or {})},
                         start=initial_beliefs, fold=fold, decider=Decider, memo=memo, temperature=temperature)

    def params(self) -> dict[str, Any]:
        """Profile name and parameters plus the seed (and, when it samples, the temperature and
        the sample index): with the context they fix the reply."""
        return {"agent": "builtin", "profile": self.profile, "seed": self.seed, **self.skill,
                **self.sampling_params()}
