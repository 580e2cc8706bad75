"""The cooking family through the paired replayer: rows with prefix_match, identical across runs,
and the family's features in them."""

from __future__ import annotations

import pandas as pd

from cir.families.registry import resolve_extractor
from cir.families.textworld_cooking.agent.builtin import CookingAgent
from cir.families.textworld_cooking.env import CookingEnv
from cir.families.textworld_cooking.features import COOKING_FEATURES, FEATURES
from cir.pairs.paired import validate_paired
from cir.pairs.replay import ReplaySettings, run_task_pairs

SETTINGS = ReplaySettings(conditions=("clean", "stale2", "missing"), delays=(0, 2),
                          operations=("refresh", "placebo"))


def _table(tasks) -> tuple[pd.DataFrame, list]:
    rows, traces = [], []
    for task in tasks:
        result = run_task_pairs(task, CookingAgent(seed=0), CookingEnv(task.game_file), SETTINGS,
                                extractor=COOKING_FEATURES)
        rows += result.rows
        traces += [(e.role, e.condition, e.delay, e.operation, tuple(ev.mechanism for ev in e.transcript.trace))
                   for e in result.episodes if e.transcript is not None]
    return validate_paired(pd.DataFrame(rows), source="cooking pairs"), traces


def test_paired_rows_are_identical_across_runs_and_carry_the_family_features(cooking_tasks):
    first, traces = _table(cooking_tasks[:2])
    again, traces_again = _table(cooking_tasks[:2])
    pd.testing.assert_frame_equal(first, again)
    assert traces == traces_again
    assert len(first) == 2 * 3 * 2 * 2
    assert first["prefix_match"].all()
    assert [c for c in first.columns if c.startswith("f_")] == list(FEATURES)
    clean = first[first["condition"] == "clean"]
    assert (clean["y0"] == clean["factual_success"].astype(int)).all()
    perturbed = first[(first["condition"] != "clean") & (first["delay"] == 0)]
    assert perturbed["f_has_suspect"].eq(1).all()
    # the suspect of every decision after a missing text is that text, read from what was shown
    assert first.loc[first["condition"] == "missing", "f_suspect_missing"].eq(1).all()
    assert first.loc[first["condition"] != "missing", "f_suspect_missing"].eq(0).all()


def test_the_extractor_keeps_the_contract():
    assert resolve_extractor(COOKING_FEATURES) is COOKING_FEATURES
    assert COOKING_FEATURES.name == "textworld-cooking"
    assert all(name.startswith("f_") and meaning for name, meaning in FEATURES.items())


def test_lag_arms_show_the_answer_of_k_env_actions_earlier(cooking_tasks):
    """lagK on TextWorld's cooking games through the family contract's restore alone."""
    from support.replay import check_lag_arms

    settings = ReplaySettings(conditions=("clean", "lag2", "lag1"), delays=(0, 1), operations=("refresh",))
    assert check_lag_arms(cooking_tasks[0], CookingAgent(seed=0), lambda t: CookingEnv(t.game_file), settings,
                          extractor=COOKING_FEATURES) == 2
