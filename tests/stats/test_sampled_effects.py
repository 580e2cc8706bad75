"""Effects, expected counts, intervals and the noise floor of tables of K draws per arm."""

from __future__ import annotations

import numpy as np
import pytest

from cir.pairs.synthetic import simulate_paired, simulate_sampled
from cir.stats.decompose import decompose
from cir.stats.effects import SAMPLED_COLUMNS, contrast_table, effect_table
from cir.stats.noise import arm_cells, noise_floor
from cir.util.errors import CirError

BY = ["condition", "delay", "operation"]


def test_effects_and_counts_come_from_all_draws():
    df = simulate_sampled(n_tasks=60, samples=4, seed=3)
    table = effect_table(df, by=BY, resamples=500)
    for _, row in table.iterrows():
        rows = df[(df.condition == row.condition) & (df.delay == row.delay)]
        assert row.effect_pp == pytest.approx(100 * (rows.p1_hat - rows.p0_hat).mean())
        assert row.rescues == pytest.approx(rows.p_rescue.sum())
        assert row.harms == pytest.approx(rows.p_harm.sum())
        assert row.rescues + row.harms + row.stable_success + row.stable_failure == pytest.approx(row.n)
        assert row.success_without == pytest.approx(rows.p0_hat.mean())
        assert np.isnan(row.mcnemar_p)  # its pairs are not independent draws
        assert row.k == 4
    assert list(table.columns[-3:]) == SAMPLED_COLUMNS
    counts = decompose(df, by=BY)
    assert counts["rescues"].to_numpy() == pytest.approx(table["rescues"].to_numpy())


def test_a_table_of_one_draw_keeps_its_columns_and_integer_counts():
    df = simulate_paired(n_tasks=20, seed=1)
    table = effect_table(df, by=BY, resamples=200)
    assert not set(SAMPLED_COLUMNS) & set(table.columns)
    assert table["rescues"].dtype.kind == "i" and "bootstrap" not in table.attrs
    with pytest.raises(CirError, match="bootstrap 'samples'"):
        effect_table(df, by=BY, resamples=10, bootstrap="samples")


def test_the_noise_floor_is_the_unbiased_disagreement_of_two_draws():
    df = simulate_sampled(n_tasks=50, samples=5, seed=2)
    cells = arm_cells(df)
    assert len(cells) == 50 * 2 * 2  # tasks x conditions x delays (the operation's rows share the arm)
    floor = noise_floor(df).set_index("condition")
    for condition in ("clean", "stale2"):
        sub = df[df.condition == condition].drop_duplicates(["task_id", "delay"])
        s, k = sub.y0_sum.to_numpy(float), sub.k.to_numpy(float)
        assert floor.loc[condition, "noise_floor_pp"] == pytest.approx(100 * np.mean(2 * s * (k - s) / (k * (k - 1))))
    table = effect_table(df, by=BY, resamples=200)
    for _, row in table.iterrows():
        assert row.noise_floor_pp == pytest.approx(floor.loc[row.condition, "noise_floor_pp"])
        assert row.within_noise == (abs(row.effect_pp) <= row.noise_floor_pp)
    # the floor is a chance that two draws of an arm disagree: 2 p (1 - p) on average over states
    big = simulate_sampled(n_tasks=400, samples=8, seed=4)
    z = noise_floor(big).set_index("condition").loc["clean", "disagreement"]
    assert 0.2 < z < 0.45
    assert noise_floor(simulate_sampled(n_tasks=5, samples=1, seed=0))["disagreement"].isna().all()


def test_the_two_stage_interval_is_wider_and_both_cover_on_planted_tables():
    covered = {"tasks": 0, "tasks+samples": 0}
    widths = {"tasks": [], "tasks+samples": []}
    events = 0
    for r in range(40):  # a small version of benchmarks/sample_coverage.py
        df = simulate_sampled(n_tasks=60, samples=4, seed=100 + r, delays=(0,))
        for b in covered:
            table = effect_table(df, by=BY, resamples=400, seed=r, bootstrap=b)
            for _, row in table.iterrows():
                truth = df.attrs["truth"][(row.condition, row.delay, row.operation)]
                covered[b] += row.ci_low_pp <= truth <= row.ci_high_pp
                widths[b].append(row.ci_high_pp - row.ci_low_pp)
        events += 2
    assert covered["tasks"] / events >= 0.85 and covered["tasks+samples"] / events >= 0.85
    assert np.mean(widths["tasks+samples"]) > np.mean(widths["tasks"])


def test_a_contrast_of_sampled_tables_uses_the_draws():
    df = simulate_sampled(n_tasks=40, samples=4, seed=5)
    c = contrast_table(df, "stale2", "clean", by=["operation", "delay"], resamples=300)
    e = effect_table(df, by=BY, resamples=300).set_index(["condition", "delay"])
    for _, row in c.iterrows():
        assert row.difference_pp == pytest.approx(e.loc[("stale2", row.delay), "effect_pp"]
                                                  - e.loc[("clean", row.delay), "effect_pp"])
        assert row.rescues_a == pytest.approx(e.loc[("stale2", row.delay), "rescues"])
