"""Statistics: invariants (hypothesis), agreement with scipy/statsmodels, bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from cir.pairs.paired import read_paired
from cir.pairs.synthetic import simulate_paired
from cir.stats.bootstrap import bootstrap_ratios, percentile_ci, task_weights
from cir.stats.effects import contrast_table, effect_table, tian_pearl_bounds
from cir.stats.joint import joint_effects, joint_matrix, joint_outcomes
from cir.stats.significance import mcnemar_p, sign_flip_test
from cir.util.errors import CirError


def _rng(seed: int) -> dict:
    """scipy >= 1.15 takes ``rng``; older releases ``random_state``."""
    import inspect

    key = "rng" if "rng" in inspect.signature(sps.bootstrap).parameters else "random_state"
    return {key: np.random.default_rng(seed)}

FAST = 200  # resamples in property tests: the invariants hold for any number


@st.composite
def paired_tables(draw, max_tasks: int = 12):
    """Random paired tables with task structure: each task has rows for a subset of cells."""
    n_tasks = draw(st.integers(1, max_tasks))
    conditions = draw(st.lists(st.sampled_from(["clean", "stale1", "stale2", "missing"]),
                               min_size=1, max_size=3, unique=True))
    delays = draw(st.lists(st.sampled_from([0, 1, 2, 4]), min_size=1, max_size=2, unique=True))
    rows = []
    for t in range(n_tasks):
        factual = draw(st.integers(0, 1))
        for c in conditions:
            y0 = draw(st.integers(0, 1))
            for d in delays:
                y1 = draw(st.integers(0, 1))
                rows.append({"task_id": f"t{t}", "condition": c, "delay": d, "operation": "refresh",
                             "y0": y0, "y1": y1, "executed": 1, "factual_success": factual,
                             "prefix_match": 1, "split": "valid_seen", "task_type": "x", "agent": "a"})
    return pd.DataFrame(rows)


PROPS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- invariants


@PROPS
@given(paired_tables())
def test_outcomes_partition_n_and_effect_is_rescue_minus_harm(df):
    table = effect_table(df, by=["condition", "delay"], resamples=FAST)
    parts = table[["rescues", "harms", "stable_success", "stable_failure"]].sum(axis=1)
    assert (parts == table["n"]).all()
    assert np.allclose(table["effect_pp"], 100 * (table["rescue_rate"] - table["harm_rate"]))
    assert np.allclose(table["effect_pp"], 100 * (table["success_with"] - table["success_without"]))
    assert (table["ci_low_pp"] <= table["ci_high_pp"] + 1e-9).all()
    # The observed rescue/harm rates always lie inside the Tian-Pearl bounds.
    assert (100 * table["rescue_rate"] >= table["rescue_bound_low_pp"] - 1e-9).all()
    assert (100 * table["rescue_rate"] <= table["rescue_bound_high_pp"] + 1e-9).all()
    assert (100 * table["harm_rate"] >= table["harm_bound_low_pp"] - 1e-9).all()
    assert (100 * table["harm_rate"] <= table["harm_bound_high_pp"] + 1e-9).all()
    assert ((0 <= table["sign_flip_p"]) & (table["sign_flip_p"] <= 1)).all()


@PROPS
@given(paired_tables(), st.integers(0, 2**31 - 1))
def test_no_discordant_pairs_gives_zero_effect_and_zero_interval(df, seed):
    df = df.assign(y1=df["y0"])
    table = effect_table(df, by=["condition", "delay"], resamples=FAST, seed=seed)
    assert (table["effect_pp"] == 0).all()
    assert (table["ci_low_pp"] == 0).all() and (table["ci_high_pp"] == 0).all()
    assert (table["sign_flip_p"] == 1).all() and (table["mcnemar_p"] == 1).all()


@PROPS
@given(paired_tables(), st.randoms(use_true_random=False))
def test_permuting_rows_changes_nothing(df, rnd):
    order = list(range(len(df)))
    rnd.shuffle(order)
    shuffled = df.iloc[order].reset_index(drop=True)
    a = effect_table(df, by=["condition", "delay"], resamples=FAST, seed=3)
    b = effect_table(shuffled, by=["condition", "delay"], resamples=FAST, seed=3)
    pd.testing.assert_frame_equal(a, b)


@PROPS
@given(paired_tables())
def test_bootstrap_resamples_tasks_not_rows(df):
    """Copying every row of a task into a new condition must not narrow the pooled interval.

    A row-level bootstrap would treat the copies as new evidence and shrink the CI by
    about sqrt(2); the task-level bootstrap gives exactly the same interval.
    """
    single = df[df["condition"] == df["condition"].iloc[0]].assign(condition="clean")
    doubled = pd.concat([single, single.assign(condition="copy")], ignore_index=True)
    a = effect_table(single, by=[], resamples=FAST, seed=5)
    b = effect_table(doubled, by=[], resamples=FAST, seed=5)
    for col in ["effect_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p"]:
        assert a[col].item() == pytest.approx(b[col].item(), abs=1e-9)
    assert b["n"].item() == 2 * a["n"].item() and b["n_tasks"].item() == a["n_tasks"].item()


@PROPS
@given(paired_tables())
def test_duplicating_one_task_into_new_conditions_leaves_other_groups_unchanged(df):
    first = df.iloc[0]
    extra = df[(df["task_id"] == first["task_id"]) & (df["condition"] == first["condition"])]
    grown = pd.concat([df] + [extra.assign(condition=f"dup{k}") for k in range(3)], ignore_index=True)
    a = effect_table(df, by=["condition", "delay"], resamples=FAST, seed=9)
    b = effect_table(grown, by=["condition", "delay"], resamples=FAST, seed=9)
    b = b[~b["condition"].str.startswith("dup")].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


# --------------------------------------------------------------------------- vectorised = naive


def test_vectorised_bootstrap_equals_a_loop_over_the_same_resamples():
    df = simulate_paired(40, conditions=("clean", "stale2"), delays=(0, 4), seed=4)
    resamples, seed = 150, 11
    table = effect_table(df, by=["condition", "delay"], resamples=resamples, seed=seed)
    tasks = np.unique(df["task_id"].to_numpy(dtype=str))
    rows_of = {t: np.flatnonzero(df["task_id"].to_numpy(dtype=str) == t) for t in tasks}
    diff = (df["y1"] - df["y0"]).to_numpy(dtype=float)
    cells = list(zip(table["condition"], table["delay"], strict=True))
    cell_of = {cell: ((df["condition"] == cell[0]) & (df["delay"] == cell[1])).to_numpy() for cell in cells}
    effects = {cell: [] for cell in cells}
    for w in task_weights(len(tasks), resamples, seed):
        for weights in w:  # one resample at a time: rebuild the resampled rows by repeating tasks
            picked = np.concatenate([rows_of[t] for t in np.repeat(tasks, weights.astype(int))])
            for cell in cells:
                inside = picked[cell_of[cell][picked]]
                effects[cell].append(100 * diff[inside].mean())
    for i, cell in enumerate(cells):
        low, high = np.percentile(effects[cell], [2.5, 97.5])
        assert table["ci_low_pp"].iloc[i] == pytest.approx(low)
        assert table["ci_high_pp"].iloc[i] == pytest.approx(high)


def test_seeded_results_are_reproducible_and_seed_matters():
    df = simulate_paired(50, seed=1)
    a = effect_table(df, resamples=500, seed=1)
    b = effect_table(df, resamples=500, seed=1)
    c = effect_table(df, resamples=500, seed=2)
    pd.testing.assert_frame_equal(a, b)
    assert not a["ci_low_pp"].equals(c["ci_low_pp"]) or not a["ci_high_pp"].equals(c["ci_high_pp"])


def test_percentile_ci_ignores_empty_resamples():
    reps = np.array([[np.nan, 1.0], [np.nan, 2.0], [np.nan, 3.0]])
    low, high = percentile_ci(reps, 0.5)
    assert np.isnan(low[0]) and np.isnan(high[0])
    assert (low[1], high[1]) == (1.5, 2.5)
    with pytest.raises(ValueError):
        bootstrap_ratios(np.zeros((3, 2)), np.zeros((3, 1)), 10, 0)


# --------------------------------------------------------------------------- agreement


def _scipy_sign_flip(d: np.ndarray, n_resamples: float, seed: int = 0) -> float:
    res = sps.permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                               alternative="two-sided", n_resamples=n_resamples, **_rng(seed))
    return float(res.pvalue)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([-1.0, 0.0, 1.0, 0.5, -0.5, 2.0]), min_size=2, max_size=12))
def test_exact_sign_flip_equals_scipy_permutation_test(values):
    d = np.array(values)
    assert sign_flip_test(d) == pytest.approx(_scipy_sign_flip(d, np.inf), abs=1e-12)


def test_monte_carlo_sign_flip_agrees_with_scipy_within_monte_carlo_error():
    rng = np.random.default_rng(7)
    d = rng.choice([-1.0, 0.0, 1.0], p=[0.2, 0.55, 0.25], size=120)  # ~54 non-zero tasks: Monte Carlo
    ours = sign_flip_test(d, resamples=20_000, seed=1)
    theirs = _scipy_sign_flip(d, 20_000, seed=2)
    # two independent estimates of the same p: SE of the difference ~ sqrt(2 p (1-p) / 20000)
    se = math.sqrt(2 * theirs * (1 - theirs) / 20_000)
    assert abs(ours - theirs) < 4 * se + 1e-3


def _hand_mcnemar(b: int, c: int) -> float:
    n, k = b + c, min(b, c)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


@pytest.mark.parametrize("rescues,harms", [(0, 0), (1, 0), (15, 4), (4, 15), (7, 7), (2, 6), (17, 10), (40, 22)])
def test_mcnemar_matches_a_hand_binomial_count(rescues, harms):
    expected = 1.0 if rescues + harms == 0 else _hand_mcnemar(rescues, harms)
    assert mcnemar_p(rescues, harms) == pytest.approx(expected, rel=1e-10)


def test_one_cell_sign_flip_equals_mcnemar_when_exact():
    """With one row per task, task differences are +1 (rescue) / -1 (harm): the exact
    sign-flip test is the exact binomial (McNemar) test."""
    df = simulate_paired(80, conditions=("stale2",), delays=(1,), seed=12)
    table = effect_table(df, by=["condition"], resamples=FAST)
    assert table["rescues"].item() + table["harms"].item() <= 20
    assert table["sign_flip_p"].item() == pytest.approx(table["mcnemar_p"].item(), rel=1e-10)


def test_bootstrap_agrees_with_scipy_bootstrap_on_one_condition():
    df = simulate_paired(120, conditions=("stale2",), delays=(2,), seed=21)
    table = effect_table(df, by=[], resamples=10_000, seed=0)
    diffs = (df["y1"] - df["y0"]).to_numpy(dtype=float) * 100
    res = sps.bootstrap((diffs,), np.mean, method="percentile", n_resamples=10_000,
                        **_rng(1), vectorized=True)
    step = 100 / len(df)  # the effect moves in steps of one task
    assert abs(table["ci_low_pp"].item() - res.confidence_interval.low) <= step + 0.5
    assert abs(table["ci_high_pp"].item() - res.confidence_interval.high) <= step + 0.5


def test_tian_pearl_bounds_by_hand():
    b = tian_pearl_bounds(np.array([0.7]), np.array([0.6]))
    assert b["rescue_low"][0] == pytest.approx(0.1) and b["rescue_high"][0] == pytest.approx(0.4)
    assert b["harm_low"][0] == 0 and b["harm_high"][0] == pytest.approx(0.3)


# --------------------------------------------------------------------------- contrasts and joint


def test_contrast_is_difference_of_effects_with_shared_resamples():
    df = simulate_paired(60, conditions=("clean", "stale2"), delays=(0, 4), seed=5)
    con = contrast_table(df, "stale2", "clean", by=["delay"], resamples=2000, seed=3)
    eff = effect_table(df, by=["condition", "delay"], resamples=FAST)
    for _, row in con.iterrows():
        a = eff[(eff["condition"] == "stale2") & (eff["delay"] == row["delay"])]["effect_pp"].item()
        b = eff[(eff["condition"] == "clean") & (eff["delay"] == row["delay"])]["effect_pp"].item()
        assert row["difference_pp"] == pytest.approx(a - b)
        assert row["ci_low_pp"] <= row["difference_pp"] <= row["ci_high_pp"]
        assert row["n_paired"] == 60


def test_contrast_keeps_task_correlation():
    """When a and b are the same outcomes, the shared-resample contrast has a zero-width
    interval; resampling a and b independently would not."""
    df = simulate_paired(50, conditions=("clean",), delays=(0,), seed=6)
    both = pd.concat([df, df.assign(condition="copy")], ignore_index=True)
    con = contrast_table(both, "copy", "clean", by=[], resamples=1000)
    assert con["difference_pp"].item() == 0 and con["ci_low_pp"].item() == 0 and con["ci_high_pp"].item() == 0


def test_joint_table_counts_and_paired_effects():
    df = simulate_paired(70, conditions=("stale2",), delays=(4,), operations=("refresh", "refresh_ablated"), seed=8)
    counts = joint_outcomes(df, "refresh", "refresh_ablated")
    matrix = joint_matrix(counts)
    executed = df.groupby("task_id")["executed"].min()
    assert matrix.to_numpy().sum() == int((executed == 1).sum())
    assert counts.attrs["excluded_not_executed"] == int((executed == 0).sum())
    # same no-recovery arm: a task cannot be a rescue under one and a harm under the other
    assert matrix.loc["rescue", "harm"] == 0 and matrix.loc["harm", "rescue"] == 0
    eff = joint_effects(df, "refresh", "refresh_ablated", resamples=1000)
    a_none, b_none, a_b = (eff.iloc[i] for i in range(3))
    assert a_none["net"] == matrix.loc["rescue"].sum() - matrix.loc["harm"].sum()
    assert b_none["net"] == matrix["rescue"].sum() - matrix["harm"].sum()
    assert a_b["effect_pp"] == pytest.approx(a_none["effect_pp"] - b_none["effect_pp"])
    assert a_b["mcnemar_p"] == pytest.approx(_hand_mcnemar(int(a_b["wins"]), int(a_b["losses"])) if a_b["wins"] + a_b["losses"] else 1.0)


# --------------------------------------------------------------------------- bad input


def _write(tmp_path, df: pd.DataFrame):
    path = tmp_path / "paired.csv"
    df.to_csv(path, index=False)
    return path


def test_missing_column_is_named(tmp_path):
    df = simulate_paired(5, seed=0).drop(columns=["y1"])
    with pytest.raises(CirError, match="missing column.*'y1'"):
        effect_table(df)
    with pytest.raises(CirError, match="paired.csv: missing column.*'y1'"):
        read_paired(_write(tmp_path, df))


@pytest.mark.parametrize("bad", [2, -1, "yes"])
def test_non_binary_outcome_is_named(tmp_path, bad):
    df = simulate_paired(5, seed=0)
    df["y0"] = df["y0"].astype(object)
    df.loc[3, "y0"] = bad
    with pytest.raises(CirError, match=f"column 'y0' must hold 0/1.*row 3 has {bad!r}"):
        effect_table(df)
    with pytest.raises(CirError, match="'y0' must hold 0/1"):
        read_paired(_write(tmp_path, df))


def test_duplicate_rows_are_named():
    df = simulate_paired(5, seed=0)
    df = pd.concat([df, df.iloc[[7]]], ignore_index=True)
    task = df.iloc[7]["task_id"]
    with pytest.raises(CirError, match=f"duplicate rows for task_id='{task}'"):
        effect_table(df)


def test_empty_table_is_an_error(tmp_path):
    df = simulate_paired(5, seed=0).iloc[:0]
    with pytest.raises(CirError, match="empty"):
        effect_table(df)
    path = tmp_path / "paired.csv"
    path.write_text("")
    with pytest.raises(CirError, match="empty"):
        read_paired(path)


def test_unknown_grouping_key_is_named_in_every_table():
    df = simulate_paired(5, operations=("refresh", "replan"), seed=0)
    with pytest.raises(CirError, match="grouping key 'room'"):
        effect_table(df, by=["room"])
    with pytest.raises(CirError, match="grouping key 'room'"):
        contrast_table(df, "stale2", "clean", by=["room"])
    with pytest.raises(CirError, match="grouping key 'room'"):
        joint_effects(df, "refresh", "replan", by=["room"])


def test_unknown_values_are_named():
    df = simulate_paired(5, seed=0)
    with pytest.raises(CirError, match="condition 'stale9' is not in the paired table; present: clean, stale2"):
        contrast_table(df, "stale9", "clean")
    with pytest.raises(CirError, match="operation 'refresh_ablated' is not in the paired table"):
        joint_outcomes(df, "refresh", "refresh_ablated")
    with pytest.raises(CirError, match="delay 7 is not in the paired table"):
        joint_outcomes(df, "refresh", "refresh_ablated", delay=7)
    with pytest.raises(CirError, match="a and b are both"):
        contrast_table(df, "clean", "clean")
    with pytest.raises(CirError, match="cannot also be a grouping key"):
        contrast_table(df, "stale2", "clean", by=["condition"])


@pytest.mark.parametrize("resamples", [0, -5, 2.5])
def test_bad_resamples_are_named(resamples):
    with pytest.raises(CirError, match="resamples must be a positive integer"):
        effect_table(simulate_paired(5, seed=0), resamples=resamples)


def test_mcnemar_only_where_pairs_are_independent():
    df = simulate_paired(20, conditions=("clean", "stale2"), delays=(0, 4), seed=2)
    per_cell = effect_table(df, by=["condition", "delay"], resamples=FAST)
    pooled = effect_table(df, by=["condition"], resamples=FAST)
    assert per_cell["mcnemar_p"].notna().all()
    assert pooled["mcnemar_p"].isna().all()  # two delays per task: rows of a task are not independent
    assert pooled["sign_flip_p"].notna().all()  # the task-level test still applies
