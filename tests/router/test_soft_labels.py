"""The router on probabilities: a table of --samples fits soft labels and walks expected outcomes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cir.pairs.paired import validate_paired
from cir.pairs.samples import sample_columns
from cir.pairs.synthetic import simulate
from cir.router.evaluation import evaluate
from cir.router.policy import CIRPolicy, fit_linear_model
from cir.router.walk import build_cells, model_labels, summarize, walk


def with_draws(df: pd.DataFrame, k: int, seed: int = 0) -> pd.DataFrame:
    """``df`` with K draws per arm: the first draw is the row's y0/y1, the others draw the same
    outcome with chance 0.75 (the arm's draws shared by the operations of a delay)."""
    rng = np.random.default_rng(seed)
    arms: dict[tuple, list[int]] = {}
    rows = []
    for row in df.to_dict("records"):
        key = (row["task_id"], row["condition"], row["delay"])
        if key not in arms:
            arms[key] = [row["y0"]] + [int(row["y0"] if rng.random() < 0.75 else 1 - row["y0"])
                                       for _ in range(k - 1)] if row["executed"] else [row["y0"]] * k
        branch = ([row["y1"]] + [int(row["y1"] if rng.random() < 0.75 else 1 - row["y1"]) for _ in range(k - 1)]
                  if row["executed"] else arms[key])
        rows.append({**row, **sample_columns(arms[key], branch)})
    return validate_paired(pd.DataFrame(rows))


def test_soft_labels_are_the_probabilities_and_fit_as_weighted_rows():
    df = with_draws(simulate(n_tasks=80, seed=1), 4)
    cells = build_cells(df, (1, 2, 4), ("refresh",), "t")
    decisions = cells.decisions
    p0, p1 = decisions["p0_hat"].to_numpy(), decisions["y1_refresh"].to_numpy()
    assert model_labels(decisions, "p0") == pytest.approx(p0)
    assert model_labels(decisions, "p_rescue[refresh]") == pytest.approx(np.maximum(p1 - p0, 0))
    assert model_labels(decisions, "p_harm[refresh]") == pytest.approx(np.maximum(p0 - p1, 0))
    assert ((p1 > 0) & (p1 < 1)).any()
    # a soft label of 0.25 is one row counted a quarter a success: the fit of the duplicated rows
    X = decisions[["f_delay", "f_suspect_mismatch"]].to_numpy(float)
    y = model_labels(decisions, "p0")
    soft = fit_linear_model(X, y, C=1.0)
    hard = fit_linear_model(np.vstack([X, X, X, X]), np.concatenate([(y > q).astype(int) for q in (0, 0.25, 0.5, 0.75)]),
                            C=4.0)
    assert soft.predict_proba(X) == pytest.approx(hard.predict_proba(X), abs=1e-3)  # the same objective


def test_the_walk_is_in_expected_outcomes():
    df = with_draws(simulate(n_tasks=60, seed=2), 4, seed=3)
    cells = build_cells(df, (1, 2, 4), ("refresh",), "t")
    assert cells.expected and cells.y0.dtype.kind == "f"
    fire = np.zeros(cells.status.shape, dtype=bool)
    fire[:, 0] = True  # always recover at the first candidate delay
    outcome, intervened, _ = walk(cells, fire)
    s = summarize(cells, outcome, intervened)
    first = df[(df.operation == "refresh") & (df.delay == 1)].set_index(["task_id", "condition"])
    arms = cells.arms.set_index(["task_id", "condition"])
    decided = cells.status[:, 0] == 0
    gain = (first["p1_hat"] - first["p0_hat"]).reindex(arms.index).to_numpy()
    err = (arms.index.get_level_values("condition") != "clean")
    assert s["gain_count"] == pytest.approx(np.nansum(np.where(decided & err, gain, 0.0)))
    clean_drop = np.where(decided & ~err, np.maximum(-gain, 0.0), 0.0)
    assert s["clean_harm_count"] == pytest.approx(np.nansum(clean_drop))


def test_a_router_fits_and_is_evaluated_on_a_table_of_samples():
    train = with_draws(simulate(n_tasks=150, seed=4), 4, seed=5)
    test = with_draws(simulate(n_tasks=80, seed=6), 4, seed=7)
    for estimator in ("paper", "paired"):
        policy = CIRPolicy(estimator=estimator).fit(train)
        result = evaluate(policy, test, resamples=200)
        summary = result["summary"].set_index(["policy", "condition"])
        assert np.isfinite(summary.loc[("cir", "all"), "effect_pp"])
        assert summary.loc[("oracle", "all"), "effect_pp"] >= summary.loc[("cir", "all"), "effect_pp"] - 1e-9
        assert summary.loc[("never", "all"), "effect_pp"] == 0
        episodes = result["episodes"]
        assert episodes["y_cir"].dtype.kind == "f"  # expected outcomes
    # one draw: the router of the table as it was (integer outcomes)
    plain = CIRPolicy(estimator="paired").fit(simulate(n_tasks=150, seed=4))
    assert evaluate(plain, simulate(n_tasks=80, seed=6), resamples=50)["episodes"]["y_cir"].dtype.kind == "i"


def test_the_study_diagnostics_take_soft_labels():
    from cir.router.calibration import calibration_table
    from cir.study.selective import discrimination_table, optimism_table

    train = with_draws(simulate(n_tasks=120, seed=8), 4, seed=9)
    test = with_draws(simulate(n_tasks=60, seed=10), 4, seed=11)
    policy = CIRPolicy(estimator="paired").fit(train)
    assert policy.oof_["p0_hat"].between(0, 1).all()  # the out-of-fold table keeps the soft labels
    table = discrimination_table({"cir_paired": policy}, {"cir_paired": policy.to_router()}, test)
    assert table["auc_score"].between(0, 1).all() and table["positives"].dtype.kind == "f"
    calib = calibration_table(policy)
    assert calib["brier"].between(0, 1).all() and calib["fraction_positive"].between(0, 1).all()
    arms = evaluate({"cir_paired": policy}, test, resamples=50)["episodes"]
    assert optimism_table({"cir_paired": policy}, arms)["clean_harm"].between(0, 1).all()
