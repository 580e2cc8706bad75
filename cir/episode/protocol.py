"""The shared vocabulary: the harness's texts and the paper's protocol defaults.

Several layers must agree on these (the engine adapter, the agents, the harness, the
features, the statistics, the command line), so each is written once, here, and
imported where it is needed. Every default is a setting somewhere (DESIGN.md,
"Protocol defaults"); this module only says what it is when nobody chooses.
"""

from __future__ import annotations

# -- the harness's answer to an empty action (ALFWorld's text for an action that does not apply)
NOTHING_HAPPENS = "Nothing happens."

# -- the agent's turn (ReAct) -----------------------------------------------------------------
#: A reply starting with this is a thought: a model turn without an env action.
THINK_PREFIX = "think:"
#: What the harness shows after a thought.
THINK_ACK = "OK."

# -- what the harness shows (recovery operations: ``cir.episode.operations``) ------------------------
#: Before the answer to a refresh query.
REFRESH_PREFIX = "[Refreshed observation]"
#: Instead of the answer to a content-ablated refresh query.
ABLATED_TEXT = "[The environment was queried again; the result is not shown.]"
REPLAN_TEXT = (
    "[Replan] Before you act, reconsider your plan: review what you have observed so far, "
    "check which steps of the task are done and which remain, and choose your next actions."
)
REWIND_HEADER = "[Rewind] You are back at an earlier point of this task; the environment is restored to that state."
#: The content-free harness message of the placebo control.
PLACEBO_TEXT = "[harness] no new information"
#: The id of a tool call the harness made, not the agent (a refresh done as a call of the
#: observing tool, in a framework's message list), starts with this; the rest names the
#: operation and its step (``cir-recovery-refresh-7``). ``Transcript.from_messages`` reads such
#: a call as the recovery it is, never as an agent step.
RECOVERY_CALL_PREFIX = "cir-recovery-"

# -- the harness budgets (paper) ---------------------------------------------------------------
DEFAULT_MAX_TURNS = 49
DEFAULT_MAX_ACTIONS = 64
#: Model turns and env actions per episode at most (a larger budget is a typo).
MAX_BUDGET = 100_000

# -- the paired design ----------------------------------------------------------------------------
DEFAULT_CONDITIONS: tuple[str, ...] = ("clean", "stale2", "stale1", "missing")
#: The stale condition the paper reports first.
PRIMARY_STALE = "stale2"
DEFAULT_DELAYS: tuple[int, ...] = (0, 1, 2, 4)
#: The operations a run applies by default (every one: ``cir.episode.operations.OPERATIONS``).
DEFAULT_OPERATIONS: tuple[str, ...] = ("refresh",)
#: The perturbed env action comes after this fraction of the factual run's env actions.
DEFAULT_FRACTION = 0.25

# -- CIR ------------------------------------------------------------------------------------------
DEFAULT_LAMBDA = 2.0
DEFAULT_EPSILON = 0.02
DEFAULT_D_MIN = 1
DEFAULT_CANDIDATE_DELAYS: tuple[int, ...] = (1, 2, 4)
DEFAULT_C = 0.1
DEFAULT_FOLDS = 5
#: The certified budget's confidence: clean harm <= epsilon with probability >= 1 - delta.
DEFAULT_DELTA = 0.1
#: The candidate C of the paired estimator's outcome models (chosen by grouped cross-validation).
PAIRED_CS: tuple[float, ...] = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)

# -- inference ------------------------------------------------------------------------------------
DEFAULT_RESAMPLES = 10_000
#: Replicates of each planted world a study's report checks the routers on: quick, or not.
PLANTED_WORLD_REPLICATES = {True: 1, False: 200}
DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 0
#: Seeds of the agent, the bootstrap, the folds and the study: what numpy and scikit-learn accept.
MAX_SEED = 2**32 - 1
