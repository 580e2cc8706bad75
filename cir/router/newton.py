"""Many small L2 logistic regressions solved at once, step for step as scikit-learn solves one.

Choosing a paired model's ``C`` (:func:`cir.router.policy.choose_C`) fits every candidate ``C``
on every training fold of a grouped cross-validation, inside every fold of the out-of-fold
search: thousands of fits of a few hundred rows and some twenty features per study, and as many
again per replicate of the planted worlds. scikit-learn spends most of such a fit checking its
input and dispatching, not solving. Here the candidates of one training fold are solved
together, with numpy arrays that hold all of them, by the algorithm scikit-learn's
``LogisticRegression(solver="newton-cholesky")`` runs on each (``sklearn.linear_model._glm``):
from zero coefficients, Newton steps on the mean log loss plus ``1 / (2 C n)`` times the
squared weights (the intercept unpenalised), each step's length found by the same backtracking
line search (Armijo's condition, halving from 1), until the largest gradient entry and half the
squared Newton decrement are both at most ``tol``. The per-row loss, gradient and Hessian are
those of scikit-learn's half binomial loss (``sklearn/_loss/_loss.pyx.tp``) in stable forms.

So every iterate is scikit-learn's up to rounding (numpy's sums, not its loops), and the
coefficients agree to about 1e-12 (``tests/router/test_newton.py`` checks it against
scikit-learn). Where this solver could decide otherwise than scikit-learn would, it does not
decide: a problem whose convergence test or line search is within a hair of its threshold,
whose line search reaches scikit-learn's fallback (21 halvings, a step that does not descend,
the "loss around machine precision" branch), whose Hessian is singular or ill-conditioned,
whose per-row Hessian is mostly zero, or that does not converge in ``max_iter`` steps is
marked not solved, and the caller fits it with scikit-learn itself.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

#: scikit-learn's line search: step multiplier and Armijo's sufficient-decrease factor.
_BETA, _SIGMA = 0.5, 0.00048828125
#: Its ``16 * eps``, below which a loss change is rounding.
_EPS = 16 * np.finfo(np.float64).eps
#: How close to a threshold a test may come before the problem is left to scikit-learn.
_MARGIN = 1e-6
#: Hessians worse conditioned than this are left to scikit-learn (it falls back to L-BFGS).
_MAX_CONDITION = 1e12


def _loss_gradient_rows(y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the half binomial loss ``log(1 + exp(raw)) - y raw`` and its gradient
    ``expit(raw) - y`` (stable forms; scikit-learn's branches differ from them by rounding)."""
    return np.logaddexp(0.0, raw) - y * raw, expit(raw) - y


def _gradient_hessian_rows(y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the gradient and the Hessian ``expit(raw) expit(-raw)`` (positive wherever
    scikit-learn's is: its zeros, where exp underflows, decide its fallback)."""
    p = expit(raw)
    return p - y, p * expit(-raw)


class _Problems:
    """The rows of one training set and the L2 strengths of the problems solved on it."""

    def __init__(self, X: np.ndarray, y: np.ndarray, weight: np.ndarray | None, l2: np.ndarray) -> None:
        self.X = X
        self.y = y
        self.weight = weight
        self.sw_sum = float(len(y)) if weight is None else float(np.sum(weight))
        self.l2 = l2

    def _weighted(self, values: np.ndarray) -> np.ndarray:
        return values if self.weight is None else values * self.weight

    def raw(self, coef: np.ndarray) -> np.ndarray:
        """(problems, rows): the linear predictor of each problem's coefficients."""
        return coef[:, :-1] @ self.X.T + coef[:, -1:]

    def loss_gradient(self, coef: np.ndarray, raw: np.ndarray, l2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        loss_rows, grad_rows = _loss_gradient_rows(self.y, raw)
        loss = self._weighted(loss_rows).sum(axis=1) / self.sw_sum
        w = coef[:, :-1]
        loss = loss + 0.5 * l2 * np.einsum("ij,ij->i", w, w)
        g = self._weighted(grad_rows) / self.sw_sum
        grad = np.empty_like(coef)
        grad[:, :-1] = g @ self.X + l2[:, None] * w
        grad[:, -1] = g.sum(axis=1)
        return loss, grad

    def gradient_hessian(self, coef: np.ndarray, raw: np.ndarray, l2: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(gradient, Hessian, whether scikit-learn would warn of a mostly zero per-row Hessian)."""
        grad_rows, hess_rows = _gradient_hessian_rows(self.y, raw)
        g = self._weighted(grad_rows) / self.sw_sum
        h = self._weighted(hess_rows) / self.sw_sum
        weights = np.ones(h.shape[1]) if self.weight is None else self.weight
        warn = ((h <= 0) * weights).sum(axis=1) / weights.sum() > 0.25
        h = np.abs(h)
        p = self.X.shape[1]
        grad = np.empty_like(coef)
        grad[:, :-1] = g @ self.X + l2[:, None] * coef[:, :-1]
        grad[:, -1] = g.sum(axis=1)
        hess = np.empty((len(coef), p + 1, p + 1))
        hess[:, :p, :p] = (self.X.T[None, :, :] * h[:, None, :]) @ self.X
        hess[:, np.arange(p), np.arange(p)] += l2[:, None]
        xh = h @ self.X
        hess[:, :p, p] = xh
        hess[:, p, :p] = xh
        hess[:, p, p] = h.sum(axis=1)
        return grad, hess, warn


def _near(value: np.ndarray, threshold: np.ndarray | float) -> np.ndarray:
    """Whether ``value`` is within a hair of ``threshold`` (a test rounding could turn)."""
    return np.abs(value - threshold) <= _MARGIN * np.maximum(np.abs(threshold), 1e-300)


def fit_many(X: np.ndarray, y: np.ndarray, Cs: np.ndarray, sample_weight: np.ndarray | None = None,
             tol: float = 1e-4, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Fit ``LogisticRegression(C=C, solver="newton-cholesky", tol=tol, max_iter=max_iter)`` on
    ``(X, y)`` (labels 0/1; rows weighted by ``sample_weight``) for every ``C`` of ``Cs`` at once.

    Returns ``(coef, solved)``: ``coef[i]`` is the weights then the intercept of ``Cs[i]``'s fit,
    and ``solved[i]`` False where scikit-learn must fit that ``C`` itself (module docstring).
    """
    X = np.ascontiguousarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    Cs = np.asarray(Cs, dtype=float)
    problems = _Problems(X, y, None if sample_weight is None else np.asarray(sample_weight, dtype=float),
                         np.empty(0))
    l2_all = 1.0 / (Cs * problems.sw_sum)
    n = len(Cs)
    coef = np.zeros((n, X.shape[1] + 1))
    raw = problems.raw(coef)
    loss, _ = problems.loss_gradient(coef, raw, l2_all)
    running = np.ones(n, dtype=bool)  # neither converged nor left to scikit-learn
    solved = np.zeros(n, dtype=bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(running)
        if not len(idx):
            break
        l2 = l2_all[idx]
        grad, hess, warn = problems.gradient_hessian(coef[idx], raw[idx], l2)
        ok = ~warn
        with np.errstate(all="ignore"):
            eig = np.linalg.eigvalsh(hess)  # ascending; symmetric, so cond = largest / smallest
        ok &= (eig[:, 0] > 0) & (eig[:, -1] < _MAX_CONDITION * eig[:, 0])
        step = np.zeros_like(grad)
        if ok.any():
            try:
                step[ok] = np.linalg.solve(hess[ok], -grad[ok][..., None])[..., 0]
            except np.linalg.LinAlgError:
                ok[:] = False
        descent = np.einsum("ij,ij->i", grad, step)
        ok &= descent < 0
        # the line search, every problem from its own step size 1
        t = np.ones(len(idx))
        raw_step = problems.raw(step)
        accepted = np.zeros(len(idx), dtype=bool)
        new_coef, new_raw = coef[idx].copy(), raw[idx].copy()
        new_loss, new_grad = loss[idx].copy(), np.zeros_like(grad)
        for _ in range(21):
            todo = ok & ~accepted
            if not todo.any():
                break
            k = np.flatnonzero(todo)
            c_try = coef[idx[k]] + t[k, None] * step[k]
            r_try = raw[idx[k]] + t[k, None] * raw_step[k]
            l_try, g_try = problems.loss_gradient(c_try, r_try, l2[k])
            old = loss[idx[k]]
            improvement = l_try - old
            armijo = t[k] * (_SIGMA * descent[k])
            passes = improvement <= armijo
            # a loss change is known to a few ulps of the loss: too close to call, or scikit-learn's
            # branch for changes at rounding level: either way scikit-learn decides
            rounding = 64 * np.finfo(np.float64).eps * np.abs(old)
            close = np.abs(improvement - armijo) <= _MARGIN * np.abs(armijo) + rounding
            tiny = ~passes & (np.abs(improvement) <= np.abs(old * _EPS))
            ok[k] &= ~close & ~tiny
            good = ok[k] & passes
            take = k[good]
            accepted[take] = True
            new_coef[take], new_raw[take] = c_try[good], r_try[good]
            new_loss[take], new_grad[take] = l_try[good], g_try[good]
            t[k[~good]] *= _BETA
        ok &= accepted
        # scikit-learn's convergence test, on the gradient after the step and the step's decrement
        g_max = np.abs(new_grad).max(axis=1)
        decrement = 0.5 * np.einsum("ij,ijk,ik->i", step, hess, step)
        ok &= ~_near(g_max, tol) & ~_near(decrement, tol)
        done = ok & (g_max <= tol) & (decrement <= tol)
        coef[idx[ok]], raw[idx[ok]], loss[idx[ok]] = new_coef[ok], new_raw[ok], new_loss[ok]
        solved[idx[done]] = True
        running[idx[~ok | done]] = False
    return coef, solved
