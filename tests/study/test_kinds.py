"""The study by perturbation kind (cir.study.kinds): staleK against lagK against missing."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from support.replay import fake_settings, fake_tasks

from cir.pairs.paired import read_run
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.shown import with_shown
from cir.pairs.synthetic import simulate
from cir.router.evaluation import evaluate
from cir.router.policy import CIRPolicy
from cir.study.kinds import (
    by_kind,
    by_part,
    condition_kind,
    error_detection,
    error_detection_by_shown,
    kind_section,
    scored_cells,
    shown_split,
    split_part,
    with_arm_shown,
)
from cir.study.page import Report

CONDITIONS = ("clean", "stale2", "stale1", "lag2", "lag1", "missing")


def test_a_condition_s_kind():
    assert [condition_kind(c) for c in CONDITIONS] == ["clean", "stale", "stale", "lag", "lag", "missing"]
    assert condition_kind("all") == "all"


@pytest.fixture(scope="module")
def fitted():
    train, test = simulate(120, seed=1, conditions=CONDITIONS), simulate(80, seed=2, conditions=CONDITIONS)
    router = CIRPolicy(seed=0).fit(train).to_router()
    return router, test, evaluate({"cir": router}, test, resamples=200, seed=0)


def test_the_walks_grouped_by_kind_are_the_same_walks(fitted):
    _, _, result = fitted
    arms = result["episodes"]
    kinds = by_kind(arms)
    assert set(kinds["condition"]) == {"clean", "stale", "lag", "missing"} and len(kinds) == len(arms)
    assert (kinds.drop(columns="condition").values == arms.drop(columns="condition").values).all()
    assert kinds.attrs == arms.attrs


def test_the_error_model_is_scored_by_kind_against_the_clean_cells(fitted):
    router, test, _ = fitted
    cells = scored_cells({"cir": router}, test)
    table = error_detection(cells).set_index("kind")
    assert list(table.index) == ["stale", "lag", "missing", "lag1", "lag2", "stale1", "stale2"]
    assert table.loc["lag", "cells"] == table.loc["lag1", "cells"] + table.loc["lag2", "cells"]
    assert (table["clean_cells"] == (cells["kind"] == "clean").sum()).all()
    assert table["auc_p_err"].between(0, 1).all() and table.loc["stale", "auc_p_err"] > 0.6


def _with_shown(test: pd.DataFrame) -> pd.DataFrame:
    """A synthetic table with a shown column: each perturbed arm's value drawn from its task and condition."""
    values = ["true", "anomalous", "looks_right"]
    shown = [("true" if c == "clean" else values[(hash((t, c)) & 0xFFFF) % 3]) for t, c in
             zip(test["task_id"], test["condition"], strict=True)]
    return test.assign(shown=shown)


def test_the_report_section_by_kind(fitted, tmp_path):
    router, test, result = fitted
    report = Report("t")
    cells = scored_cells({"cir": router}, test)
    tables = kind_section(report, tmp_path, result["episodes"], list(dict.fromkeys(result["summary"]["policy"])),
                          ["cir"], cells, pd.DataFrame(), resamples=200, seed=0)
    summary = tables.summary
    assert tables.parts is None and tables.part_margins is None
    assert report.blocks[0] == ("heading", (2, "By perturbation kind, and what each arm showed"))
    assert set(summary["condition"]) == {"all", "clean", "stale", "lag", "missing"}
    # the by-kind numbers pool the conditions' arms: the lag row's arms are lag1's and lag2's
    arms = result["episodes"]
    lag = summary[(summary["policy"] == "cir") & (summary["condition"] == "lag")].iloc[0]
    assert lag["n"] == arms["condition"].isin(["lag1", "lag2"]).sum()
    assert lag["interventions"] == arms.loc[arms["condition"].isin(["lag1", "lag2"]), "int_cir"].sum()
    for name in ("cir_eval_by_kind.csv", "cir_margins_by_kind.csv", "cir_error_detection.csv"):
        assert (tmp_path / "tables" / name).is_file()
    # arms without what they showed: no table by it
    assert not (tmp_path / "tables" / "cir_eval_by_shown.csv").exists()
    # one perturbed kind only: no section
    only = result["episodes"][result["episodes"]["condition"].isin(["clean", "stale2"])]
    assert kind_section(Report("t"), tmp_path, only, ["never", "cir"], ["cir"], cells, pd.DataFrame(),
                        resamples=50, seed=0) is None


def test_every_result_by_kind_is_also_given_by_what_the_arm_showed(fitted, tmp_path):
    router, test, result = fitted
    test = _with_shown(test)
    arms = with_arm_shown(result["episodes"], test)
    assert len(arms) == len(result["episodes"]) and arms.attrs == result["episodes"].attrs
    parts = by_part(arms)
    assert set(parts["condition"]) <= {"clean", *(f"{k}/{v}" for k in ("stale", "lag", "missing")
                                                  for v in ("true", "anomalous", "looks_right"))}
    cells = scored_cells({"cir": router}, test)
    detection = error_detection_by_shown(cells)
    lag = detection[detection["kind"] == "lag"].set_index("shown")
    assert lag["cells"].sum() == ((cells["kind"] == "lag").sum())
    split = shown_split([test])
    assert (split[["true", "anomalous", "looks_right"]].sum(axis=1) == split["arms"]).all()
    report = Report("t")
    kind_section(report, tmp_path, arms, list(dict.fromkeys(result["summary"]["policy"])), ["cir"], cells, split,
                 resamples=100, seed=0)
    by_shown = pd.read_csv(tmp_path / "tables" / "cir_eval_by_shown.csv", keep_default_na=False)
    # the parts of a kind hold its arms: the lag parts' arms add up to the lag arms
    cir = by_shown[by_shown["policy"] == "cir"]
    assert cir.loc[cir["kind"] == "lag", "n"].sum() == arms["condition"].isin(["lag1", "lag2"]).sum()
    assert set(cir.loc[cir["kind"] == "clean", "shown"]) == {""}
    assert (tmp_path / "tables" / "cir_margins_by_shown.csv").is_file()
    assert (tmp_path / "tables" / "shown_split.csv").is_file()
    assert any(kind == "text" and "What each kind held: of " in payload[0] if isinstance(payload, tuple)
               else kind == "text" and "What each kind held: of " in payload for kind, payload in report.blocks)
    assert list(split_part(pd.DataFrame({"condition": ["lag/true", "clean"], "x": [1, 2]})).columns) == \
        ["kind", "shown", "x"]


def test_what_each_arm_showed_is_derived_for_a_run_without_the_column(tmp_path):
    run_experiment(fake_tasks(5), tmp_path / "run", fake_settings(ReplaySettings(
        conditions=("clean", "stale2", "lag2", "lag1", "missing"), delays=(0, 1), operations=("refresh",))),
        progress=False, echo=lambda s: None)
    checked = read_run(tmp_path / "run")
    table = checked.table
    assert set(table.loc[table["condition"] == "clean", "shown"]) == {"true"}
    assert set(table.loc[table["condition"] == "missing", "shown"]) == {"anomalous"}
    assert with_shown(checked) is table  # the replayer's own column
    # a run of an earlier version (no column): derived from the store, the values the replayer wrote
    derived = with_shown(replace(checked, table=table.drop(columns="shown")))
    assert (derived[["task_id", "condition", "delay", "shown"]].to_numpy()
            == table[["task_id", "condition", "delay", "shown"]].to_numpy()).all()
    split = shown_split([table]).set_index(["kind", "condition"])
    assert split.loc[("lag", "all"), "arms"] == split.loc[("lag", "lag1"), "arms"] + split.loc[("lag", "lag2"), "arms"]
    assert split.loc[("lag", "all"), "arms"] == 2 * table["task_id"].nunique()
