"""Tests on paired outcomes: the task-level sign-flip test and McNemar's exact test.

The sign-flip test is the inference the paper reports: under the null of no effect
each task's difference is as likely to have either sign, so whole-task differences
are flipped (rows of a task stay together, as in :mod:`cir.stats.bootstrap`). McNemar's
test on the discordant pairs is a cross-check that treats rows as independent.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from cir.episode.protocol import DEFAULT_RESAMPLES, DEFAULT_SEED
from cir.stats.bootstrap import CHUNK_CELLS

# Sign-flip tests enumerate all 2**k sign patterns up to this many non-zero tasks.
MAX_EXACT_SIGN_FLIP = 20


def group_seed(seed: int, key: tuple) -> list[int]:
    """A seed for one group's test that does not depend on which other groups exist."""
    return [int(seed), zlib.crc32(repr(tuple(str(k) for k in key)).encode())]


def _signed_sums(values: np.ndarray) -> np.ndarray:
    """All 2**k sums of +/- values (k = len(values))."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def sign_flip_test(
    differences: Sequence[float] | np.ndarray,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int | Sequence[int] = DEFAULT_SEED,
    max_exact: int = MAX_EXACT_SIGN_FLIP,
) -> float:
    """Two-sided task-level sign-flip test of ``mean(differences) == 0``.

    One difference per task. Under the null of no effect each task's difference is
    as likely to have either sign, so the statistic is compared with its values over
    sign flips: all 2**k patterns when the k non-zero tasks are few (exact), else
    ``resamples`` random patterns with the (count + 1) / (resamples + 1) correction.
    """
    return sign_flip_tests([differences], resamples, seed, max_exact)[0]


def sign_flip_tests(
    columns: Sequence[Sequence[float] | np.ndarray],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int | Sequence[int] = DEFAULT_SEED,
    max_exact: int = MAX_EXACT_SIGN_FLIP,
) -> list[float]:
    """:func:`sign_flip_test` of each column, all with ``seed``. The random patterns of a test
    depend only on the seed and on how many non-zero tasks it flips, so the columns with as
    many draw them once and share them (one matrix product for all, not one each): the
    p-values are those of the tests one by one."""
    out: list[float] = [1.0] * len(columns)
    drawn: dict[int, list[tuple[int, np.ndarray, float]]] = {}  # non-zero tasks -> (column, d, bar)
    for i, column in enumerate(columns):
        d = np.asarray(column, dtype=float)
        scale = max(1.0, float(np.abs(d).sum()))
        d = d[np.abs(d) > 1e-12 * scale]
        if len(d) == 0:
            continue
        bar = abs(d.sum()) - 1e-9 * scale  # |statistic| at least the observed one, rounding aside
        if len(d) <= max_exact:
            out[i] = float(np.mean(np.abs(_signed_sums(d)) >= bar))
        else:
            drawn.setdefault(len(d), []).append((i, d, bar))
    for k, tests in drawn.items():
        chunk = max(1, min(resamples, CHUNK_CELLS // k))
        per_product = max(1, CHUNK_CELLS // chunk)  # columns per product, to bound its memory
        for start in range(0, len(tests), per_product):
            part = tests[start:start + per_product]
            D = np.column_stack([d for _, d, _ in part])
            bars = np.array([bar for _, _, bar in part])
            count = np.zeros(len(part), dtype=np.int64)
            rng = np.random.default_rng(seed)
            done = 0
            while done < resamples:
                c = min(chunk, resamples - done)
                signs = rng.integers(0, 2, size=(c, k), dtype=np.int8) * 2 - 1
                count += np.sum(np.abs(signs @ D) >= bars, axis=0)
                done += c
            for (i, _, _), n in zip(part, count, strict=True):
                out[i] = (int(n) + 1) / (resamples + 1)
    return out


def mcnemar_p(rescues: int, harms: int) -> float:
    """McNemar's exact test on the discordant pairs (statsmodels), as a cross-check.

    Rows are treated as independent pairs, which holds within one condition x delay
    x operation cell (one row per task); the sign-flip test is the task-level test.
    """
    # statsmodels takes about a second to import (measured: cir.stats.effects 0.6 s without it, 1.5 s
    # with it); only this cross-check needs it, so it loads on the first call.
    from statsmodels.stats.contingency_tables import mcnemar

    if rescues + harms == 0:
        return 1.0
    return float(mcnemar([[0, int(harms)], [int(rescues), 0]], exact=True).pvalue)
