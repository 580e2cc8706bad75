"""CIR policy: planted signal, the clean-harm limit, the sequential walk, baselines,
scikit-learn conventions and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)
from sklearn.utils.validation import check_is_fitted

from cir.pairs.synthetic import simulate
from cir.router.evaluation import POLICIES, decide_rows, evaluate, walk_policies
from cir.router.policy import CIRPolicy
from cir.router.walk import build_cells, walk
from cir.util.errors import CirError


@pytest.fixture(scope="module")
def train() -> pd.DataFrame:
    return simulate(160, seed=1)


@pytest.fixture(scope="module")
def test_table() -> pd.DataFrame:
    df = simulate(120, seed=101)
    df["task_id"] = "test-" + df["task_id"]
    return df


@pytest.fixture(scope="module")
def fitted(train: pd.DataFrame) -> CIRPolicy:
    return CIRPolicy().fit(train)


def test_planted_signal_cir_beats_never_and_respects_epsilon(fitted: CIRPolicy, test_table: pd.DataFrame) -> None:
    s = fitted.oof_summary_
    assert s["clean_harm"] <= fitted.epsilon  # the limit holds on the OOF clean rows
    assert s["net_gain"] > 0.05
    assert fitted.candidates_.iloc[0]["feasible"]
    result = evaluate(fitted, test_table, resamples=1000, seed=0)
    summary = result["summary"].set_index(["policy", "condition"])
    cir = summary.loc[("cir", "all")]
    assert cir["effect_pp"] > 5 and cir["ci_low_pp"] > 0
    assert cir["sign_flip_p"] < 0.01
    assert cir["rescues"] > cir["harms"]
    # CIR reaches most of the oracle's gain and more than the detector alone
    assert 0.5 < cir["oracle_fraction"] <= 1
    assert cir["effect_pp"] > summary.loc[("anomaly", "all"), "effect_pp"]
    assert summary.loc[("never", "all"), "effect_pp"] == 0
    margins = result["margins"].set_index(["versus", "condition"])
    assert margins.loc[("never", "all"), "margin_pp"] == pytest.approx(cir["effect_pp"])
    assert margins.loc[("oracle", "all"), "margin_pp"] <= 0


def test_oracle_is_the_ceiling_episode_by_episode(fitted: CIRPolicy, test_table: pd.DataFrame) -> None:
    ep = walk_policies(fitted, test_table)
    for p in POLICIES:
        assert (ep["y_oracle"] >= ep[f"y_{p}"]).all(), p
    assert (ep["int_never"] == 0).all()
    assert (ep["int_always"] <= 1).all()
    # interventions only at candidate delays >= d_min
    for p in POLICIES:
        d = ep.loc[ep[f"int_{p}"] == 1, f"delay_{p}"]
        assert d.isin([1, 2, 4]).all()


def test_epsilon_zero_means_no_oof_clean_harm(train: pd.DataFrame) -> None:
    p = CIRPolicy(epsilon=0.0, threshold_steps=9).fit(train)
    assert p.oof_summary_["clean_harm_count"] == 0
    assert p.baselines_["anomaly"]["oof_clean_harm"] == 0


def test_d_min_is_respected(train: pd.DataFrame, test_table: pd.DataFrame) -> None:
    p = CIRPolicy(d_min=2, threshold_steps=9).fit(train)
    ep = walk_policies(p, test_table)
    for name in POLICIES:
        assert (ep.loc[ep[f"int_{name}"] == 1, f"delay_{name}"] >= 2).all()


def test_rate_matched_baseline_is_closest_to_cir_rate(fitted: CIRPolicy) -> None:
    rate = fitted.oof_summary_["intervention_rate"]
    matched = fitted.baselines_["anomaly_rate_matched"]["oof_intervention_rate"]
    candidates = fitted.candidates_  # any anomaly alpha gives a rate; the matched one is at least as close as the best
    assert abs(matched - rate) <= abs(fitted.baselines_["anomaly"]["oof_intervention_rate"] - rate) + 1e-12
    assert len(candidates) > 100


def test_fit_is_deterministic(train: pd.DataFrame, fitted: CIRPolicy) -> None:
    again = CIRPolicy().fit(train)
    assert again.thresholds_ == fitted.thresholds_
    assert again.baselines_ == fitted.baselines_
    for name in ("p_err", "p0", "p1[refresh]"):
        assert np.array_equal(again.models_[name].coef, fitted.models_[name].coef)
    other = CIRPolicy(seed=7, threshold_steps=5).fit(train)  # another fold assignment: still a valid fit
    assert other.oof_summary_["clean_harm"] <= other.epsilon


def test_sequential_walk_semantics() -> None:
    """First firing delay wins; an ended episode keeps y0; a missing cell is skipped."""
    rows = []
    # episode A (stale2): fires at delays 2 and 4 -> refresh at 2 (y1=1), not at 4 (y1=0)
    for d, y1 in [(1, 0), (2, 1), (4, 0)]:
        rows.append(("a", "stale2", d, 0, y1, 1, 1))
    # episode B (stale2): ended before delay 2 -> keeps y0 even though delay 4 "would" rescue
    rows += [("b", "stale2", 1, 0, 0, 1, 1), ("b", "stale2", 2, 0, 0, 0, 1), ("b", "stale2", 4, 0, 0, 0, 1)]
    # episode C (clean): delay 1 prefix mismatch (skipped), fires at 2
    rows += [("c", "clean", 1, 1, 1, 1, 0), ("c", "clean", 2, 1, 0, 1, 1), ("c", "clean", 4, 1, 1, 1, 1)]
    df = pd.DataFrame(rows, columns=["task_id", "condition", "delay", "y0", "y1", "executed", "prefix_match"])
    df["operation"] = "refresh"
    df["factual_success"] = 1
    cells = build_cells(df, (1, 2, 4), "refresh", "t")
    assert cells.meta["ended_cells"] == 2 and cells.meta["prefix_mismatch_cells"] == 1
    fire = np.array([[False, True, True], [False, False, True], [True, True, True]])
    outcome, intervened, first = walk(cells, fire)
    # episodes are sorted by (task, condition): a, b, c
    assert outcome.tolist() == [1, 0, 0]
    assert intervened.tolist() == [True, False, True]
    assert first.tolist() == [1, -1, 1]
    # vectorised over settings: same answer per setting
    o2, _, _ = walk(cells, np.stack([fire, np.zeros_like(fire)]))
    assert o2.tolist() == [[1, 0, 0], [0, 0, 1]]


# -- scikit-learn conventions ---------------------------------------------------------------
def test_sklearn_estimator_conventions(train: pd.DataFrame) -> None:
    est = CIRPolicy()
    check_no_attributes_set_in_init("CIRPolicy", est)
    check_get_params_invariance("CIRPolicy", est)
    check_set_params("CIRPolicy", est)
    check_parameters_default_constructible("CIRPolicy", est)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    with pytest.raises(NotFittedError):
        est.predict_scores(train)
    est.set_params(lam=3.0, delays=(1, 2))
    assert est.get_params()["lam"] == 3.0
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est


def test_clone_of_fitted_is_unfitted(fitted: CIRPolicy) -> None:
    check_is_fitted(fitted)
    twin = clone(fitted)
    assert not hasattr(twin, "models_")
    assert twin.get_params() == fitted.get_params()


# -- bad input ---------------------------------------------------------------------------------
def test_table_without_feature_columns(train: pd.DataFrame) -> None:
    bare = train[[c for c in train.columns if not c.startswith("f_")]]
    with pytest.raises(CirError, match="no feature columns"):
        CIRPolicy().fit(bare)


def test_training_table_without_clean_rows(train: pd.DataFrame) -> None:
    with pytest.raises(CirError, match="no clean rows"):
        CIRPolicy().fit(train[train["condition"] != "clean"])


def test_training_table_with_only_clean_rows(train: pd.DataFrame) -> None:
    with pytest.raises(CirError, match="only clean rows"):
        CIRPolicy().fit(train[train["condition"] == "clean"])


def test_unknown_feature_column_and_non_numbers(train: pd.DataFrame) -> None:
    with pytest.raises(CirError, match="unknown feature column 'f_made_up'"):
        CIRPolicy().fit(train.assign(f_made_up=1.0))
    bad = train.copy()
    bad["f_delay"] = bad["f_delay"].astype(object)
    bad.loc[bad.index[3], "f_delay"] = "x"
    with pytest.raises(CirError, match="'f_delay' must hold finite numbers"):
        CIRPolicy().fit(bad)


def test_bad_settings_and_small_tables(train: pd.DataFrame) -> None:
    with pytest.raises(CirError, match="delays"):
        CIRPolicy(delays=(2, 1)).fit(train)
    with pytest.raises(CirError, match="epsilon"):
        CIRPolicy(epsilon=1.5).fit(train)
    with pytest.raises(CirError, match="no rows with operation 'replan'"):
        CIRPolicy(operations=("replan",)).fit(train)
    few = train[train["task_id"].isin(sorted(set(train["task_id"]))[:3])]
    with pytest.raises(CirError, match="fewer than folds=5"):
        CIRPolicy().fit(few)
    with pytest.raises(CirError, match="no 'refresh' rows at the candidate delays"):
        CIRPolicy(delays=(7,)).fit(train)


def test_evaluation_table_missing_a_router_feature(fitted: CIRPolicy, test_table: pd.DataFrame) -> None:
    with pytest.raises(CirError, match="missing feature column 'f_progress'"):
        walk_policies(fitted, test_table.drop(columns=["f_progress"]))


@pytest.fixture(scope="module")
def paired_fit(train: pd.DataFrame) -> CIRPolicy:
    return CIRPolicy(estimator="paired").fit(train)


def test_the_paired_estimator_models_rescue_and_harm_directly(paired_fit: CIRPolicy, test_table: pd.DataFrame,
                                                              fitted: CIRPolicy) -> None:
    assert set(paired_fit.models_) == {"p_err", "p_rescue[refresh]", "p_harm[refresh]"}
    assert set(paired_fit.thresholds_) == {"alpha", "gamma"}
    # the paper's models keep C = 0.1; the outcome models' C comes from the cells by grouped CV
    assert paired_fit.Cs_["p_err"] == 0.1 and paired_fit.Cs_["p_rescue[refresh]"] in paired_fit.Cs
    # the planted harm channel (refreshing while holding an object) is what P(harm) learns
    holding = paired_fit.features_.index("f_holding")
    assert paired_fit.models_["p_harm[refresh]"].coef[holding] > 0
    # out of fold P(rescue) ranks the rescue cells above the rest
    oof = paired_fit.oof_
    rescued = (oof["y0"] == 0) & (oof["y1"] == 1)
    assert oof.loc[rescued, "p_rescue"].mean() > 2 * oof.loc[~rescued, "p_rescue"].mean()
    result = evaluate({"cir": fitted, "cir_paired": paired_fit}, test_table, resamples=500, seed=0)
    summary = result["summary"].set_index(["policy", "condition"])
    assert list(dict.fromkeys(result["summary"]["policy"])) == [
        "never", "always", "anomaly", "anomaly_rate_matched", "anomaly_rate_matched_heldout", "cir",
        "anomaly_matched_cir_paired", "anomaly_matched_heldout_cir_paired", "cir_paired", "oracle"]
    # matched on the held-out arms: the anomaly rule's rate there is the router's, to one step of
    # its threshold; matched on the fitting tasks it may drift
    arms = result["episodes"]
    for router, matched in (("cir", "anomaly_rate_matched_heldout"), ("cir_paired", "anomaly_matched_heldout_cir_paired")):
        rate = arms[f"int_{router}"].mean()
        assert abs(arms[f"int_{matched}"].mean() - rate) <= 0.05 + 1e-9
        assert summary.loc[(matched, "all"), "intervention_rate"] == pytest.approx(arms[f"int_{matched}"].mean())
    paired = summary.loc[("cir_paired", "all")]
    assert paired["effect_pp"] > 5 and paired["ci_low_pp"] > 0 and paired["oracle_fraction"] > 0.5
    assert summary.loc[("cir_paired", "clean"), "clean_harm_rate"] <= 0.05
    margins = result["margins"].set_index(["policy", "versus", "condition"])
    assert margins.loc[("cir_paired", "never", "all"), "margin_pp"] == pytest.approx(paired["effect_pp"])
    assert ("cir", "cir_paired", "all") in margins.index


def test_paired_fit_is_deterministic(train: pd.DataFrame, paired_fit: CIRPolicy) -> None:
    again = CIRPolicy(estimator="paired").fit(train)
    assert again.thresholds_ == paired_fit.thresholds_ and again.Cs_ == paired_fit.Cs_
    for name, model in paired_fit.models_.items():
        assert np.array_equal(again.models_[name].coef, model.coef)


def test_the_budget_summary_says_whether_it_bound(fitted: CIRPolicy, train: pd.DataFrame) -> None:
    b = fitted.budget_
    assert b["kind"] == "empirical" and b["candidates_searched"] == len(fitted.candidates_)
    assert b["candidates_within_budget"] == int(fitted.candidates_["feasible"].sum())
    assert b["bound"] == (b["candidates_within_budget"] < b["candidates_searched"])
    from cir.router.budget import Budget

    search = pd.DataFrame({"clean_harm_count": [0, 1, 3], "interventions": [4, 9, 0]})
    search["feasible"] = Budget("empirical", 0.02, 0.1).admits(search, n_clean=100)
    assert search["feasible"].tolist() == [True, True, False]  # 3 harms of 100 clean arms > 2%
    summary = Budget("empirical", 0.02, 0.1).summary(search, 100)
    assert summary["bound"] and summary["candidates_within_budget"] == 2 and summary["certified_any"] is None


def test_a_certified_budget_says_plainly_when_nothing_can_be_certified(train: pd.DataFrame) -> None:
    small = train[train["task_id"].isin(sorted(set(train["task_id"]))[:40])]
    policy = CIRPolicy(budget="certified", epsilon=0.02, delta=0.1, threshold_steps=7).fit(small)
    b = policy.budget_
    # 40 clean arms cannot certify 2% at delta 0.1 even with no observed harm (114 are needed)
    assert b["n_clean"] == 40 and b["clean_arms_to_certify_one"] == 114 and b["certified_any"] is False
    assert policy.thresholds_["alpha"] is None  # never recovers
    assert policy.oof_summary_["interventions"] == 0


def test_a_certified_budget_admits_what_learn_then_test_certifies(train: pd.DataFrame) -> None:
    from cir.router.budget import Budget

    budget = Budget("certified", epsilon=0.2, delta=0.1)
    table = pd.DataFrame({"clean_harm_count": [0, 5, 40, 0], "interventions": [10, 10, 10, 0]})
    admitted = budget.admits(table, n_clean=160).tolist()
    # 0 and 5 harms of 160 are far under 20%; 40 (25%) is not; never recovering always is
    assert admitted == [True, True, False, True]
    p = budget.p_values(np.array([0, 40]), 160)
    assert p[0] < 1e-10 and p[1] > 0.5
    policy = CIRPolicy(budget="certified", epsilon=0.2, threshold_steps=7).fit(train)
    assert policy.budget_["certified_any"] and policy.oof_summary_["interventions"] > 0
    # every admitted setting's OOF clean harm rate is under epsilon
    assert (policy.candidates_.loc[policy.candidates_["feasible"], "clean_harm"] <= 0.2).all()


def test_bad_estimator_budget_and_operations_are_refused(train: pd.DataFrame) -> None:
    with pytest.raises(CirError, match="estimator: expected one of paper, paired"):
        CIRPolicy(estimator="magic").fit(train)
    with pytest.raises(CirError, match="budget: expected one of empirical, certified"):
        CIRPolicy(budget="loose").fit(train)
    with pytest.raises(CirError, match="delta"):
        CIRPolicy(delta=0.0).fit(train)
    with pytest.raises(CirError, match="operations: expected distinct"):
        CIRPolicy(operations=("refresh", "refresh")).fit(train)


@pytest.fixture(scope="module")
def several() -> tuple[pd.DataFrame, pd.DataFrame]:
    ops = ("refresh", "replan", "rewind")
    test = simulate(150, seed=202, operations=ops)
    test["task_id"] = "test-" + test["task_id"]
    return simulate(200, seed=201, operations=ops), test


def test_a_router_over_several_operations_chooses_per_state(several) -> None:
    train, test = several
    ops = ("refresh", "replan", "rewind")
    fast = {"Cs": (0.1, 1.0), "threshold_steps": 11}  # a small search: the test is about the choice
    multi = CIRPolicy(estimator="paired", operations=ops, **fast).fit(train)
    assert set(multi.models_) == {"p_err", *[f"p_{k}[{op}]" for op in ops for k in ("rescue", "harm")]}
    singles = {f"cir_paired_{op}": CIRPolicy(estimator="paired", operations=(op,), **fast).fit(train) for op in ops}
    result = evaluate({"cir_multi": multi, **singles}, test, resamples=500, seed=0)
    summary = result["summary"].set_index(["policy", "condition"])
    arms = result["episodes"]
    # the router's choice depends on the state: more than one operation is used
    used = arms.loc[arms["int_cir_multi"] == 1, "op_cir_multi"].value_counts()
    assert len(used) >= 2, used
    # per-operation baselines, each recovering with its own operation, and the oracle over all
    policies = list(dict.fromkeys(result["summary"]["policy"]))
    for op in ops:
        assert f"anomaly_{op}" in policies and f"always_{op}" in policies
        assert set(arms.loc[arms[f"int_anomaly_{op}"] == 1, f"op_anomaly_{op}"]) <= {op}
    assert set(arms.loc[arms["int_oracle"] == 1, "op_oracle"]) <= set(ops)
    # (refresh rescues every confused run of this table, so the oracle's first rescuer is refresh)
    assert summary.loc[("oracle", "all"), "rescues"] >= max(summary.loc[(n, "all"), "rescues"] for n in singles)
    best_single = max(summary.loc[(name, "all"), "effect_pp"] for name in singles)
    assert summary.loc[("cir_multi", "all"), "effect_pp"] >= best_single - 2.0
    assert summary.loc[("oracle", "all"), "effect_pp"] >= summary.loc[("cir_multi", "all"), "effect_pp"]
    # each single-operation policy's share of the gain is that of its own operation's oracle
    for op in ops:
        own = summary.loc[(f"oracle_{op}", "all")]
        assert set(arms.loc[arms[f"int_oracle_{op}"] == 1, f"op_oracle_{op}"]) <= {op}
        assert own["effect_pp"] <= summary.loc[("oracle", "all"), "effect_pp"] + 1e-9
        for policy in (f"cir_paired_{op}", f"anomaly_{op}", f"always_{op}"):
            row = summary.loc[(policy, "all")]
            assert row["oracle_policy"] == f"oracle_{op}"
            assert row["oracle_fraction"] == pytest.approx(row["effect_pp"] / own["effect_pp"])
    assert summary.loc[("cir_multi", "all"), "oracle_policy"] == "oracle"
    # a rescue by the router is a rescue of the operation it chose, at the delay it chose
    test_rows = test.set_index(["task_id", "condition", "delay", "operation"])
    for _, arm in arms[arms["int_cir_multi"] == 1].head(30).iterrows():
        row = test_rows.loc[(arm["task_id"], arm["condition"], arm["delay_cir_multi"], arm["op_cir_multi"])]
        assert row["y1"] == arm["y_cir_multi"]


def test_the_live_multi_operation_decision_equals_the_offline_one(several) -> None:
    train, test = several
    router = CIRPolicy(estimator="paired", operations=("refresh", "replan", "rewind"), Cs=(0.1, 1.0),
                       threshold_steps=11).fit(train).to_router()
    offline = decide_rows(router, test)
    for i in range(0, len(test), 37):
        row = test.iloc[i]
        live = router.decide_features({f: row[f] for f in router.features}, int(row["delay"]))
        assert (live.recover, live.operation, live.blocked_by) == (
            offline["recover"].iloc[i], offline["operation"].iloc[i], offline["blocked_by"].iloc[i])
        assert live.utility == offline["utility"].iloc[i]
        assert set(live.utilities) == {"refresh", "replan", "rewind"}
