"""The CIR rule as arithmetic: models, both estimators' scores, the operation choice, the gates."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from cir.router.policy import fit_linear_model
from cir.router.rule import (
    ESTIMATORS,
    LinearModel,
    blocked_by,
    choose,
    gates_pass,
    passes,
    predict,
    split_model_name,
)


def test_linear_model_is_the_fitted_pipeline_as_plain_numbers() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X @ [1.0, -2.0, 0.5, 0.0] + rng.normal(size=200) > 0).astype(int)
    model = fit_linear_model(X, y, C=0.3)
    pipe = Pipeline([("s", StandardScaler()), ("l", LogisticRegression(C=0.3, solver="newton-cholesky"))]).fit(X, y)
    np.testing.assert_allclose(model.predict_proba(X), pipe.predict_proba(X)[:, 1], rtol=1e-10)
    # row by row the same bits as the batch (the live router asks one row at a time)
    assert all(model.predict_proba(X[i:i + 1])[0] == model.predict_proba(X)[i] for i in range(20))
    assert LinearModel.from_dict(model.to_dict()).predict_proba(X).tolist() == model.predict_proba(X).tolist()


def test_a_label_with_one_class_is_its_clipped_rate() -> None:
    X = np.arange(10.0).reshape(5, 2)
    assert np.allclose(fit_linear_model(X, np.zeros(5)).predict_proba(X), 1e-3)
    assert np.allclose(fit_linear_model(X, np.ones(5)).predict_proba(X), 1 - 1e-3)


def test_paper_scores_are_equations_6_and_7() -> None:
    p = {"p_err": np.array([0.9]), "p0": np.array([0.3]), "p1[refresh]": np.array([0.8])}
    s = ESTIMATORS["paper"].scores(p, "refresh", lam=2.0)
    assert s["s_R"][0] == pytest.approx(0.7 * 0.8) and s["s_H"][0] == pytest.approx(0.3 * 0.2)
    assert s["utility"][0] == pytest.approx(0.56 - 2 * 0.06) and s["p_fail"][0] == pytest.approx(0.7)
    # lambda = 1: the difference of the two success probabilities
    assert ESTIMATORS["paper"].scores(p, "refresh", 1.0)["utility"][0] == pytest.approx(0.8 - 0.3)


def test_paired_scores_weigh_the_two_joint_probabilities() -> None:
    p = {"p_err": np.array([0.5]), "p_rescue[replan]": np.array([0.2]), "p_harm[replan]": np.array([0.05])}
    s = ESTIMATORS["paired"].scores(p, "replan", lam=2.0)
    assert s["utility"][0] == pytest.approx(0.2 - 2 * 0.05)
    assert ESTIMATORS["paired"].thresholds == ("alpha", "gamma")
    assert ESTIMATORS["paired"].model_names(("refresh", "rewind")) == (
        "p_err", "p_rescue[refresh]", "p_harm[refresh]", "p_rescue[rewind]", "p_harm[rewind]")
    assert split_model_name("p_harm[rewind]") == ("p_harm", "rewind") and split_model_name("p0") == ("p0", None)


def test_the_operation_of_highest_utility_is_chosen_first_on_ties() -> None:
    per_op = {"refresh": {"p_err": np.array([0.9, 0.9, 0.9]), "utility": np.array([0.1, 0.5, 0.2])},
              "rewind": {"p_err": np.array([0.9, 0.9, 0.9]), "utility": np.array([0.3, 0.1, 0.2])}}
    s = choose(per_op, ("refresh", "rewind"))
    assert s["choice"].tolist() == [1, 0, 0]
    assert s["utility_chosen"].tolist() == [0.3, 0.5, 0.2]
    assert s["utility"].shape == (3, 2)


def test_a_none_threshold_never_passes() -> None:
    assert passes(0.99, None) is False and not passes(np.array([1.0]), None).any()
    assert passes(0.5, 0.5) and not passes(0.49, 0.5)


def test_blocked_by_agrees_with_the_vectorised_gates() -> None:
    """The scalar rule (live router) and the array rule (walk, search) are the same rule."""
    rng = np.random.default_rng(3)
    for name, estimator in ESTIMATORS.items():
        models = {m: LinearModel(np.zeros(3), np.ones(3), rng.normal(size=3), float(rng.normal()))
                  for m in estimator.model_names(("refresh", "replan"))}
        X = rng.normal(size=(300, 3))
        s = predict(estimator, models, ("refresh", "replan"), X, 2.0)
        thresholds = {t: float(rng.uniform(0.2, 0.6)) if t != "gamma" else 0.0 for t in estimator.thresholds}
        vector = gates_pass(estimator, s, thresholds)
        for i in range(len(X)):
            row = {k: v[i] for k, v in s.items() if k.endswith("_chosen")}
            blocker = blocked_by(estimator, 2, row, thresholds, d_min=1, delays=(1, 2, 4))
            assert (blocker is None) == bool(vector[i]), (name, i)
            if blocker is not None:
                assert blocker in ("p_err", "p_fail", "utility")
        assert vector.any() and not vector.all(), name  # both outcomes occur
        row = {k: v[0] for k, v in s.items() if k.endswith("_chosen")}
        assert blocked_by(estimator, 0, row, thresholds, 1, (1, 2, 4)) == "delay"  # below d_min
        assert blocked_by(estimator, 3, row, thresholds, 1, (1, 2, 4)) == "delay"  # not a candidate
