"""The study by perturbation kind (cir.study.kinds): staleK against lagK against missing."""

from __future__ import annotations

import pandas as pd
import pytest
from support.replay import fake_settings, fake_tasks

from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.synthetic import simulate
from cir.router.evaluation import evaluate
from cir.router.policy import CIRPolicy
from cir.study.kinds import (
    by_kind,
    condition_kind,
    error_detection,
    kind_section,
    lag_visibility,
    scored_cells,
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


def test_the_report_section_by_kind(fitted, tmp_path):
    router, test, result = fitted
    report = Report("t")
    detection = error_detection(scored_cells({"cir": router}, test))
    summary, margins = kind_section(report, tmp_path, result["episodes"], list(dict.fromkeys(result["summary"]["policy"])),
                                    ["cir"], detection, pd.DataFrame(), resamples=200, seed=0)
    assert report.blocks[0] == ("heading", (2, "Stale reads that look right: by perturbation kind"))
    assert set(summary["condition"]) == {"all", "clean", "stale", "lag", "missing"}
    # the by-kind numbers pool the conditions' arms: the lag row's arms are lag1's and lag2's
    arms = result["episodes"]
    lag = summary[(summary["policy"] == "cir") & (summary["condition"] == "lag")].iloc[0]
    assert lag["n"] == arms["condition"].isin(["lag1", "lag2"]).sum()
    assert lag["interventions"] == arms.loc[arms["condition"].isin(["lag1", "lag2"]), "int_cir"].sum()
    for name in ("cir_eval_by_kind.csv", "cir_margins_by_kind.csv", "cir_error_detection.csv"):
        assert (tmp_path / "tables" / name).is_file()
    # one perturbed kind only: no section
    only = result["episodes"][result["episodes"]["condition"].isin(["clean", "stale2"])]
    assert kind_section(Report("t"), tmp_path, only, ["never", "cir"], ["cir"], detection, pd.DataFrame(),
                        resamples=50, seed=0) is None


def test_lag_visibility_counts_lag_texts_that_were_the_true_text(tmp_path):
    run_experiment(fake_tasks(5), tmp_path / "run", fake_settings(ReplaySettings(
        conditions=("clean", "stale2", "lag2", "lag1"), delays=(0,), operations=("refresh",))),
        progress=False, echo=lambda s: None)
    table = lag_visibility([tmp_path / "run"]).set_index("condition")
    assert list(table.index) == ["lag1", "lag2"]
    assert (table["arms"] >= table["shown_true"]).all() and (table["arms"] > 0).all()
    assert (table["shown_true_share"] == table["shown_true"] / table["arms"]).all()
