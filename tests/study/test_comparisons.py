"""Comparisons named before the study runs (cir.study.comparisons): parsed from the eval config, found in
the margins tables by group, Holm-adjusted over the named ones, read as a difference only when the
adjusted p is at most 0.05."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cir.study.comparisons import (
    Comparison,
    claim,
    comparisons_block,
    comparisons_sentence,
    parse_comparison,
    parse_comparisons,
    primary_comparisons,
)
from cir.study.experiments import load_experiment, load_experiments
from cir.study.page import Report
from cir.util.errors import CirError


def _margins() -> dict[str, pd.DataFrame]:
    by_condition = pd.DataFrame([
        # policy, versus, condition, n, margin, low, high, p
        ("cir_paired", "anomaly", "all", 750, 0.5, 0.1, 1.0, 0.039),
        ("cir_paired", "anomaly", "lag2", 150, 0.7, 0.0, 2.0, 0.25),
        ("cir", "anomaly", "all", 750, 0.1, -0.4, 0.8, 0.61),
        ("cir_multi", "anomaly_rewind", "all", 750, -0.2, -1.2, 0.9, 0.74),
        ("cir_multi", "always_rewind", "all", 750, 2.1, 1.2, 3.0, 0.0001),
    ], columns=["policy", "versus", "condition", "n", "margin_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p"])
    by_kind = by_condition.assign(condition=["all", "lag", "all", "all", "all"])
    by_shown = pd.DataFrame([("cir_multi", "anomaly_rewind", "lag", "anomalous", 300, 0.4, -1.0, 1.8, 0.6),
                             ("cir_multi", "anomaly_rewind", "all", np.nan, 750, -0.2, -1.2, 0.9, 0.74)],
                            columns=["policy", "versus", "kind", "shown", "n", "margin_pp", "ci_low_pp", "ci_high_pp",
                                     "sign_flip_p"])
    return {"condition": by_condition, "kind": by_kind, "shown": by_shown}


def test_a_comparison_is_written_policy_minus_versus_on_a_group():
    assert parse_comparison("cir_paired - anomaly") == Comparison("cir_paired", "anomaly", "all")
    assert parse_comparison(" cir_multi  -  anomaly_rewind on lag/looks_right ") == \
        Comparison("cir_multi", "anomaly_rewind", "lag/looks_right")
    assert parse_comparison("cir - anomaly on lag2").text == "cir - anomaly on lag2"
    for bad in ("cir_paired vs anomaly", "cir_paired-anomaly", "cir - cir", "cir - anomaly on", "- anomaly"):
        with pytest.raises(CirError, match="expected 'POLICY - VERSUS'"):
            parse_comparison(bad)
    with pytest.raises(CirError, match="named twice"):
        parse_comparisons(["cir - anomaly", "cir  -  anomaly"])


def test_the_named_margins_are_adjusted_by_holm_over_the_named_ones():
    named = ["cir_paired - anomaly", "cir - anomaly", "cir_multi - anomaly_rewind", "cir_multi - always_rewind"]
    table = primary_comparisons(named, _margins())
    raw = np.array([0.039, 0.61, 0.74, 0.0001])
    # Holm's step-down by hand: the i-th smallest p times (m - i), running maximum, at most 1
    order = np.argsort(raw)
    stepped = np.minimum(1, np.maximum.accumulate(raw[order] * (len(raw) - np.arange(len(raw)))))
    holm = np.empty_like(raw)
    holm[order] = stepped
    assert np.allclose(table["p_raw"], raw) and np.allclose(table["p_holm"], holm)
    assert table.loc[0, "p_holm"] == pytest.approx(0.117)  # 0.039 raw: positive-looking, not a finding
    assert list(table["reads"]) == ["no difference shown", "no difference shown", "no difference shown", "positive"]
    assert list(table["comparison"]) == named and table.loc[0, "n"] == 750


def test_a_comparison_on_a_condition_a_kind_or_what_the_arm_showed():
    table = primary_comparisons(["cir_paired - anomaly on lag2", "cir_paired - anomaly on lag",
                                 "cir_multi - anomaly_rewind on lag/anomalous"], _margins())
    assert list(table["n"]) == [150, 150, 300] and list(table["on"]) == ["lag2", "lag", "lag/anomalous"]
    with pytest.raises(CirError, match="no held-out arms of 'stale/true'"):
        primary_comparisons(["cir - anomaly on stale/true"], _margins())
    with pytest.raises(CirError, match="no margin of 'cir' over 'oracle'; the routers whose margins are measured are "
                                       "cir, cir_multi, cir_paired"):
        primary_comparisons(["cir - oracle"], _margins())
    assert primary_comparisons([], _margins()).empty


def test_a_margin_is_a_difference_only_when_its_adjusted_p_says_so():
    assert claim(0.5, 0.28) == "no difference shown" and claim(-3.0, 0.2) == "no difference shown"
    assert claim(0.5, 0.01) == "positive" and claim(-0.5, 0.05) == "negative" and claim(0.0, 0.0) == "no difference shown"


def test_the_summary_sentence_says_how_many_other_margins_exist_and_where(tmp_path):
    table = primary_comparisons(["cir_paired - anomaly", "cir_multi - always_rewind"], _margins())
    text = comparisons_sentence(table, {"tables/cir_margins.csv": 980, "tables/cir_margins_by_kind.csv": 700},
                                "`cir_eval.toml`")
    assert text.startswith("Named before the study ran (`cir_eval.toml`) and adjusted for the 2 named (Holm): "
                           "`cir_paired` - `anomaly` +0.5 pp [+0.1, +1.0], p 0.039, Holm 0.039: positive; "
                           "`cir_multi` - `always_rewind` +2.1 pp [+1.2, +3.0], p < 0.001, Holm < 0.001: positive.")
    assert "1,678 other margins (980 in `tables/cir_margins.csv`, 700 in `tables/cir_margins_by_kind.csv`)" in text
    eval_config = next(e for e in load_experiments() if e.role == "eval")
    report = Report("t")
    sentence = comparisons_block(report, tmp_path, eval_config, _margins())
    assert "adjusted for the 4 named (Holm)" in sentence and (tmp_path / "tables" / "primary_comparisons.csv").is_file()
    assert report.blocks[0][0] == "table" and report.blocks[1] == ("text", sentence)


def _config(path: Path, role: str, extra: str) -> Path:
    path.write_text(f'name = "x"\nrole = "{role}"\norder = 1\nsplit = "valid_seen"\nn_tasks = 3\nquick_n_tasks = 2\n'
                    f'conditions = ["clean", "stale2"]\ndelays = [0]\noperations = ["refresh"]\n{extra}')
    return path


def test_the_eval_config_names_them_and_the_study_record_keeps_them(tmp_path):
    shipped = next(e for e in load_experiments() if e.role == "eval")
    assert shipped.comparisons == ("cir_paired - anomaly", "cir - anomaly", "cir_multi - anomaly_rewind",
                                   "cir_multi - always_rewind")
    assert shipped.identity()["comparisons"] == list(shipped.comparisons)
    assert "comparisons" not in next(e for e in load_experiments() if e.role != "eval").identity()
    exp = load_experiment(_config(tmp_path / "e.toml", "eval", 'comparisons = ["cir  -  anomaly on lag"]\n'))
    assert exp.comparisons == ("cir - anomaly on lag",)
    with pytest.raises(CirError, match=r"e.toml: field 'comparisons': comparison 'cir vs anomaly': expected"):
        load_experiment(_config(tmp_path / "e.toml", "eval", 'comparisons = ["cir vs anomaly"]\n'))
    with pytest.raises(CirError, match="belongs to the held-out cohort's config"):
        load_experiment(_config(tmp_path / "e.toml", "effects", 'comparisons = ["cir - anomaly"]\n'))
    with pytest.raises(CirError, match="field 'comparisons' must be a list"):
        load_experiment(_config(tmp_path / "e.toml", "eval", 'comparisons = "cir - anomaly"\n'))


def test_a_comparison_the_study_cannot_measure_is_refused_before_it_runs(tmp_path):
    import shutil

    from cir.study.selective import study_policies, study_routers

    folder = tmp_path / "experiments"
    folder.mkdir()
    for config in sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*.toml")):
        shutil.copy(config, folder / config.name)
    assert load_experiments(folder)[-1].comparisons  # the shipped ones: measurable
    path = folder / "cir_eval.toml"
    text = path.read_text().replace('operations = ["refresh", "replan", "rewind"]', 'operations = ["refresh"]')
    path.write_text(text)
    with pytest.raises(CirError, match=r"cir_eval.toml: comparison 'cir_multi - anomaly_rewind': 'cir_multi' is not "
                                       r"one of the study's routers \(cir, cir_paired\)"):
        load_experiments(folder)
    for named, ok in (('"cir_paired - anomaly on lag/looks_right", "cir - anomaly on stale2"', True),
                      ('"cir_paired - anomaly_rewind"', False), ('"cir_paired - anomaly on lag3"', False),
                      ('"cir_paired - anomaly on lag/wrong"', False)):
        path.write_text(text.split("comparisons = ")[0] + f"comparisons = [{named}]\n")
        if ok:
            assert load_experiments(folder)[-1].comparisons
        else:
            with pytest.raises(CirError, match="cir_eval.toml: comparison"):
                load_experiments(folder)
    assert "cir_multi" in study_routers(("refresh", "rewind")) and "anomaly_rewind" in study_policies(("refresh", "rewind"))
