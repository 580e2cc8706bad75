"""The task-level cluster bootstrap (paper, appendix A).

The unit of inference is the task: every condition, delay and operation of a task
shares its agent, its start state and its factual run, so rows of a task are not
independent. Intervals therefore resample tasks with replacement and keep all rows of
a task together. The bootstrap is vectorised: per-task sums go into a (tasks x groups)
matrix and each resample is a row of task weights, so 10,000 resamples cost a few
matrix products, not a Python loop.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from cir.episode.protocol import DEFAULT_LEVEL
from cir.util.errors import CirError, CirValueError

# Upper bound on resamples x tasks held in memory at once.
CHUNK_CELLS = 4_000_000


def check_resamples(resamples: int, level: float) -> None:
    if int(resamples) != resamples or resamples < 1:
        raise CirError(f"resamples must be a positive integer; got {resamples!r}")
    if not 0 < level < 1:
        raise CirError(f"confidence level must be between 0 and 1; got {level!r}")


def task_weights(n_tasks: int, resamples: int, seed: int | Sequence[int]) -> Iterator[np.ndarray]:
    """Chunks of bootstrap weights: row b holds how often each task is drawn in resample b.

    Drawing ``n_tasks`` task indices with replacement and counting them (bincount)
    is the multinomial resample of tasks; chunking bounds the memory.
    """
    if n_tasks < 1:
        raise CirError("the cluster bootstrap needs at least one task")
    rng = np.random.default_rng(seed)
    chunk = max(1, min(resamples, CHUNK_CELLS // n_tasks))
    done = 0
    while done < resamples:
        c = min(chunk, resamples - done)
        idx = rng.integers(0, n_tasks, size=(c, n_tasks))
        idx += (np.arange(c) * n_tasks)[:, None]
        yield np.bincount(idx.ravel(), minlength=c * n_tasks).reshape(c, n_tasks).astype(float)
        done += c


def bootstrap_ratios(
    num: np.ndarray, den: np.ndarray, resamples: int, seed: int | Sequence[int]
) -> np.ndarray:
    """Cluster-bootstrap replicates of ``sum(num) / sum(den)`` for every column.

    ``num`` and ``den`` are (tasks x columns) per-task sums (e.g. of y1 - y0 and of
    row counts). Returns a (resamples x columns) array; a replicate in which a column
    drew none of its tasks is NaN (``percentile_ci`` ignores those).
    """
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    if num.shape != den.shape or num.ndim != 2:
        raise CirValueError(f"bootstrap: num and den must be 2-D arrays of the same shape (tasks x columns), got {np.shape(num)} and {np.shape(den)}")
    k = num.shape[1]
    both = np.hstack([num, den])  # one matrix product per chunk for numerator and denominator
    out = np.empty((resamples, k))
    start = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        for w in task_weights(num.shape[0], resamples, seed):
            sums = w @ both
            out[start : start + len(w)] = sums[:, :k] / sums[:, k:]
            start += len(w)
    return out


def percentile_ci(replicates: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap replicates along axis 0 (NaN replicates ignored)."""
    alpha = (1 - level) / 2
    reps = np.asarray(replicates, dtype=float)
    if reps.ndim == 1:
        reps = reps[:, None]
    low = np.full(reps.shape[1], np.nan)
    high = np.full(reps.shape[1], np.nan)
    nan = np.isnan(reps)
    if not nan.any():  # the common case; np.percentile is much faster than np.nanpercentile
        q = np.percentile(reps, [100 * alpha, 100 * (1 - alpha)], axis=0)
        return q[0], q[1]
    ok = ~np.all(nan, axis=0)
    if ok.any():
        q = np.nanpercentile(reps[:, ok], [100 * alpha, 100 * (1 - alpha)], axis=0)
        low[ok], high[ok] = q[0], q[1]
    return low, high


def task_group_sums(
    tcodes: np.ndarray, gcodes: np.ndarray, values: np.ndarray, n_tasks: int, n_groups: int
) -> np.ndarray:
    """(tasks x groups) matrix of the sums of ``values`` per task and group."""
    flat = tcodes * n_groups + gcodes
    return np.bincount(flat, weights=values, minlength=n_tasks * n_groups).reshape(n_tasks, n_groups)



def two_stage_ratios(tcodes: np.ndarray, gcodes: np.ndarray, probabilities: dict[str, np.ndarray],
                     n_tasks: int, n_groups: int, resamples: int, seed: int | Sequence[int]) -> np.ndarray:
    """Bootstrap replicates of each group's mean effect that resample the tasks (the same task
    weights as :func:`bootstrap_ratios` with this seed) and, within every row, its K draw pairs.

    A row of ``k`` draw pairs with rescue share ``p_rescue`` and harm share ``p_harm``
    (:func:`cir.pairs.samples.outcome_probabilities`) is redrawn as ``k`` pairs from those shares
    (rescues binomial, then harms among the rest), so its effect ``(rescues - harms) / k`` varies
    as a new set of draws would; a row of one draw (``k = 1``) is redrawn as itself. Returns a
    (resamples x groups) array.
    """
    k = probabilities["k"].astype(np.int64)
    rescue = np.clip(probabilities["p_rescue"], 0.0, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        harm_rest = np.where(rescue < 1, np.clip(probabilities["p_harm"] / (1 - rescue), 0.0, 1.0), 0.0)
    rows = len(k)
    onehot = np.zeros((rows, n_groups))
    onehot[np.arange(rows), gcodes] = 1.0
    den = task_group_sums(tcodes, gcodes, np.ones(rows), n_tasks, n_groups)
    draws = np.random.default_rng([*np.atleast_1d(seed).tolist(), 2])  # apart from the task draws
    out = np.empty((resamples, n_groups))
    start = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        for w in task_weights(n_tasks, resamples, seed):
            for part in np.array_split(np.arange(len(w)), max(1, -(-len(w) * rows // CHUNK_CELLS))):
                c = len(part)
                r = draws.binomial(np.broadcast_to(k, (c, rows)), np.broadcast_to(rescue, (c, rows)))
                h = draws.binomial(k[None, :] - r, np.broadcast_to(harm_rest, (c, rows)))
                effect = (r - h) / k[None, :]
                num = (w[part][:, tcodes] * effect) @ onehot
                out[start: start + c] = num / (w[part] @ den)
                start += c
    return out
