"""Held-out evaluation of routers against their baselines (paper, section 5.4).

Every policy walks the candidate delays of a held-out paired table on the precomputed
branches (:mod:`cir.router.walk`): never, always (at the delay chosen on the training
table), the anomaly detector (at its OOF threshold and at the threshold whose rate
matches the router's), the router itself, and the oracle (recover exactly where it
rescues). Everything a walk needs is in the :class:`~cir.router.runtime.Router` (its
models, thresholds and the baselines' parameters), so a router file and a test table are
enough; a fitted :class:`~cir.router.policy.CIRPolicy` (anything with ``to_router()``) is
accepted too.

The rate-matched anomaly rule is matched twice: on the fitting tasks (``anomaly_rate_matched``,
the threshold whose out-of-fold rate is the router's, a baseline the router file keeps) and on
the held-out arms themselves (``anomaly_rate_matched_heldout``: the threshold at which the
anomaly rule recovers in as many held-out arms as the router does there; chosen from the
router's rate alone, never from an outcome), because a rate matched on the fitting tasks can
drift from the router's on held-out ones.

Several routers can be evaluated side by side on the same table (``evaluate({"cir": paper,
"cir_paired": paired}, test)``): the first one's baselines are the baselines, every other
router adds its own rate-matched anomaly baselines (``anomaly_matched_<name>``,
``anomaly_matched_heldout_<name>``), and every router gets margins over every other policy. :func:`summarize_walks` computes the summary
and margins from the per-arm walk table alone, so arms walked in different replicates
(each by its own routers) can be pooled into one table and summarised with one task-level
cluster bootstrap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import numpy as np
import pandas as pd

from cir import __version__
from cir.episode.protocol import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED
from cir.pairs.paired import validate_paired
from cir.router.rule import blocked_by, passes
from cir.router.runtime import Router
from cir.router.walk import DECIDE, Cells, build_cells, check_features, walk
from cir.stats.bootstrap import bootstrap_ratios, percentile_ci
from cir.stats.counts import FEW_DISCORDANT, count_interval
from cir.stats.significance import sign_flip_tests
from cir.util.memo import memoized, register

register(Router, Router.to_dict)  # a router's content, for the memos: its file

#: The anomaly rule at the threshold whose held-out recovery rate is the router's.
HELDOUT_MATCHED = "anomaly_rate_matched_heldout"
#: The policies of one router's evaluation, in display order (``cir`` is the router).
POLICIES = ("never", "always", "anomaly", "anomaly_rate_matched", HELDOUT_MATCHED, "cir", "oracle")
GROUP_ALL = "all"
ARM_KEYS = ["task_id", "condition"]
#: Which interval ``ci_low_pp``/``ci_high_pp`` are (``bootstrap``, or ``counts`` where the two
#: sides disagree in fewer than :data:`cir.stats.counts.FEW_DISCORDANT` arms) and the bootstrap's.
INTERVAL_COLUMNS = ["interval", "bootstrap_low_pp", "bootstrap_high_pp"]
SUMMARY_COLUMNS = [
    "policy", "condition", "n", "n_tasks", "success_never", "success_policy", "effect_pp",
    "ci_low_pp", "ci_high_pp", "sign_flip_p", "rescues", "harms", "interventions",
    "intervention_rate", "clean_harm_rate", "oracle_fraction", "oracle_policy", *INTERVAL_COLUMNS,
]
MARGIN_COLUMNS = ["policy", "versus", "condition", "n", "margin_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p",
                  *INTERVAL_COLUMNS]


class Fitted(Protocol):
    """A fitted policy: it can become a :class:`~cir.router.runtime.Router`."""

    def to_router(self) -> Router: ...


def as_router(model: Router | Fitted) -> Router:
    """A router as is; a fitted policy as its router."""
    return model if isinstance(model, Router) else model.to_router()


def score_rows(model: Router | Fitted, paired: pd.DataFrame, source: str = "paired table") -> pd.DataFrame:
    """The estimator's scores of the operation of highest utility for every row of ``paired``
    (``operation`` names it; with several operations, ``utility[OP]`` each one's utility)."""
    router = as_router(model)
    check_features(paired, source, router.features)
    s = router.predict(paired[router.features].to_numpy(dtype=float))
    out = pd.DataFrame({k[: -len("_chosen")]: v for k, v in s.items() if k.endswith("_chosen")},
                       index=paired.index)
    out["operation"] = [router.operations[i] for i in s["choice"]]
    if len(router.operations) > 1:
        for i, op in enumerate(router.operations):
            out[f"utility[{op}]"] = s["utility"][:, i]
    return out


def decide_rows(model: Router | Fitted, paired: pd.DataFrame, source: str = "paired table") -> pd.DataFrame:
    """Per row: the rule's decision if the walk reaches that row, with scores and blocker."""
    router = as_router(model)
    s = score_rows(router, paired, source)
    d_min = router.params["d_min"]
    gated = [score for score, _ in router.estimator.gates]
    blockers = [
        blocked_by(router.estimator, int(d), {f"{k}_chosen": s.at[i, k] for k in gated}, router.thresholds,
                   d_min, router.delays)
        for i, d in zip(paired.index, paired["delay"], strict=True)
    ]
    out = s.copy()
    out["blocked_by"] = pd.Series(blockers, index=out.index, dtype=object)  # None: recover
    out["recover"] = [b is None for b in blockers]
    out["operation"] = pd.Series([op if r else None for op, r in zip(out["operation"], out["recover"], strict=True)],
                                 index=out.index, dtype=object)
    return out


def walk_policies(model: Router | Fitted, paired: pd.DataFrame, source: str = "paired table",
                  name: str = "cir") -> pd.DataFrame:
    """Every policy's sequential walk on ``paired``: one row per arm (task, condition).

    Columns ``y_<policy>``, ``int_<policy>`` (intervened), ``delay_<policy>`` and
    ``op_<policy>`` (the operation used, "" where none) for never, each baseline of the
    router (always, anomaly, anomaly_rate_matched, and for a router over several operations
    always_<op> and anomaly_<op>, each with its own operation), the anomaly rule matched to the
    router's rate on these arms (:data:`HELDOUT_MATCHED`, with anomaly_rate_matched's operation),
    the router (``name``) and the oracle (recover where some operation rescues, with the first
    that does).
    """
    router = as_router(model)
    df = validate_paired(paired, source=source)
    check_features(df, source, router.features)
    delays, d_min = router.delays, router.params["d_min"]
    cells = build_cells(df, delays, router.operations, source)
    walks, g = policy_fires(router, cells, name)
    delay_ok = cells.delay_ok(d_min)
    with np.errstate(invalid="ignore"):
        _, intervened, _ = walk(cells, walks[name][0], walks[name][1])
        o = router.operations.index(router.baselines["anomaly_rate_matched"]["operation"])
        walks = {**{k: v for k, v in walks.items() if k != name},
                 HELDOUT_MATCHED: (_rate_matched(cells, g["p_err_chosen"], delay_ok, cells.y1[..., o],
                                                 float(intervened.mean()) if len(intervened) else 0.0), cells.y1[..., o], o),
                 name: walks[name]}
    out = cells.arms.copy()
    d = np.asarray(delays)
    ops = np.asarray(cells.operations, dtype=object)
    for policy, (fire, y1, op_index) in walks.items():
        outcome, intervened, first = walk(cells, fire, y1)
        op_at = np.broadcast_to(op_index, cells.status.shape)
        picked = np.take_along_axis(op_at, np.maximum(first, 0)[:, None], axis=1)[:, 0]
        out[f"y_{policy}"] = outcome if cells.expected else outcome.astype(int)
        out[f"int_{policy}"] = intervened.astype(int)
        out[f"delay_{policy}"] = np.where(first >= 0, d[np.maximum(first, 0)], -1)
        out[f"op_{policy}"] = np.where(intervened, ops[np.clip(picked, 0, len(ops) - 1)], "")
    out = out.merge(walk_oracle(df, delays, d_min, router.operations, source), on=ARM_KEYS, how="left",
                    validate="1:1")
    out.attrs["meta"] = cells.meta
    out.attrs["policies"] = [*walks, "oracle"]
    return out


def policy_fires(router: Router, cells: Cells, name: str = "cir") -> tuple[
        dict[str, tuple[np.ndarray, np.ndarray, Any]], dict[str, np.ndarray]]:
    """Where each policy of fixed rule fires on ``cells`` (never, each baseline of the router, the
    router as ``name``): policy -> (fire, the outcome of recovering there, the operation's index),
    and the router's scores spread on the cells. Every rule here was set on the fitting table;
    the anomaly rule rate-matched on held-out arms (:data:`HELDOUT_MATCHED`) is not."""
    delays, d_min = router.delays, router.params["d_min"]
    g = cells.spread(router.predict(cells.decisions[router.features].to_numpy(dtype=float)))
    delay_ok = cells.delay_ok(d_min)
    walks: dict[str, tuple[np.ndarray, np.ndarray, Any]] = {
        "never": (np.zeros(cells.status.shape, dtype=bool), cells.y1[..., 0], 0)}
    with np.errstate(invalid="ignore"):
        for baseline in sorted(router.baselines, key=_baseline_order):
            b = router.baselines[baseline]
            o = router.operations.index(b["operation"])
            if "delay" in b:  # always recover at one delay
                fire = np.zeros(cells.status.shape, dtype=bool)
                fire[:, delays.index(b["delay"])] = True
            else:  # the error detector alone
                fire = delay_ok & passes(g["p_err_chosen"], b["alpha"])
            walks[baseline] = (fire, cells.y1[..., o], o)
        walks[name] = (cells.rule_fires(router.estimator, g, router.thresholds, d_min),
                       cells.outcome_if_chosen(g["choice"]), g["choice"])
    return walks, g


def _rate_matched(cells: Cells, p_err: np.ndarray, delay_ok: np.ndarray, y1: np.ndarray, rate: float) -> np.ndarray:
    """Where the anomaly rule fires at the threshold whose recovery rate on ``cells``'s arms is
    closest to ``rate`` (ties: the larger threshold, which recovers less); chosen from the
    rates alone, so no outcome of these arms is looked at."""
    alphas = np.append(np.unique(p_err[np.isfinite(p_err)]), np.inf)
    with np.errstate(invalid="ignore"):
        fire = delay_ok[None] & (p_err[None] >= alphas[:, None, None])
    _, intervened, _ = walk(cells, fire, y1)
    gap = np.abs(intervened.mean(axis=-1) - rate) if intervened.shape[-1] else np.zeros(len(alphas))
    best = int(np.flatnonzero(gap <= gap.min() + 1e-12)[-1])
    return fire[best]


def _baseline_order(name: str) -> tuple[int, str]:
    """always, anomaly, anomaly_rate_matched, then the per-operation ones by name."""
    main = ("always", "anomaly", "anomaly_rate_matched")
    return (main.index(name), "") if name in main else (len(main), name)


@memoized(ignore=("source",))  # the pooled report walks what each replicate's report walked
def walk_routers(models: Mapping[str, Router | Fitted], paired: pd.DataFrame,
                 source: str = "paired table") -> tuple[pd.DataFrame, list[str]]:
    """Walk several routers on one table: the first one's walk with its baselines, then each
    other router's own column with its always-recover (``always_<name>``: the operation and
    delay best on its training table) and rate-matched anomaly (``anomaly_matched_<name>``)
    baselines, the per-operation baselines of a router over several operations, and the
    oracle over every operation any of them may use. Returns (arms, the policies in display
    order).

    When the routers use more than one operation between them, each policy is also measured
    against the oracle of the operations it may choose among (``oracle_<op>`` for a policy of
    one operation), walked here too: ``arms.attrs["oracles"]`` maps each policy to its oracle,
    for :func:`summarize_walks`.
    """
    routers = {name: as_router(m) for name, m in models.items()}
    names = list(routers)
    out = walk_policies(routers[names[0]], paired, source, name=names[0])
    policies = [p for p in out.attrs["policies"] if p != "oracle"]
    scope = _policy_operations(routers[names[0]], names[0], {p: p for p in policies})
    out = out.drop(columns=[f"{k}_oracle" for k in ("y", "int", "delay", "op")])
    for name in names[1:]:
        other = walk_policies(routers[name], paired, source, name=name)
        # its own rate-matched anomaly and always-recover baselines, and the per-operation ones
        # (of a router over several operations) that no earlier router brought
        own = {"anomaly_rate_matched": f"anomaly_matched_{name}", HELDOUT_MATCHED: f"anomaly_matched_heldout_{name}"}
        if len(routers[name].operations) > 1:  # its always may recover with another operation
            own["always"] = f"always_{name}"
        new = [p for p in other.attrs["policies"] if p not in policies and p not in ("never", "oracle", *own)]
        added = [*(own[p] for p in ("always", "anomaly_rate_matched", HELDOUT_MATCHED) if p in own), *new]
        renamed = {f"{k}_{p}": f"{k}_{own.get(p, p)}" for p in [*own, *new] for k in ("y", "int", "delay", "op")}
        out = out.merge(other[ARM_KEYS + list(renamed)].rename(columns=renamed), on=ARM_KEYS, how="left",
                        validate="1:1")
        policies += [p for p in added if p != name] + [name]
        scope.update(_policy_operations(routers[name], name,
                                        {name: name, **{p: p for p in new}, **{v: k for k, v in own.items()}}))
    operations = tuple(dict.fromkeys(op for r in routers.values() for op in r.operations))
    first = routers[names[0]]
    delays, d_min = first.delays, int(first.params["d_min"])
    oracles: dict[str, str] = {}
    for policy, ops in scope.items():
        ops = tuple(o for o in operations if o in ops)  # in the table's order
        oracle = "oracle" if ops == operations else "oracle_" + "_".join(ops)
        oracles[policy] = oracle
        if oracle != "oracle" and f"y_{oracle}" not in out.columns:
            walked = walk_oracle(paired, delays, d_min, ops, source)
            out = out.merge(walked.rename(columns={f"{k}_oracle": f"{k}_{oracle}" for k in ("y", "int", "delay", "op")}),
                            on=ARM_KEYS, how="left", validate="1:1")
    out = out.merge(walk_oracle(paired, delays, d_min, operations, source), on=ARM_KEYS, how="left",
                    validate="1:1")
    partial = list(dict.fromkeys(o for o in oracles.values() if o != "oracle"))
    out.attrs["oracles"] = {**oracles, **{o: o for o in partial}, "oracle": "oracle"}
    return out, [*policies, *partial, "oracle"]


def _policy_operations(router: Router, name: str, walked: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """The operations each walked policy may recover with: the router's own for its column, a
    baseline's one operation for a baseline (``walked``: the column's name -> the policy of
    :func:`walk_policies` it came from)."""
    scope: dict[str, tuple[str, ...]] = {}
    for column, policy in walked.items():
        if policy == name:
            scope[column] = router.operations
        elif policy in router.baselines:
            scope[column] = (router.baselines[policy]["operation"],)
        elif policy == HELDOUT_MATCHED:  # it recovers with the rate-matched baseline's operation
            scope[column] = (router.baselines["anomaly_rate_matched"]["operation"],)
    return scope


def walk_oracle(paired: pd.DataFrame, delays: tuple[int, ...], d_min: int, operations: tuple[str, ...],
                source: str = "paired table") -> pd.DataFrame:
    """The oracle's walk: recover at the first candidate delay where some operation rescues,
    with the first operation that does (one row per arm: y, int, delay and op of ``oracle``)."""
    cells = build_cells(validate_paired(paired, source=source), delays, operations, source)
    if cells.expected:  # expected outcomes: where some operation raises the chance, the one raising it most
        gain = np.where(cells.status[..., None] == DECIDE, cells.y1 - cells.y0[:, None, None], 0.0)
        fire = cells.delay_ok(d_min) & (gain.max(axis=-1) > 0)
        best = np.argmax(gain, axis=-1)
        outcome, intervened, first = walk(cells, fire, np.take_along_axis(cells.y1, best[..., None], -1)[..., 0])
    else:
        rescues = (cells.y0[:, None, None] == 0) & (cells.y1 == 1)
        fire = cells.delay_ok(d_min) & rescues.any(axis=-1)
        outcome, intervened, first = walk(cells, fire, rescues.any(axis=-1).astype(int))
        best = np.argmax(rescues, axis=-1)
    picked = np.take_along_axis(best, np.maximum(first, 0)[:, None], axis=1)[:, 0]
    out = cells.arms[ARM_KEYS].copy()
    out["y_oracle"] = outcome if cells.expected else outcome.astype(int)
    out["int_oracle"] = intervened.astype(int)
    out["delay_oracle"] = np.where(first >= 0, np.asarray(delays)[np.maximum(first, 0)], -1)
    out["op_oracle"] = np.where(intervened, np.asarray(operations, dtype=object)[picked], "")
    return out


def _task_sums(arms: pd.DataFrame, values: dict[str, np.ndarray], groups: list[str]) -> tuple[
        np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """(tasks x columns) sums of each value per task for each condition and for all."""
    tasks, tcode = np.unique(arms["task_id"].to_numpy(), return_inverse=True)
    cond = arms["condition"].to_numpy()
    nums, dens, cols = [], [], []
    for name, v in values.items():
        for g in groups:
            mask = np.ones(len(cond), dtype=bool) if g == GROUP_ALL else cond == g
            nums.append(np.bincount(tcode[mask], weights=v[mask].astype(float), minlength=len(tasks)))
            dens.append(np.bincount(tcode[mask], minlength=len(tasks)).astype(float))
            cols.append((name, g))
    return np.column_stack(nums), np.column_stack(dens), cols


def _rises(before: np.ndarray, after: np.ndarray, mask: np.ndarray) -> int | float:
    """How many of the masked arms go from failure to success: a count of 0/1 outcomes, or, for
    the expected outcomes of a table of ``--samples``, the summed rise in the chance of success."""
    if before.dtype.kind == "f" or after.dtype.kind == "f":
        return float(np.maximum(after - before, 0.0)[mask].sum())
    return int(((before == 0) & (after == 1) & mask).sum())


def _summary_rows(arms: pd.DataFrame, policies: list[str], groups: list[str], diffs: dict[str, np.ndarray],
                  ci: dict[tuple[str, str], _Interval],
                  flip: dict[tuple[str, str], float], oracles: Mapping[str, str]) -> list[dict]:
    cond = arms["condition"].to_numpy()
    clean = cond == "clean"
    y0 = arms["y_never"].to_numpy()
    rows = []
    for p in policies:
        yp = arms[f"y_{p}"].to_numpy()
        intervened = arms[f"int_{p}"].to_numpy()
        for g in groups:
            m = np.ones(len(cond), dtype=bool) if g == GROUP_ALL else cond == g
            oracle = oracles.get(p, "oracle")
            oracle_gain = float(diffs[oracle][m].sum())
            cm = m & clean
            rows.append({
                "policy": p, "condition": g, "n": int(m.sum()), "n_tasks": int(arms.loc[m, "task_id"].nunique()),
                "success_never": float(y0[m].mean()), "success_policy": float(yp[m].mean()),
                "effect_pp": 100 * float(diffs[p][m].mean()),
                "ci_low_pp": 100 * ci[(p, g)].low, "ci_high_pp": 100 * ci[(p, g)].high,
                "sign_flip_p": flip[(p, g)],
                "rescues": _rises(y0, yp, m), "harms": _rises(yp, y0, m),
                "interventions": int(intervened[m].sum()), "intervention_rate": float(intervened[m].mean()),
                "clean_harm_rate": (float(_rises(yp, y0, cm)) / cm.sum() if cm.any() else float("nan")),
                "oracle_fraction": (float(diffs[p][m].sum()) / oracle_gain if oracle_gain > 0 else float("nan")),
                "oracle_policy": oracle, **ci[(p, g)].fields(),
            })
    return rows


class _Interval(NamedTuple):
    """A column's reported interval (fractions, not pp): ``kind`` ``bootstrap`` or ``counts``,
    and the bootstrap's percentile interval beside it."""

    kind: str
    low: float
    high: float
    boot_low: float
    boot_high: float

    def fields(self) -> dict[str, Any]:
        """Its :data:`INTERVAL_COLUMNS`."""
        return {"interval": self.kind, "bootstrap_low_pp": 100 * self.boot_low, "bootstrap_high_pp": 100 * self.boot_high}


def _intervals(arms: pd.DataFrame, named: dict[str, np.ndarray], cols: list[tuple[str, str]], low: np.ndarray,
               high: np.ndarray, few: int, level: float) -> dict[tuple[str, str], _Interval]:
    """Each column's reported interval. A difference of 0/1 outcomes whose two sides disagree in
    fewer than ``few`` arms gets the counts' interval (:mod:`cir.stats.counts`); any other the
    bootstrap's percentile one. Never's own effect is 0 by construction, not an estimate: its
    interval stays the point."""
    cond = arms["condition"].to_numpy()
    masks = {g: cond == g for g in dict.fromkeys(g for _, g in cols) if g != GROUP_ALL}
    out = {}
    for i, (name, g) in enumerate(cols):
        boot = (float(low[i]), float(high[i]))
        v = named[name] if g == GROUP_ALL else named[name][masks[g]]
        wins, losses = int((v > 0).sum()), int((v < 0).sum())
        if (few > 0 and name != "never" and len(v) > 0 and wins + losses < few
                and bool(np.isin(v, (-1, 0, 1)).all())):
            out[(name, g)] = _Interval("counts", *count_interval(wins, losses, len(v), level), *boot)
        else:
            out[(name, g)] = _Interval("bootstrap", *boot, *boot)
    return out


@memoized  # one bootstrap per walk table and settings, whichever report asks (cir.util.memo)
def summarize_walks(arms: pd.DataFrame, policies: list[str], contenders: list[str], *,
                    resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                    level: float = DEFAULT_LEVEL, oracles: Mapping[str, str] | None = None,
                    few: int = FEW_DISCORDANT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, margins) of walked arms (one row per arm with ``y_<policy>``/``int_<policy>``).

    Per policy and condition (and ``all``): success never vs policy, effect (pp) with a
    task-level cluster-bootstrap CI and sign-flip p-value versus never, rescues, harms,
    intervention and clean-harm rates, and the fraction of the oracle's gain reached (each
    policy's own oracle, ``oracles`` mapping policy -> oracle policy, else ``oracle``; the
    ``oracle_policy`` column names it);
    margins of each contender over every other policy with paired (same-task) intervals.
    ``task_id`` is the cluster: arms pooled from several replicates need task ids that
    are unique across them. All columns share the same bootstrap resamples. A difference whose
    sides disagree in fewer than ``few`` arms reports the counts' interval instead
    (:mod:`cir.stats.counts`; ``interval`` says which, ``bootstrap_*`` keep the bootstrap's; 0:
    the bootstrap's always).
    """
    conditions = sorted(set(arms["condition"]), key=lambda c: (c != "clean", c))
    groups = [GROUP_ALL, *conditions]
    y0 = arms["y_never"].to_numpy()
    diffs = {p: arms[f"y_{p}"].to_numpy() - y0 for p in policies}
    margins = {(c, p): arms[f"y_{c}"].to_numpy() - arms[f"y_{p}"].to_numpy()
               for c in contenders for p in policies if p != c}
    named = {**diffs, **{f"{c} - {p}": v for (c, p), v in margins.items()}}
    num, den, cols = _task_sums(arms, named, groups)
    reps = bootstrap_ratios(num, den, resamples, seed)
    low, high = percentile_ci(reps, level)
    ci = _intervals(arms, named, cols, low, high, few, level)
    flip = dict(zip(cols, sign_flip_tests([num[den[:, i] > 0, i] for i in range(len(cols))], resamples, seed),
                    strict=True))
    oracles = dict(oracles if oracles is not None else arms.attrs.get("oracles") or {})
    summary = pd.DataFrame(_summary_rows(arms, policies, groups, diffs, ci, flip, oracles), columns=SUMMARY_COLUMNS)
    cond = arms["condition"].to_numpy()
    mrows = []
    for (c, p), v in margins.items():
        for g in groups:
            m = np.ones(len(cond), dtype=bool) if g == GROUP_ALL else cond == g
            key = (f"{c} - {p}", g)
            mrows.append({"policy": c, "versus": p, "condition": g, "n": int(m.sum()),
                          "margin_pp": 100 * float(v[m].mean()), "ci_low_pp": 100 * ci[key].low,
                          "ci_high_pp": 100 * ci[key].high, "sign_flip_p": flip[key], **ci[key].fields()})
    return summary, pd.DataFrame(mrows, columns=MARGIN_COLUMNS)


def evaluate(model: Router | Fitted | Mapping[str, Router | Fitted], paired: pd.DataFrame, *,
             resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL,
             source: str = "test table") -> dict[str, Any]:
    """Held-out evaluation of one router (named ``cir``) or several (a name -> router mapping)
    and their baselines on ``paired`` (tasks never used in fitting).

    Returns ``{"episodes", "summary", "margins", "settings"}``: ``episodes`` is the walk table
    (one row per arm), ``summary`` and ``margins`` those of :func:`summarize_walks`, with every
    router a contender. Intervals and tests are those of :mod:`cir.stats.bootstrap` and
    :mod:`cir.stats.significance`.
    """
    models = dict(model) if isinstance(model, Mapping) else {"cir": model}
    routers = {name: as_router(m) for name, m in models.items()}
    arms, policies = walk_routers(routers, paired, source=source)
    summary, margins = summarize_walks(arms, policies, list(routers), resamples=resamples, seed=seed,
                                       level=level)
    first = next(iter(routers.values()))
    settings = {"routers": {name: _router_settings(r) for name, r in routers.items()},
                **_router_settings(first), "resamples": int(resamples), "seed": int(seed), "level": level,
                "episodes": int(len(arms)), "tasks": int(arms["task_id"].nunique()),
                **{f"cells_{k}": v for k, v in arms.attrs.get("meta", {}).items()},
                "cir_version": __version__}
    return {"episodes": arms, "summary": summary, "margins": margins, "settings": settings}


#: The columns of :func:`arm_decisions` (``cir evaluate --decisions FILE``).
DECISION_COLUMNS = ["task_id", "condition", "router", "recover", "delay", "operation", "y"]


def arm_decisions(arms: pd.DataFrame, routers: list[str]) -> pd.DataFrame:
    """Each router's decision on each held-out arm, from a walk table (:func:`walk_routers`, the
    ``episodes`` of :func:`evaluate`): whether it recovers, at which delay (-1: never) and with which
    operation ("" where none), and the arm's outcome under it. What a live run of the router is
    compared with, arm by arm (``cir evaluate --decisions FILE``): the live episode of a task under
    a condition recovers at that delay with that operation, or not at all, and ends with ``y``."""
    frames = [pd.DataFrame({"task_id": arms["task_id"].astype(str), "condition": arms["condition"].astype(str),
                            "router": name, "recover": arms[f"int_{name}"].astype(bool),
                            "delay": arms[f"delay_{name}"].astype(int), "operation": arms[f"op_{name}"].astype(str),
                            "y": arms[f"y_{name}"]}) for name in routers]
    out = pd.concat(frames, ignore_index=True)[DECISION_COLUMNS]
    return out.sort_values(["router", "task_id", "condition"], kind="stable").reset_index(drop=True)


def _router_settings(router: Router) -> dict[str, Any]:
    """The policy's settings as fitted (the harness budgets are the router's, not the policy's)."""
    params = {k: v for k, v in router.params.items() if k not in ("max_turns", "max_actions")}
    return {**{k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()},
            "estimator": router.estimator.name, "operations": list(router.operations),
            "thresholds": router.thresholds, "never_recovers": router.never_recovers, "budget": router.budget,
            "baselines": router.baselines}
