"""The sequential walk: decidable, ended and missing cells, several operations, first firing cell."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cir.router.walk import DECIDE, ENDED, MISSING, build_cells, model_labels, summarize, walk
from cir.util.errors import CirError


def _rows(spec: list[tuple]) -> pd.DataFrame:
    """(task, condition, delay, operation, y0, y1, executed, prefix_match) -> a paired table."""
    return pd.DataFrame([{"task_id": t, "condition": c, "delay": d, "operation": o, "y0": y0, "y1": y1,
                          "executed": e, "prefix_match": m, "f_delay": float(d)}
                         for t, c, d, o, y0, y1, e, m in spec])


def test_cells_are_decidable_ended_or_missing() -> None:
    df = _rows([
        ("a", "stale2", 1, "refresh", 0, 1, 1, 1),
        ("a", "stale2", 2, "refresh", 0, 0, 0, 1),  # the arm ended before delay 2
        ("a", "stale2", 4, "refresh", 0, 0, 0, 1),
        ("b", "clean", 1, "refresh", 1, 1, 1, 0),  # prefix mismatch: missing
        ("b", "clean", 2, "refresh", 1, 0, 1, 1),
    ])
    cells = build_cells(df, (1, 2, 4), "refresh", "t")
    assert cells.arms[["task_id", "condition"]].values.tolist() == [["a", "stale2"], ["b", "clean"]]
    assert cells.status.tolist() == [[DECIDE, ENDED, ENDED], [MISSING, DECIDE, MISSING]]
    assert cells.meta == {"arms": 2, "tasks": 2, "cells": 2, "ended_cells": 2, "prefix_mismatch_cells": 1}
    assert cells.decisions[["task_id", "delay"]].values.tolist() == [["a", 1], ["b", 2]]  # table order
    assert cells.decisions["y1_refresh"].tolist() == [1, 0]


def test_walk_recovers_at_the_first_firing_cell_and_an_end_stops_it() -> None:
    df = _rows([
        ("a", "stale2", 1, "refresh", 0, 0, 1, 1), ("a", "stale2", 2, "refresh", 0, 1, 1, 1),
        ("b", "stale2", 1, "refresh", 1, 1, 0, 1), ("b", "stale2", 2, "refresh", 1, 0, 1, 1),
        ("c", "clean", 1, "refresh", 1, 0, 1, 1), ("c", "clean", 2, "refresh", 1, 1, 1, 1),
    ])
    cells = build_cells(df, (1, 2), "refresh", "t")
    fire = np.array([[False, True], [True, True], [True, True]])
    outcome, intervened, first = walk(cells, fire)
    assert outcome.tolist() == [1, 1, 0]  # a rescued at 2; b ended at 1 (keeps y0); c harmed at 1
    assert intervened.tolist() == [True, False, True] and first.tolist() == [1, -1, 0]
    s = summarize(cells, outcome, intervened)
    assert (s["gain_count"], s["clean_harm_count"], s["n_err"], s["n_clean"]) == (1, 1, 2, 1)
    # many settings at once: (settings, arms, delays)
    outcomes, _, _ = walk(cells, np.stack([fire, np.zeros_like(fire)]))
    assert outcomes.tolist() == [[1, 1, 0], [0, 1, 1]]


def test_several_operations_need_every_row_and_the_policy_names_the_outcome() -> None:
    df = _rows([
        ("a", "stale2", 1, "refresh", 0, 0, 1, 1), ("a", "stale2", 1, "replan", 0, 1, 1, 1),
        ("b", "stale2", 1, "refresh", 0, 1, 1, 1),  # no replan row: not decidable with both
    ])
    cells = build_cells(df, (1,), ("refresh", "replan"), "t")
    assert cells.status[:, 0].tolist() == [DECIDE, MISSING]
    assert cells.y1[0, 0].tolist() == [0, 1]
    y1 = cells.outcome_if_chosen(np.array([[1], [-1]]))
    assert walk(cells, np.ones((2, 1), dtype=bool), y1)[0].tolist() == [1, 0]
    with pytest.raises(ValueError, match="give y1"):
        walk(cells, np.ones((2, 1), dtype=bool))


def test_model_labels_are_what_each_model_predicts() -> None:
    cells = pd.DataFrame({"condition": ["clean", "stale2", "stale2", "clean"], "y0": [1, 0, 0, 1],
                          "y1_refresh": [0, 1, 0, 1]})
    assert model_labels(cells, "p_err").tolist() == [0, 1, 1, 0]
    assert model_labels(cells, "p0").tolist() == [1, 0, 0, 1]
    assert model_labels(cells, "p1[refresh]").tolist() == [0, 1, 0, 1]
    assert model_labels(cells, "p_rescue[refresh]").tolist() == [0, 1, 0, 0]
    assert model_labels(cells, "p_harm[refresh]").tolist() == [1, 0, 0, 0]


def test_bad_tables_are_refused_with_what_is_wrong() -> None:
    df = _rows([("a", "stale2", 1, "refresh", 0, 1, 1, 1), ("a", "stale2", 2, "refresh", 1, 1, 1, 1)])
    with pytest.raises(CirError, match="different y0"):
        build_cells(df, (1, 2), "refresh", "t")
    with pytest.raises(CirError, match="no rows with operation 'rewind'"):
        build_cells(df, (1, 2), "rewind", "t")
    with pytest.raises(CirError, match="no 'refresh' rows at the candidate delays 7"):
        build_cells(df, (7,), "refresh", "t")
