"""The service desk's model-free agent, built as an instrument (``docs/service-desk.md``).

It plans from what it is shown: it reads the ticket, finds the customer, and for each request
reads the order (and the profile or the product it needs), makes the change and reads the order
again to see it. Every random choice is keyed by the task, the seed and content
(:class:`cir.agents.modelfree.Draws`), every way it fails, is rescued or is harmed is a named
mechanism (:data:`~.mechanisms.MECHANISMS`) whose chance is one parameter of its profile (0 turns
it off), and :meth:`act_traced` names the mechanisms behind each reply for the episode's
explanation trace. The profiles were set on the calibration cohort (generator seed 1, agent
seeds 0, 1, 2; ``benchmarks/service_desk_calibration.py``) before any study cohort ran, and
are frozen.

Beliefs are memoised by context prefix (:class:`cir.agents.modelfree.ModelFreeAgent`), so a call
reads only the messages its longest known prefix lacks; replies are the same with ``memo=False``.
"""

from __future__ import annotations

from typing import Any

from cir.agents.modelfree import ModelFreeAgent
from cir.families.service_desk.agent.beliefs import fold, initial_beliefs
from cir.families.service_desk.agent.decide import Decider
from cir.families.service_desk.agent.mechanisms import MECHANISMS
from cir.util.errors import CirError

#: how strongly each kind of harness message invites reconsidering (read from its words)
INVITE = {"invite_replan": 1.0, "invite_refresh": 0.6, "invite_query": 0.6, "invite_rewind": 0.6,
          "invite_message": 0.4}

#: each profile's chances (PARAMETERS says what each means); set on the calibration cohort
PROFILES: dict[str, dict[str, float]] = {
    "default": {
        "wrong_item": 0.3, "wrong_variant": 0.08, "forget_request": 0.06, "obey_customer": 0.3,
        "extra_lookup": 0.1, "verify": 0.8,
        "reread_missing": 0.6, "give_up": 0.12, "misread": 0.3, "lost_write": 0.5, "retry_missing": 0.4,
        "refresh_correction": 0.9, "harness_recheck": 0.7, "over_correct": 0.25, "interruption": 0.15,
        "distraction": 0.3,
        **INVITE,
    },
}
PROFILES["weak"] = {**PROFILES["default"], "wrong_item": 0.6, "wrong_variant": 0.2, "forget_request": 0.2,
                    "obey_customer": 0.6, "extra_lookup": 0.3, "verify": 0.6, "reread_missing": 0.4, "give_up": 0.25, "misread": 0.5,
                    "lost_write": 0.7, "retry_missing": 0.6, "refresh_correction": 0.8, "harness_recheck": 0.5,
                    "over_correct": 0.35, "interruption": 0.3, "distraction": 0.4}
PROFILES["strong"] = {**PROFILES["default"], "wrong_item": 0.1, "wrong_variant": 0.02, "forget_request": 0.01,
                      "obey_customer": 0.1, "extra_lookup": 0.03, "verify": 0.95, "reread_missing": 0.85, "give_up": 0.04,
                      "misread": 0.1, "lost_write": 0.3, "retry_missing": 0.2, "refresh_correction": 0.95,
                      "harness_recheck": 0.85, "over_correct": 0.15, "interruption": 0.1, "distraction": 0.15}
DEFAULTS = PROFILES["default"]

PARAMETERS: dict[str, str] = {
    **{m.name: f"chance: {m.meaning}" for m in MECHANISMS.values() if m.parameter == m.name},
    "misread": "chance: a result about another order is taken for the one asked about (misread_other; else "
               "reread_mismatch)",
    "verify": "chance: after a change whose answer shows it, it reads the order again to see it (a habit)",
    **{f"invite_{kind}": f"how strongly {what} invites reconsidering (scales harness_recheck, over_correct and "
                         "interruption)"
       for kind, what in (("replan", "a request to re-plan"), ("refresh", "a refreshed result"),
                          ("query", "a note that the store was queried"),
                          ("rewind", "a note that the state was restored"), ("message", "any other harness message"))},
}


class ServiceDeskAgent(ModelFreeAgent):
    """The model-free service-desk agent (see the module docstring). ``act`` reads only ``context``.

    ``profile`` is ``weak``, ``default`` or ``strong``; ``overrides`` sets single parameters
    (``{"lost_write": 1.0}``); both are part of :meth:`params`, so they name the agent and key its
    replies. ``temperature`` above 0 makes it sample (``sampled_choice``).
    """

    name = "builtin-service-desk"
    mechanisms = MECHANISMS

    def __init__(self, profile: str = "default", *, seed: int = 0, overrides: dict[str, float] | None = None,
                 memo: bool = True, temperature: float = 0.0) -> None:
        if profile not in PROFILES:
            raise CirError(f"agent profile {profile!r}: the service-desk agent's profiles are "
                           f"{', '.join(PROFILES)}")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise CirError(f"agent seed {seed!r}: expected an integer")
        unknown = sorted(set(overrides or {}) - set(DEFAULTS))
        if unknown:
            raise CirError(f"agent parameter {unknown[0]!r}: unknown; expected one of {', '.join(DEFAULTS)}")
        for key, value in (overrides or {}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise CirError(f"agent parameter {key} = {value!r}: expected a chance from 0 to 1")
        self.profile, self.seed = profile, seed
        params = {**PROFILES[profile], **{k: float(v) for k, v in (overrides or {}).items()}}
        # draws keyed by the seed only: every profile and override shares them (common random numbers)
        super().__init__({"agent": self.name, "seed": seed}, params, start=initial_beliefs, fold=fold,
                         decider=Decider, memo=memo, temperature=temperature)

    def params(self) -> dict[str, Any]:
        """The profile, its parameters and the seed (and, when it samples, the temperature and the
        sample index): with the context they fix the reply."""
        return {"agent": self.name, "version": 1, "profile": self.profile, "seed": self.seed, **self.skill,
                **self.sampling_params()}
