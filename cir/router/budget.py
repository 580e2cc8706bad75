"""The clean-harm budget of the threshold search: empirical (the paper's) or certified.

The search (:meth:`cir.router.policy.CIRPolicy._search`) scores every threshold candidate on
out-of-fold predictions: how many clean arms that succeed without recovery the candidate
turns into failures (``clean_harm_count``, out of ``n_clean`` clean arms). A budget says
which candidates are admissible:

* ``empirical`` (paper, eq. 4): the observed clean-harm rate is at most ``epsilon``;
* ``certified``: Learn-then-Test (Angelopoulos et al., 2021) at the task level, with
  MAPIE's risk control: each candidate's hypothesis "its clean-harm risk exceeds epsilon"
  gets a Hoeffding-Bentkus p-value for a binary loss from its OOF clean harms, and the
  family of candidates is tested with Bonferroni-Holm at ``delta``. The rejected ones are
  certified: with probability at least ``1 - delta``, every certified candidate has
  clean-harm risk <= epsilon (for tasks like the fitting tasks, each scored by models
  that did not see it). Never recovering harms nothing by construction and is always
  admissible; when it is the only admissible candidate, the summary says that no threshold
  could be certified, and how many clean arms it would take.

One clean arm per task (the clean condition of each task), so the clean arms are
independent at the task level, as Learn-then-Test needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Budget:
    """Which threshold candidates are admissible (module docstring)."""

    kind: str
    epsilon: float
    delta: float

    def p_values(self, clean_harm_count: np.ndarray, n_clean: int) -> np.ndarray:
        """Hoeffding-Bentkus p-values of "risk > epsilon" for each candidate (binary loss)."""
        from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value

        risk = np.asarray(clean_harm_count, dtype=float) / max(n_clean, 1)
        return compute_hoeffding_bentkus_p_value(risk, max(n_clean, 1), self.epsilon, binary=True)[:, 0]

    def admits(self, table: pd.DataFrame, n_clean: int) -> np.ndarray:
        """Per candidate (row of ``table``): within the budget?"""
        harms = table["clean_harm_count"].to_numpy(dtype=float)
        if self.kind == "empirical":
            return harms <= self.epsilon * max(n_clean, 1) + 1e-9
        from mapie.risk_control import control_fwer

        never = table["interventions"].to_numpy() == 0  # harms nothing, by construction
        tested = ~never
        ok = never.copy()
        if tested.any():
            certified = control_fwer(self.p_values(harms[tested], n_clean), self.delta,
                                     fwer_method="bonferroni_holm")
            ok[np.flatnonzero(tested)[np.asarray(certified, dtype=int)]] = True
        return ok

    def summary(self, search: pd.DataFrame, n_clean: int) -> dict[str, Any]:
        """What the search found: candidates tried and admitted, whether the budget bound (some
        candidate was refused), and for a certified budget whether any recovering candidate was
        certified and how many clean arms certifying one with no observed harm would take."""
        feasible = search["feasible"].to_numpy(dtype=bool)
        recovering = search["interventions"].to_numpy() > 0
        out = {"kind": self.kind, "epsilon": float(self.epsilon), "delta": float(self.delta),
               "n_clean": int(n_clean), "candidates_searched": int(len(search)),
               "candidates_within_budget": int(feasible.sum()), "bound": bool((~feasible).any()),
               "certified_any": bool((feasible & recovering).any()) if self.kind == "certified" else None}
        out["clean_arms_to_certify_one"] = clean_arms_needed(self.epsilon, self.delta)
        return out


def clean_arms_needed(epsilon: float, delta: float) -> int | None:
    """The fewest clean arms for which one candidate with zero observed clean harm is certified
    at ``delta`` alone: the binary Bentkus p-value ``(1 - epsilon)^n <= delta``."""
    if not 0 < epsilon < 1:
        return None
    return int(math.ceil(math.log(delta) / math.log(1 - epsilon)))
