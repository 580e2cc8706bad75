"""Statistics on a paired table: cohorts and outcome counts, the cluster bootstrap, tests, effects, joint outcomes, explanations."""

from cir.util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "select_subset": "cir.stats.decompose",
    "outcome_counts": "cir.stats.decompose",
    "decompose": "cir.stats.decompose",
    "effect_table": "cir.stats.effects",
    "contrast_table": "cir.stats.effects",
    "joint_outcomes": "cir.stats.joint",
    "joint_matrix": "cir.stats.joint",
    "joint_effects": "cir.stats.joint",
    "sign_flip_test": "cir.stats.significance",
    "mcnemar_p": "cir.stats.significance",
    "explain_run": "cir.stats.explain",
    "explain_pair": "cir.stats.explain",
}, former={"select_cohort": "cir.stats.decompose"})

# ``decompose`` is both an exported function and a module of this package: bound here, once, so that
# importing the module (which sets the package's attribute to it) never shadows the function
from cir.stats.decompose import decompose as decompose  # noqa: E402
