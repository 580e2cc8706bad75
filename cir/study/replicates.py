"""Replicates of the whole study, pooled: every headline over all replicates' tasks, and its spread.

One draw of tasks (and of the built-in agent's seed) cannot tell routers apart: seed to seed,
the headline effects move as much as they differ. ``cir reproduce --replicates N`` runs N
independent replicates of the whole study (new tasks and agent seed each: seeds
:func:`replicate_seeds`), each a complete study folder under ``replicates/seed-S/`` that
fits and evaluates its own routers, as the paper does. This module pools them:

* the paired tables of each cohort, concatenated, with task ids prefixed by the replicate
  (``seed-S/``) so that the task-level cluster bootstrap resamples every replicate's tasks;
* the held-out walks: each replicate's routers walk its own held-out cohort
  (:func:`cir.router.evaluation.walk_routers`), and the arms are summarised together
  (:func:`cir.router.evaluation.summarize_walks`);
* the headlines (:func:`headlines`): the same rows for each replicate and for the pool, so
  the spread beside a pooled number is read from the same definition.

Everything is computed from the replicates' run folders and router files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from cir.episode.protocol import PRIMARY_STALE
from cir.pairs.paired import read_paired
from cir.pairs.shown import with_shown
from cir.router.evaluation import summarize_walks, walk_routers
from cir.router.runtime import Router
from cir.stats.effects import contrast_table, effect_table
from cir.study.experiments import Experiment
from cir.study.selective import experiment_operations, router_file, study_routers

#: Replicate r of a study with seed S uses seed S + STRIDE * r (replicate 0 is the study itself).
#: A stride of 1000 keeps every replicate away from the agent's calibration cohort (generator seed 1).
REPLICATE_SEED_STRIDE = 1000
#: Columns of a headline row (``tables/replicates.csv``, ``tables/headlines_pooled.csv``).
HEADLINE_COLUMNS = ["replicate", "seed", "headline", "cohort", "subset", "condition", "delay", "operation", "policy",
                    "versus", "n", "n_tasks", "value_pp", "ci_low_pp", "ci_high_pp", "rescues", "harms",
                    "intervention_rate", "clean_harm_rate", "oracle_fraction"]
#: The baselines each router's margin is reported against.
VERSUS = ("never", "always", "anomaly", "anomaly_rate_matched", "anomaly_rate_matched_heldout",
          "anomaly_matched_cir_paired", "anomaly_matched_heldout_cir_paired", "oracle")


def replicate_seeds(seed: int, replicates: int) -> list[int]:
    """The study seed of each replicate (recorded in ``study.json`` and every table)."""
    return [seed + REPLICATE_SEED_STRIDE * r for r in range(replicates)]


def replicate_dir(out: Path, seed: int) -> Path:
    return out / "replicates" / f"seed-{seed}"


def _prefixed(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    return df.assign(task_id=f"seed-{seed}/" + df["task_id"].astype(str))


def pooled_paired(studies: dict[int, Path], experiment: str, shown: bool = False) -> pd.DataFrame:
    """One cohort's paired tables of every replicate, task ids prefixed by the replicate; ``shown``:
    with what each arm showed (:func:`cir.pairs.shown.with_shown`: derived from the store of a run
    written before the column)."""
    read = (lambda run: with_shown(run)) if shown else read_paired
    return pd.concat([_prefixed(read(d / "runs" / experiment), s) for s, d in studies.items()],
                     ignore_index=True)


def walked_arms(study: Path, experiments: list[Experiment]) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The study's routers walked on its own held-out cohort: (arms, policies in display order,
    the routers)."""
    test = next(e for e in experiments if e.role == "eval")
    names = list(study_routers(experiment_operations(experiments)))
    routers = {name: Router.load(study / router_file(name)) for name in names}
    arms, policies = walk_routers(routers, read_paired(study / "runs" / test.name, require_features=True),
                                  source=str(study / "runs" / test.name))
    return arms, policies, names


def pooled_evaluation(studies: dict[int, Path], experiments: list[Experiment], *, resamples: int,
                      seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(arms, summary, margins) over every replicate's held-out arms."""
    parts, policies, names, oracles = [], [], [], {}
    for s, d in studies.items():
        arms, policies, names = walked_arms(d, experiments)
        oracles = arms.attrs.get("oracles", {})  # the same routers in every replicate
        parts.append(_prefixed(arms, s).assign(seed=s))
    arms = pd.concat(parts, ignore_index=True)
    arms.attrs.update(oracles=oracles, policies=policies, routers=names)
    summary, margins = summarize_walks(arms, policies, names, resamples=resamples, seed=seed, oracles=oracles)
    return arms, summary, margins


def pooled_scored_cells(studies: dict[int, Path], experiments: list[Experiment]) -> pd.DataFrame:
    """Every replicate's held-out decision cells scored by its own routers' p_err
    (:func:`cir.study.kinds.scored_cells`), with what each arm showed, task ids prefixed by the replicate."""
    from cir.study.kinds import scored_cells

    test = next(e for e in experiments if e.role == "eval")
    names = list(study_routers(experiment_operations(experiments)))
    parts = []
    for s, d in studies.items():
        routers = {name: Router.load(d / router_file(name)) for name in names}
        parts.append(_prefixed(scored_cells(routers, with_shown(d / "runs" / test.name)), s))
    return pd.concat(parts, ignore_index=True)


def control_cells(df: pd.DataFrame) -> pd.DataFrame:
    """The mechanism controls' cells: clean at delay 0 and the primary stale condition at delay 4
    (the paper's), or the nearest delays of a grid without them."""
    delays = set(df["delay"])
    clean_at, stale_at = (0 if 0 in delays else min(delays)), (4 if 4 in delays else max(delays))
    return df[((df["condition"] == "clean") & (df["delay"] == clean_at))
              | ((df["condition"] == PRIMARY_STALE) & (df["delay"] == stale_at))]


def _effect_rows(tab: pd.DataFrame, headline: str, cohort: str, subset: str) -> list[dict]:
    return [{"headline": headline, "cohort": cohort, "subset": subset, "condition": r["condition"], "delay": int(r["delay"]),
             "operation": r["operation"], "n": int(r["n"]), "n_tasks": int(r["n"]), "value_pp": r["effect_pp"],
             "ci_low_pp": r["ci_low_pp"], "ci_high_pp": r["ci_high_pp"], "rescues": _count(r["rescues"]),
             "harms": _count(r["harms"])} for _, r in tab.iterrows()]


def headlines(primary: pd.DataFrame, mechanism: pd.DataFrame | None, summary: pd.DataFrame,
              margins: pd.DataFrame, *, resamples: int, seed: int) -> pd.DataFrame:
    """The headline rows of one study (or of the pool): effects of refresh in the primary
    cohort's factual-success subset at every delay (clean and the primary stale condition), the stale
    minus clean contrast, the mechanism controls at clean/delay 0 and stale/delay 4 (the
    paper's cells; the nearest delays a grid without them has), and every policy's held-out
    effect and each router's margins."""
    refresh = primary[primary["operation"] == "refresh"]
    eff = effect_table(refresh[refresh["condition"].isin(["clean", PRIMARY_STALE])],
                       by=["condition", "delay", "operation"], subset="factual-success",
                       resamples=resamples, seed=seed)
    rows = _effect_rows(eff, "effect", "primary", "factual-success")
    con = contrast_table(refresh, PRIMARY_STALE, "clean", on="condition", by=["delay"], subset="factual-success",
                         resamples=resamples, seed=seed)
    rows += [{"headline": f"{PRIMARY_STALE} minus clean", "cohort": "primary", "subset": "factual-success",
              "condition": f"{PRIMARY_STALE}-clean", "delay": int(r["delay"]), "operation": "refresh",
              "n": int(r["n_paired"]), "n_tasks": int(r["n_paired"]), "value_pp": r["difference_pp"],
              "ci_low_pp": r["ci_low_pp"], "ci_high_pp": r["ci_high_pp"]} for _, r in con.iterrows()]
    if mechanism is not None:
        cells = control_cells(mechanism)
        mech = effect_table(cells, by=["condition", "delay", "operation"], subset="all", resamples=resamples,
                            seed=seed)
        rows += _effect_rows(mech, "mechanism control", "mechanism", "all")
    for _, r in summary[summary["condition"] == "all"].iterrows():
        rows.append({"headline": "held-out policy", "cohort": "eval", "subset": "all", "condition": "all",
                     "policy": r["policy"], "n": int(r["n"]), "n_tasks": int(r["n_tasks"]),
                     "value_pp": r["effect_pp"], "ci_low_pp": r["ci_low_pp"], "ci_high_pp": r["ci_high_pp"],
                     "rescues": int(r["rescues"]), "harms": int(r["harms"]),
                     "intervention_rate": r["intervention_rate"], "oracle_fraction": r["oracle_fraction"],
                     "clean_harm_rate": float(summary[(summary["policy"] == r["policy"])
                                                      & (summary["condition"] == "clean")]["clean_harm_rate"].iloc[0])
                     if (summary["condition"] == "clean").any() else np.nan})
    for _, r in margins[(margins["condition"] == "all") & margins["versus"].isin(VERSUS)].iterrows():
        rows.append({"headline": "held-out margin", "cohort": "eval", "subset": "all", "condition": "all",
                     "policy": r["policy"], "versus": r["versus"], "n": int(r["n"]), "value_pp": r["margin_pp"],
                     "ci_low_pp": r["ci_low_pp"], "ci_high_pp": r["ci_high_pp"]})
    return pd.DataFrame(rows).reindex(columns=HEADLINE_COLUMNS[2:])


def replicate_headlines(studies: dict[int, Path], experiments: list[Experiment], *, resamples: int,
                        seed: int) -> pd.DataFrame:
    """:func:`headlines` of each replicate, one block of rows per replicate."""
    primary = next(e for e in experiments if e.fit_cir)
    mechanism = next((e for e in experiments if e.role == "mechanism"), None)
    blocks = []
    for r, (s, d) in enumerate(studies.items()):
        arms, policies, names = walked_arms(d, experiments)
        summary, margins = summarize_walks(arms, policies, names, resamples=resamples, seed=seed)
        mech = read_paired(d / "runs" / mechanism.name) if mechanism else None
        rows = headlines(read_paired(d / "runs" / primary.name), mech, summary, margins,
                         resamples=resamples, seed=seed)
        blocks.append(rows.assign(replicate=r, seed=s))
    return pd.concat(blocks, ignore_index=True).reindex(columns=HEADLINE_COLUMNS)


def spread(per_replicate: pd.DataFrame, pooled: pd.DataFrame) -> pd.DataFrame:
    """Per headline: the pooled value with its interval beside the replicates' min, median, max
    and standard deviation."""
    keys = ["headline", "cohort", "subset", "condition", "delay", "operation", "policy", "versus"]

    def keyed(df: pd.DataFrame) -> pd.DataFrame:
        df = df.assign(delay=[("" if pd.isna(v) else str(int(v))) for v in df["delay"]])
        return df.fillna({k: "" for k in keys})

    per = keyed(per_replicate)
    stats = (per.groupby(keys, sort=False, dropna=False)["value_pp"]
             .agg(replicates="count", min_pp="min", median_pp="median", max_pp="max", sd_pp="std").reset_index())
    pool = keyed(pooled)[[*keys, "n_tasks", "value_pp", "ci_low_pp", "ci_high_pp"]]
    pool = pool.rename(columns={"value_pp": "pooled_pp", "ci_low_pp": "pooled_ci_low_pp",
                                "ci_high_pp": "pooled_ci_high_pp", "n_tasks": "pooled_n_tasks"})
    return pool.merge(stats, on=keys, how="left")


def spread_figure(per_replicate: pd.DataFrame, pooled: pd.DataFrame, headline_filter: list[tuple[str, dict]]) -> Figure:
    """Each selected headline: every replicate's value (dots) and the pooled value with its CI."""
    fig = Figure(figsize=(8.5, 0.42 * len(headline_filter) + 1.4))
    ax = fig.subplots()
    labels = []
    for i, (label, where) in enumerate(headline_filter):
        def pick(df: pd.DataFrame, where: dict = where) -> pd.DataFrame:
            mask = np.ones(len(df), dtype=bool)
            for k, v in where.items():
                mask &= (df[k] == v).to_numpy()
            if "operation" not in where and "policy" not in where:
                mask &= (df["operation"] == "refresh").to_numpy()
            return df[mask]
        reps, pool = pick(per_replicate), pick(pooled)
        y = len(headline_filter) - 1 - i
        ax.scatter(reps["value_pp"], np.full(len(reps), y), s=18, color="tab:grey", zorder=2,
                   label="a replicate" if i == 0 else None)
        if len(pool):
            p = pool.iloc[0]
            ax.errorbar(p["value_pp"], y, xerr=[[p["value_pp"] - p["ci_low_pp"]], [p["ci_high_pp"] - p["value_pp"]]],
                        fmt="D", color="tab:blue", capsize=3, zorder=3, label="pooled, 95% CI" if i == 0 else None)
        labels.append(label)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels[::-1], fontsize=8)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("percentage points")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Headlines: each replicate and the pool", fontsize=10)
    fig.tight_layout()
    return fig


def _count(value: float) -> int | float:
    """A count as an int; an expected count (a table of --samples) as it is."""
    return int(value) if float(value).is_integer() else float(value)
