"""The numbers docs/service-desk.md quotes from the published study (data/service-desk/) are the
tables' own: each is computed here from the CSV and looked for, as the page prints it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[3]
TABLES = ROOT / "data" / "service-desk" / "tables"
DOC = " ".join((ROOT / "docs/service-desk.md").read_text(encoding="utf-8").split())

pytestmark = pytest.mark.skipif(not TABLES.is_dir(), reason="the published study is not in this checkout")


def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(TABLES / name)


def _ci(r: pd.Series) -> str:
    return f"{r['effect_pp' if 'effect_pp' in r else 'margin_pp']:+.1f} pp [{r['ci_low_pp']:.1f}, {r['ci_high_pp']:.1f}]"


def test_what_the_arms_showed():
    split = _csv("shown_split.csv").set_index(["kind", "condition"])
    counts = split[["arms", "true", "anomalous", "looks_right"]].astype(int)
    shares = split[[c for c in split.columns if c.endswith("_share")]]
    lag, stale, missing = ({**counts.loc[(k, "all")], **shares.loc[(k, "all")]} for k in ("lag", "stale", "missing"))
    assert (f"of {lag['arms']} `lag` arms, {lag['looks_right']} ({100 * lag['looks_right_share']:.1f}%) looked right, "
            f"{lag['true']} ({100 * lag['true_share']:.1f}%) showed the true record and none was anomalous") in DOC
    assert lag["anomalous"] == 0 and missing["anomalous"] == missing["arms"]
    assert (f"of {stale['arms']} `stale` arms, {stale['looks_right']} ({100 * stale['looks_right_share']:.1f}%) "
            f"looked right, {stale['anomalous']} ({100 * stale['anomalous_share']:.1f}%) were anomalous") in DOC
    assert f"and {stale['true']} ({100 * stale['true_share']:.1f}%) true" in DOC


def test_detection_of_the_looks_right_arms():
    d = _csv("cir_error_detection_by_shown.csv").set_index(["router", "kind", "shown"])["auc_p_err"]
    assert f"looks-right lag cells AUC {d[('cir_paired', 'lag', 'looks_right')]:.3f}" in DOC
    assert f"looks-right stale cells {d[('cir_paired', 'stale', 'looks_right')]:.3f}" in DOC
    assert {round(v, 3) for k, v in d.items() if k[0] == "cir_paired" and k[2] == "anomalous"} == {1.0}


def test_refresh_harms_and_the_routers_that_never_recover():
    e = _csv("effects_primary_factual_success.csv")
    clean0 = e[(e["condition"] == "clean") & (e["delay"] == 0)].iloc[0]
    assert f"by {clean0['effect_pp']:.1f} pp [{clean0['ci_low_pp']:.1f}, {clean0['ci_high_pp']:.1f}]" in DOC
    assert f"({clean0['harms']} harms of {clean0['n']};" in DOC
    harms = _csv("harm_pairs.csv")
    harms = harms[(harms["condition"] == "clean") & (harms["operation"] == "refresh") & (harms["experiment"] == "primary")]
    counts = harms["mechanisms"].value_counts()
    assert f"of the primary cohort's {len(harms)} clean refresh harms" in DOC
    assert f"{counts['world_clock']} are `world_clock`" in DOC
    shown = _csv("cir_eval_by_shown.csv").set_index(["kind", "shown", "policy"])
    for policy in ("cir", "cir_paired", "anomaly"):
        assert shown.loc[(slice(None), slice(None), policy), "intervention_rate"].eq(0).all(), policy
    assert f"`oracle_refresh` gains {_ci(shown.loc[('lag', 'looks_right', 'oracle_refresh')])}" in DOC


def test_rewind_reaches_the_looks_right_lag_arms():
    m = _csv("cir_margins_by_shown.csv").set_index(["policy", "versus", "kind", "shown"])
    r = m.loc[("cir_multi", "anomaly", "lag", "looks_right")]
    assert f"`cir_multi` gains {_ci(r)} over the anomaly rule (sign-flip p = {r['sign_flip_p']:.3f}" in DOC
    shown = _csv("cir_eval_by_shown.csv").set_index(["kind", "shown", "policy"])
    multi = shown.loc[("lag", "looks_right", "cir_multi")]
    assert f"recovering in {100 * multi['intervention_rate']:.0f}% of them" in DOC
    for same in ("always_rewind", "anomaly_rewind"):
        assert shown.loc[("lag", "looks_right", same), "effect_pp"] == multi["effect_pp"]
