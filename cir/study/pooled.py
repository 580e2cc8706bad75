"""The report of a study with replicates: every headline pooled, beside its spread over replicates.

Each replicate is a complete study (``replicates/seed-S/``, with its own report). This report
answers the paper's three questions on all replicates' tasks together (task-level cluster
bootstrap over every replicate's tasks, :mod:`cir.study.replicates`), and wherever it gives a
number it shows the replicates' spread beside it: ``tables/replicates.csv`` (one row per
replicate and headline), ``tables/headlines_pooled.csv`` (the same rows for the pool),
``tables/replicate_spread.csv`` and ``figures/replicates_spread.png``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cir.episode.protocol import PRIMARY_STALE
from cir.stats.counts import FEW_DISCORDANT
from cir.stats.effects import contrast_table, effect_table
from cir.stats.explain import harm_table
from cir.stats.joint import joint_effects
from cir.study.comparisons import comparisons_block
from cir.study.experiments import Experiment
from cir.study.figures import plot_effects
from cir.study.findings import (
    cir_finding,
    effect_finding,
    mechanism_finding,
    small_cohort_warning,
)
from cir.study.kinds import kind_section, shown_split, with_arm_shown
from cir.study.page import Report, counted, format_number, save_csv, save_figure
from cir.study.replicates import (
    control_cells,
    headlines,
    pooled_evaluation,
    pooled_paired,
    pooled_scored_cells,
    replicate_headlines,
    spread,
    spread_figure,
)
from cir.study.report import (
    EFFECT_SHOWN,
    EVAL_SHOWN,
    HELDOUT_SHOWN,
    Shown,
    budget_sentence,
    cell_figure,
    discrimination_summary,
    explanation_tables,
    fit_shown,
    heldout_figure,
    which_recovery_section,
)
from cir.study.summaries import effect_grid, largest_margins, margins_caption, policy_rows
from cir.study.validation import VALIDATION_WORLDS, validation_section
from cir.util.progress import Steps

#: Each step's share of the pooled analysis, for the progress line's estimate (measured on the
#: reference study's five replicates; the planted worlds: per world replicate, as a study's).
POOLED_WEIGHTS = {"each replicate's walks and headlines, pooled": 15.0, "setup": 1.0, "effects": 5.0,
                  "mechanism controls": 1.5, "what the mechanisms explain": 0.5, "selective recovery": 3.0,
                  "by perturbation kind": 4.0, "the report": 1.0}
#: Per-replicate tables each replicate's own report wrote, gathered with a seed column.
GATHERED = ("cohorts", "cir_fit", "cir_optimism", "cir_discrimination", "mechanisms_explained",
            "attribution_split", "harm_pairs")


def _gather(studies: dict[int, Path], name: str) -> pd.DataFrame:
    parts = [pd.read_csv(d / "tables" / f"{name}.csv").assign(seed=s) for s, d in studies.items()
             if (d / "tables" / f"{name}.csv").exists()]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _spread_line(spread_table: pd.DataFrame, **where: object) -> str:
    rows = spread_table
    for k, v in where.items():
        rows = rows[rows[k] == v]
    if rows.empty:
        return ""
    r = rows.iloc[0]
    return (f"{format_number(r['pooled_pp'], 1)} pp pooled [{format_number(r['pooled_ci_low_pp'], 1)}, "
            f"{format_number(r['pooled_ci_high_pp'], 1)}]; replicates {format_number(r['min_pp'], 1)} to "
            f"{format_number(r['max_pp'], 1)} (median {format_number(r['median_pp'], 1)})")


def _effects(report: Report, out: Path, studies: dict[int, Path], experiments: list[Experiment],
             resamples: int, seed: int) -> Shown | None:
    report.heading("1. Effects of refresh by condition and delay (pooled)")
    shown: Shown | None = None
    for exp in (e for e in experiments if e.role == "effects"):
        df = pooled_paired(studies, exp.name)
        df = df[df["operation"] == "refresh"]
        fig = plot_effects(df, subset="factual-success", resamples=resamples, seed=seed)
        caption = f"{exp.name}: refresh effects by delay and condition, replicates pooled (factual-success)"
        figure = save_figure(fig, out / "figures", f"effects_{exp.name}_pooled")
        report.figure(figure, caption)
        for subset in ("factual-success", "all"):
            tab = effect_table(df, by=["condition", "delay"], subset=subset, resamples=resamples, seed=seed)
            tab = tab[[c for c in ["condition", "delay", *EFFECT_SHOWN] if c in tab.columns]]
            suffix = subset.replace("-", "_")
            path = save_csv(tab, out / "tables" / f"effects_{exp.name}_{suffix}_pooled.csv")
            pooled_caption = f"{exp.name} cohort ({subset}), {counted(len(studies), 'replicate')} pooled"
            report.table(tab, path, pooled_caption, summary=effect_grid(tab),
                         summary_caption=f"{pooled_caption}: refresh effect (pp) and its 95% interval by condition "
                         "and delay (rescues, harms and tests in the whole table)")
            con = contrast_table(df, PRIMARY_STALE, "clean", on="condition", by=["delay"], subset=subset,
                                 resamples=resamples, seed=seed)
            save_csv(con, out / "tables" / f"contrast_{exp.name}_{suffix}_pooled.csv")
            if shown is None and subset == "factual-success":
                shown = (effect_finding(tab, f"`{exp.name}` cohorts' factual-success tasks of "
                                             f"{counted(len(studies), 'replicate')}", PRIMARY_STALE), figure, caption)
    return shown


def _mechanism(report: Report, out: Path, studies: dict[int, Path], experiments: list[Experiment],
               resamples: int, seed: int) -> Shown | None:
    exp = next((e for e in experiments if e.role == "mechanism"), None)
    if exp is None:
        return None
    report.heading("2. Mechanism controls (pooled)")
    df = pooled_paired(studies, exp.name)
    full = effect_table(df, by=["condition", "delay", "operation"], subset="all", resamples=resamples, seed=seed)
    cells = control_cells(full)
    stale_at = int(cells.loc[cells["condition"] == PRIMARY_STALE, "delay"].max()) if len(cells) else 4
    figure, caption = cell_figure(df, out, f"mechanism_{exp.name}_pooled", PRIMARY_STALE, stale_at, resamples, seed)
    if figure is not None:
        report.figure(figure, caption)
    cells = cells[[c for c in ["condition", "delay", "operation", *EFFECT_SHOWN] if c in cells.columns]]
    report.table(cells, save_csv(cells, out / "tables" / f"mechanism_{exp.name}_pooled.csv"),
                 f"{exp.name} cohort: each operation vs no recovery, {counted(len(studies), 'replicate')} pooled")
    if {"refresh", "refresh_ablated"} <= set(df["operation"]) and (df["condition"] == PRIMARY_STALE).any():
        eff = joint_effects(df, "refresh", "refresh_ablated", condition=PRIMARY_STALE, delay=stale_at, by=[],
                            resamples=resamples, seed=seed)
        report.table(eff, save_csv(eff, out / "tables" / f"joint_effects_{exp.name}_pooled.csv"),
                     f"Full vs content-ablated refresh at {PRIMARY_STALE}, delay {stale_at}, on the tasks where "
                     "both ran, pooled")
        return mechanism_finding(eff, full, PRIMARY_STALE, stale_at), figure, caption
    return None


def _selective(report: Report, out: Path, studies: dict[int, Path], evaluation: tuple[pd.DataFrame, ...]) -> Shown:
    report.heading("3. Selective recovery on held-out tasks (pooled)")
    report.text(
        "Each replicate fits its own routers on its own fitting cohort and evaluates them on its own held-out "
        "cohort, as the paper does; the held-out arms of every replicate are then summarised together "
        "(task-level cluster bootstrap over all replicates' tasks; the counts' Clopper-Pearson interval "
        f"where a policy and its comparison differ in fewer than {FEW_DISCORDANT} arms)."
    )
    arms, summary, margins = evaluation
    figure, caption = heldout_figure(summary, out, "cir_heldout_pooled")
    if figure is not None:
        report.figure(figure, caption)
    save_csv(arms, out / "tables" / "cir_eval_episodes_pooled.csv")
    path = save_csv(summary, out / "tables" / "cir_eval_pooled.csv")
    # n and success_never are the same in every row (every policy walks the same arms): in the caption
    every = summary[summary["condition"] == "all"]
    same = [c for c in ("n", "success_never") if every[c].nunique() == 1]
    shown = [c for c in EVAL_SHOWN if c not in same]
    said = {"n": lambda v: f"{int(v):,} arms", "success_never": lambda v: f"success without recovery {format_number(v, 3)}"}
    note = "; ".join(said[c](every[c].iloc[0]) for c in same)
    held = every[["policy", *shown, "oracle_fraction", "oracle_policy"]]
    caption_all = (f"Held-out evaluation, all conditions, {counted(len(studies), 'replicate')} pooled"
                   + (f" ({note})" if note else ""))
    report.table(held, path, caption_all, summary=policy_rows(held, ("never", *HELDOUT_SHOWN)),
                 summary_caption=f"{caption_all}: the routers and the baselines and oracles they are read against "
                 "(every policy in the whole table)")
    for name in ("cir", "cir_paired"):
        report.table(summary[summary["policy"] == name][["condition", *EVAL_SHOWN]], path,
                     f"{name} by observation condition, pooled")
    mpath = save_csv(margins, out / "tables" / "cir_margins_pooled.csv")
    every_margin = margins[margins["condition"] == "all"]
    report.table(every_margin, mpath, "Margins of each router (pp, paired by task), pooled",
                 summary=largest_margins(every_margin),
                 summary_caption="Margins of the routers over the other policies (pp, paired by task), pooled: "
                 + margins_caption(every_margin, 8))
    fit = _gather(studies, "cir_fit")
    if len(fit):
        shown_fit = fit_shown(fit)[["seed", "router", "train_tasks", "alpha", "beta", "gamma", "candidates_searched",
                                    "candidates_within_epsilon", "budget_bound", "oof_net_gain_pp"]]
        report.table(shown_fit, save_csv(fit, out / "tables" / "cir_fit_replicates.csv"), "Each replicate's fits",
                     summary=_fits_by_router(fit), summary_caption="The fits, per router over the replicates: how "
                     "many never recover (no threshold chosen), how many the budget bound, the out-of-fold gain")
        report.text(" ".join(f"Replicate seed {s}: {budget_sentence(part)}" for s, part in fit.groupby("seed")))
    optimism = _gather(studies, "cir_optimism")
    if len(optimism):
        values = [c for c in optimism.columns if c not in ("router", "estimate", "seed")]
        report.table(optimism, save_csv(optimism, out / "tables" / "cir_optimism_replicates.csv"),
                     "Out of fold vs held out, per replicate",
                     summary=optimism.groupby(["router", "estimate"], as_index=False, sort=False)[values].mean(),
                     summary_caption="Out of fold vs held out, the mean over the replicates")
    disc = _gather(studies, "cir_discrimination")
    if len(disc):
        values = [c for c in ("cells", "positives", "auc_score", "auc_utility") if c in disc.columns]
        mean = disc.groupby(["router", "where", "operation", "outcome", "score"], as_index=False, sort=False)[values].mean()
        report.table(disc, save_csv(disc, out / "tables" / "cir_discrimination_replicates.csv"),
                     "Discrimination of rescue and harm cells (ROC AUC), per replicate",
                     summary=discrimination_summary(mean),
                     summary_caption="Discrimination of rescue and harm cells, held out (ROC AUC, the mean over the "
                     "replicates; a router whose rows repeat an earlier one's is left out)")
    return cir_finding(summary, float(fit["epsilon"].iloc[0]) if len(fit) else 0.02), figure, caption


def _fits_by_router(fit: pd.DataFrame) -> pd.DataFrame:
    """Per router: its replicates, how many chose no alpha (never recover) and were bound by the
    budget, and the median out-of-fold gain."""
    rows = []
    for router, part in fit.groupby("router", sort=False):
        rows.append({"router": router, "replicates": len(part),
                     "never_recovers": int(part["alpha"].isna().sum()),
                     "budget_bound": int(part["budget_bound"].astype(bool).sum()),
                     "oof_net_gain_pp_median": float(part["oof_net_gain_pp"].median())})
    return pd.DataFrame(rows)


SPREAD_SHOWN = [
    ("clean refresh, delay 0", {"headline": "effect", "condition": "clean", "delay": 0}),
    (f"{PRIMARY_STALE} refresh, delay 0", {"headline": "effect", "condition": PRIMARY_STALE, "delay": 0}),
    (f"{PRIMARY_STALE} refresh, delay 4", {"headline": "effect", "condition": PRIMARY_STALE, "delay": 4}),
    (f"{PRIMARY_STALE} minus clean, delay 0", {"headline": f"{PRIMARY_STALE} minus clean", "delay": 0}),
    ("cir vs never", {"headline": "held-out policy", "policy": "cir"}),
    ("cir_paired vs never", {"headline": "held-out policy", "policy": "cir_paired"}),
    ("anomaly vs never", {"headline": "held-out policy", "policy": "anomaly"}),
    ("oracle vs never", {"headline": "held-out policy", "policy": "oracle"}),
    ("cir_paired - anomaly", {"headline": "held-out margin", "policy": "cir_paired", "versus": "anomaly"}),
    ("cir_paired - rate-matched anomaly", {"headline": "held-out margin", "policy": "cir_paired",
                                           "versus": "anomaly_matched_cir_paired"}),
    ("cir_paired - anomaly matched held out", {"headline": "held-out margin", "policy": "cir_paired",
                                               "versus": "anomaly_matched_heldout_cir_paired"}),
    ("cir - anomaly", {"headline": "held-out margin", "policy": "cir", "versus": "anomaly"}),
]


def write_pooled_report(out: Path, experiments: list[Experiment], studies: dict[int, Path], *, resamples: int,
                        seed: int, agent: str, quick: bool, validation: int = 0, jobs: int = 1,
                        progress: Steps | None = None, hard_worlds: int = 0) -> Path:
    """Write the pooled tables, figures and ``report.md`` / ``report.html`` into ``out`` (with
    ``validation`` replicates of each planted world: :mod:`cir.study.validation`, ``hard_worlds``
    of each hard one: :mod:`cir.study.hard_worlds`); ``progress``:
    the line that shows each step (weights :data:`POOLED_WEIGHTS`)."""
    steps = progress or Steps.off()
    steps.next("each replicate's walks and headlines, pooled")
    per, pooled, evaluation, spread_table = _pooled_tables(out, experiments, studies, resamples, seed)
    steps.next("setup")
    title = f"cir reproduction{' (quick)' if quick else ''}, {counted(len(studies), 'replicate')}: when harnesses lose the signal"
    body = Report(title)
    body.heading("Setup")
    body.text(
        f"Agent `{agent}`; {len(studies)} independent replicates of the whole study, each with new tasks and "
        f"a new agent seed (seeds {', '.join(map(str, studies))}; each replicate's own report is in "
        "`replicates/seed-S/report.md`). Every number below is pooled over all replicates' tasks (95% "
        "task-level cluster bootstrap) and shown beside the spread of the replicates."
    )
    fig = spread_figure(per, pooled, SPREAD_SHOWN)
    body.figure(save_figure(fig, out / "figures", "replicates_spread"), "Headlines: each replicate and the pool")
    shown = spread_table[["headline", "condition", "delay", "operation", "pooled_pp",
                          "pooled_ci_low_pp", "pooled_ci_high_pp", "min_pp", "max_pp"]].copy()
    # one column for the policy and what a margin compares it with (each is empty in most rows)
    policy, versus = spread_table["policy"].fillna("").astype(str), spread_table["versus"].fillna("").astype(str)
    shown.insert(4, "policy", policy.where(versus == "", policy + " - " + versus))
    picked = [shown[_matches(spread_table, where)].head(1) for _, where in SPREAD_SHOWN]
    brief = pd.concat([p for p in picked if len(p)]) if any(len(p) for p in picked) else None
    body.table(shown, out / "tables" / "replicate_spread.csv",
               "Every headline: pooled, and the replicates' spread (a margin's policy as A - B; the replicates' "
               "median and sd in the CSV)", summary=brief,
               summary_caption="The headlines of the figure above: pooled, and the replicates' spread (a margin's "
               "policy as A - B; every headline in the whole table)")
    cohorts = _gather(studies, "cohorts")
    if len(cohorts):
        columns = ["tasks", "prefix_feasible", "factual_success", "pairs"]
        body.table(cohorts[["seed", "experiment", "split", *columns]],
                   save_csv(cohorts, out / "tables" / "cohorts_replicates.csv"), "Cohorts of each replicate",
                   summary=cohorts.groupby(["experiment", "split"], as_index=False, sort=False)[columns].sum(),
                   summary_caption="Cohorts, every replicate's together")
    steps.next("effects")
    effects = _effects(body, out, studies, experiments, resamples, seed)
    steps.next("mechanism controls")
    mechanism_f = _mechanism(body, out, studies, experiments, resamples, seed)
    steps.next("what the mechanisms explain")
    counts = _gather(studies, "mechanisms_explained")
    if len(counts):
        body.heading("What the agent's mechanisms explain (pooled)")
        total = counts.groupby(["operation", "mechanism"], as_index=False)[
            [c for c in ("pairs", "rescues", "harms") if c in counts.columns]].sum()
        split = _gather(studies, "attribution_split").drop(columns="seed")
        split = split.groupby("operation", as_index=False, sort=False).sum()
        harms = _gather(studies, "harm_pairs")
        harms = harm_table(harms.fillna({"decision_mechanisms": "", "mechanisms": "", "attribution": ""})
                           ) if len(harms) else harms
        explanation_tables(body, split, total, harms, out, int(split.loc[split["operation"] == "all", "pairs"].iloc[0]),
                           "_pooled")
    steps.next("selective recovery")
    selective = _selective(body, out, studies, evaluation)
    which_recovery_section(body, out, evaluation[0], evaluation[1], evaluation[2], suffix="_pooled")
    steps.next("by perturbation kind")
    test = next(e for e in experiments if e.role == "eval")
    tables = {e.name: pooled_paired(studies, e.name, shown=True) for e in experiments}
    arms = with_arm_shown(evaluation[0], tables[test.name])
    kinds = kind_section(body, out, arms, arms.attrs["policies"], arms.attrs["routers"],
                         pooled_scored_cells(studies, experiments), shown_split(tables.values()),
                         resamples=resamples, seed=seed, suffix="_pooled")
    named = comparisons_block(body, out, test, {"condition": evaluation[2], "kind": kinds and kinds.margins,
                                                "shown": kinds and kinds.part_margins}, suffix="_pooled")
    if validation:
        steps.next("the planted worlds", parts=validation * len(VALIDATION_WORLDS))
        validation_section(body, out, validation, seed=seed, jobs=jobs, steps=steps)
    if hard_worlds:
        from cir.study.hard_worlds import hard_section

        hard_section(body, out, hard_worlds, seed=seed, jobs=jobs)
    steps.next("the report")
    report = _findings(title, [f for f in (effects, mechanism_f, selective) if f is not None], spread_table, quick,
                       named)
    report.blocks += body.blocks
    md, _ = report.write(out)
    steps.finish()
    return md


def _pooled_tables(out: Path, experiments: list[Experiment], studies: dict[int, Path], resamples: int,
                   seed: int) -> tuple[pd.DataFrame, pd.DataFrame, tuple[pd.DataFrame, ...], pd.DataFrame]:
    """Each replicate's headlines, the pooled ones, the pooled held-out evaluation and the spread
    table (all saved)."""
    primary = next(e for e in experiments if e.fit_cir)
    mechanism = next((e for e in experiments if e.role == "mechanism"), None)
    per = replicate_headlines(studies, experiments, resamples=resamples, seed=seed)
    save_csv(per, out / "tables" / "replicates.csv")
    evaluation = pooled_evaluation(studies, experiments, resamples=resamples, seed=seed)
    _, summary, margins = evaluation
    pooled = headlines(pooled_paired(studies, primary.name),
                       pooled_paired(studies, mechanism.name) if mechanism else None, summary, margins,
                       resamples=resamples, seed=seed).assign(replicate="pooled", seed=None)
    save_csv(pooled, out / "tables" / "headlines_pooled.csv")
    spread_table = spread(per, pooled)
    save_csv(spread_table, out / "tables" / "replicate_spread.csv")
    return per, pooled, evaluation, spread_table


def _matches(table: pd.DataFrame, where: dict[str, object]) -> pd.Series:
    """The rows of the spread table a headline of :data:`SPREAD_SHOWN` names (refresh's, unless it
    names an operation or a policy)."""
    mask = pd.Series(True, index=table.index)
    for k, v in where.items():
        mask &= table[k].astype(str) == str(v)
    if "operation" not in where and "policy" not in where:
        mask &= table["operation"] == "refresh"
    return mask


def _findings(title: str, shown: list[Shown], spread_table: pd.DataFrame, quick: bool, named: str = "") -> Report:
    """The report's head: each question's finding with the replicates' spread."""
    report = Report(title)
    report.heading("Findings")
    report.text("The paper's three questions, each answered from a pooled table below, with the spread of the "
                "replicates, beside the figure that shows it.")
    spreads = {"Effects of refresh": _spread_line(spread_table, headline="effect", condition=PRIMARY_STALE, delay=0),
               "Selective recovery (CIR)": _spread_line(spread_table, headline="held-out policy", policy="cir_paired")}
    for i, (f, figure, caption) in enumerate(shown, 1):
        extra = spreads.get(f.question, "")
        label = {"Effects of refresh": f"{PRIMARY_STALE} refresh at delay 0",
                 "Selective recovery (CIR)": "cir_paired"}.get(f.question, "")
        report.finding(f"**{i}. {f.question}.** {f.sentence}" + (f" Spread ({label}): {extra}." if extra else ""),
                       figure, caption)
    if named:
        report.text(f"**Primary comparisons.** {named}")
    warning = small_cohort_warning([f for f, _, _ in shown], quick)
    if warning:
        report.warning(warning)
    return report
