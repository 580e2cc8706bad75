"""Where a policy and never differ in few arms, the study reports the counts' interval."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cir.router.evaluation import summarize_walks
from cir.stats.counts import FEW_DISCORDANT, count_interval


def test_the_counts_interval_holds_the_estimate_and_keeps_width_with_no_discordant_arm():
    low, high = count_interval(0, 0, 750)
    assert low == pytest.approx(-high) and 0.005 < high < 0.0065  # +-0.58 pp: what 750 arms allow
    low, high = count_interval(9, 2, 400)
    assert low < (9 - 2) / 400 < high and low < 0  # 7 net rescues of 400 do not exclude 0
    low, high = count_interval(60, 0, 400)
    assert low > 0.1 and high < 0.2
    with pytest.raises(ValueError, match="at least one arm"):
        count_interval(0, 0, 0)


def _arms(rare_rescues: int, rare_harms: int, many: int, *, tasks: int = 100, per_task: int = 4) -> pd.DataFrame:
    """``tasks`` x ``per_task`` error arms; ``rare`` recovers with a few rescues and harms, ``many``
    rescues in ``many`` arms, ``oracle`` in those too."""
    n = tasks * per_task
    rng = np.random.default_rng(3)
    y0 = rng.integers(0, 2, n)
    rare = y0.copy()
    ones, zeros = np.flatnonzero(y0 == 1), np.flatnonzero(y0 == 0)
    rare[zeros[:rare_rescues]] = 1
    rare[ones[:rare_harms]] = 0
    lots = y0.copy()
    lots[zeros[:many]] = 1
    return pd.DataFrame({
        "task_id": np.repeat([f"t{i:03d}" for i in range(tasks)], per_task), "condition": "stale1",
        "y_never": y0, "int_never": 0, "y_rare": rare, "int_rare": (rare != y0).astype(int),
        "y_many": lots, "int_many": (lots != y0).astype(int), "y_oracle": lots, "int_oracle": (lots != y0).astype(int)})


def test_a_policy_that_differs_from_never_in_few_arms_reports_the_counts_interval():
    arms = _arms(rare_rescues=3, rare_harms=1, many=FEW_DISCORDANT + 20)
    summary, margins = summarize_walks(arms, ["never", "rare", "many", "oracle"], ["rare"], resamples=500, seed=1)
    row = summary[(summary["policy"] == "rare") & (summary["condition"] == "all")].iloc[0]
    assert row["interval"] == "counts"
    low, high = count_interval(3, 1, len(arms))
    assert (row["ci_low_pp"], row["ci_high_pp"]) == pytest.approx((100 * low, 100 * high))
    # the bootstrap's own interval is kept beside it, narrower: it draws from 4 discordant arms
    assert row["bootstrap_high_pp"] - row["bootstrap_low_pp"] < row["ci_high_pp"] - row["ci_low_pp"]
    lots = summary[(summary["policy"] == "many") & (summary["condition"] == "all")].iloc[0]
    assert lots["interval"] == "bootstrap"
    assert (lots["ci_low_pp"], lots["ci_high_pp"]) == (lots["bootstrap_low_pp"], lots["bootstrap_high_pp"])
    assert lots["ci_low_pp"] > 0
    never = summary[(summary["policy"] == "never") & (summary["condition"] == "all")].iloc[0]
    assert never["interval"] == "bootstrap" and never["ci_low_pp"] == never["ci_high_pp"] == 0  # 0 by construction
    # a margin is a paired difference too: rare - many differ in 60 + 3 + 1 arms minus the overlap
    m = margins[(margins["versus"] == "many") & (margins["condition"] == "all")].iloc[0]
    assert m["interval"] == "bootstrap"


def test_few_zero_keeps_the_bootstrap_and_expected_outcomes_are_never_counted():
    arms = _arms(rare_rescues=3, rare_harms=1, many=60)
    summary, _ = summarize_walks(arms, ["never", "rare", "many", "oracle"], ["rare"], resamples=500, seed=1, few=0)
    assert set(summary["interval"]) == {"bootstrap"}
    expected = arms.assign(y_rare=arms["y_rare"] * 0.9, y_never=arms["y_never"] * 0.9)  # a --samples table's chances
    summary, _ = summarize_walks(expected, ["never", "rare", "many", "oracle"], ["rare"], resamples=500, seed=1)
    assert summary.loc[summary["policy"] == "rare", "interval"].eq("bootstrap").all()
