"""Decomposition: outcome labels, counts by any grouping, subsets, bad keys."""

from __future__ import annotations

import pandas as pd
import pytest

from cir.pairs.synthetic import simulate_paired
from cir.stats.decompose import decompose, outcome_counts, select_subset
from cir.util.errors import CirError


def _row(task, condition, y0, y1, delay=0, operation="refresh", factual=1, prefix=1, executed=1):
    return {"task_id": task, "split": "valid_seen", "task_type": "pick_and_place", "agent": "a",
            "condition": condition, "delay": delay, "operation": operation, "y0": y0, "y1": y1,
            "executed": executed, "factual_success": factual, "prefix_match": prefix}


def _small() -> pd.DataFrame:
    return pd.DataFrame([
        _row("t1", "clean", 1, 1), _row("t1", "stale2", 0, 1),
        _row("t2", "clean", 1, 0), _row("t2", "stale2", 1, 0),
        _row("t3", "clean", 0, 0, factual=0), _row("t3", "stale2", 0, 1, factual=0),
        _row("t4", "clean", 1, 1), _row("t4", "stale2", 1, 1, prefix=0),
    ])


def test_counts_by_condition_match_hand_count():
    table = decompose(_small(), by=["condition"], require_prefix_match=False)
    clean = table[table["condition"] == "clean"].iloc[0]
    stale = table[table["condition"] == "stale2"].iloc[0]
    assert (clean["n"], clean["stable_success"], clean["harms"], clean["rescues"], clean["stable_failure"]) == (4, 2, 1, 0, 1)
    assert (stale["n"], stale["stable_success"], stale["harms"], stale["rescues"], stale["stable_failure"]) == (4, 1, 1, 2, 0)
    assert stale["success_without"] == pytest.approx(0.5)
    assert stale["success_with"] == pytest.approx(0.75)
    assert stale["rescue_rate"] == pytest.approx(0.5)
    assert list(table["condition"]) == ["clean", "stale2"]


def test_prefix_mismatch_rows_are_dropped_by_default():
    rows = select_subset(_small())
    assert len(rows) == 7
    assert rows.attrs["dropped_prefix_mismatch"] == 1
    assert len(select_subset(_small(), require_prefix_match=False)) == 8


def test_factual_success_subset_keeps_only_factual_successes():
    rows = select_subset(_small(), "factual-success", require_prefix_match=False)
    assert sorted(rows["task_id"].unique()) == ["t1", "t2", "t4"]
    table = decompose(_small(), by=["condition"], subset="factual-success", require_prefix_match=False)
    # In this subset the clean no-recovery arm reproduces the factual success: no rescue possible.
    assert table.loc[table["condition"] == "clean", "rescues"].item() == 0


@pytest.mark.parametrize("by", [["split"], ["task_type"], ["agent"], ["condition", "delay", "operation"], []])
def test_any_grouping_partitions_the_rows(by):
    df = simulate_paired(20, operations=("refresh", "replan"), seed=2)
    table = outcome_counts(df, by)
    assert table["n"].sum() == len(df)
    assert (table[["rescues", "harms", "stable_success", "stable_failure"]].sum(axis=1) == table["n"]).all()


def test_unknown_grouping_key_is_named():
    with pytest.raises(CirError, match="grouping key 'room'.*available: task_id"):
        decompose(_small(), by=["condition", "room"])


def test_grouping_by_an_outcome_column_is_refused():
    with pytest.raises(CirError, match="'y1' is an outcome"):
        decompose(_small(), by=["y1"])


def test_unknown_subset_is_named():
    with pytest.raises(CirError, match="subset 'succ' is unknown"):
        select_subset(_small(), "succ")


def test_empty_subset_is_an_error():
    df = _small().assign(factual_success=0)
    with pytest.raises(CirError, match="subset 'factual-success' has no rows"):
        decompose(df, subset="factual-success")


def test_non_dataframe_input_is_an_error():
    with pytest.raises(CirError, match="expected a pandas DataFrame"):
        decompose([1, 2, 3])
