"""The planted worlds and the router's validation against them (cir.pairs.synthetic, cir.study.validation)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from cir.pairs.synthetic import WORLDS, planted_world
from cir.study.validation import ROW_COLUMNS, criteria, validation_summary, world_replicate


def test_planted_worlds_are_deterministic_paired_tables_with_their_truth_beside():
    for world in WORLDS:
        a = planted_world(world, 50, seed=(3, 1, 0))
        pd.testing.assert_frame_equal(a, planted_world(world, 50, seed=(3, 1, 0)))
        assert not a.equals(planted_world(world, 50, seed=(3, 2, 0)))
        assert set(a["condition"]) == {"clean", "stale2"} and set(a["operation"]) == {"refresh"}
        planted = [c for c in a.columns if c.startswith("planted_")]
        assert planted and not any(c.startswith("f_") for c in planted)
        clean = a[a["condition"] == "clean"]
        assert (clean["y0"] == clean["factual_success"]).all()
    with pytest.raises(ValueError, match="unknown world"):
        planted_world("z", 10)


def test_the_planted_truth_is_what_the_draws_follow():
    """On many tasks: the realized effect of recovering follows planted_gain; the feature gain
    is the planted gain averaged over what a router does not see; (a)'s signal detects errors
    with an AUC of 0.75; (b) is null everywhere."""
    for world in WORLDS:
        df = planted_world(world, 20_000, seed=5, delays=(1,))
        realized = (df["y1"] - df["y0"]).mean()
        assert realized == pytest.approx(df["planted_gain"].mean(), abs=0.01)
        assert df["planted_feature_gain"].mean() == pytest.approx(df["planted_gain"].mean(), abs=0.01)
        # the effect varies with the features as planted: by holding, within each condition
        for (cond, holding), g in df.groupby(["condition", "f_holding"]):
            assert (g["y1"] - g["y0"]).mean() == pytest.approx(g["planted_gain"].mean(), abs=0.02), (world, cond, holding)
    a = planted_world("a", 20_000, seed=6, delays=(1,))
    assert roc_auc_score(a["condition"] != "clean", a["f_suspect_words"]) == pytest.approx(0.75, abs=0.01)
    b = planted_world("b", 2_000, seed=6)
    assert np.allclose(b["planted_gain"], 0) and np.allclose(b["planted_feature_gain"], 0)
    # in (a) recovery rescues in some states and harms in others
    assert (a["planted_gain"] > 0.1).any() and (a["planted_gain"] < -0.1).any()


def test_one_replicate_walks_the_routers_beside_the_planted_oracles():
    rows = world_replicate("a", 0, resamples=200)
    assert list(rows.columns) == ROW_COLUMNS
    by = rows.set_index("policy")
    assert {"cir", "cir_paired", "anomaly", "anomaly_rate_matched_heldout", "planted_oracle", "feature_oracle"} <= set(by.index)
    assert by.loc["never", "effect_pp"] == 0 and by.loc["never", "expected_clean_harm"] == 0
    assert 0.6 < by.loc["cir_paired", "p_err_auc"] < 0.9  # the error model sees the errors only partly
    assert by.loc["feature_oracle", "effect_pp"] > 0
    pd.testing.assert_frame_equal(rows, world_replicate("a", 0, resamples=200))


def _rows() -> pd.DataFrame:
    """Hand-made replicate rows: a router that always gains 5 of an oracle's 10 and beats the
    anomaly rule by 2; in (b) one replicate of four claims a gain."""
    rows = []
    for r in range(4):
        for policy, effect, low in (("cir_paired", 5 + r % 2, 1), ("anomaly", 3 + r % 2, 0.5),
                                    ("planted_oracle", 10, 5), ("feature_oracle", 8, 4), ("never", 0, 0)):
            rows.append({"world": "a", "replicate": r, "policy": policy, "n_arms": 100, "effect_pp": effect,
                         "ci_low_pp": low, "ci_high_pp": effect + 3, "interventions": 10, "intervention_rate": 0.1,
                         "clean_harm_rate": 0.0, "expected_clean_harm": 0.0, "p_err_auc": 0.75})
        rows.append({"world": "b", "replicate": r, "policy": "cir_paired", "n_arms": 100, "effect_pp": 1.0,
                     "ci_low_pp": 0.5 if r == 0 else -1, "ci_high_pp": 2, "interventions": 5 if r else 0,
                     "intervention_rate": 0.05, "clean_harm_rate": 0.0, "expected_clean_harm": 0.0, "p_err_auc": 0.8})
        for budget, harm in (("certified", 0.01), ("empirical", 0.03 if r < 2 else 0.01)):
            rows.append({"world": "c", "replicate": r, "policy": f"cir_paired_{budget}", "n_arms": 100,
                         "effect_pp": 2, "ci_low_pp": 1, "ci_high_pp": 3, "interventions": 5, "intervention_rate": 0.05,
                         "clean_harm_rate": harm, "expected_clean_harm": harm, "p_err_auc": 0.8})
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


def test_the_summary_pools_replicates_and_the_criteria_read_it():
    summary, margins = validation_summary(_rows())
    s = summary.set_index(["world", "policy"])
    assert s.loc[("a", "cir_paired"), "effect_pp"] == 5.5
    assert s.loc[("a", "cir_paired"), "share_planted_oracle"] == pytest.approx(0.55)
    assert s.loc[("a", "cir_paired"), "share_feature_oracle"] == pytest.approx(5.5 / 8)
    m = margins.set_index(["world", "policy", "versus"]).loc[("a", "cir_paired", "anomaly")]
    assert m["margin_pp"] == 2 and m["ci_low_pp"] == m["ci_high_pp"] == 2  # the same margin in every replicate
    assert s.loc[("b", "cir_paired"), "excludes_zero"] == 0.25 and s.loc[("b", "cir_paired"), "recovered_any"] == 0.75
    assert s.loc[("c", "cir_paired_empirical"), "violations_realized"] == 0.5
    assert s.loc[("c", "cir_paired_certified"), "violations_expected"] == 0.0
    checks = criteria(summary, margins).set_index(["world", "criterion"])["met"]
    assert not checks[("a", "cir_paired: share of the planted (full-state) oracle's gain")]
    assert checks[("a", "cir_paired - anomaly: lower end of the 95% interval (pp)")]
    assert not checks[("b", "cir_paired: share of replicates whose interval vs never excludes 0")]
    assert checks[("c", "certified budget: share of replicates whose expected clean harm exceeds epsilon")]


def test_a_study_report_section_of_the_planted_worlds_kept_for_a_resume(tmp_path, monkeypatch):
    """The report's section: the checks, the pooled worlds; the rows kept with their settings in
    validation/ and read back, not fitted again, by a call with the same settings."""
    import cir.study.validation as validation
    from cir.study.page import Report

    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "cache"))  # a cache of this test's own
    report = Report("t")
    validation.validation_section(report, tmp_path, 1, seed=0)
    kinds = [k for k, _ in report.blocks]
    assert report.blocks[0] == ("heading", (2, "Does the router work when there is something to learn?"))
    assert kinds.count("table") == 2
    for name in ("router_validation.csv", "router_validation_margins.csv", "router_validation_criteria.csv"):
        assert (tmp_path / "tables" / name).is_file()
    checks = pd.read_csv(tmp_path / "tables" / "router_validation_criteria.csv")
    assert set(checks["world"]) == {"a", "b", "c"}
    # one replicate: no interval over replicates, so the margin's check is not decided
    margin = checks[checks["criterion"].str.startswith("cir_paired - anomaly:")]
    assert margin["met"].isna().all()
    before = (tmp_path / "validation" / "validation_rows.csv").read_bytes()
    assert len(list((tmp_path / "validation" / "replicates").glob("world-*.csv"))) == 3
    monkeypatch.setattr(validation, "world_replicate", lambda *a, **k: pytest.fail("fitted again"))
    validation.validation_section(Report("t"), tmp_path, 1, seed=0)
    assert (tmp_path / "validation" / "validation_rows.csv").read_bytes() == before
    # another seed: the kept replicates are not its own
    with pytest.raises(pytest.fail.Exception, match="fitted again"):
        validation.validation_section(Report("t"), tmp_path, 1, seed=1)


def test_a_world_replicate_is_fitted_once_per_key_in_the_users_cache(tmp_path, monkeypatch):
    """A replicate the cache holds under its key (world, seed, options, code) is read back, every
    digit as fitted, by another study folder and by the benchmark's table; another seed or other
    options are other keys."""
    import cir.study.validation as validation

    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "cache"))
    first = validation.run_validation(1, worlds=("b",), seed=3, folder=tmp_path / "one", resamples=100)
    assert len(list((tmp_path / "cache" / "planted-worlds").rglob("world-b-0000.csv"))) == 1
    monkeypatch.setattr(validation, "world_replicate", lambda *a, **k: pytest.fail("fitted again"))
    again = validation.run_validation(1, worlds=("b",), seed=3, folder=tmp_path / "two", resamples=100)
    pd.testing.assert_frame_equal(again, first, check_exact=True)
    assert (tmp_path / "two" / "world-b-0000.csv").read_bytes() == (tmp_path / "one" / "world-b-0000.csv").read_bytes()
    for other in ({"seed": 4, "resamples": 100}, {"seed": 3, "resamples": 200}):
        with pytest.raises(pytest.fail.Exception, match="fitted again"):
            validation.run_validation(1, worlds=("b",), folder=tmp_path / "three", **other)
    assert validation.replicate_key("b", 3, {"resamples": 100}) != validation.replicate_key("a", 3, {"resamples": 100})


def test_a_new_world_is_one_entry(monkeypatch):
    """The worlds the validation runs, their routers, tables and checks are one table of specs:
    a world added there is fitted and checked without another change."""
    import cir.study.validation as validation

    world = validation.World("z", 60, 60, (0, 1, 2), {"cir_paired": ("paired", "empirical")},
                             lambda s, m, delta: [("ran", float(s.loc[("z", "cir_paired")]["replicates"]), "= 1",
                                                   bool(s.loc[("z", "cir_paired")]["replicates"] == 1))])
    monkeypatch.setitem(validation.VALIDATION_WORLDS, "z", world)
    monkeypatch.setitem(validation.WORLD_ROUTERS, "z", dict(world.routers))
    monkeypatch.setattr(validation, "planted_world", lambda name, *a, **k: planted_world("a", *a, **k))
    rows = validation.run_validation(1, worlds=("z",), cache=False, resamples=50)
    summary, margins = validation.validation_summary(rows)
    checks = validation.criteria(summary, margins)
    assert checks[checks["world"] == "z"][["criterion", "met"]].values.tolist() == [["ran", True]]
