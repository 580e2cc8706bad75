"""The analysis of a reproduced study, written as tables, figures and a report.

The report opens with its findings: one sentence per question of the paper, with the
number, its interval and its test, generated from the tables (:mod:`cir.study.findings`), and a
plain warning when the cohorts are too small for an interval to exclude zero. Then it
walks through the three questions in order: the effects of refresh (by condition and
delay, in the factual-success and the complete subset of every ``effects`` cohort), the
mechanism controls (and the joint outcome table of full vs content-ablated refresh), and
CIR (fit on the cohort a config marks ``fit_cir``, held-out evaluation against the
baselines and the oracle). Every table is written as CSV under ``tables/`` before it is
put in the report, so each number can be traced to a file.

Each cohort's run folder is read and checked once (:func:`cir.pairs.paired.read_run`), and the
routers are fitted and evaluated before any section is written; the sections only show.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from cir.episode.perturb import NO_READ, parse_conditions, perturbation_point
from cir.episode.protocol import (
    PRIMARY_STALE,
)
from cir.families.registry import get_family
from cir.pairs.paired import CheckedRun, feature_columns, read_run
from cir.pairs.record import RunRecord
from cir.pairs.samples import has_samples
from cir.pairs.shown import with_shown
from cir.pairs.store import PAIRED
from cir.router.calibration import calibration_figure, calibration_table
from cir.stats.counts import FEW_DISCORDANT
from cir.stats.decompose import decompose, select_subset
from cir.stats.effects import SAMPLED_COLUMNS, contrast_table, effect_table
from cir.stats.explain import attribution_split, explain_checked, harm_table, mechanism_counts
from cir.stats.joint import joint_effects, joint_matrix, joint_outcomes
from cir.stats.noise import noise_floor
from cir.study.comparisons import comparisons_block
from cir.study.experiments import Experiment
from cir.study.figures import (
    FigureSkipped,
    plot_effects,
    plot_heldout,
    plot_joint,
    plot_mechanisms,
    plot_partitions,
    plot_recovery_mix,
)
from cir.study.findings import (
    Finding,
    cir_finding,
    effect_finding,
    mechanism_finding,
    small_cohort_warning,
)
from cir.study.kinds import kind_section, scored_cells, shown_split, with_arm_shown
from cir.study.page import Report, SavedFigure, format_number, save_csv, save_figure
from cir.study.selective import (
    MULTI,
    ROUTERS,
    Selective,
    discrimination_table,
    fit_table,
    mix_table,
    optimism_table,
    run_selective,
)
from cir.study.summaries import (
    effect_grid,
    largest_margins,
    margins_caption,
    mix_sentence,
    policy_rows,
)
from cir.study.validation import VALIDATION_WORLDS, validation_section
from cir.util.errors import CirError
from cir.util.progress import Steps

# the columns of the stats tables that the report shows
EFFECT_SHOWN = ["n", "rescues", "harms", "stable_success", "stable_failure", "success_without",
                "success_with", "effect_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p",
                *SAMPLED_COLUMNS]  # the last only in a study of --samples above 1
EVAL_SHOWN = ["n", "success_never", "success_policy", "effect_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p",
              "rescues", "harms", "intervention_rate", "clean_harm_rate"]
FIT_SHOWN = ["estimator", "operations", "alpha", "beta", "gamma", "candidates_searched", "candidates_within_epsilon",
             "oof_net_gain_pp", "oof_clean_harm", "oof_intervention_rate"]
CONTRAST_SHOWN = ["effect_a_pp", "effect_b_pp", "difference_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p"]


def _cols(df: pd.DataFrame, keys: list[str], wanted: list[str]) -> pd.DataFrame:
    return df[[c for c in keys + wanted if c in df.columns]]


def _conditions_text(conditions: Sequence[str]) -> str:
    """What each condition of a grid shows, in its order (``staleK``, ``lagK``, ``missing``)."""
    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    parts = []
    for c in parse_conditions(list(conditions)):
        k = words.get(c.k, str(c.k))
        if c.kind == "stale":
            parts.append(f"`{c.name}`: the observation from {k} env action{'s' if c.k != 1 else ''} earlier, "
                         "the answer to another command")
        elif c.kind == "lag":
            parts.append(f"`{c.name}`: the answer the same command would have got {k} env "
                         f"action{'s' if c.k != 1 else ''} earlier, which looks right")
        elif c.kind == "missing":
            parts.append("`missing`: a fixed unavailable message")
    return "; ".join(parts) or "no condition but clean"


def _read_point_text(experiments: list[Experiment], runs: dict[str, RunRecord]) -> str:
    """For a world whose env says which actions are reads (a tool world): that the perturbed env
    action is the first read at or after the protocol's, and how often that moved it (from the run
    records); nothing for any other world (no task moved, none refused for want of a read)."""
    moved = feasible = no_read = 0
    for exp in experiments:
        for task_id, f in runs[exp.name].feasibility.items():
            no_read += f.reason.startswith(NO_READ)
            if f.point is not None:
                feasible += 1
                protocol = perturbation_point(f.factual_env_actions, exp.replay.perturb_fraction,
                                              exp.replay.point_at(task_id))
                moved += f.point != protocol
    if not moved and not no_read:
        return ""
    return (f" (or, as this world's env says which of its actions are reads and a cache serves reads, the "
            f"first read at or after it: a later env action in {moved} of {feasible} prefix-feasible task runs; "
            f"{no_read} had no read there)")


def _setup_section(report: Report, out: Path, experiments: list[Experiment], runs: dict[str, RunRecord],
                   agent: str, quick: bool) -> None:
    rows = []
    for exp in experiments:
        rec = runs[exp.name]
        c, costs, grid = rec.counts, rec.costs, exp.replay
        rows.append({
            "experiment": exp.name, "role": exp.role, "split": exp.split, "tasks": c.tasks,
            "prefix_feasible": c.tasks_feasible, "factual_success": c.factual_success,
            "pairs": c.pairs, "agent_calls": costs.agent_calls,
            "cache_hits": costs.cache_hits, "env_steps": costs.env_steps,
            "conditions": ", ".join(grid.conditions), "delays": ", ".join(map(str, grid.delays)),
            "operations": ", ".join(grid.operations),
        })
    table = pd.DataFrame(rows)
    report.heading("Setup")
    first = experiments[0].replay
    family = experiments[0].family
    tasks = get_family(family).tasks_text or f"generated tasks of the `{family}` environment family"
    point = (f"the observation of env action {first.perturb_at}" if first.perturb_at is not None else
             f"the observation of the env action after {first.perturb_fraction:.0%} of the factual run's env actions")
    point += _read_point_text(experiments, runs)
    report.text(
        f"Agent `{agent}`; {'quick' if quick else 'full'} cohorts of {tasks}; budgets "
        f"{first.max_turns} model turns and {first.max_actions} env actions; {point} is "
        f"modified ({_conditions_text(first.conditions)}). Recovery at delay d runs after d more env actions. "
        "Cohorts never share tasks. "
        "Intervals: 95% task-level cluster bootstrap; a held-out policy's or margin's where it differs from "
        f"its comparison in fewer than {FEW_DISCORDANT} arms: the counts' (Clopper-Pearson) interval."
    )
    report.text(
        "Where everything is, beside this report: every table it shows as CSV in `tables/` (each table "
        "names its file), the figures in `figures/`, each cohort's run folder in `runs/<experiment>/` "
        "(`paired.csv`, the run record `run.json`, every episode in `episodes.jsonl.gz`), the fitted "
        "router in `router.json`, the generated tasks with their manifests in `tasks/<split>/`, and "
        "the study's settings and timings in `study.json`."
    )
    source = save_csv(table, out / "tables" / "cohorts.csv")
    grid_columns = ["experiment", "role", "split", "tasks", "prefix_feasible", "factual_success", "pairs",
                    "conditions", "delays", "operations"]
    report.table(table[grid_columns], source, "Cohorts and what was run on them")
    report.text(
        "`factual_success` counts every task whose factual run succeeded, prefix-infeasible ones "
        "included (a factual run too short to perturb); the factual-success subsets below keep the "
        "prefix-feasible ones."
    )
    report.table(table[["experiment", "pairs", "agent_calls", "cache_hits", "env_steps"]], source,
                 "The work each cohort took")


#: A finding with the figure that shows it (drawn for the column beside it) and its caption.
Shown = tuple[Finding, SavedFigure | None, str]


def _effects_section(report: Report, out: Path, experiments: list[Experiment], runs: dict[str, CheckedRun],
                     resamples: int, seed: int) -> Shown | None:
    """The effects of refresh per ``effects`` cohort; the finding of the first cohort, with its figure."""
    report.heading("1. Effects of refresh by condition and delay")
    report.text(
        "Effect of refresh = success with refresh minus success without, from the same state, in "
        "percentage points; rescues turn a failure into a success, harms the reverse. In the "
        "factual-success subset the clean no-recovery run reproduces a success, so clean refresh can "
        "only harm; the complete subset (all) keeps every prefix-feasible task."
    )
    shown_finding: Shown | None = None
    for exp in (e for e in experiments if e.role == "effects"):
        df = runs[exp.name].table
        df = df[df["operation"] == "refresh"]
        fig = plot_effects(df, subset="factual-success", resamples=resamples, seed=seed)
        caption = f"{exp.name}: refresh effects by delay and condition (factual-success subset)"
        figure = save_figure(fig, out / "figures", f"effects_{exp.name}")
        report.figure(figure, caption)
        d1 = df[df["delay"] == 1] if (df["delay"] == 1).any() else df
        parts = decompose(d1, by=["condition", "delay"], subset="factual-success")
        save_csv(parts, out / "tables" / f"partitions_{exp.name}.csv")
        report.figure(save_figure(plot_partitions(d1, subset="factual-success"), out / "figures", f"partitions_{exp.name}"),
                      f"{exp.name}: paired outcomes at delay {int(d1['delay'].iloc[0])} (factual-success subset)")
        shown: list[pd.DataFrame] = []
        for subset in ("factual-success", "all"):
            tab = effect_table(df, by=["condition", "delay"], subset=subset, resamples=resamples, seed=seed)
            tab = _cols(tab, ["condition", "delay"], EFFECT_SHOWN)
            con = contrast_table(df, PRIMARY_STALE, "clean", on="condition", by=["delay"], subset=subset,
                                 resamples=resamples, seed=seed)
            con = _cols(con, ["delay"], ["n_paired", *CONTRAST_SHOWN])
            suffix = subset.replace("-", "_")
            tab_csv = save_csv(tab, out / "tables" / f"effects_{exp.name}_{suffix}.csv")
            con_csv = save_csv(con, out / "tables" / f"contrast_{exp.name}_{suffix}.csv")
            if shown_finding is None and subset == "factual-success":
                finding = effect_finding(tab, f"`{exp.name}` cohort's factual-success tasks", PRIMARY_STALE)
                shown_finding = (finding, figure, caption)
            if shown and tab.equals(shown[0]):
                # every prefix-feasible task succeeded in its factual run: one table says it all
                report.text(f"In the `{exp.name}` cohort every prefix-feasible task's factual run succeeded, "
                            "so its complete subset is its factual-success subset (the tables above; "
                            f"also in `{tab_csv.name}`).")
                continue
            shown.append(tab)
            report.table(tab, tab_csv, f"{exp.name} cohort ({subset}): refresh effect by condition and delay",
                         summary=effect_grid(tab), summary_caption=f"{exp.name} cohort ({subset}): refresh effect "
                         "(pp) and its 95% interval by condition and delay (rescues, harms and tests in the whole table)")
            report.table(con, con_csv,
                         f"{exp.name} cohort ({subset}): {PRIMARY_STALE} minus clean effect at each delay")
        if has_samples(df):
            _noise_floor(report, out, exp, df)
    return shown_finding


def _noise_floor(report: Report, out: Path, exp: Experiment, df: pd.DataFrame) -> None:
    """A study of ``--samples``: how often two draws of the same arm disagree, per condition."""
    floor = noise_floor(df)
    k = int(floor["k"].max()) if len(floor) else 0
    report.text(
        f"Each arm and branch was drawn {k} times from each branch point (`--samples {k}`): the counts "
        "above are expected counts over the draw pairs, the effects the mean of `p1_hat - p0_hat`, and "
        "their intervals resample tasks. Two draws of the same no-recovery arm are a placebo of nothing: "
        "the rate at which they disagree is the noise floor, what one draw per arm would label a rescue "
        "or a harm with no recovery at all. `within_noise` flags an effect no larger than its condition's "
        "floor.")
    report.table(floor, save_csv(floor, out / "tables" / f"noise_floor_{exp.name}.csv"),
                 f"{exp.name} cohort: the noise floor per condition (two draws of one arm disagree)")


def _mechanism_section(report: Report, out: Path, experiments: list[Experiment], runs: dict[str, CheckedRun],
                       resamples: int, seed: int) -> Shown | None:
    """The mechanism controls per ``mechanism`` cohort; the finding of the first one, with its figure."""
    shown_finding: Shown | None = None
    for exp in (e for e in experiments if e.role == "mechanism"):
        report.heading("2. Mechanism controls: what part of refresh acts")
        report.text(
            "Mechanism controls on their own cohort: full refresh (the refresh query, result shown), "
            "content-ablated refresh (same env query, content hidden), replan (no env query, the agent is "
            "asked to reconsider), rewind (context and env restored to before the modified observation, with "
            "a short memory of the abandoned branch) and placebo (a content-free harness message: the "
            "interruption alone). Cells as in the paper: clean at delay 0 and "
            f"{PRIMARY_STALE} at delay 4; the full grid is in the CSV."
        )
        df = runs[exp.name].table
        report.figure(save_figure(plot_mechanisms(df, subset="all", resamples=resamples, seed=seed), out / "figures",
                                  f"mechanism_{exp.name}"), f"{exp.name}: mechanism controls by operation")
        full = effect_table(df, by=["condition", "delay", "operation"], subset="all", resamples=resamples, seed=seed)
        save_csv(full, out / "tables" / f"mechanism_{exp.name}_grid.csv")
        cells = full[((full["condition"] == "clean") & (full["delay"] == 0))
                     | ((full["condition"] == PRIMARY_STALE) & (full["delay"] == 4))]
        cells = _cols(cells, ["condition", "delay", "operation"], EFFECT_SHOWN)
        report.table(cells, save_csv(cells, out / "tables" / f"mechanism_{exp.name}.csv"),
                     f"{exp.name} cohort: effect of each operation vs no recovery")
        ops = set(df["operation"])
        if {"refresh", "refresh_ablated"} <= ops and (df["condition"] == PRIMARY_STALE).any():
            delay = 4 if (df["delay"] == 4).any() else int(df["delay"].max())
            fig = plot_joint(df, "refresh", "refresh_ablated", condition=PRIMARY_STALE, delay=delay)
            report.figure(save_figure(fig, out / "figures", f"joint_{exp.name}"),
                          f"Joint outcomes of full vs content-ablated refresh ({PRIMARY_STALE}, delay {delay})")
            counts = joint_outcomes(df, "refresh", "refresh_ablated", condition=PRIMARY_STALE, delay=delay, by=[])
            matrix = joint_matrix(counts).reset_index().rename(columns={"outcome_a": "refresh \\ refresh_ablated"})
            matrix.columns.name = None
            report.table(matrix, save_csv(matrix, out / "tables" / f"joint_{exp.name}.csv"),
                         f"Joint outcomes at {PRIMARY_STALE}, delay {delay} (executed pairs; rows: full refresh, "
                         "columns: content-ablated refresh)")
            eff = joint_effects(df, "refresh", "refresh_ablated", condition=PRIMARY_STALE, delay=delay, by=[],
                                resamples=resamples, seed=seed)
            report.table(eff, save_csv(eff, out / "tables" / f"joint_effects_{exp.name}.csv"),
                         "Paired effects on the tasks where both operations ran")
            if shown_finding is None:
                shown_finding = (mechanism_finding(eff, full, PRIMARY_STALE, delay),
                                 *cell_figure(df, out, f"finding_mechanism_{exp.name}", PRIMARY_STALE, delay,
                                               resamples, seed))
    return shown_finding


def cell_figure(df: pd.DataFrame, out: Path, name: str, condition: str, delay: int, resamples: int,
                 seed: int) -> tuple[SavedFigure | None, str]:
    """The mechanism controls at one condition and delay, for the finding that reads them."""
    cell = df[(df["condition"] == condition) & (df["delay"] == delay)]
    try:
        fig = plot_mechanisms(cell, subset="all", resamples=resamples, seed=seed)
    except FigureSkipped:
        return None, ""
    return save_figure(fig, out / "figures", name), f"Each operation against no recovery at {condition}, delay {delay}"


def _explanation_section(report: Report, out: Path, experiments: list[Experiment],
                         runs: dict[str, CheckedRun]) -> None:
    """Which mechanisms of the agent explain the rescues and harms (agents that record them)."""
    tables = [explain_checked(runs[e.name]).assign(experiment=e.name) for e in experiments]
    table = pd.concat(tables, ignore_index=True)
    traced = table["arm_mechanisms"].str.len().gt(0).any() or table["mechanisms"].str.len().gt(0).any()
    if not traced:
        return
    report.heading("What the agent's mechanisms explain")
    split = attribution_split(table)
    save_csv(table[table["outcome"] == "harm"], out / "tables" / "harm_pairs.csv")
    counts = mechanism_counts(table)
    explanation_tables(report, split, counts, harm_table(table), out, len(table), "")


def explanation_tables(report: Report, split: pd.DataFrame, counts: pd.DataFrame, harms: pd.DataFrame,
                       out: Path, pairs: int, suffix: str) -> None:
    """The explanation section's text and tables (one study's, or the replicates' pooled)."""
    every = split[split["operation"] == "all"].iloc[0]
    diverged = int(every["diverged"])
    report.text(
        "The built-in agent records which of its named mechanisms fired at each step (the explanation "
        "trace, beside each transcript in the episode store; never read by features or the router). Two "
        "arms of a pair diverge when the agent's replies after the branch point differ. A divergence is "
        "attributed only to the recovery-reachable mechanisms that fired on the divergent decision itself "
        "(a rewind acts on the first decision after it), else to the budget when the arms gave the same "
        "replies until one ran out, else it is unattributed (`cir explain` shows one pair). "
        f"{diverged} of {pairs} pairs diverge: {int(every['mechanism'])} attributed to a mechanism, "
        f"{int(every['budget'])} to the budget, {int(every['unattributed'])} unattributed (of which "
        f"{int(every['unattributed_mechanism_earlier'])} had a recovery-reachable mechanism fire on an earlier "
        "decision, whose reply was the arm's). A check of the instrument, not a finding about recovery: "
        f"{int(every['unexplained'])} divergences have no such mechanism at all since the recovery (one would "
        "be a defect of the agent)."
    )
    report.table(split, save_csv(split, out / "tables" / f"attribution_split{suffix}.csv"),
                 "Divergences by what they are attributed to, by operation (all cohorts)")
    by_cause = counts.groupby("mechanism", as_index=False, sort=False)[
        [c for c in ("pairs", "rescues", "harms") if c in counts.columns]].sum()
    by_cause = by_cause.sort_values("pairs", ascending=False, kind="mergesort").head(12)
    report.table(counts, save_csv(counts, out / "tables" / f"mechanisms_explained{suffix}.csv"),
                 "Pairs, rescues and harms attributed to each cause, by operation (all cohorts)",
                 summary=by_cause, summary_caption="Pairs, rescues and harms attributed to each cause, every "
                 "operation together (all cohorts; by operation in the whole table)")
    if len(harms):
        budget, total = int(harms["ended_by_budget"].sum()), int(harms["harms"].sum())
        circles = int(harms["ended_in_circles"].sum())
        text = (f"{budget} of {total} harm attributions end on the budget and {circles} end going round one or "
                "two commands (`ended_in_circles`); the model turns each branch took beyond what its "
                "no-recovery arm needed to succeed are below.")
        if budget * 2 > total:
            text += (" Most harms are long episodes, not quick failures: that persistence is a property of "
                     "this instrument (a language model rarely repeats itself that long), to be read as such, "
                     "not as a finding about recovery.")
        report.text(text)
        report.table(harms, save_csv(harms, out / "tables" / f"harms_by_mechanism{suffix}.csv"),
                     "Harms by cause: ended on the budget, model turns lost (branch minus arm, from the "
                     "branch point), ended going round one or two commands (>= 4 env actions)",
                     summary=harms.sort_values("harms", ascending=False, kind="mergesort").head(10),
                     summary_caption="Harms by cause, the ten with most harms (each cause and operation in the "
                     "whole table): ended on the budget, model turns lost (branch minus arm, from the branch point), "
                     "ended going round one or two commands (>= 4 env actions)")


def _fit_routers(out: Path, experiments: list[Experiment], runs: dict[str, CheckedRun], resamples: int,
                 seed: int) -> Selective:
    """The routers fitted on the fitting cohort, written, and evaluated on the held-out one."""
    train, test = _fit_and_eval(experiments)
    train_df = select_subset(_with_features(runs[train.name]), train.fit_cir or "all")
    return run_selective(train_df, _with_features(runs[test.name]), out, resamples=resamples, seed=seed,
                         source=str(out / "runs" / test.name), family=train.family)


def _fit_and_eval(experiments: list[Experiment]) -> tuple[Experiment, Experiment]:
    return next(e for e in experiments if e.fit_cir), next(e for e in experiments if e.role == "eval")


def _with_features(run: CheckedRun) -> pd.DataFrame:
    """The run's table, which must hold the features CIR is fitted and evaluated on."""
    if not feature_columns(run.table):
        raise CirError(f"{run.run_dir / PAIRED}: no feature columns (f_*); run `cir run` with this version "
                       "to write them")
    return run.table


#: The held-out policies the report's figure and its short table show, in this order (those a study has).
HELDOUT_SHOWN = ("cir", "cir_paired", "cir_paired_replan", "cir_paired_rewind", MULTI, "always", "anomaly",
                 "anomaly_rate_matched_heldout", "oracle_refresh", "oracle")


def fit_shown(fit: pd.DataFrame) -> pd.DataFrame:
    """The fit table as shown: a threshold that is never passed reads ``never``, a gate the
    estimator does not have ``n/a`` (both None in the CSV)."""
    from cir.router.rule import ESTIMATORS

    out = fit.copy()
    for gate in ("alpha", "beta", "gamma"):
        if gate not in out.columns:
            continue
        gated = [gate in ESTIMATORS[e].thresholds if e in ESTIMATORS else True for e in out["estimator"]]
        out[gate] = [("never" if has else "n/a") if v is None or pd.isna(v) else v
                     for v, has in zip(out[gate], gated, strict=True)]
    return out


def heldout_figure(summary: pd.DataFrame, out: Path, name: str) -> tuple[SavedFigure | None, str]:
    """The held-out policies against never recovering (:func:`cir.study.figures.plot_heldout`)."""
    try:
        fig = plot_heldout(summary, HELDOUT_SHOWN)
    except FigureSkipped:
        return None, ""
    return save_figure(fig, out / "figures", name), "Held-out tasks: each policy against never recovering"


def discrimination_summary(disc: pd.DataFrame) -> pd.DataFrame:
    """The held-out rows of a discrimination table, a router's rows left out where an earlier
    router's are the same numbers (``cir_multi``'s models per operation are the single routers')."""
    held = disc[disc["where"] == "held out"]
    values = [c for c in held.columns if c not in ("router", "seed")]
    return held.drop_duplicates(subset=values, keep="first")


def _cir_section(report: Report, out: Path, experiments: list[Experiment], sel: Selective,
                 runs: dict[str, CheckedRun], resamples: int, seed: int) -> tuple[Shown, str]:
    """The section, its finding with its figure, and the sentence of the primary comparisons (empty:
    none named)."""
    train, test = _fit_and_eval(experiments)
    report.heading("3. Selective recovery: CIR on held-out tasks")
    test_df = runs[test.name].table
    fit = fit_table(sel.policies)
    report.text(
        f"The routers are fitted on the `{train.name}` cohort's {train.fit_cir} tasks ({train.split}) and "
        f"evaluated on the held-out `{test.name}` cohort ({test.split}), which shares no task and no room "
        "layout with them. `cir` is the paper's CIR: three L2 logistic models (C=0.1) for p_err, p0 and p1, "
        "thresholds alpha, beta, gamma >= 0 (`router.json`). `cir_paired` uses the paired design's own "
        "labels: the outcome class of every row (rescue, harm, stable) is observed, so P(rescue) and "
        "P(harm) are fitted directly (C chosen by cross-validation grouped by task), with utility "
        "P(rescue) - lambda P(harm), the same p_err gate, thresholds alpha and gamma >= 0 "
        "(`router_paired.json`); `cir_paired_replan` and `cir_paired_rewind` are the same estimator for replan "
        "and rewind, and `cir_multi` chooses among the operations (see Which recovery?). All search their "
        "thresholds on 5-fold out-of-fold predictions grouped "
        "by task under the same clean-harm budget epsilon, then refit on all fitting tasks; every "
        "baseline is chosen the same way (`anomaly_matched_cir_paired` matches cir_paired's rate). A rate "
        "matched on the fitting tasks can drift on held-out ones, so each rate-matched anomaly rule is also "
        "matched on the held-out arms themselves (`anomaly_rate_matched_heldout` to cir's rate there, "
        "`anomaly_matched_heldout_<router>` to each other router's), from the router's rate alone."
    )
    result = sel.evaluation
    summary, margins = result["summary"], result["margins"]
    figure, caption = heldout_figure(summary, out, "cir_heldout")
    if figure is not None:
        report.figure(figure, caption)
    report.table(_cols(fit_shown(fit), ["router"], FIT_SHOWN), save_csv(fit, out / "tables" / "cir_fit.csv"),
                 "The fits: thresholds, budget and out-of-fold results (lambda, epsilon, d_min, delays and "
                 "the fitting cohort's size in the CSV)")
    report.text(budget_sentence(fit))
    save_csv(result["episodes"], out / "tables" / "cir_eval_episodes.csv")
    eval_csv = save_csv(summary, out / "tables" / "cir_eval.csv")
    every = _cols(summary[summary["condition"] == "all"], ["policy"], EVAL_SHOWN)
    report.table(every, eval_csv, "Held-out evaluation, all conditions (per-condition rows and more columns in the CSV)",
                 summary=policy_rows(every, ("never", *HELDOUT_SHOWN)),
                 summary_caption="Held-out evaluation, all conditions: the routers and the baselines and oracles "
                 "they are read against (every policy in the whole table)")
    for name in ROUTERS:
        report.table(_cols(summary[summary["policy"] == name], ["condition"], EVAL_SHOWN), eval_csv,
                     f"{name} by observation condition")
    optimism = optimism_table(sel.policies, result["episodes"])
    report.table(optimism, save_csv(optimism, out / "tables" / "cir_optimism.csv"),
                 "Out of fold (the threshold search's own estimate) next to the held-out result")
    every_margin = margins[margins["condition"] == "all"]
    report.table(every_margin, save_csv(margins, out / "tables" / "cir_margins.csv"),
                 "Margins of each router over each policy (pp, paired by task)",
                 summary=largest_margins(every_margin),
                 summary_caption="Margins of the routers over the other policies (pp, paired by task): "
                 + margins_caption(every_margin, 8))
    disc = discrimination_table(sel.policies, sel.routers, test_df)
    report.table(disc, save_csv(disc, out / "tables" / "cir_discrimination.csv"),
                 "How well each router's scores tell rescue and harm cells from the rest (ROC AUC; 0.5 is chance)",
                 summary=discrimination_summary(disc),
                 summary_caption="How well each router's scores tell rescue and harm cells from the rest, held out "
                 "(ROC AUC; 0.5 is chance; a router whose rows repeat an earlier one's is left out; out of fold in "
                 "the whole table)")
    router = sel.routers["cir"]
    cal = calibration_table(router, test_df)
    cal_csv = save_csv(cal, out / "tables" / "cir_calibration.csv")
    brier = cal.groupby("model", sort=False)["brier"].first().reset_index()
    report.figure(save_figure(calibration_figure(router, test_df), out / "figures", "cir_calibration"),
                  "Reliability of p_err, p0 and p1 on the held-out cohort")
    report.table(brier, cal_csv, "Brier scores of cir's three models on the held-out cohort")
    which_recovery_section(report, out, result["episodes"], summary, margins)
    shown_test = with_shown(runs[test.name])  # a run of an earlier version: derived from its store
    kinds = kind_section(report, out, with_arm_shown(result["episodes"], shown_test),
                         list(dict.fromkeys(summary["policy"])), list(sel.routers), scored_cells(sel.routers, shown_test),
                         shown_split(with_shown(runs[e.name]) for e in experiments), resamples=resamples, seed=seed)
    named = comparisons_block(report, out, test, {"condition": margins, "kind": kinds and kinds.margins,
                                                  "shown": kinds and kinds.part_margins})
    return (cir_finding(summary, float(fit["epsilon"].iloc[0])), figure, caption), named


def which_recovery_section(report: Report, out: Path, arms: pd.DataFrame, summary: pd.DataFrame,
                           margins: pd.DataFrame, suffix: str = "") -> None:
    """"Which recovery?": the router over several operations against each single-operation
    router, always the best single operation, the anomaly rule with each operation and the
    oracle over all; and the mix of operations it chose by condition and delay."""
    if f"y_{MULTI}" not in arms.columns:
        return
    report.heading("Which recovery?")
    singles = [p for p in summary["policy"].unique() if p.startswith("cir_paired")]
    report.text(
        f"`{MULTI}` fits the paired estimator for every operation the cohorts ran (P(rescue) and P(harm) per "
        "operation) and recovers, at the first candidate delay where the p_err gate and the utility "
        "threshold pass, with the operation of highest utility, at most once; its thresholds are searched "
        "over all operations together under the same clean-harm budget. It is compared with the paired "
        f"single-operation routers ({', '.join(f'`{s}`' for s in singles)}), with always recovering with the "
        f"operation and delay that gained most on the fitting tasks (`always_{MULTI}`) and with each operation "
        "at its best delay (`always_<op>`), with the anomaly rule recovering with each operation "
        "(`anomaly_<op>`), and with the oracle, which recovers wherever some operation "
        "rescues (`oracle_<op>`: wherever that operation rescues; each policy's share of the gain is of "
        "the oracle of the operations it may use, named in `oracle_policy`). Every operation's branches were run from the same states, so this comparison is exact: no "
        "off-policy estimate is involved."
    )
    mix = mix_table(arms, MULTI)
    try:
        report.figure(save_figure(plot_recovery_mix(mix), out / "figures", f"cir_mix{suffix}"),
                      f"Which recovery {MULTI} chose, by condition and delay")
    except FigureSkipped as skipped:
        report.text(f"No figure of the mix: {skipped}.")
    ops = sorted({op for op in arms[f"op_{MULTI}"] if op} | {p.removeprefix("always_") for p in summary["policy"]
                                                              if p.startswith("always_") and not p.startswith("always_cir")})
    keep = [*singles, MULTI, f"always_{MULTI}", *[f"always_{op}" for op in ops], *[f"anomaly_{op}" for op in ops],
            *[f"oracle_{op}" for op in ops], "oracle"]
    rows = _cols(summary[(summary["condition"] == "all") & summary["policy"].isin(keep)], ["policy"],
                 [*EVAL_SHOWN, "oracle_fraction", "oracle_policy"])
    best = [max((p for p in rows["policy"] if p.startswith(prefix) and p != f"always_{MULTI}"),
                key=lambda p: float(rows.loc[rows["policy"] == p, "effect_pp"].iloc[0]), default=None)
            for prefix in ("always_", "anomaly_")]
    path = out / "tables" / f"cir_eval{suffix}.csv"
    report.table(rows, path, "Held-out, all conditions: the operation chooser and what it is measured against",
                 summary=policy_rows(rows, [*singles, MULTI, f"always_{MULTI}", *[b for b in best if b], "oracle"]),
                 summary_caption=f"Held-out, all conditions: {MULTI} against the single-operation routers, always "
                 "recovering, the best operation for always and for the anomaly rule, and the oracle (every "
                 "operation's in the whole table)")
    m = margins[(margins["policy"] == MULTI) & (margins["condition"] == "all")
                & margins["versus"].isin([*singles, f"always_{MULTI}", "oracle", "anomaly",
                                          *[f"anomaly_{op}" for op in ops], *[f"always_{op}" for op in ops]])]
    report.table(m, out / "tables" / f"cir_margins{suffix}.csv", f"Margins of {MULTI} (pp, paired by task)",
                 summary=largest_margins(m), summary_caption=f"Margins of {MULTI} (pp, paired by task): "
                 + margins_caption(m, 8))
    report.table(mix, save_csv(mix, out / "tables" / f"cir_mix{suffix}.csv"),
                 f"The operations {MULTI} chose, by condition and delay (delay -1: no recovery)",
                 summary=mix_sentence(mix))


def budget_sentence(fit: pd.DataFrame) -> str:
    """Whether the clean-harm budget bound each router's threshold search, in words."""
    parts = []
    for _, r in fit.iterrows():
        within, searched = int(r["candidates_within_epsilon"]), int(r["candidates_searched"])
        if within == searched:
            parts.append(f"for `{r['router']}` all {searched} threshold candidates met the clean-harm budget "
                         f"(epsilon = {format_number(r['epsilon'], 2)} of {int(r['clean_arms'])} clean arms), "
                         "so it did not bind")
        else:
            parts.append(f"for `{r['router']}` {within} of {searched} threshold candidates met the clean-harm "
                         f"budget (epsilon = {format_number(r['epsilon'], 2)} of {int(r['clean_arms'])} clean "
                         "arms): it bound")
    return "The budget: " + "; ".join(parts) + "."


def _findings_section(report: Report, shown: list[Shown], quick: bool, named: str = "") -> None:
    report.heading("Findings")
    report.text("The paper's three questions, each answered from a table below (number, 95% task-level "
                "cluster-bootstrap interval, or for a held-out policy that differs from never in fewer than "
                f"{FEW_DISCORDANT} arms the counts' Clopper-Pearson one, sign-flip test), beside the figure "
                "that shows it. What was run "
                "(agent, cohorts, conditions, budgets) is in Setup, after the results.")
    for i, (finding, figure, caption) in enumerate(shown, 1):
        report.finding(f"**{i}. {finding.question}.** {finding.sentence}", figure, caption)
    if named:
        report.text(f"**Primary comparisons.** {named}")
    warning = small_cohort_warning([f for f, _, _ in shown], quick)
    if warning:
        report.warning(warning)


#: Each step's share of a study's analysis, for the progress line's estimate of what remains:
#: CPU seconds of the quick study's (measured; a full study's fits weigh more, and the line's
#: estimate follows what it measures as it goes). The planted worlds: per world replicate.
ANALYSIS_WEIGHTS = {"reading the runs": 1.0, "fitting and evaluating the routers": 8.0, "setup": 0.3,
                    "effects": 6.0, "mechanism controls": 7.0, "what the mechanisms explain": 1.5,
                    "selective recovery": 8.0, "the report": 1.0}
WORLD_REPLICATE_WEIGHT = 1.0


def write_study_report(out: Path, experiments: list[Experiment], runs: dict[str, RunRecord], *,
                       resamples: int, seed: int, agent: str, quick: bool, validation: int = 0,
                       jobs: int = 1, progress: Steps | None = None, hard_worlds: int = 0) -> Path:
    """Write tables, figures, ``router.json`` and ``report.md`` / ``report.html`` into ``out``
    (with ``validation`` replicates of each planted world: :mod:`cir.study.validation`, and
    ``hard_worlds`` of each hard one: :mod:`cir.study.hard_worlds`): each run folder read once, the routers fitted before any section is written; ``progress``: the line
    that shows each step (:class:`cir.util.progress.Steps`, weights :data:`ANALYSIS_WEIGHTS`)."""
    steps = progress or Steps.off()
    title = f"cir reproduction{' (quick)' if quick else ''}: when harnesses lose the signal"
    steps.next("reading the runs")
    read = {e.name: read_run(out / "runs" / e.name) for e in experiments}
    steps.next("fitting and evaluating the routers")
    sel = _fit_routers(out, experiments, read, resamples, seed)
    body = Report(title)
    effects = _effects_section(body, out, experiments, read, resamples, seed)
    steps.next("mechanism controls")
    mechanism = _mechanism_section(body, out, experiments, read, resamples, seed)
    steps.next("what the mechanisms explain")
    _explanation_section(body, out, experiments, read)
    steps.next("selective recovery")
    selective, named = _cir_section(body, out, experiments, sel, read, resamples, seed)
    if validation:
        steps.next("the planted worlds", parts=validation * len(VALIDATION_WORLDS))
        validation_section(body, out, validation, seed=seed, jobs=jobs, steps=steps)
    if hard_worlds:
        from cir.study.hard_worlds import hard_section

        hard_section(body, out, hard_worlds, seed=seed, jobs=jobs)
    # the setup after the results: the findings say what was run, and the first section's figure
    # follows them within a screen
    steps.next("setup")
    _setup_section(body, out, experiments, runs, agent, quick)
    steps.next("the report")
    report = Report(title)
    _findings_section(report, [f for f in (effects, mechanism, selective) if f is not None], quick, named)
    report.blocks += body.blocks
    md, _ = report.write(out)
    steps.finish()
    return md


def analysis_steps(validation: int, jobs: int, *, enabled: bool, what: str = "analysis",
                   weights: dict[str, float] | None = None) -> Steps:
    """The progress line of a study's analysis (:func:`write_study_report`; ``weights``: another
    report's), the planted worlds weighed by their replicates."""
    table = dict(ANALYSIS_WEIGHTS if weights is None else weights)
    if validation:
        table["the planted worlds"] = validation * len(VALIDATION_WORLDS) * WORLD_REPLICATE_WEIGHT / max(jobs, 1)
    return Steps(what, table, enabled=enabled)
