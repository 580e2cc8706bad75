"""The hard planted worlds plant what they say, and a replicate measures truth and intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from cir.pairs.synthetic import HARD_WORLDS, planted_world
from cir.study import hard_worlds
from cir.study.hard_worlds import HARD, hard_criteria, hard_replicate, hard_summary


def _arms(world: str, n: int = 10_000, heldout: bool = False, seed: int = 5) -> pd.DataFrame:
    """One row per arm of a large draw (a single delay: the planted chances are per arm)."""
    return planted_world(world, n, seed=seed, delays=(0,), heldout=heldout)


def test_every_hard_world_is_deterministic_by_seed_and_has_a_spec():
    assert tuple(HARD) == HARD_WORLDS
    for world in HARD_WORLDS:
        one = planted_world(world, 30, seed=(1, 2), delays=(0, 1))
        pd.testing.assert_frame_equal(one, planted_world(world, 30, seed=(1, 2), delays=(0, 1)))
        assert not one.equals(planted_world(world, 30, seed=(1, 3), delays=(0, 1)))
    with pytest.raises(ValueError, match="unknown world 'z'"):
        planted_world("z", 10)


def test_the_interaction_world_rescues_only_on_an_xor_that_no_feature_shows_alone():
    a = _arms("d")
    err = a[a["condition"] != "clean"]
    late = err["f_progress"] > 0.5
    on = (err["f_holding"] == 1) != late
    assert np.allclose(err.loc[on, "planted_rescue"], 0.75) and np.allclose(err.loc[~on, "planted_rescue"], 0.05)
    # the true gain is positive on the XOR and negative off it (but for the most and least skilled) ...
    assert (err.loc[on, "planted_gain"] > 0).mean() > 0.95 and (err.loc[~on, "planted_gain"] < 0).mean() > 0.95
    # ... while holding alone leaves the mean gain after an error unchanged, and progress alone
    # (late: 65% "on", early 35%) moves it by under a third of the XOR's contrast
    by_holding = err.groupby("f_holding")["planted_gain"].mean()
    by_late = err.groupby(late)["planted_gain"].mean()
    contrast = err.loc[on, "planted_gain"].mean() - err.loc[~on, "planted_gain"].mean()
    assert contrast > 0.3
    assert abs(by_holding.iloc[1] - by_holding.iloc[0]) < 0.02
    assert abs(by_late.iloc[1] - by_late.iloc[0]) < contrast / 3


def test_the_weak_world_detects_errors_at_an_auc_between_0_6_and_0_7():
    a = _arms("e")
    auc = roc_auc_score((a["condition"] != "clean").astype(int), a["f_suspect_words"])
    assert 0.6 <= auc <= 0.7
    strong = _arms("a")
    assert roc_auc_score((strong["condition"] != "clean").astype(int), strong["f_suspect_words"]) > 0.72


def test_the_subgroup_world_puts_its_clean_harm_in_the_subgroup():
    a = _arms("f")
    clean = a[a["condition"] == "clean"]
    subgroup = (clean["f_holding"] == 1) & (clean["f_progress"] > 0.5)
    risk = clean["planted_success"] * clean["planted_harm"]  # expected clean harm of recovering there
    assert 0.15 < subgroup.mean() < 0.2
    assert risk[subgroup].sum() / risk.sum() > 0.9
    # recovering on every clean arm would break the 2% budget; outside the subgroup it would not
    assert risk.mean() > 0.05 and risk[~subgroup].mean() < 0.01
    err = a[a["condition"] != "clean"]
    assert (err["planted_gain"] > 0).mean() > 0.95 and err["planted_gain"].mean() > 0.2


def test_the_shifted_world_holds_out_another_population():
    fit, held = _arms("g"), _arms("g", heldout=True)
    assert abs(fit["f_holding"].mean() - 0.35) < 0.01 and abs(held["f_holding"].mean() - 0.6) < 0.01
    assert abs(fit["f_progress"].mean() - 0.5) < 0.01 and abs(held["f_progress"].mean() - 2 / 3) < 0.01
    clean_fit = fit.loc[fit["condition"] == "clean", "f_suspect_words"].mean()
    clean_held = held.loc[held["condition"] == "clean", "f_suspect_words"].mean()
    assert abs(clean_held - clean_fit - 0.5) < 0.03
    assert held["planted_success"].mean() < fit["planted_success"].mean() - 0.05
    # the other worlds' held-out tables are their fitting population
    for world in ("d", "e", "f"):
        pd.testing.assert_frame_equal(planted_world(world, 40, seed=3), planted_world(world, 40, seed=3, heldout=True),
                                      check_exact=True)


def test_the_null_world_is_fitted_where_recovery_helps_and_held_out_where_it_does_nothing():
    fit = planted_world("h", 10_000, seed=8, delays=(0, 1))
    held = planted_world("h", 10_000, seed=8, delays=(0, 1), heldout=True)
    assert fit["planted_gain"].max() > 0.2
    assert np.abs(held["planted_gain"]).max() < 1e-12 and np.abs(held["planted_feature_gain"]).max() < 1e-12
    # realized effect of always recovering: 0 within sampling (task-level standard error)
    per_task = (held["y1"] - held["y0"]).groupby(held["task_id"]).mean()
    assert abs(per_task.mean()) < 3 * per_task.std() / np.sqrt(len(per_task))
    discordant = (held["y1"] != held["y0"]).mean()
    assert discordant > 0.1  # many rescues and harms: the interval has something to measure


def test_a_replicate_measures_true_effects_and_two_intervals(monkeypatch):
    monkeypatch.setattr(hard_worlds, "TRUTH_TASKS", 2_000)
    hard_worlds.truth_table.cache_clear()
    rows = hard_replicate("h", 0, resamples=300)
    hard_worlds.truth_table.cache_clear()
    by = rows.set_index("policy")
    # in the null world every fixed rule's true effect is 0; the held-out-matched one has none
    fixed = by.drop(index=[p for p in by.index if "heldout" in p or p == "oracle"])
    assert np.allclose(fixed["true_effect_pp"], 0.0, atol=1e-9)
    assert by.loc[[p for p in by.index if "heldout" in p], "true_effect_pp"].isna().all()
    recovered = by[by["interventions"] > 0]
    assert len(recovered) and (recovered["bca_low_pp"] <= recovered["effect_pp"] + 1e-9).all()
    assert (recovered["effect_pp"] <= recovered["bca_high_pp"] + 1e-9).all()
    assert by.loc["never", ["bca_low_pp", "bca_high_pp"]].tolist() == [0.0, 0.0]
    assert np.isfinite(by.loc[["cir", "cir_paired"], "margin_anomaly_pp"]).all()
    assert by.loc["anomaly", ["margin_anomaly_pp"]].isna().all()
    summary = hard_summary(rows)
    s = summary.set_index("policy")
    assert s.loc["never", "coverage_percentile"] == 1.0
    checks = hard_criteria(summary)
    assert set(checks["world"]) == {"h"} and checks["criterion"].str.contains("coverage").any()


@pytest.mark.slow
def test_the_report_section_of_the_hard_worlds_is_kept_for_a_resume(tmp_path, monkeypatch):
    """One replicate of each hard world in a report: its checks and table, the rows kept and read
    back by a second call, not fitted again (about 15 s)."""
    from cir.study.page import Report

    report = Report("t")
    hard_worlds.hard_section(report, tmp_path, 1, seed=0)
    assert report.blocks[0] == ("heading", (2, "Where it is hard: the hard planted worlds"))
    checks = pd.read_csv(tmp_path / "tables" / "router_validation_hard_criteria.csv")
    assert set(checks["world"]) == set(HARD_WORLDS)
    summary = pd.read_csv(tmp_path / "tables" / "router_validation_hard.csv")
    assert {"coverage_percentile", "coverage_bca"} <= set(summary.columns)
    monkeypatch.setattr(hard_worlds, "hard_replicate", lambda *a, **k: pytest.fail("fitted again"))
    hard_worlds.hard_section(Report("t"), tmp_path, 1, seed=0)


def test_the_readme_s_coverage_numbers_are_the_fresh_replicates():
    """The README's sentence on the counts' rule is computed from data/planted/seed-1's rows."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    rows = pd.read_csv(root / "data" / "planted" / "seed-1" / "hard_worlds_rows.csv.gz")
    routers = rows[rows["policy"].isin(["cir", "cir_paired", "cir_paired_certified"])]
    truth = routers["true_effect_pp"]

    def covered(low: str, high: str, part: pd.Series) -> float:
        return round(float(((routers[low] <= truth + 1e-9) & (truth <= routers[high] + 1e-9))[part].mean()), 3)

    everywhere = pd.Series(True, index=routers.index)
    few = routers["rescues"] + routers["harms"] < 40
    summary = hard_summary(rows).set_index(["world", "policy"])
    cells = summary[summary.index.get_level_values("policy").isin(["cir", "cir_paired", "cir_paired_certified"])]
    below = cells[cells["coverage_study"] < 0.94]
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    assert (f"coverage rose from {covered('bootstrap_low_pp', 'bootstrap_high_pp', everywhere):.3f} to "
            f"{covered('ci_low_pp', 'ci_high_pp', everywhere):.3f} over all router replicates "
            f"({covered('bootstrap_low_pp', 'bootstrap_high_pp', few):.3f} to "
            f"{covered('ci_low_pp', 'ci_high_pp', few):.3f} where the rule applies)") in readme
    assert f"{len(below)} of the {len(cells)} router-world cells stay at {below['coverage_study'].max():.3f}" in readme
