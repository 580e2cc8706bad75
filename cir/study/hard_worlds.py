"""Planted worlds that are hard: the router where its models are wrong, its detector weak, its
budget binding in a corner, its held-out population shifted, and its intervals on trial.

Worlds (a)-(c) (:mod:`cir.study.validation`) are the easy, well-specified case. The hard worlds
(:data:`cir.pairs.synthetic.HARD_WORLDS`, generators documented in
:func:`cir.pairs.synthetic._recovery`) are run the same way, replicate after replicate (a new
fitting table of ``fit_tasks`` and a new held-out one of ``heldout_tasks``: the reference study's
375 held-out tasks), and each replicate also measures:

* the *true* effect of every policy of fixed rule (set on the fitting table: the routers, never,
  always, the anomaly rule and its rate-matched form, the planted oracles) on the world's
  held-out population: the mean planted expected gain (``planted_gain``, y1 - y0 knowing
  everything) of the arms the policy recovers in, over a table of :data:`TRUTH_TASKS` tasks
  drawn once per world from the held-out population (its sampling error, under 0.2 pp, is far
  below an interval's half-width);
* the 95% intervals of each policy's effect on the held-out table, so that their coverage of the
  true effect can be counted over replicates: the study's (:func:`cir.router.evaluation.summarize_walks`:
  the task-cluster bootstrap's percentile interval, or the counts' one where the policy and
  never differ in fewer than :data:`cir.stats.counts.FEW_DISCORDANT` arms), the bootstrap's
  percentile one alone, a BCa one (:func:`scipy.stats.bootstrap`, ``method="BCa"``, resampling
  tasks, each task's sums of y_policy - y_never and of its arms paired) and the counts' one
  always (:func:`cir.stats.counts.count_interval`: Clopper-Pearson intervals of the rates of
  rescues and of harms);
* each router's margin over the anomaly rule with the study's interval.

:data:`HARD` holds each world's spec and its checks, written before any replicate was run.
:func:`hard_summary` pools replicates; :func:`hard_criteria` measures the checks.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from cir.episode.protocol import DEFAULT_DELTA, DEFAULT_EPSILON
from cir.pairs.synthetic import HARD_WORLDS, planted_world
from cir.router.evaluation import ARM_KEYS, policy_fires
from cir.router.walk import build_cells, walk
from cir.stats.counts import FEW_DISCORDANT, count_interval
from cir.study.validation import ORACLES, ROW_COLUMNS, fit_and_walk, oracle_walks, t_interval
from cir.util.parallel import parallel_map

#: The tasks of the table a policy's true effect is measured on (per world, drawn once).
TRUTH_TASKS = 20_000
#: The held-out tasks of a replicate: the reference study's held-out cohort.
STUDY_HELDOUT = 375
#: A replicate's rows: those of :data:`cir.study.validation.ROW_COLUMNS` (``ci_*``: the study's
#: interval), the policy's true effect, which interval the study reported (``interval``) and its
#: bootstrap percentile one, its BCa interval, its rescues and harms with the interval of :func:`count_interval`,
#: and (routers only) its margin over the anomaly rule with the study's interval.
HARD_COLUMNS = [*ROW_COLUMNS, "true_effect_pp", "true_effect_se_pp", "interval", "bootstrap_low_pp",
                "bootstrap_high_pp", "bca_low_pp", "bca_high_pp", "rescues", "harms",
                "cp_low_pp", "cp_high_pp", "margin_anomaly_pp", "margin_anomaly_low_pp", "margin_anomaly_high_pp"]
#: A world's check, measured: (criterion, value, target, met; None where shown beside, no target).
Check = tuple[str, float, str, "bool | None"]


@dataclass(frozen=True)
class HardWorld:
    """A hard planted world as the validation runs it: what it plants (``title``), the tasks of a
    replicate's fitting and held-out tables, the delays they hold, the routers fitted on it
    (policy name -> (estimator, budget), every other setting the study's) and its checks (given
    the pooled summary indexed by world and policy, and delta)."""

    name: str
    title: str
    fit_tasks: int
    heldout_tasks: int
    delays: tuple[int, ...]
    routers: dict[str, tuple[str, str]]
    checks: Callable[[pd.DataFrame, float], list[Check]]


def _coverage(world: str, routers: tuple[str, ...]) -> Callable[[pd.DataFrame, float], list[Check]]:
    """Every world: each router's study interval covers its true effect in >= 94% of replicates
    (the bootstrap's percentile, the BCa and the counts' intervals' coverage beside)."""
    def checks(s: pd.DataFrame, delta: float) -> list[Check]:
        out: list[Check] = []
        for policy in routers:
            if (world, policy) in s.index:
                r = s.loc[(world, policy)]
                out.append((f"{policy}: coverage of the true effect by the study's 95% interval",
                            r["coverage_study"], ">= 0.94", bool(r["coverage_study"] >= 0.94)))
                out.append((f"{policy}: coverage by the bootstrap's percentile interval alone", r["coverage_percentile"],
                            "(beside it)", None))
                out.append((f"{policy}: coverage by the BCa interval", r["coverage_bca"], "(beside it)", None))
                out.append((f"{policy}: coverage by the counts' interval (Clopper-Pearson)", r["coverage_counts"],
                            "(beside it)", None))
        return out
    return checks


def _beside(world: str, policy: str, column: str, what: str) -> Callable[[pd.DataFrame], list[Check]]:
    def check(s: pd.DataFrame) -> list[Check]:
        return [(f"{policy}: {what}", s.loc[(world, policy)][column], "(beside it)", None)] \
            if (world, policy) in s.index else []
    return check


def _checks_d(s: pd.DataFrame, delta: float) -> list[Check]:
    """(d): no target on the gain (a model linear in the features cannot express the XOR: the
    share of the planted oracle is shown as measured), the margin over the anomaly rule beside."""
    out = _coverage("d", ("cir", "cir_paired"))(s, delta)
    for policy in ("cir", "cir_paired"):
        out += _beside("d", policy, "share_planted_oracle", "share of the planted oracle's gain")(s)
        out += _beside("d", policy, "margin_anomaly_pp", "margin over the anomaly rule (pp)")(s)
    return out


def _checks_e(s: pd.DataFrame, delta: float) -> list[Check]:
    """(e): the world is what it says: cir_paired's held-out p_err AUC within 0.60-0.70; its
    share of the feature oracle's gain beside."""
    out = _coverage("e", ("cir", "cir_paired"))(s, delta)
    if ("e", "cir_paired") in s.index:
        auc = s.loc[("e", "cir_paired")]["p_err_auc"]
        out.append(("cir_paired: p_err held-out AUC", auc, "0.60 - 0.70", bool(0.6 <= auc <= 0.7)))
    out += _beside("e", "cir_paired", "share_feature_oracle", "share of the feature oracle's gain")(s)
    return out


def _checks_f(s: pd.DataFrame, delta: float) -> list[Check]:
    """(f): the certified budget's share of replicates over epsilon <= delta (expected and
    realized); the empirical budget's and the anomaly rule's beside."""
    out = _coverage("f", ("cir_paired", "cir_paired_certified"))(s, delta)
    for policy, target in (("cir_paired_certified", f"<= {delta:g}"), ("cir_paired", "(beside it)"),
                           ("anomaly", "(beside it)")):
        if ("f", policy) in s.index:
            r = s.loc[("f", policy)]
            for kind in ("expected", "realized"):
                out.append((f"{policy}: share of replicates whose {kind} clean harm exceeds epsilon",
                            r[f"violations_{kind}"], target,
                            bool(r[f"violations_{kind}"] <= delta) if policy == "cir_paired_certified" else None))
    return out


def _checks_g(s: pd.DataFrame, delta: float) -> list[Check]:
    """(g): coverage on the shifted population; the share of the feature oracle and clean-harm
    violations beside (no target: how much a shift costs is what is measured)."""
    out = _coverage("g", ("cir", "cir_paired"))(s, delta)
    out += _beside("g", "cir_paired", "share_feature_oracle", "share of the (held-out) feature oracle's gain")(s)
    out += _beside("g", "cir_paired", "violations_realized", "share of replicates over epsilon (realized)")(s)
    return out


def _checks_h(s: pd.DataFrame, delta: float) -> list[Check]:
    """(h): the world tests intervals, not abstention: cir_paired recovers in at least half the
    replicates; the share of replicates whose interval vs never excludes 0 is <= 7% (every
    policy's true effect is 0)."""
    out = _coverage("h", ("cir", "cir_paired"))(s, delta)
    for policy in ("cir", "cir_paired"):
        if ("h", policy) in s.index:
            r = s.loc[("h", policy)]
            if policy == "cir_paired":
                out.append(("cir_paired: share of replicates that recover at all", r["recovered_any"], ">= 0.5",
                            bool(r["recovered_any"] >= 0.5)))
            out.append((f"{policy}: share of replicates whose interval vs never excludes 0", r["excludes_zero"],
                        "<= 0.07", bool(r["excludes_zero"] <= 0.07)))
    return out


_ROUTERS = {"cir": ("paper", "empirical"), "cir_paired": ("paired", "empirical")}
#: The hard worlds, their tables and checks (written before any replicate ran). Delays 0 and 1
#: only: one decision cell per arm (d_min = 1), so a replicate costs what (a)'s does at a larger
#: held-out table. (f) fits on 600 tasks, as (c) does: enough clean arms to certify a setting.
HARD: dict[str, HardWorld] = {w.name: w for w in (
    HardWorld("d", "an interaction (XOR of two features) the logistic models cannot express", 200, STUDY_HELDOUT,
              (0, 1), _ROUTERS, _checks_d),
    HardWorld("e", "weak error detection (an ideal detector's AUC 0.65)", 200, STUDY_HELDOUT, (0, 1), _ROUTERS,
              _checks_e),
    HardWorld("f", "clean harm concentrated in a subgroup (17.5% of arms)", 600, STUDY_HELDOUT, (0, 1),
              {"cir_paired": ("paired", "empirical"), "cir_paired_certified": ("paired", "certified")}, _checks_f),
    HardWorld("g", "a held-out population shifted from the fitting one", 200, STUDY_HELDOUT, (0, 1), _ROUTERS,
              _checks_g),
    HardWorld("h", "a null held-out world, fitted where recovery helps: routers recover, the true gain is 0", 200,
              STUDY_HELDOUT, (0, 1), _ROUTERS, _checks_h),
)}
assert tuple(HARD) == HARD_WORLDS


@lru_cache(maxsize=8)
def truth_table(world: str, seed: int, delays: tuple[int, ...]) -> pd.DataFrame:
    """The world's held-out population, :data:`TRUTH_TASKS` tasks (seed ``(seed, 999)``)."""
    return planted_world(world, TRUTH_TASKS, seed=(seed, 999), delays=delays, task_prefix="truth", heldout=True)


def true_effects(routers: dict[str, Any], table: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """The true effect (pp) on ``table``'s population of every policy of fixed rule: each router,
    the first router's baselines, the other routers' rate-matched anomaly rules
    (``anomaly_matched_<name>``), never and the planted oracles: 100 times the mean over arms of
    the planted gain where the policy recovers, with its standard error over ``table``'s tasks."""
    first = next(iter(routers.values()))
    cells = build_cells(table, first.delays, first.operations, "truth table")
    gain = cells.arms[ARM_KEYS].join(table.groupby(ARM_KEYS, sort=False)["planted_gain"].first(), on=ARM_KEYS)
    gain = gain["planted_gain"].to_numpy(dtype=float)
    _, task = np.unique(cells.arms["task_id"].to_numpy(), return_inverse=True)

    def effect(intervened: np.ndarray) -> tuple[float, float]:
        per_task = np.bincount(task, weights=gain * intervened) / np.bincount(task)
        return 100 * float((gain * intervened).mean()), 100 * float(per_task.std(ddof=1) / np.sqrt(len(per_task)))

    out: dict[str, tuple[float, float]] = {}
    for i, (name, router) in enumerate(routers.items()):
        walks, _ = policy_fires(router, cells, name)
        rename = {} if i == 0 else {"anomaly_rate_matched": f"anomaly_matched_{name}"}
        for policy, (fire, y1, _) in walks.items():
            if i == 0 or policy in (name, *rename):
                with np.errstate(invalid="ignore"):
                    _, intervened, _ = walk(cells, fire, y1)
                out[rename.get(policy, policy)] = effect(intervened)
    oracles = oracle_walks(table, int(first.params["d_min"]), first.delays)
    for name in ORACLES:
        out[name] = effect(oracles[f"int_{name}"].to_numpy())
    return out


def bca_intervals(arms: pd.DataFrame, policies: list[str], *, resamples: int, seed: int,
                  level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Each policy's BCa task-cluster bootstrap interval of its effect (pp): scipy's
    :func:`~scipy.stats.bootstrap` over tasks, each task's sum of y_policy - y_never paired with
    its count of arms, the statistic their ratio of sums (the effect per arm). A policy whose
    per-task effects are all equal (one that never recovers) has the point as its interval."""
    tasks, code = np.unique(arms["task_id"].to_numpy(), return_inverse=True)
    den = np.bincount(code, minlength=len(tasks)).astype(float)
    y0 = arms["y_never"].to_numpy(dtype=float)
    rng = np.random.default_rng(seed)

    def ratio(num: np.ndarray, d: np.ndarray, axis: int = -1) -> np.ndarray:
        return num.sum(axis=axis) / d.sum(axis=axis)

    out = {}
    for policy in policies:
        num = np.bincount(code, weights=arms[f"y_{policy}"].to_numpy(dtype=float) - y0, minlength=len(tasks))
        if np.ptp(num / den) == 0:
            point = 100 * float(num.sum() / den.sum())
            out[policy] = (point, point)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a degenerate jackknife: scipy says so and returns NaN
            res = stats.bootstrap((num, den), ratio, paired=True, vectorized=True, n_resamples=resamples,
                                  confidence_level=level, method="BCa", random_state=rng)
        out[policy] = (100 * float(res.confidence_interval.low), 100 * float(res.confidence_interval.high))
    return out


def hard_replicate(world: str, replicate: int, *, seed: int = 0, resamples: int = 2000,
                   epsilon: float = DEFAULT_EPSILON, delta: float = DEFAULT_DELTA) -> pd.DataFrame:
    """One replicate of a hard world: routers fitted on a new fitting table (seed ``(seed,
    replicate, 0)``), walked with their baselines and the planted oracles on a new held-out table
    (``(seed, replicate, 1)``, the held-out population); one row per policy (:data:`HARD_COLUMNS`)."""
    spec = HARD[world]
    walked = fit_and_walk(world, spec, replicate, seed=seed, resamples=resamples, epsilon=epsilon, delta=delta,
                          heldout=True)
    truth = true_effects(walked.routers, truth_table(world, seed, spec.delays))
    bca = bca_intervals(walked.arms, walked.policies, resamples=resamples, seed=seed + replicate)
    margins = walked.margins
    over = margins[(margins["condition"] == "all") & (margins["versus"] == "anomaly")].set_index("policy")
    rows = []
    for policy in walked.policies:
        r = walked.every.loc[policy]
        m = over.loc[policy] if policy in over.index else None
        count = [100 * x for x in count_interval(int(r["rescues"]), int(r["harms"]), int(r["n"]))]
        rows.append({**walked.row(world, replicate, policy),
                     "true_effect_pp": truth.get(policy, (np.nan, np.nan))[0],
                     "true_effect_se_pp": truth.get(policy, (np.nan, np.nan))[1],
                     "interval": r["interval"], "bootstrap_low_pp": float(r["bootstrap_low_pp"]),
                     "bootstrap_high_pp": float(r["bootstrap_high_pp"]),
                     "bca_low_pp": bca[policy][0], "bca_high_pp": bca[policy][1],
                     "rescues": int(r["rescues"]), "harms": int(r["harms"]), "cp_low_pp": count[0],
                     "cp_high_pp": count[1],
                     "margin_anomaly_pp": float(m["margin_pp"]) if m is not None else float("nan"),
                     "margin_anomaly_low_pp": float(m["ci_low_pp"]) if m is not None else float("nan"),
                     "margin_anomaly_high_pp": float(m["ci_high_pp"]) if m is not None else float("nan")})
    return pd.DataFrame(rows, columns=HARD_COLUMNS)


def _part(folder: Path, world: str, replicate: int) -> Path:
    return folder / f"hard-{world}-{replicate:04d}.csv"


def _one(job: tuple[str, int], options: dict[str, Any], folder: str | None) -> pd.DataFrame:
    rows = hard_replicate(job[0], job[1], **options)
    if folder is not None:  # written as it goes: a run that stops keeps what it finished
        from cir.util.files import write_atomic

        write_atomic(_part(Path(folder), *job), rows.to_csv(index=False))
    return rows


def run_hard(replicates: int, *, worlds: tuple[str, ...] = HARD_WORLDS, seed: int = 0, jobs: int = 1,
             folder: str | Path | None = None, progress: Callable[[int, int], None] | None = None,
             **options: Any) -> pd.DataFrame:
    """Every replicate of every hard world (:func:`hard_replicate`), in order, as one table; with
    ``folder``, each replicate's rows written there as it finishes and read back instead of
    fitted again (the folder must hold replicates of the same settings: the caller keeps it so).
    ``progress(done, total)`` after each replicate."""
    # replicate by replicate across the worlds: a run stopped early has as many of each
    todo = [(w, r) for r in range(replicates) for w in worlds]
    done: dict[tuple[str, int], pd.DataFrame] = {}
    if folder is not None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for job in todo:
            if _part(folder, *job).exists():
                done[job] = pd.read_csv(_part(folder, *job))
    missing = [job for job in todo if job not in done]
    ran = parallel_map(_one, missing, {"seed": seed, **options}, None if folder is None else str(folder), jobs=jobs)
    for job, rows in zip(missing, ran, strict=True):
        done[job] = rows
        if progress is not None:
            progress(len(done), len(todo))
    parts = [done[job] for job in sorted(todo)]  # world by world, each in replicate order
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=HARD_COLUMNS)


HARD_SUMMARY_COLUMNS = [
    "world", "policy", "replicates", "effect_pp", "ci_low_pp", "ci_high_pp", "true_effect_pp",
    "share_planted_oracle", "share_feature_oracle", "excludes_zero", "recovered_any", "intervention_rate",
    "clean_harm_rate", "expected_clean_harm", "violations_realized", "violations_expected", "margin_anomaly_pp",
    "margin_anomaly_ci_low_pp", "margin_anomaly_ci_high_pp", "margin_anomaly_excludes_zero",
    "margin_anomaly_above_zero", "margin_anomaly_below_zero", "coverage_study", "coverage_percentile", "coverage_bca",
    "coverage_counts", "counted_share", "point_intervals", "width_study_pp", "width_percentile_pp", "width_bca_pp",
    "width_counts_pp",
    "true_effect_se_pp", "p_err_auc"]


def _covers(low: pd.Series, high: pd.Series, truth: pd.Series) -> float:
    """The share of replicates whose interval holds the true effect (to 1e-9 pp: an interval of
    a policy that never recovers is the point 0, its truth exactly 0)."""
    ok = truth.notna()
    hit = (low[ok] <= truth[ok] + 1e-9) & (truth[ok] <= high[ok] + 1e-9)
    return float(hit.mean()) if ok.any() else float("nan")


def hard_summary(rows: pd.DataFrame, epsilon: float = DEFAULT_EPSILON) -> pd.DataFrame:
    """Per world and policy, pooled over replicates: the mean effect with its t interval over
    replicates, the mean true effect, the share of each planted oracle's mean gain (by the
    held-out effects), the share of replicates whose own interval vs never excludes 0, that
    recovered at all, clean harm (realized, expected) and the share of replicates over
    ``epsilon``, the router's margin over the anomaly rule (mean, t interval, the share of
    replicates whose own interval excludes 0, above, below), the coverage of the true effect by
    the study's interval (the bootstrap's percentile one, or the counts' where few arms differ:
    :mod:`cir.stats.counts`), the bootstrap's percentile one alone, the BCa and the counts' intervals,
    the share of replicates whose study interval was the counts' one, whose interval is a point, the
    mean widths, the true effect's mean standard error, the p_err AUC."""
    out = []
    for world, w in rows.groupby("world", sort=True):
        by = {p: g.sort_values("replicate") for p, g in w.groupby("policy", sort=False)}
        oracle = {name: by[name]["effect_pp"].mean() for name in ORACLES if name in by}
        for policy, g in by.items():
            mean, low, high = t_interval(g["effect_pp"].to_numpy())
            margin = g["margin_anomaly_pp"].dropna().to_numpy()
            mm, mlo, mhi = t_interval(margin) if len(margin) else (np.nan, np.nan, np.nan)
            has_margin = g["margin_anomaly_pp"].notna()
            m_low, m_high = g.loc[has_margin, "margin_anomaly_low_pp"], g.loc[has_margin, "margin_anomaly_high_pp"]
            # rows from before the counts' rule (no bootstrap_* columns) reported the bootstrap's
            boot_low = g["bootstrap_low_pp"] if "bootstrap_low_pp" in g else g["ci_low_pp"]
            boot_high = g["bootstrap_high_pp"] if "bootstrap_high_pp" in g else g["ci_high_pp"]
            out.append({
                "world": world, "policy": policy, "replicates": len(g), "effect_pp": mean, "ci_low_pp": low,
                "ci_high_pp": high, "true_effect_pp": float(g["true_effect_pp"].mean()),
                "share_planted_oracle": mean / oracle["planted_oracle"] if oracle.get("planted_oracle", 0) > 0 else np.nan,
                "share_feature_oracle": mean / oracle["feature_oracle"] if oracle.get("feature_oracle", 0) > 0 else np.nan,
                "excludes_zero": float(((g["ci_low_pp"] > 0) | (g["ci_high_pp"] < 0)).mean()),
                "recovered_any": float((g["interventions"] > 0).mean()),
                "intervention_rate": float(g["intervention_rate"].mean()),
                "clean_harm_rate": float(g["clean_harm_rate"].mean()),
                "expected_clean_harm": float(g["expected_clean_harm"].mean()),
                "violations_realized": float((g["clean_harm_rate"] > epsilon + 1e-12).mean()),
                "violations_expected": float((g["expected_clean_harm"] > epsilon + 1e-12).mean()),
                "margin_anomaly_pp": mm, "margin_anomaly_ci_low_pp": mlo, "margin_anomaly_ci_high_pp": mhi,
                "margin_anomaly_excludes_zero": float(((m_low > 0) | (m_high < 0)).mean()) if len(m_low) else np.nan,
                "margin_anomaly_above_zero": float((m_low > 0).mean()) if len(m_low) else np.nan,
                "margin_anomaly_below_zero": float((m_high < 0).mean()) if len(m_low) else np.nan,
                "coverage_study": _covers(g["ci_low_pp"], g["ci_high_pp"], g["true_effect_pp"]),
                "coverage_percentile": _covers(boot_low, boot_high, g["true_effect_pp"]),
                "coverage_bca": _covers(g["bca_low_pp"], g["bca_high_pp"], g["true_effect_pp"]),
                "coverage_counts": _covers(g["cp_low_pp"], g["cp_high_pp"], g["true_effect_pp"]),
                # an interval that is a point (no recovery held out) covers only a true effect of 0
                "point_intervals": float((g["ci_high_pp"] == g["ci_low_pp"]).mean()),
                "counted_share": float((g["interval"] == "counts").mean()) if "interval" in g else 0.0,
                "width_study_pp": float((g["ci_high_pp"] - g["ci_low_pp"]).mean()),
                "width_percentile_pp": float((boot_high - boot_low).mean()),
                "width_bca_pp": float((g["bca_high_pp"] - g["bca_low_pp"]).mean()),
                "width_counts_pp": float((g["cp_high_pp"] - g["cp_low_pp"]).mean()),
                "true_effect_se_pp": float(g["true_effect_se_pp"].mean()),
                "p_err_auc": float(g["p_err_auc"].mean()) if g["p_err_auc"].notna().any() else np.nan})
    return pd.DataFrame(out, columns=HARD_SUMMARY_COLUMNS)


def hard_criteria(summary: pd.DataFrame, delta: float = DEFAULT_DELTA) -> pd.DataFrame:
    """Each hard world's checks (:data:`HARD`), measured on :func:`hard_summary`."""
    s = summary.set_index(["world", "policy"])
    rows = [{"world": name, "criterion": c, "value": v, "target": t, "met": met}
            for name, spec in HARD.items() if name in set(summary["world"])
            for c, v, t, met in spec.checks(s, delta)]
    return pd.DataFrame(rows, columns=["world", "criterion", "value", "target", "met"])


#: The rows of the hard worlds' table the main text shows (every policy in the CSV).
BRIEF = ("cir", "cir_paired", "cir_paired_certified", "anomaly", "planted_oracle")


def hard_section(report: Any, out: Path, replicates: int, *, seed: int, jobs: int = 1) -> None:
    """"Where it is hard": ``replicates`` replicates of each hard world in a study's report
    (``cir reproduce --hard-worlds N``); each replicate's rows kept in
    ``out/validation/hard-seed<S>/`` as it finishes and read back by a later call."""
    from cir.study.page import format_number, save_csv
    from cir.util.files import write_atomic

    folder = Path(out) / "validation" / f"hard-seed{int(seed)}"
    rows = run_hard(replicates, seed=seed, jobs=jobs, folder=folder / "replicates")
    write_atomic(folder / "hard_rows.csv", rows.to_csv(index=False))
    summary = hard_summary(rows)
    checks = hard_criteria(summary)
    report.heading("Where it is hard: the hard planted worlds")
    worlds = "; ".join(f"({w.name}) {w.title}" for w in HARD.values())
    s = summary.set_index(["world", "policy"])

    def share(world: str) -> str:
        if (world, "cir_paired") not in s.index or not np.isfinite(s.loc[(world, "cir_paired")]["share_planted_oracle"]):
            return "n/a"
        return format_number(s.loc[(world, "cir_paired")]["share_planted_oracle"], 2)

    report.text(
        f"Worlds (a)-(c) are the well-specified case. The hard worlds are not: {worlds}. The study's routers, every "
        f"setting their default, are fitted on {replicates} replicate{'' if replicates == 1 else 's'} of each (375 "
        "held-out tasks, the reference study's), and each policy's true effect on the world's held-out population is "
        "computed from the generator, so each replicate's 95% interval is checked against it: the study's (the "
        "task-cluster bootstrap's percentile interval, or the counts' Clopper-Pearson one where a policy and never "
        f"differ in fewer than {FEW_DISCORDANT} held-out arms), the bootstrap's alone and a BCa one "
        "(`scipy.stats.bootstrap`). `cir_paired`'s share of the "
        "planted oracle's gain: " + ", ".join(f"({w}) {share(w)}" for w in HARD if w != "h") + ". "
        "`benchmarks/planted_hard.py` runs 200 replicates of each (`data/planted/hard_worlds.json`).")
    report.table(checks, save_csv(checks, out / "tables" / "router_validation_hard_criteria.csv"),
                 "Each hard world's check, written before any replicate ran, measured")
    path = save_csv(summary, out / "tables" / "router_validation_hard.csv")
    shown = summary[summary["policy"].isin(BRIEF)][
        ["world", "policy", "replicates", "effect_pp", "true_effect_pp", "share_planted_oracle", "margin_anomaly_pp",
         "margin_anomaly_excludes_zero", "violations_realized", "coverage_study", "coverage_percentile", "coverage_bca"]]
    report.table(shown, path, "The hard planted worlds, pooled over replicates (every policy and column in the CSV)")
