"""The study by perturbation kind: stale reads that look wrong (``staleK``) against stale reads
that look right (``lagK``), and ``missing``.

A ``staleK`` text answers another command, so a check of text against command sees it; a
``lagK`` text answers the command it is shown for (:mod:`cir.episode.perturb`). Whether the
routers still help where the error does not show is what the study asks of them, so the
report reads every held-out policy, its share of its oracle, the margins and how well the
error model ``p_err`` detects the error, by kind (the conditions of a kind pooled: ``lag``
holds ``lag1`` and ``lag2``):

* :func:`by_kind`: walked arms with each condition replaced by its kind, for
  :func:`cir.router.evaluation.summarize_walks` (the same walks, grouped by kind);
* :func:`error_detection`: the held-out ROC AUC of each router's ``p_err`` at telling a kind's
  decision cells from the clean ones;
* :func:`lag_visibility`: how many ``lagK`` texts were the true text anyway (the command's
  answer had not changed in K env actions: a harmless stale read), from the episode store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from cir.episode.perturb import parse_condition
from cir.pairs.episode_record import ARM, EpisodeRecord
from cir.pairs.paired import CheckedRun
from cir.pairs.store import read_records
from cir.router.runtime import Router
from cir.router.walk import build_cells
from cir.util.errors import CirError
from cir.util.memo import memoized

#: The kinds in reading order (``all`` is every condition).
KINDS = ("clean", "stale", "lag", "missing")


def condition_kind(condition: str) -> str:
    """``clean``, ``stale``, ``lag`` or ``missing`` (a name no condition parses to: itself)."""
    try:
        return parse_condition(condition).kind
    except CirError:
        return str(condition)


def by_kind(arms: pd.DataFrame) -> pd.DataFrame:
    """Walked arms with ``condition`` replaced by its kind (their walks unchanged)."""
    out = arms.assign(condition=[condition_kind(c) for c in arms["condition"]])
    out.attrs = dict(arms.attrs)
    return out


@memoized(ignore=("source",))  # each replicate's, again in the pooled report
def scored_cells(routers: Mapping[str, Router], test: pd.DataFrame, source: str = "held-out table") -> pd.DataFrame:
    """The held-out decision cells (refresh's cells) with each router's ``p_err`` (``p_err[<router>]``)."""
    out = None
    for name, router in routers.items():
        decisions = build_cells(test, router.delays, router.operations, source).decisions
        scored = decisions[["task_id", "condition", "delay"]].copy()
        scored[f"p_err[{name}]"] = router.predict(decisions[router.features].to_numpy(dtype=float))["p_err_chosen"]
        out = scored if out is None else out.merge(scored, on=["task_id", "condition", "delay"], how="inner")
    if out is None:
        raise CirError("scored_cells: no routers")
    return out.assign(kind=[condition_kind(c) for c in out["condition"]])


DETECTION_COLUMNS = ["router", "kind", "conditions", "cells", "clean_cells", "auc_p_err"]


def error_detection(cells: pd.DataFrame) -> pd.DataFrame:
    """Per router and perturbed kind (and every perturbed condition alone): the ROC AUC of ``p_err``
    telling that kind's cells from the clean cells (0.5 is chance, 1 perfect)."""
    rows = []
    clean = cells[cells["kind"] == "clean"]
    routers = [c[len("p_err["):-1] for c in cells.columns if c.startswith("p_err[")]
    groups = [(k, cells[cells["kind"] == k]) for k in KINDS[1:] if (cells["kind"] == k).any()]
    groups += [(c, cells[cells["condition"] == c]) for c in sorted(set(cells["condition"]) - set(KINDS))]
    for name in routers:
        for label, sub in groups:
            y = np.r_[np.ones(len(sub)), np.zeros(len(clean))]
            score = np.r_[sub[f"p_err[{name}]"].to_numpy(), clean[f"p_err[{name}]"].to_numpy()]
            rows.append({"router": name, "kind": label, "conditions": ",".join(sorted(set(sub["condition"]))),
                         "cells": len(sub), "clean_cells": len(clean),
                         "auc_p_err": float(roc_auc_score(y, score)) if len(sub) and len(clean) else float("nan")})
    return pd.DataFrame(rows, columns=DETECTION_COLUMNS)


VISIBILITY_COLUMNS = ["condition", "arms", "shown_true", "shown_true_share", "shown_nothing_happens"]


def lag_visibility(runs: Iterable[str | Path | CheckedRun]) -> pd.DataFrame:
    """Per ``lagK`` condition: its perturbed observations, how many showed the true text anyway
    (the command's answer had not changed in K env actions) and how many showed 'Nothing
    happens.' (the command did not apply K actions earlier), over the runs' no-recovery arms.
    ``runs``: run folders, or runs already checked (:func:`cir.pairs.paired.read_run`), whose
    members are read without checking the store again. Only the lag arms' records are decoded."""
    counts: dict[str, list[int]] = {}
    for run in runs:
        path, scan = (run.run_dir, run.scan) if isinstance(run, CheckedRun) else (Path(run), None)
        for rec in read_records(path, scan):
            if rec.get("kind") != "episode" or rec.get("role") != ARM or rec.get("transcript") is None \
                    or condition_kind(str(rec.get("condition"))) != "lag":
                continue
            ep = EpisodeRecord.from_dict(rec, str(path))
            mark = f"perturb:{ep.condition}"
            step = next((s for s in ep.transcript.steps if mark in s.events), None)
            if step is None:
                continue
            c = counts.setdefault(ep.condition, [0, 0, 0])
            c[0] += 1
            c[1] += int(step.shown == step.observation)
            c[2] += int(step.shown.strip() == "Nothing happens.")
    rows = [{"condition": k, "arms": v[0], "shown_true": v[1], "shown_true_share": v[1] / v[0] if v[0] else np.nan,
             "shown_nothing_happens": v[2]} for k, v in sorted(counts.items())]
    return pd.DataFrame(rows, columns=VISIBILITY_COLUMNS)


def summed_visibility(tables: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """:func:`lag_visibility` of several studies' runs from each study's own table: the counts
    summed, the share of their sums."""
    parts = [t for t in tables if len(t)]
    if not parts:
        return pd.DataFrame(columns=VISIBILITY_COLUMNS)
    total = pd.concat(parts).groupby("condition", sort=True)[["arms", "shown_true", "shown_nothing_happens"]].sum()
    rows = [{"condition": k, "arms": int(r["arms"]), "shown_true": int(r["shown_true"]),
             "shown_true_share": int(r["shown_true"]) / int(r["arms"]) if r["arms"] else np.nan,
             "shown_nothing_happens": int(r["shown_nothing_happens"])} for k, r in total.iterrows()]
    return pd.DataFrame(rows, columns=VISIBILITY_COLUMNS)


#: The policies the section shows (those a study has; every one in the CSV), and the margins it reads.
SHOWN = ("cir", "cir_paired", "cir_multi", "anomaly", "anomaly_rate_matched_heldout",
         "anomaly_matched_heldout_cir_paired", "oracle_refresh", "oracle")
#: The router whose error model the section shows (every router's in the CSV: each fits the same
#: p_err model, C = 0.1 on the same label, on its decision cells).
DETECTORS = ("cir_paired",)
MARGINS = (("cir_paired", "anomaly"), ("cir_paired", "anomaly_matched_heldout_cir_paired"), ("cir", "anomaly"),
           ("cir", "anomaly_rate_matched_heldout"), ("cir_multi", "anomaly"))


def kind_section(report, out: Path, arms: pd.DataFrame, policies: list[str], contenders: list[str],
                 detection: pd.DataFrame, visibility: pd.DataFrame, *, resamples: int, seed: int,
                 suffix: str = "") -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """"By perturbation kind": the held-out policies, their margins and the error model's AUC
    by kind; returns (summary, margins) by kind, or None when the cohorts ran one kind only."""
    from cir.router.evaluation import summarize_walks
    from cir.study.page import save_csv

    kinds = arms.assign(kind=[condition_kind(c) for c in arms["condition"]])["kind"]
    if len(set(kinds) - {"clean"}) < 2:
        return None
    report.heading("Stale reads that look right: by perturbation kind")
    summary, margins = summarize_walks(by_kind(arms), policies, contenders, resamples=resamples, seed=seed,
                                       oracles=arms.attrs.get("oracles"))
    save_csv(summary, out / "tables" / f"cir_eval_by_kind{suffix}.csv")
    save_csv(margins, out / "tables" / f"cir_margins_by_kind{suffix}.csv")
    report.text(
        "A `staleK` observation is the answer to another command (the one K env actions earlier), so a check "
        "of text against command can see it; a `lagK` observation is the answer the same command would have "
        "got K env actions earlier (the env restored there, the command sent, restored: a stale cache or a "
        "lagging replica), so it answers the command and no such check can. Below, the held-out walks of every "
        "policy grouped by kind (`lag` pools lag1 and lag2; the walks are those of the tables above), the "
        "margins by kind, and how well each router's error model tells a kind's decision cells from the clean "
        "ones (ROC AUC of `p_err`, 0.5 is chance).")
    if len(visibility):
        vis = save_csv(visibility, out / "tables" / f"lag_visibility{suffix}.csv")
        report.table(visibility, vis, "How many lagK texts were the true text anyway (the command's answer had not "
                     "changed in K env actions) and how many were 'Nothing happens.', no-recovery arms of every cohort")
    path = save_csv(detection, out / "tables" / f"cir_error_detection{suffix}.csv")
    detectors = detection[detection["router"].isin(DETECTORS)]
    report.table(detectors if len(detectors) else detection, path,
                 "The error model p_err (cir_paired's) by kind and condition, held out (ROC AUC against the clean "
                 "cells; every router's in the CSV)")
    shown = summary[summary["policy"].isin(SHOWN) & ~summary["condition"].isin(["all", "clean"])]
    shown = shown[["policy", "condition", "n", "success_never", "effect_pp", "ci_low_pp", "ci_high_pp",
                   "oracle_fraction", "oracle_policy", "intervention_rate", "clean_harm_rate"]].rename(
        columns={"condition": "kind"})
    order = {k: i for i, k in enumerate(KINDS)}
    shown = shown.assign(_k=shown["kind"].map(order)).sort_values(["_k", "policy"], kind="mergesort").drop(columns="_k")
    report.table(shown, out / "tables" / f"cir_eval_by_kind{suffix}.csv",
                 "Held-out policies by perturbation kind (share of the gain of each policy's own oracle; clean "
                 "arms and every policy in the CSV)")
    m = margins[margins.apply(lambda r: (r["policy"], r["versus"]) in MARGINS, axis=1)
                & (margins["condition"] != "all")].rename(columns={"condition": "kind"})
    report.table(m, out / "tables" / f"cir_margins_by_kind{suffix}.csv", "Margins by perturbation kind (pp, paired by task)")
    return summary, margins
