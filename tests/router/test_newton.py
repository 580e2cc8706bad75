"""Many logistic regressions at once (cir.router.newton) against scikit-learn fitting each, and the
C search built on it against the loop over scikit-learn's fits it replaced."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

from cir.episode.protocol import PAIRED_CS
from cir.router.newton import fit_many
from cir.router.policy import choose_C, fit_linear_model, fold_models, is_soft
from cir.util.memo import forget

CS = np.asarray(PAIRED_CS)


def _problem(rng: np.random.Generator, soft: bool = False) -> tuple[np.ndarray, np.ndarray]:
    n, p = int(rng.integers(40, 600)), int(rng.integers(2, 12))
    X = rng.normal(size=(n, p)) * rng.uniform(0.1, 10, size=p)
    X[:, 0] = 0.0  # a constant feature, as a cohort can have
    logit = X @ rng.normal(size=p) / np.sqrt(p) - rng.uniform(0, 3)
    if soft:
        return X, np.round(1 / (1 + np.exp(-logit)) * (rng.random(n) < 0.7), 3)
    return X, (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)


@pytest.mark.parametrize("soft", [False, True])
def test_each_fit_is_scikit_learns_to_rounding(soft: bool) -> None:
    rng = np.random.default_rng(7 + soft)
    solved_count = total = 0
    for _ in range(12):
        X, y = _problem(rng, soft)
        Z = StandardScaler().fit_transform(X)
        if soft:  # as fit_linear_model: each row once a success (weight y), once not (1 - y)
            Z, target, weight = np.vstack([Z, Z]), np.r_[np.ones(len(y)), np.zeros(len(y))], np.r_[y, 1 - y]
        else:
            target, weight = y, None
        coef, solved = fit_many(Z, target, CS, weight, max_iter=1000)
        for i, C in enumerate(CS):
            ref = LogisticRegression(C=C, solver="newton-cholesky", max_iter=1000).fit(Z, target, sample_weight=weight)
            expected = np.r_[ref.coef_[0], ref.intercept_[0]]
            total += 1
            if solved[i]:
                solved_count += 1
                np.testing.assert_allclose(coef[i], expected, rtol=1e-10, atol=1e-12)
    assert solved_count >= 0.9 * total  # the fast path is the common one


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_problem_it_cannot_follow_is_left_to_scikit_learn() -> None:
    X, y = _problem(np.random.default_rng(3))
    Z = StandardScaler().fit_transform(X)
    _, solved = fit_many(Z, y, CS, max_iter=1)  # one Newton step converges nowhere
    assert not solved.any()
    forget()
    models = fold_models(X, y, tuple(CS), max_iter=1)  # so scikit-learn fits every one (and warns)
    for C, model in zip(CS, models, strict=True):
        assert np.array_equal(model.coef, fit_linear_model.uncached(X, y, C=C, max_iter=1).coef)


def _choose_C_by_loop(X, y, groups, Cs, folds, seed, max_iter=1000) -> float:
    """The C search as it was: scikit-learn fits every C on every fold, one by one."""
    soft = is_soft(y)
    y = np.asarray(y, dtype=float if soft else int)
    n_groups = len(np.unique(groups))
    if len(np.unique(y)) < 2 or n_groups < 2:
        return float(min(Cs))
    splits = list(GroupKFold(n_splits=min(folds, n_groups), shuffle=True, random_state=seed).split(X, y, groups))
    losses = []
    for C in Cs:
        pred = np.zeros(len(y))
        for tr, te in splits:
            pred[te] = fit_linear_model.uncached(X[tr], y[tr], C=C, max_iter=max_iter).predict_proba(X[te])
        pred = np.clip(pred, 1e-12, 1 - 1e-12)
        losses.append(float(-np.mean(y * np.log(pred) + (1 - y) * np.log(1 - pred))) if soft
                      else log_loss(y, pred, labels=[0, 1]))
    best = min(losses)
    return float(min(C for C, loss in zip(Cs, losses, strict=True) if loss <= best + 1e-12))


@pytest.mark.parametrize("seed", range(6))
def test_the_chosen_C_is_the_one_the_loop_chose(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    X, y = _problem(rng, soft=seed % 3 == 2)
    if seed % 3 == 1:  # a rare label: some training folds hold one class
        y = np.zeros(len(y), dtype=int)
        y[rng.choice(len(y), 3, replace=False)] = 1
    groups = rng.integers(0, max(5, len(y) // 6), size=len(y))
    forget()
    assert choose_C(X, y, groups, PAIRED_CS, 5, seed) == _choose_C_by_loop(X, y, groups, PAIRED_CS, 5, seed)
