"""The report page shows, then tabulates (without a browser: tests/study/test_page.py measures it in
one): long tables summarised in the main text and whole in the appendix, each special cell explained
once, a finding beside its figure, plurals that agree with their numbers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from cir.study.findings import effect_finding, small_cohort_warning
from cir.study.page import MAIN_ROWS, Report, counted, save_figure
from cir.study.summaries import effect_grid, largest_margins, margins_caption, mix_sentence


def _margins(n: int, adjusted: bool = False, named: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    margin = np.r_[rng.normal(0, 3, n // 2), np.zeros(n - n // 2)]
    df = pd.DataFrame({"policy": "cir", "versus": [f"p{i}" for i in range(n)], "condition": "all", "n": 60,
                       "margin_pp": margin, "ci_low_pp": margin - 2, "ci_high_pp": margin + 2,
                       "sign_flip_p": rng.uniform(0, 1, n)})
    if adjusted:
        df["p_holm"] = np.minimum(1, df["sign_flip_p"] * n)
    if named:
        df["primary"] = df["versus"].isin(["p100", "p120"])
    return df


def _figure() -> Figure:
    fig = Figure(figsize=(7, 3), layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    return fig


def test_a_long_table_is_summarised_in_the_text_and_whole_in_the_appendix(tmp_path: Path):
    margins = _margins(142)
    report = Report("t")
    report.heading("Findings")
    report.finding("**1. A finding.** It says so.", save_figure(_figure(), tmp_path / "figures", "f"), "its figure")
    report.heading("Section")
    report.table(margins, tmp_path / "tables" / "m.csv", "Margins of each router over each policy",
                 summary=largest_margins(margins), summary_caption="the largest margins")
    report.table(margins.head(4), tmp_path / "tables" / "s.csv", "A short table")
    report.table(margins.head(20), None, "A long one without a summary")
    md = report.markdown(tmp_path)
    main, appendix = md.split("## Appendix: the long tables whole")
    assert "*the largest margins*" in main and "The whole table, 142 rows: Appendix A1 and `tables/m.csv`." in main
    assert "*A long one without a summary*: The whole table, 20 rows: Appendix A2." in main
    assert "*A1. Margins of each router over each policy*" in appendix and "*A2. A long one" in appendix
    rows = [line for line in main.splitlines() if line.startswith("| cir ")]
    assert len(rows) == 8 + 4  # the summary's rows and the short table's, no more
    assert len([line for line in appendix.splitlines() if line.startswith("| cir ")]) == 142 + 20
    page = report.html(tmp_path)
    head, tail = page.split("<h2 id='appendix'>")
    assert head.count("<tr>") - head.count("<thead><tr>") == 8 + 4 and "<a href='#a1'>Appendix A1</a>" in head
    assert "<p class='cap' id='a1'>" in tail
    # the finding with its figure beside it: the figure drawn for a narrow column
    assert re.search(r"<div class='finding'><p><strong>1\. A finding\.</strong> It says so\.</p><figure><img ", page)


def test_the_largest_margins_keep_the_named_comparisons_first_and_the_adjusted_p():
    plain = largest_margins(_margins(142))
    assert len(plain) == 8 <= MAIN_ROWS and list(plain.columns)[-1] == "sign_flip_p"
    sizes = plain["margin_pp"].abs().tolist()
    assert sizes == sorted(sizes, reverse=True) and sizes[0] == _margins(142)["margin_pp"].abs().max()
    assert "not adjusted" in margins_caption(_margins(142), 8) and "(71 are 0.00)" in margins_caption(_margins(142), 8)
    named = largest_margins(_margins(142, adjusted=True, named=True))
    assert list(named["versus"][:2]) == ["p100", "p120"] and list(named.columns)[-1] == "p_holm"
    assert "`p_holm`, adjusted" in margins_caption(_margins(142, adjusted=True, named=True), 8)


def test_every_special_cell_is_explained_once(tmp_path: Path):
    fit = pd.DataFrame({"router": ["cir", "cir_paired"], "alpha": ["never", 0.9], "beta": [0.5, "n/a"]})
    evaluation = pd.DataFrame({"policy": ["always", "cir"], "oracle_fraction": [-9.0, np.nan],
                               "clean_harm_rate": [np.nan, 0.0]})
    report = Report("t")
    for _ in range(2):
        report.table(fit, None, "fits")
        report.table(evaluation, None, "held out")
    md = report.markdown(tmp_path)
    for said in ("`alpha` never: no threshold", "`beta` n/a: the estimator has no such gate",
                 "`oracle_fraction` -: the oracle gains nothing", "`oracle_fraction` below 0: the policy loses",
                 "`clean_harm_rate` -: no clean arms"):
        assert md.count(said) == 1, said
    assert md.count("<sub>`") == 2  # one line of notes under the first of each table, none under the second


def test_an_effect_table_as_a_grid_and_a_mix_in_words():
    effects = pd.DataFrame({"condition": ["clean"] * 2 + ["stale2"] * 2, "delay": [0, 1] * 2, "n": 8,
                            "effect_pp": [0.0, -12.5, 25.0, 12.5], "ci_low_pp": [0.0, -37.5, 0.0, 0.0],
                            "ci_high_pp": [0.0, 0.0, 50.0, 37.5]})
    grid = effect_grid(effects)
    assert grid.to_dict("records") == [
        {"condition": "clean", "tasks": 8, "delay 0": "0.0 [0.0, 0.0]", "delay 1": "-12.5 [-37.5, 0.0]"},
        {"condition": "stale2", "tasks": 8, "delay 0": "25.0 [0.0, 50.0]", "delay 1": "12.5 [0.0, 37.5]"}]
    mix = pd.DataFrame({"policy": "cir_multi", "condition": ["clean", "stale2", "stale2", "stale2"],
                        "delay": [-1, -1, 1, 2], "operation": ["none", "none", "replan", "rewind"],
                        "arms": [10, 6, 3, 1], "share": [1.0, 0.6, 0.3, 0.1]})
    assert mix_sentence(mix) == ("It recovered in 4 of 20 arms (replan in 3, rewind in 1); the share of each "
                                 "condition's arms recovered: stale2 40%; none in clean.")


@pytest.mark.parametrize(("n", "word", "said"), [(0, "harm", "0 harms"), (1, "harm", "1 harm"),
                                                 (1, "replicate", "1 replicate"), (1200, "task", "1,200 tasks")])
def test_counts_agree_with_their_nouns(n, word, said):
    assert counted(n, word) == said


def test_findings_say_one_harm_and_one_task():
    effects = pd.DataFrame({"condition": ["stale2", "clean"], "delay": [0, 0], "n": [1, 1], "rescues": [0, 0],
                            "harms": [0, 1], "effect_pp": [0.0, -100.0], "ci_low_pp": [0.0, -100.0],
                            "ci_high_pp": [0.0, 0.0], "success_without": [1.0, 1.0]})
    finding = effect_finding(effects, "primary cohort", "stale2")
    assert "(1 task)" in finding.sentence and "(0 rescues and 1 harm over the delays)" in finding.sentence
    assert "2 of 2 intervals include zero: 1 task cannot" in finding.sentence
    assert "1 harms" not in finding.sentence and "(s)" not in finding.sentence
    assert "Effects of refresh, 1 task)" in (small_cohort_warning([finding], True) or "")
