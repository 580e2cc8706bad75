"""Calibration of the three models: Brier scores, reliability curves, a figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from cir.pairs.synthetic import simulate  # noqa: E402
from cir.router.calibration import calibration_figure, calibration_table  # noqa: E402
from cir.router.policy import CIRPolicy  # noqa: E402
from cir.util.errors import CirError  # noqa: E402


@pytest.fixture(scope="module")
def policy() -> CIRPolicy:
    return CIRPolicy(threshold_steps=7).fit(simulate(100, seed=31))


def test_oof_calibration_table(policy: CIRPolicy) -> None:
    table = calibration_table(policy, n_bins=5)
    assert set(table["model"]) == {"p_err", "p0", "p1[refresh]"}
    per_model = table.groupby("model").first()
    assert (per_model["brier"].between(0, 1)).all()
    # the planted signal is learnable: every model beats predicting its base rate
    assert (per_model["brier"] < per_model["brier_baseline"]).all()
    assert table["mean_predicted"].between(0, 1).all() and table["fraction_positive"].between(0, 1).all()
    assert per_model.loc["p_err", "n"] == len(policy.oof_)


def test_held_out_calibration_and_figure(policy: CIRPolicy) -> None:
    held = simulate(60, seed=32)
    table = calibration_table(policy, held, n_bins=5, strategy="uniform")
    assert set(table["model"]) == {"p_err", "p0", "p1[refresh]"}
    fig = calibration_figure(policy, held)
    assert len(fig.axes) == 3
    assert "Brier" in fig.axes[0].get_title()


def test_unfitted_policy_has_no_oof() -> None:
    with pytest.raises(CirError, match="out-of-fold"):
        calibration_table(CIRPolicy())
