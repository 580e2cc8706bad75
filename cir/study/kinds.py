"""The study by perturbation kind: ``staleK`` (another command's answer), ``lagK`` (the same
command's answer K env actions earlier) and ``missing``, and by what each perturbed arm showed.

A ``staleK`` text answers another command, so a check of text against command can see it; a
``lagK`` text answers the command it is shown for (:mod:`cir.episode.perturb`). Yet what a kind
holds is not its name: a ``lagK`` read whose answer had not changed in K env actions shows the
true text (no error at all), and one whose command did not apply K actions earlier shows a text
the harness sees is wrong (ALFWorld's ``Nothing happens.``). So every result by kind is also
given by what the arm showed (the paired table's ``shown`` column: ``true``, ``anomalous``,
``looks_right``; :func:`cir.episode.perturb.shown_kind`), and the report says in numbers what
each kind holds. The report reads every held-out policy, its share of its oracle, the margins
and how well the error model ``p_err`` detects the error, by kind (the conditions of a kind
pooled: ``lag`` holds ``lag1`` and ``lag2``) and by kind and what was shown:

* :func:`by_kind`, :func:`by_part`: walked arms with each condition replaced by its kind (or its
  kind and what it showed), for :func:`cir.router.evaluation.summarize_walks` (the same walks,
  grouped otherwise);
* :func:`error_detection`, :func:`error_detection_by_shown`: the held-out ROC AUC of each
  router's ``p_err`` at telling a kind's decision cells (or a part of them) from the clean ones;
* :func:`shown_split`: per condition and kind, how many arms showed the true text, an anomalous
  text or one that looks right (from the paired tables: :mod:`cir.pairs.shown` for a run written
  before the column).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from cir.episode.perturb import SHOWN_VALUES, parse_condition
from cir.pairs.paired import SHOWN
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


#: The separator of a part's label in :func:`by_part` (``lag/true``).
PART = "/"


def part_of(condition: str, shown: str) -> str:
    """``clean``, or a perturbed condition's kind and what its arm showed (``lag/anomalous``)."""
    kind = condition_kind(condition)
    return kind if kind == "clean" else f"{kind}{PART}{shown}"


def by_part(arms: pd.DataFrame) -> pd.DataFrame:
    """Walked arms (with a ``shown`` column: :func:`with_arm_shown`) with ``condition`` replaced by
    their kind and what they showed (``lag/true``, ...; ``clean`` stays), their walks unchanged."""
    out = arms.assign(condition=[part_of(c, s) for c, s in zip(arms["condition"], arms[SHOWN], strict=True)])
    out.attrs = dict(arms.attrs)
    return out


def with_arm_shown(arms: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Walked arms (one row per task and condition) with what each arm showed, from the paired
    ``table`` they were walked on (its ``shown`` column); the arms as they are when it has none."""
    if SHOWN not in table.columns or SHOWN in arms.columns:
        return arms
    shown = table[["task_id", "condition", SHOWN]].drop_duplicates(["task_id", "condition"])
    out = arms.merge(shown, on=["task_id", "condition"], how="left", validate="1:1")
    out.attrs = dict(arms.attrs)
    return out


def split_part(table: pd.DataFrame, column: str = "condition") -> pd.DataFrame:
    """A table grouped by :func:`by_part` with its label as two columns, ``kind`` and ``shown``
    (``all`` and ``clean`` rows: ``shown`` empty), in place of ``column``."""
    parts = table[column].astype(str).str.partition(PART)
    out = table.drop(columns=column)
    out.insert(table.columns.get_loc(column), "kind", parts[0])
    out.insert(table.columns.get_loc(column) + 1, "shown", parts[2])
    return out




@memoized(ignore=("source",))  # each replicate's, again in the pooled report
def scored_cells(routers: Mapping[str, Router], test: pd.DataFrame, source: str = "held-out table") -> pd.DataFrame:
    """The held-out decision cells (refresh's cells) with each router's ``p_err`` (``p_err[<router>]``),
    and what the arm showed (``shown``) when the table says."""
    out = None
    keys = ["task_id", "condition", "delay", *([SHOWN] if SHOWN in test.columns else [])]
    for name, router in routers.items():
        decisions = build_cells(test, router.delays, router.operations, source).decisions
        scored = decisions[keys].copy()
        scored[f"p_err[{name}]"] = router.predict(decisions[router.features].to_numpy(dtype=float))["p_err_chosen"]
        out = scored if out is None else out.merge(scored, on=keys, how="inner")
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


DETECTION_SHOWN_COLUMNS = ["router", "kind", "shown", "cells", "clean_cells", "auc_p_err", "clean_cells_same_tasks",
                           "auc_p_err_same_tasks"]


def _auc(positive: np.ndarray, negative: np.ndarray) -> float:
    if not len(positive) or not len(negative):
        return float("nan")
    return float(roc_auc_score(np.r_[np.ones(len(positive)), np.zeros(len(negative))], np.r_[positive, negative]))


def error_detection_by_shown(cells: pd.DataFrame) -> pd.DataFrame:
    """Per router, perturbed kind and what its arms showed: the ROC AUC of ``p_err`` telling those
    cells from the clean cells, and from the clean cells of the same tasks only (the tasks whose arms
    showed the true text differ from the others: an AUC above 0.5 against every clean cell is then
    the tasks', not an error's; empty without a ``shown`` column)."""
    if SHOWN not in cells.columns:
        return pd.DataFrame(columns=DETECTION_SHOWN_COLUMNS)
    rows = []
    clean = cells[cells["kind"] == "clean"]
    routers = [c[len("p_err["):-1] for c in cells.columns if c.startswith("p_err[")]
    for name in routers:
        score = f"p_err[{name}]"
        for kind in KINDS[1:]:
            for shown in SHOWN_VALUES:
                sub = cells[(cells["kind"] == kind) & (cells[SHOWN] == shown)]
                if not len(sub):
                    continue
                same = clean[clean["task_id"].isin(set(sub["task_id"]))]
                rows.append({"router": name, "kind": kind, "shown": shown, "cells": len(sub),
                             "clean_cells": len(clean), "auc_p_err": _auc(sub[score].to_numpy(), clean[score].to_numpy()),
                             "clean_cells_same_tasks": len(same),
                             "auc_p_err_same_tasks": _auc(sub[score].to_numpy(), same[score].to_numpy())})
    return pd.DataFrame(rows, columns=DETECTION_SHOWN_COLUMNS)


SPLIT_COLUMNS = ["kind", "condition", "arms", *SHOWN_VALUES, *(f"{v}_share" for v in SHOWN_VALUES)]


def shown_split(tables: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """What the perturbed arms of ``tables`` (paired tables with a ``shown`` column) showed: per
    kind (``condition`` ``all``) and per condition, the arms (one per task and condition) that
    showed the true text, an anomalous text and one that looks right, as counts and shares."""
    parts = [t[["task_id", "condition", SHOWN]].drop_duplicates(["task_id", "condition"]) for t in tables
             if SHOWN in t.columns]
    if not parts:
        return pd.DataFrame(columns=SPLIT_COLUMNS)
    arms = pd.concat(parts, ignore_index=True)
    arms = arms.assign(kind=[condition_kind(c) for c in arms["condition"]])
    arms = arms[arms["kind"] != "clean"]
    rows = []
    for kind in [k for k in KINDS[1:] if (arms["kind"] == k).any()]:
        of_kind = arms[arms["kind"] == kind]
        for condition, sub in [("all", of_kind), *sorted(of_kind.groupby("condition"))]:
            counts = sub[SHOWN].value_counts()
            row = {"kind": kind, "condition": condition, "arms": len(sub),
                   **{v: int(counts.get(v, 0)) for v in SHOWN_VALUES}}
            row.update({f"{v}_share": row[v] / len(sub) for v in SHOWN_VALUES})
            rows.append(row)
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


def split_sentence(split: pd.DataFrame) -> str:
    """What each kind held, in words and numbers, from :func:`shown_split`."""
    parts = []
    for _, r in split[split["condition"] == "all"].iterrows():
        parts.append(f"of {int(r['arms']):,} `{r['kind']}` arms, {int(r['true']):,} ({100 * r['true_share']:.1f}%) "
                     f"showed the true text, {int(r['anomalous']):,} ({100 * r['anomalous_share']:.1f}%) a text "
                     f"the family's test sees is anomalous and {int(r['looks_right']):,} "
                     f"({100 * r['looks_right_share']:.1f}%) a wrong text that looks right")
    return ("What each kind held: " + "; ".join(parts) + ".") if parts else ""


#: The policies the section shows (those a study has; every one in the CSV), and the margins it reads:
#: rewind with the anomaly rule and always rewinding stand beside cir_multi, which mostly rewinds.
SHOWN_POLICIES = ("cir", "cir_paired", "cir_multi", "anomaly", "anomaly_rate_matched_heldout",
                  "anomaly_matched_heldout_cir_paired", "anomaly_rewind", "always_rewind", "oracle_refresh", "oracle")
#: Those the main text shows by kind, and by kind and what was shown (the rest in the appendix).
BRIEF = ("cir_paired", "cir_multi", "anomaly", "oracle")
PART_BRIEF = "cir_paired"
#: The router whose error model the section shows (every router's in the CSV: each fits the same
#: p_err model, C = 0.1 on the same label, on its decision cells).
DETECTORS = ("cir_paired",)
MARGINS = (("cir_paired", "anomaly"), ("cir_paired", "anomaly_matched_heldout_cir_paired"), ("cir", "anomaly"),
           ("cir", "anomaly_rate_matched_heldout"), ("cir_multi", "anomaly"), ("cir_multi", "anomaly_rewind"),
           ("cir_multi", "always_rewind"))
EVAL_COLUMNS = ["policy", "n", "success_never", "effect_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p",
                "oracle_fraction", "oracle_policy", "intervention_rate", "clean_harm_rate"]


def _shown_rows(summary: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The section's policies of a summary by kind (or part), perturbed groups only, in kind order."""
    shown = summary[summary["policy"].isin(SHOWN_POLICIES) & ~summary["kind"].isin(["all", "clean"])]
    order = {k: i for i, k in enumerate(KINDS)}
    shown = shown.assign(_k=shown["kind"].map(order)).sort_values(["_k", *keys[1:], "policy"], kind="mergesort")
    return shown[[*keys, *EVAL_COLUMNS]]


def _margin_rows(margins: pd.DataFrame) -> pd.DataFrame:
    return margins[margins.apply(lambda r: (r["policy"], r["versus"]) in MARGINS, axis=1)
                   & ~margins["kind"].isin(["all", "clean"])]


@dataclass(frozen=True)
class ByKind:
    """The held-out summary and margins by kind, and by kind and what the arm showed (``kind`` and
    ``shown`` columns; None when the arms do not say what they showed)."""

    summary: pd.DataFrame
    margins: pd.DataFrame
    parts: pd.DataFrame | None = None
    part_margins: pd.DataFrame | None = None


def kind_section(report, out: Path, arms: pd.DataFrame, policies: list[str], contenders: list[str],
                 cells: pd.DataFrame, split: pd.DataFrame, *, resamples: int, seed: int,
                 suffix: str = "") -> ByKind | None:
    """"By perturbation kind": what each kind held (``split``, :func:`shown_split`), the held-out
    policies, their margins and the error model's AUC (from the scored ``cells``) by kind, and by kind
    and what each arm showed when ``arms`` say (their ``shown`` column); returns the tables
    (:class:`ByKind`), or None when the cohorts ran one kind only."""
    from cir.router.evaluation import summarize_walks
    from cir.study.page import save_csv
    from cir.study.summaries import largest_margins, margins_caption

    kinds = arms.assign(kind=[condition_kind(c) for c in arms["condition"]])["kind"]
    if len(set(kinds) - {"clean"}) < 2:
        return None
    report.heading("By perturbation kind, and what each arm showed")
    summary, margins = summarize_walks(by_kind(arms), policies, contenders, resamples=resamples, seed=seed,
                                       oracles=arms.attrs.get("oracles"))
    save_csv(summary, out / "tables" / f"cir_eval_by_kind{suffix}.csv")
    save_csv(margins, out / "tables" / f"cir_margins_by_kind{suffix}.csv")
    report.text(
        "A `staleK` observation is the answer to another command (the one K env actions earlier), so a check "
        "of text against command can see it; a `lagK` observation is the answer the same command would have "
        "got K env actions earlier (the env restored there, the command sent, restored: a stale cache or a "
        "lagging replica), so it answers the command. Neither name says what an arm holds: a lag read whose "
        "answer had not changed in K env actions is the true text (no error at all), and one whose command did "
        "not apply K env actions earlier is a text the harness sees is wrong. So each perturbed arm is counted "
        "by what it showed (the paired table's `shown` column): the true text (`true`), a text the family's "
        "test finds anomalous (`anomalous`: the missing text; in ALFWorld also `Nothing happens.` to a "
        "command of its grammar and a text that does not answer its command) or a wrong text that looks like "
        "a valid answer (`looks_right`). Below, the held-out walks of every policy grouped by kind (`lag` pools "
        "lag1 and lag2; the walks are those of the tables above) and by kind and what was shown, the margins, "
        "and how well each router's error model tells those decision cells from the clean ones (ROC AUC of "
        "`p_err`, 0.5 is chance).")
    if len(split):
        path = save_csv(split, out / "tables" / f"shown_split{suffix}.csv")
        report.table(split[["kind", "condition", "arms", *SHOWN_VALUES]], path,
                     "What the perturbed arms showed, no-recovery arms of every cohort (shares in the CSV)")
        report.text(split_sentence(split))
    detection = error_detection(cells)
    path = save_csv(detection, out / "tables" / f"cir_error_detection{suffix}.csv")
    detectors = detection[detection["router"].isin(DETECTORS)]
    report.table(detectors if len(detectors) else detection, path,
                 "The error model p_err (cir_paired's) by kind and condition, held out (ROC AUC against the clean "
                 "cells; every router's in the CSV)")
    by_shown = error_detection_by_shown(cells)
    if len(by_shown):
        path = save_csv(by_shown, out / "tables" / f"cir_error_detection_by_shown{suffix}.csv")
        picked = by_shown[by_shown["router"].isin(DETECTORS)]
        report.table(picked if len(picked) else by_shown, path,
                     "The error model p_err (cir_paired's) by kind and what the arm showed, held out (ROC AUC "
                     "against the clean cells; every router's in the CSV)")
    named = _shown_rows(summary.rename(columns={"condition": "kind"}), ["kind"])
    brief = [p for p in BRIEF if p in set(named["policy"])]
    report.table(named, out / "tables" / f"cir_eval_by_kind{suffix}.csv",
                 "Held-out policies by perturbation kind (share of the gain of each policy's own oracle; clean "
                 "arms and every policy in the CSV)", summary=named[named["policy"].isin(brief)],
                 summary_caption=f"Held-out policies by perturbation kind: {', '.join(brief)} (share of the gain "
                 "of each policy's own oracle; every policy shown in the whole table)")
    kind_margins = _margin_rows(margins.rename(columns={"condition": "kind"}))
    report.table(kind_margins, out / "tables" / f"cir_margins_by_kind{suffix}.csv",
                 "Margins by perturbation kind (pp, paired by task; sign-flip p unadjusted)",
                 summary=largest_margins(kind_margins), summary_caption="Margins by perturbation kind (pp, paired "
                 "by task): " + margins_caption(kind_margins, 8))
    if SHOWN in arms.columns:
        parts, part_margins = summarize_walks(by_part(arms), policies, contenders, resamples=resamples, seed=seed,
                                              oracles=arms.attrs.get("oracles"))
        parts, part_margins = split_part(parts), split_part(part_margins)
        path = save_csv(parts, out / "tables" / f"cir_eval_by_shown{suffix}.csv")
        mpath = save_csv(part_margins, out / "tables" / f"cir_margins_by_shown{suffix}.csv")
        part_rows = _shown_rows(parts, ["kind", "shown"])
        report.table(part_rows, path,
                     "Held-out policies by kind and what the arm showed (every policy and the clean arms in the CSV)",
                     summary=part_rows[part_rows["policy"] == PART_BRIEF],
                     summary_caption=f"Held-out {PART_BRIEF} by kind and what the arm showed (every policy shown "
                     "in the whole table)")
        shown_margins = _margin_rows(part_margins)
        report.table(shown_margins, mpath,
                     "Margins by kind and what the arm showed (pp, paired by task; sign-flip p unadjusted)",
                     summary=largest_margins(shown_margins), summary_caption="Margins by kind and what the arm "
                     "showed (pp, paired by task): " + margins_caption(shown_margins, 8))
        return ByKind(summary, margins, parts, part_margins)
    return ByKind(summary, margins)
