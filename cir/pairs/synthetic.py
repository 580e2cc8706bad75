"""Synthetic paired tables with a known answer, for examples, tests and benchmarks.

Generators, one per layer that needs a planted truth:

* :func:`simulate_paired`: outcomes only, with task structure (rows of a task share a
  latent skill), for the statistics (:mod:`cir.stats.effects`, :mod:`cir.stats.joint`);
* :func:`simulate`: outcomes and ``f_*`` feature columns with a planted signal that a
  policy can learn, for CIR (:mod:`cir.router.policy`, :mod:`cir.router.evaluation`);
* :func:`simulate_sampled`: K draws per arm from planted per-state success chances, with the
  true effect, for the intervals of a table of ``--samples`` (``benchmarks/sample_coverage.py``).

Both are deterministic functions of their seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from cir.episode.protocol import DEFAULT_CONDITIONS, DEFAULT_DELAYS
from cir.pairs.paired import outcome_of, validate_paired
from cir.pairs.samples import sample_columns

#: The task types of a synthetic table: ALFWorld's six names, so that a table of planted
#: answers reads like a study's (nothing here depends on what they mean)
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place",
)


def simulate_paired(
    n_tasks: int = 100,
    conditions: Sequence[str] = ("clean", "stale2"),
    delays: Sequence[int] = DEFAULT_DELAYS,
    operations: Sequence[str] = ("refresh",),
    seed: int = 0,
    rescue: dict[str, float] | None = None,
    harm: dict[str, float] | None = None,
) -> pd.DataFrame:
    """A synthetic paired table with task structure, for examples, tests and benchmarks.

    Each task has a latent skill shared by all its rows (so rows of a task are
    correlated, as in real runs). y0 depends on skill and condition; recovery flips
    a failure to success with probability ``rescue[condition]`` and a success to
    failure with ``harm[condition]``, scaled per operation. Late delays sometimes find
    the run already over (``executed`` false, y1 = y0).
    """
    rng = np.random.default_rng(seed)
    rescue = {"clean": 0.05, **{c: 0.3 for c in conditions if c != "clean"}, **(rescue or {})}
    harm = {"clean": 0.06, **{c: 0.08 for c in conditions if c != "clean"}, **(harm or {})}
    op_scale = {"refresh": 1.0, "refresh_ablated": 0.8, "replan": 0.4, "rewind": 0.6}
    records = []
    for t in range(n_tasks):
        skill = rng.normal()
        factual = int(rng.random() < 1 / (1 + np.exp(-(skill + 1.2))))
        length = int(rng.integers(4, 40))
        task_id = f"task{t:04d}"
        for condition in conditions:
            penalty = 0.0 if condition == "clean" else 1.0
            y0 = factual if condition == "clean" else int(rng.random() < 1 / (1 + np.exp(-(skill + 1.2 - penalty))))
            shared = rng.random()  # how open this task-condition is to change: shared across cells
            for delay in delays:
                executed = int(delay < length)
                for operation in operations:
                    scale = op_scale.get(operation, 0.7)
                    u = shared if rng.random() < 0.8 else rng.random()
                    y1 = y0
                    if executed:
                        if y0 == 0 and u < rescue.get(condition, 0.2) * scale:
                            y1 = 1
                        elif y0 == 1 and u < harm.get(condition, 0.05) * scale:
                            y1 = 0
                    records.append({
                        "task_id": task_id,
                        "split": "valid_seen" if t % 2 else "valid_unseen",
                        "task_type": TASK_TYPES[t % len(TASK_TYPES)],
                        "agent": "builtin:synthetic",
                        "condition": condition,
                        "delay": int(delay),
                        "operation": operation,
                        "y0": y0,
                        "y1": y1,
                        "executed": executed,
                        "factual_success": factual,
                        "prefix_match": 1,
                        "outcome": outcome_of(y0, y1),
                    })
    return pd.DataFrame.from_records(records)


#: How each operation of :func:`simulate` acts, for a table of several: which confused runs it
#: rescues (the stale text's mismatch seen or not) and which successful runs it may harm.
OPERATION_PROFILES = {
    "refresh": {"rescues_mismatch": (0, 1), "harm_if": "holding"},
    "replan": {"rescues_mismatch": (0,), "harm_if": "late"},
    "rewind": {"rescues_mismatch": (1,), "harm_if": "none"},
}


def simulate(n_tasks: int = 200, seed: int = 0, conditions: tuple[str, ...] = DEFAULT_CONDITIONS,
             delays: tuple[int, ...] = DEFAULT_DELAYS, operation: str = "refresh",
             operations: tuple[str, ...] | None = None) -> pd.DataFrame:
    """A synthetic paired table with ``f_*`` columns and a planted signal (examples, tests).

    Each task has a latent skill. An erroneous observation is visible in the features
    (``f_suspect_seen_before``, ``f_suspect_mismatch``) most of the time, and sometimes
    also on clean runs (false alarms). Only erroneous runs that *confuse* the agent
    (visible as ``f_post_noops`` growing with the delay) lose success, and refresh
    rescues those; refreshing a run that holds an object (``f_holding``) sometimes
    harms it, errors or not. So an error detector alone refreshes many runs it cannot
    help and some it harms; a policy that also predicts the outcomes can do better.

    ``operations`` (default: ``operation`` alone) writes one row per operation of
    :data:`OPERATION_PROFILES`: ``refresh`` as above; ``replan`` rescues only confused runs
    whose mismatch was not seen and harms runs late in the task (``f_progress`` > 0.7);
    ``rewind`` rescues only those whose mismatch was seen and harms none. So which
    operation is worth it depends on visible state, and the first operation's rows are
    those of a single-operation table.
    """
    ops = tuple(operations) if operations is not None else (operation,)
    rng = np.random.default_rng(seed)
    other = {op: np.random.default_rng([seed, i + 1]) for i, op in enumerate(ops[1:])}
    records = []
    for t in range(n_tasks):
        skill = rng.normal()
        length = int(rng.integers(2, 14))  # env actions left after the perturbation point
        progress = round(_sigmoid(skill + rng.normal(scale=0.5)), 6)
        for condition in conditions:
            records += _arm_rows(rng, other, ops, delays, f"syn{t:04d}", condition, skill, length, progress)
    return validate_paired(pd.DataFrame.from_records(records), source="synthetic table")


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _arm_rows(rng: np.random.Generator, other: dict[str, np.random.Generator], ops: tuple[str, ...],
              delays: tuple[int, ...], task_id: str, condition: str, skill: float, length: int,
              progress: float) -> list[dict]:
    """One task's rows under one condition: every delay and operation (draws in a fixed order)."""
    error = condition != "clean"
    seen = int(rng.random() < (0.8 if error else 0.1))
    mismatch = int(rng.random() < (0.6 if error else 0.05))
    confused = error and rng.random() < 0.4
    holding = int(rng.random() < 0.3)
    y0 = int(rng.random() < _sigmoid(1.5 * skill + 1.2 - (3.0 if confused else 0.0)))
    y_rescued = int(rng.random() < _sigmoid(1.5 * skill + 1.2))
    noops = [int(rng.poisson(0.8 * d if confused else 0.15 * d)) for d in range(max(delays) + 1)]
    rows = []
    for d in delays:
        executed = int(d < length)
        y1 = y0
        if executed:
            if confused and y0 == 0:
                y1 = y_rescued
            elif y0 == 1 and rng.random() < (0.5 if holding else 0.01):
                y1 = 0
        features = {
            "f_delay": float(d), "f_suspect_seen_before": float(seen),
            "f_suspect_mismatch": float(mismatch), "f_post_noops": float(sum(noops[1:d + 1])),
            "f_holding": float(holding), "f_progress": progress,
            "f_env_actions": float(5 + d + int(rng.integers(0, 3))),
        }
        for op in ops:
            y = y1 if op == ops[0] else _other_outcome(OPERATION_PROFILES[op], other[op], y0, y_rescued,
                                                       executed, confused, mismatch, holding, progress)
            rows.append({
                "task_id": task_id, "split": "train", "task_type": TASK_TYPES[0],
                "agent": "synthetic", "condition": condition, "delay": int(d), "operation": op,
                "y0": y0, "y1": y, "executed": executed, "factual_success": int(skill > -0.8),
                "prefix_match": 1, "outcome": "", **features,
            })
    return rows


def _other_outcome(profile: dict, rng: np.random.Generator, y0: int, y_rescued: int, executed: int,
                   confused: bool, mismatch: int, holding: int, progress: float) -> int:
    """The outcome of recovering with an operation other than the table's first (its profile)."""
    if not executed:
        return y0
    if confused and y0 == 0:
        return y_rescued if mismatch in profile["rescues_mismatch"] else 0
    harmful = {"holding": bool(holding), "late": progress > 0.7, "none": False}[profile["harm_if"]]
    if y0 == 1 and rng.random() < (0.5 if harmful else 0.01):
        return 0
    return y0


#: How the planted success chances of :func:`simulate_sampled` depend on the condition: the
#: logit of success without recovery is ``skill + BASE[condition]`` and recovery adds
#: ``LIFT[condition]`` to it (plus the task's own lift), so the true effect differs by condition.
SAMPLED_BASE = {"clean": 1.0, "stale1": -0.2, "stale2": -0.5, "missing": -0.3}
SAMPLED_LIFT = {"clean": -0.3, "stale1": 0.6, "stale2": 0.9, "missing": 0.7}


def simulate_sampled(n_tasks: int = 80, samples: int = 4, seed: int = 0,
                     conditions: Sequence[str] = ("clean", "stale2"), delays: Sequence[int] = (0, 2),
                     operations: Sequence[str] = ("refresh",), coupling: float = 0.5,
                     lift_sd: float = 0.6, delay_slope: float = -0.1) -> pd.DataFrame:
    """A paired table of ``--samples`` with planted per-state success chances, and their truth.

    Each task draws a skill ``s ~ N(0, 1)`` and a lift ``b ~ N(0, lift_sd)`` of its own. At
    condition c and delay d the chance of success without recovery is
    ``p0 = sigmoid(s + SAMPLED_BASE[c] + delay_slope d)`` and with any operation
    ``p1 = sigmoid(logit p0 + SAMPLED_LIFT[c] + b)``. Each row holds K draws of each arm
    (the arm's draws shared by the operations of its delay, as the replayer's are), draw s of
    the branch sharing the uniform number of draw s of the arm with chance ``coupling`` (a
    sampling seed shared by the two), else drawing its own. ``y0``/``y1`` are the first draws.

    ``df.attrs["truth"]`` maps (condition, delay, operation) to the true effect over the
    population of tasks, ``100 E[p1 - p0]`` in pp (Gauss-Hermite quadrature over s and b), and
    ``df.attrs["conditional"]`` to the mean true effect of these tasks: what an interval of
    the effect of a population of tasks, or of these tasks, should cover.
    """
    rng = np.random.default_rng([seed, samples])
    records = []
    conditional: dict[tuple[str, int, str], list[float]] = {}
    for t in range(n_tasks):
        skill, lift = rng.normal(), rng.normal(scale=lift_sd)
        task_id = f"sam{t:04d}"
        for condition in conditions:
            for delay in delays:
                z0 = skill + SAMPLED_BASE.get(condition, 0.0) + delay_slope * delay
                p0 = _sigmoid(z0)
                u = rng.random(samples)
                arm = (u < p0).astype(int)
                for operation in operations:
                    p1 = _sigmoid(z0 + SAMPLED_LIFT.get(condition, 0.5) + lift)
                    own = rng.random(samples)
                    v = np.where(rng.random(samples) < coupling, u, own)
                    branch = (v < p1).astype(int)
                    conditional.setdefault((condition, int(delay), operation), []).append(100 * (p1 - p0))
                    records.append({
                        "task_id": task_id, "split": "valid_unseen", "task_type": TASK_TYPES[t % len(TASK_TYPES)],
                        "agent": "builtin:synthetic", "condition": condition, "delay": int(delay),
                        "operation": operation, "y0": int(arm[0]), "y1": int(branch[0]), "executed": 1,
                        "factual_success": 1, "prefix_match": 1, "outcome": outcome_of(int(arm[0]), int(branch[0])),
                        **sample_columns(arm.tolist(), branch.tolist()),
                    })
    df = pd.DataFrame.from_records(records)
    df.attrs["truth"] = {key: _true_effect(key[0], key[1], lift_sd, delay_slope) for key in conditional}
    df.attrs["conditional"] = {key: float(np.mean(v)) for key, v in conditional.items()}
    return df


def _true_effect(condition: str, delay: int, lift_sd: float, delay_slope: float, points: int = 40) -> float:
    """``100 E[p1 - p0]`` of :func:`simulate_sampled` over skill ~ N(0, 1) and lift ~ N(0, lift_sd)."""
    x, w = np.polynomial.hermite_e.hermegauss(points)  # nodes and weights for N(0, 1)
    w = w / w.sum()
    s, b = np.meshgrid(x, x * lift_sd, indexing="ij")
    z0 = s + SAMPLED_BASE.get(condition, 0.0) + delay_slope * delay
    p0 = 1 / (1 + np.exp(-z0))
    p1 = 1 / (1 + np.exp(-(z0 + SAMPLED_LIFT.get(condition, 0.5) + b)))
    return float(100 * (np.outer(w, w) * (p1 - p0)).sum())
