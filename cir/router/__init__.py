"""From paired evidence to a run-time decision: the CIR rule, the sequential walk, the policy, the runtime router, its evaluation.

The runtime names (``Router``, ``RouterHook``, ``Decision``) need neither pandas nor scikit-learn;
the policy and the evaluation load them when first used.
"""

from cir.util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "Router": "cir.router.runtime",
    "RouterHook": "cir.router.runtime",
    "Decision": "cir.router.runtime",
    "CIRPolicy": "cir.router.policy",
    "evaluate": "cir.router.evaluation",
    "calibration_table": "cir.router.calibration",
    "run_episode": "cir.router.live",
})
