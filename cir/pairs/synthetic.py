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


# -- planted worlds: where the answer about recovery is known, to validate the router ------------
#: The worlds of :func:`planted_world` the study's report checks (benchmarks/router_validation.py
#: runs them).
WORLDS = ("a", "b", "c")
#: The hard worlds beside them (benchmarks/planted_hard.py runs them): (d) an interaction the
#: logistic models cannot express, (e) weak detection, (f) clean harm in a subgroup, (g) a held-out
#: population shifted from the fitting one, (h) a null world that a fitted router recovers in.
HARD_WORLDS = ("d", "e", "f", "g", "h")
#: Every world :func:`planted_world` draws.
ALL_WORLDS = WORLDS + HARD_WORLDS
#: The error signal's shift under an erroneous observation, per world: in (a), (g) and (h) errors
#: are only partly detectable (a unit-variance signal shifted by 0.95: an ideal detector's AUC is
#: Phi(0.95 / sqrt 2) = 0.75); in (e) barely (0.55: AUC Phi(0.55 / sqrt 2) = 0.65); in (b), (c),
#: (d) and (f) plainly (AUC 0.86).
SIGNAL_SHIFT = {"a": 0.95, "b": 1.5, "c": 1.5, "d": 1.5, "e": 0.55, "f": 1.5, "g": 0.95, "h": 0.95}
#: Success without recovery: logit 1.8 + skill on clean arms, 0.6 + skill on erroneous ones.
_Y0_LOGIT = {0: 1.8, 1: 0.6}
#: The population of a world's arms: the skill's mean, the share holding an object, how progress is
#: drawn (None: uniform on [0, 1]; (a, b): Beta(a, b)) and the error signal's mean on clean arms (an
#: erroneous arm's is it plus :data:`SIGNAL_SHIFT`). Every world draws its fitting and held-out
#: tables from :data:`POPULATION` but (g), whose held-out tables come from :data:`SHIFTED`: weaker
#: agents (skill -0.5), holding more often (60%, not 35%), later in the task (Beta(2, 1)) and a
#: detector that drifted (+0.5 on every arm's signal).
POPULATION = {"skill_mean": 0.0, "holding": 0.35, "progress": None, "signal_mean": 0.0}
SHIFTED = {"skill_mean": -0.5, "holding": 0.6, "progress": (2.0, 1.0), "signal_mean": 0.5}


def _expit(z: np.ndarray | float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=float)))


def _recovery(world: str, err: np.ndarray, holding: np.ndarray, progress: np.ndarray,
              p0: np.ndarray, heldout: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(rescue, harm): the chance that recovering turns a failing run into a success, and a
    succeeding one into a failure, in each cell of the world (of its held-out tables with
    ``heldout``: only (h)'s differ).

    (a) the effect of recovery varies with what is visible: after an error it rescues most when
    the agent holds nothing and early in the task, and harms a run that holds an object, the more
    the later (clean or not); (b) a null world: rescue and harm balance in every state
    (``(1 - p0) rescue = p0 harm``), though each varies with the features, so recovery has no
    effect anywhere and nothing about it can be learned; (c) recovery rescues after an error and
    harms clean successes (more when holding), so gaining more means harming more clean
    runs: the clean-harm budget decides.

    The hard worlds: (d) an interaction: recovery after an error rescues (0.75) only where exactly
    one of "holding" and "past half the task" holds (an XOR of two features), and elsewhere harms
    successes (0.25, clean or not); holding alone says nothing about the effect (either half of it
    is half "on"), progress alone a little (past half the task 65% of arms are "on", before it
    35%: those not holding and those holding), so a model linear in the features expresses only
    that part of it, never the XOR; (e) (a)'s effects, with weak detection (:data:`SIGNAL_SHIFT`); (f) clean harm in a
    subgroup: recovery after an error rescues (0.6) everywhere, and harms clean successes with 0.5
    in one subgroup (holding and past half the task: 17.5% of arms) and 0.005 outside it, so the
    clean-harm budget binds there and nowhere else; (g) (a)'s effects, held out on a shifted
    population (:data:`SHIFTED`); (h) fitted on (a)'s effects, so a router learns to recover, and
    held out where recovery has no effect in any state (rescue ``0.5 p0``, harm ``0.5 (1 - p0)``):
    whatever a router recovers, its true effect is 0, so its intervals are tested, not abstention.
    """
    if world in ("a", "e", "g") or (world == "h" and not heldout):
        rescue = _expit(-3.0 + 3.2 * err - 2.0 * holding + 1.0 * (1 - progress))
        harm = _expit(-4.5 + 3.5 * holding + 1.5 * progress)
    elif world == "b":
        scale = _expit(-1.0 + 2.0 * holding - progress)
        rescue, harm = scale * p0, scale * (1 - p0)
    elif world == "c":
        rescue = np.where(err == 1, 0.5, 0.05)
        harm = np.where(err == 1, 0.02, _expit(-2.5 + 1.5 * holding))
    elif world == "d":
        on = (holding == 1) != (progress > 0.5)
        rescue = np.where(err == 1, np.where(on, 0.75, 0.05), 0.02)
        harm = np.where(on, 0.02, 0.25)
    elif world == "f":
        subgroup = (holding == 1) & (progress > 0.5)
        rescue = np.where(err == 1, 0.6, 0.02)
        harm = np.where(err == 1, 0.02, np.where(subgroup, 0.5, 0.005))
    elif world == "h":
        rescue, harm = 0.5 * p0, 0.5 * (1 - p0)
    else:
        raise ValueError(f"planted_world: unknown world {world!r}; expected one of {', '.join(ALL_WORLDS)}")
    return rescue, harm


_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(41)  # E over the skill ~ N(0, 1)


def planted_world(world: str, n_tasks: int = 200, seed: int | Sequence[int] = 0,
                  delays: tuple[int, ...] = DEFAULT_DELAYS, task_prefix: str = "w",
                  heldout: bool = False) -> pd.DataFrame:
    """A paired table (conditions ``clean`` and ``stale2``, operation ``refresh``) of a world
    whose answer about recovery is known, with the planted truth beside each row.

    Each task has a skill (never visible); each arm (task, condition) an error signal
    (``f_suspect_words``: N(0, 1), shifted by :data:`SIGNAL_SHIFT` after an error), whether the
    agent holds an object (``f_holding``), how far it has come (``f_progress``) and an
    irrelevant count (``f_env_actions``); success without recovery has logit
    :data:`_Y0_LOGIT` + skill; every cell's recovery rescues or harms with the chances of
    :func:`_recovery`. ``heldout`` draws the world's held-out tables: from its held-out population
    and recovery, which differ from the fitting ones in (g) (:data:`SHIFTED`) and (h) only. The
    planted columns (never ``f_*``, so no router reads them):
    ``planted_success`` (the chance of success without recovery), ``planted_rescue`` and
    ``planted_harm`` (the chances of :func:`_recovery`), ``planted_gain`` (the expected
    effect of recovering there, y1 - y0, knowing the skill and whether the observation was
    erroneous) and ``planted_feature_gain`` (the same knowing only what a router sees: the
    error's posterior from the signal, the skill averaged out). The planted chances are the same
    at every delay of an arm. Deterministic in ``seed`` (an integer or a sequence of them).
    """
    if world not in ALL_WORLDS:
        raise ValueError(f"planted_world: unknown world {world!r}; expected one of {', '.join(ALL_WORLDS)}")
    pop = SHIFTED if heldout and world == "g" else POPULATION
    rng = np.random.default_rng([*np.atleast_1d(seed).tolist(), ALL_WORLDS.index(world)])
    n_arms, d = 2 * n_tasks, np.asarray(delays)
    task = np.repeat(np.arange(n_tasks), 2)
    err = np.tile([0, 1], n_tasks)
    skill = rng.normal(size=n_tasks)[task] + pop["skill_mean"]
    shift, base = SIGNAL_SHIFT[world], pop["signal_mean"]
    signal = rng.normal(size=n_arms) + shift * err + base
    holding = (rng.random(n_arms) < pop["holding"]).astype(int)
    progress = np.round(rng.random(n_arms) if pop["progress"] is None else rng.beta(*pop["progress"], size=n_arms), 6)
    p0 = _expit(np.where(err == 1, _Y0_LOGIT[1], _Y0_LOGIT[0]) + skill)
    y0 = (rng.random(n_arms) < p0).astype(int)
    factual = np.where(err == 0, y0, 0)
    factual = factual.reshape(n_tasks, 2)[:, 0][task]  # the clean arm's outcome is the task's factual run
    rescue, harm = _recovery(world, err, holding, progress, p0, heldout)
    gain = (1 - p0) * rescue - p0 * harm
    # P(error | signal), equal priors: the log likelihood ratio of N(base + shift, 1) to N(base, 1)
    posterior = _expit(shift * signal - ((base + shift) ** 2 - base ** 2) / 2)
    feature_gain = np.zeros(n_arms)
    for e, weight in ((1, posterior), (0, 1 - posterior)):
        # E over the skill (Gauss-Hermite) of (1 - p0) rescue - p0 harm in error state e
        p0s = np.broadcast_to(_expit(_Y0_LOGIT[e] + pop["skill_mean"] + _GH_NODES[:, None]),
                              (len(_GH_NODES), n_arms))
        r_s, h_s = _recovery(world, np.full(p0s.shape, e), np.broadcast_to(holding, p0s.shape),
                             np.broadcast_to(progress, p0s.shape), p0s, heldout)
        feature_gain += weight * (_GH_WEIGHTS @ ((1 - p0s) * r_s - p0s * h_s)) / _GH_WEIGHTS.sum()
    u = rng.random((n_arms, len(d)))
    y1 = np.where(y0[:, None] == 0, (u < rescue[:, None]).astype(int), 1 - (u < harm[:, None]).astype(int))
    extra = rng.integers(0, 3, size=(n_arms, len(d)))
    rows = {
        "task_id": np.repeat([f"{task_prefix}{t:05d}" for t in task], len(d)),
        "split": "planted", "task_type": TASK_TYPES[0], "agent": f"planted:{world}",
        "condition": np.repeat(np.where(err == 1, "stale2", "clean"), len(d)),
        "delay": np.tile(d, n_arms), "operation": "refresh",
        "y0": np.repeat(y0, len(d)), "y1": y1.ravel(), "executed": 1,
        "factual_success": np.repeat(factual, len(d)), "prefix_match": 1,
        "f_delay": np.tile(d, n_arms).astype(float), "f_suspect_words": np.repeat(np.round(signal, 6), len(d)),
        "f_holding": np.repeat(holding, len(d)).astype(float), "f_progress": np.repeat(progress, len(d)),
        "f_env_actions": (5 + np.tile(d, n_arms) + extra.ravel()).astype(float),
        "planted_success": np.repeat(p0, len(d)),
        "planted_rescue": np.repeat(rescue, len(d)), "planted_harm": np.repeat(harm, len(d)),
        "planted_gain": np.repeat(gain, len(d)), "planted_feature_gain": np.repeat(feature_gain, len(d)),
    }
    df = pd.DataFrame(rows)
    df["outcome"] = [outcome_of(a, b) for a, b in zip(df["y0"], df["y1"], strict=True)]
    return validate_paired(df, source=f"planted world {world}{' (held out)' if heldout else ''}")
