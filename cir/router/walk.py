"""The sequential walk: a policy's decisions over the (arm x delay) cells of a paired table.

One *arm* is a (task, condition) pair: the no-recovery continuation every delay shares;
its *cells* are the candidate delays. A policy walks the cells in order and recovers at
the first cell where its rule fires, at most once, with the operation it chooses there;
an arm that already ended before a delay (``executed = 0``) keeps its no-recovery outcome.
Fitting (:mod:`cir.router.policy`) and the held-out evaluation (:mod:`cir.router.evaluation`)
walk every policy this way, on the precomputed branches of every operation.

A table of ``--samples`` (:mod:`cir.pairs.samples`) is walked in *expected* outcomes: the
arm's outcome without recovery is the ``p0_hat`` of its first cell, recovering at a cell is
worth that plus the cell's ``p1_hat - p0_hat``, and a clean harm is a drop in the chance of
success (the models are fitted on soft labels: :func:`model_labels`). With one draw these are
the 0/1 outcomes, and the walk is the one above.

The *decision cells* are the (arm, delay) cells where every operation's recovery ran
(``executed = 1``) and matched its arm up to the branch point (``prefix_match = 1``):
a cell whose arm had already ended is not a decision a policy could make. Their features
are the same for every operation (computed on the no-recovery arm); their outcomes ``y1``
are one per operation.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cir.episode.extractor import FeatureExtractor
from cir.families.registry import resolve_extractor
from cir.pairs.paired import feature_columns
from cir.pairs.samples import has_samples
from cir.router.rule import Estimator, gates_pass, split_model_name
from cir.util.errors import CirError, CirValueError
from cir.util.memo import memoized

# Status of one cell of the walk.
DECIDE, ENDED, MISSING = 0, 1, 2


@dataclass
class Cells:
    """The cells of a paired table for some operations: arms x delays (x operations)."""

    arms: pd.DataFrame  # task_id, condition, y0
    delays: tuple[int, ...]
    operations: tuple[str, ...]
    status: np.ndarray  # (arms, delays): DECIDE / ENDED / MISSING
    y1: np.ndarray  # (arms, delays, operations)
    row: np.ndarray  # (arms, delays): index into the decision-cell table, -1 where none
    decisions: pd.DataFrame  # the decision cells: features, y0, and y1_<operation>
    meta: dict[str, int] = field(default_factory=dict)
    #: a table of --samples: outcomes are expected ones (floats; see :func:`build_cells`)
    expected: bool = False

    def copy(self) -> Cells:
        """A copy whose tables and arrays are its own."""
        return Cells(self.arms.copy(), self.delays, self.operations, self.status.copy(), self.y1.copy(),
                     self.row.copy(), self.decisions.copy(), dict(self.meta), self.expected)

    @functools.cached_property
    def clean(self) -> np.ndarray:  # read by every walk of a threshold search: computed once
        return (self.arms["condition"] == "clean").to_numpy()

    @functools.cached_property
    def y0(self) -> np.ndarray:
        return self.arms["y0"].to_numpy(dtype=float if self.expected else int)

    def delay_ok(self, d_min: int) -> np.ndarray:
        """(1, delays): which candidate delays are at least ``d_min``."""
        return np.asarray(self.delays)[None, :] >= d_min

    def spread(self, cell_values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per-decision-cell values onto the (arms, delays[, operations]) array (NaN where not
        decidable; -1 for the integer ``choice``)."""
        out = {}
        has = self.row >= 0
        for name, values in cell_values.items():
            values = np.asarray(values)
            fill = -1 if values.dtype.kind in "iu" else np.nan
            a = np.full(self.row.shape + values.shape[1:], fill, dtype=values.dtype if fill == -1 else float)
            a[has] = values[self.row[has]]
            out[name] = a
        return out

    def outcome_if_chosen(self, choice: np.ndarray) -> np.ndarray:
        """(arms, delays): y1 of the operation chosen at each cell (0 where none is chosen)."""
        safe = np.clip(choice, 0, len(self.operations) - 1)
        return np.take_along_axis(self.y1, safe[..., None], axis=-1)[..., 0]

    def rule_fires(self, estimator: Estimator, g: dict[str, np.ndarray],
                   thresholds: dict[str, float | None], d_min: int) -> np.ndarray:
        """Where the CIR rule fires, given scores ``g`` spread on the cells."""
        return self.delay_ok(d_min) & gates_pass(estimator, g, thresholds)


def model_labels(cells: pd.DataFrame, name: str) -> np.ndarray:
    """What model ``name`` predicts, at each decision cell: ``p_err`` the condition is not
    clean, ``p0`` y0, ``p1[m]`` y1 of ``m``, ``p_rescue[m]`` / ``p_harm[m]`` the row of ``m``
    is a rescue / a harm. In a table of ``--samples`` these are soft labels in [0, 1]:
    ``p0_hat``, ``p1_hat`` and the positive and negative parts of ``p1_hat - p0_hat``."""
    base, op = split_model_name(name)
    if base == "p_err":
        return (cells["condition"] != "clean").to_numpy(dtype=int)
    if has_samples(cells):  # soft labels from K draws (module docstring)
        p0 = cells["p0_hat"].to_numpy(dtype=float)
        if base == "p0":
            return p0
        p1 = cells[f"y1_{op}"].to_numpy(dtype=float)
        soft = {"p1": p1, "p_rescue": np.maximum(p1 - p0, 0.0), "p_harm": np.maximum(p0 - p1, 0.0)}
        if base not in soft:
            raise ValueError(f"model_labels: unknown model {name!r}")
        return soft[base]
    y0 = cells["y0"].to_numpy(dtype=int)
    if base == "p0":
        return y0
    y1 = cells[f"y1_{op}"].to_numpy(dtype=int)
    labels = {"p1": y1, "p_rescue": (y0 == 0) & (y1 == 1), "p_harm": (y0 == 1) & (y1 == 0)}
    if base not in labels:
        raise CirValueError(f"model_labels: unknown model {name!r}")
    return labels[base].astype(int)


def check_features(df: pd.DataFrame, source: str, names: list[str] | None = None,
                   extractor: FeatureExtractor | None = None) -> list[str]:
    """The feature columns to use; CirError if missing, not the ``extractor``'s (default
    ALFWorld's) or not finite numbers."""
    have = feature_columns(df)
    if not have:
        raise CirError(f"{source}: no feature columns (f_*); a paired table from `cir run` has them")
    if names is None:
        known = resolve_extractor(extractor)
        unknown = [c for c in have if c not in known.features]
        if unknown:
            raise CirError(f"{source}: unknown feature column {unknown[0]!r}: not a feature of the "
                           f"{known.name!r} extractor, so a router could not compute it live (the "
                           "table of another environment family? give its extractor: --family NAME or "
                           "MODULE:ATTR, CIRPolicy(extractor=...))")
        names = have
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise CirError(f"{source}: missing feature column {missing[0]!r} that the router uses")
    for c in names:
        values = pd.to_numeric(df[c], errors="coerce")
        if values.isna().any() or not np.isfinite(values.to_numpy(dtype=float)).all():
            raise CirError(f"{source}: feature column {c!r} must hold finite numbers; "
                           f"found {df[c][values.isna() | ~np.isfinite(values)].iloc[0]!r}")
    return list(names)


def _check_operations(df: pd.DataFrame, delays: tuple[int, ...], operations: tuple[str, ...],
                      source: str) -> None:
    found = set(df["operation"])
    for op in operations:
        if op not in found:
            raise CirError(f"{source}: no rows with operation {op!r} (found {', '.join(sorted(found))})")
    sub = df[df["operation"].isin(operations) & df["delay"].isin(delays)]
    if sub.empty:
        raise CirError(f"{source}: no {'/'.join(map(repr, operations))} rows at the candidate delays "
                       f"{','.join(map(str, delays))} (found delays "
                       f"{','.join(map(str, sorted(set(df['delay']))))})")
    sub = df[df["operation"].isin(operations)]
    y0 = sub.groupby(["task_id", "condition"], sort=True)["y0"].agg(["min", "max"])
    if (y0["min"] != y0["max"]).any():
        bad = y0.index[(y0["min"] != y0["max"]).to_numpy()][0]
        raise CirError(f"{source}: task {bad[0]!r}, condition {bad[1]!r} has different y0 across "
                       "delays or operations; the no-recovery arm is shared by all of them")


@memoized(ignore=("source",))  # every policy and oracle walks the same cells (cir.util.memo)
def build_cells(df: pd.DataFrame, delays: tuple[int, ...], operations: tuple[str, ...] | str,
                source: str) -> Cells:
    """Arrange the rows of the operations into arms x candidate delays (x operations).

    A cell is *decidable* when every operation's row exists, ran (``executed``) and passed
    the prefix check; *ended* when a row says the arm ended before that delay (the walk
    stops there and keeps y0); *missing* otherwise (the walk skips it).
    """
    operations = (operations,) if isinstance(operations, str) else tuple(operations)
    _check_operations(df, delays, operations, source)
    df = df.reset_index(drop=True)
    arms = (df[df["operation"].isin(operations)].groupby(["task_id", "condition"], sort=True)["y0"]
            .min().reset_index())
    index = {key: i for i, key in enumerate(zip(arms["task_id"], arms["condition"], strict=True))}
    n, m, k = len(arms), len(delays), len(operations)
    col = {d: j for j, d in enumerate(delays)}
    present = np.zeros((n, m, k), dtype=bool)
    ok = np.zeros((n, m, k), dtype=bool)
    ended = np.zeros((n, m), dtype=bool)
    expected = has_samples(df)
    y1 = np.zeros((n, m, k), dtype=float if expected else int)
    p0 = np.zeros((n, m))  # a sampled table's p0_hat of each cell
    first: dict[tuple[int, int], int] = {}  # the row whose features a decision cell carries
    for o, op in enumerate(operations):
        sub = df[(df["operation"] == op) & df["delay"].isin(delays)]
        ei = np.array([index[key] for key in zip(sub["task_id"], sub["condition"], strict=True)], dtype=int)
        dj = np.array([col[d] for d in sub["delay"]], dtype=int)
        executed = sub["executed"].to_numpy() == 1
        present[ei, dj, o] = True
        ok[ei, dj, o] = executed & (sub["prefix_match"].to_numpy() == 1)
        ended[ei[~executed], dj[~executed]] = True
        y1[ei, dj, o] = sub["p1_hat" if expected else "y1"].to_numpy()
        if expected:
            p0[ei, dj] = sub["p0_hat"].to_numpy()
        if o == 0:
            first = {(e, d): i for e, d, i in zip(ei, dj, sub.index, strict=True)}
    decidable = ok.all(axis=-1) & ~ended
    status = np.where(ended, ENDED, np.where(decidable, DECIDE, MISSING))
    y1 = np.where(decidable[..., None], y1, 0)
    cell_y1 = y1
    if expected:
        arms["y0"], y1 = _expected_walk(p0, y1, present.any(axis=-1))
    # the decision cells in the table's own row order (the fits see the rows as before)
    where = sorted(((i, e, d) for (e, d), i in first.items() if decidable[e, d]))
    row = np.full((n, m), -1, dtype=int)
    for r, (_, e, d) in enumerate(where):
        row[e, d] = r
    decisions = df.loc[[i for i, _, _ in where]].reset_index(drop=True)
    where = np.array([(e, d) for _, e, d in where], dtype=int).reshape(-1, 2)
    for o, op in enumerate(operations):
        decisions[f"y1_{op}"] = cell_y1[where[:, 0], where[:, 1], o] if len(where) else np.zeros(0, dtype=int)
    meta = {"arms": n, "tasks": int(arms["task_id"].nunique()), "cells": int(decidable.sum()),
            "ended_cells": int(ended.sum()),
            "prefix_mismatch_cells": int((present & ~ok).any(axis=-1)[~ended].sum())}
    return Cells(arms, tuple(delays), operations, status, y1, row, decisions, meta, expected)


def _expected_walk(p0: np.ndarray, p1: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A sampled table's walk in expected outcomes: each arm's outcome without recovery is the
    ``p0_hat`` of its first cell, and recovering at a cell is worth that plus the cell's own
    expected gain, ``p1_hat - p0_hat`` (both estimated from the same state, so the arm's drift
    between cells, which is zero in expectation, adds no noise). Returns (the arms' outcomes
    without recovery, the (arms, delays, operations) outcomes of recovering)."""
    first = np.argmax(present, axis=1)
    never = np.where(present.any(axis=1), p0[np.arange(len(p0)), first], 0.0)
    return never, never[:, None, None] + (p1 - p0[..., None])


def walk(cells: Cells, fire: np.ndarray, y1: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the sequential policy: ``fire`` (..., arms, delays) says where the rule fires.

    ``y1`` (arms, delays) is the outcome of recovering at each cell with the operation the
    policy would use there (default: the cells' only operation). Returns (outcome,
    intervened, delay index or -1), each shaped like ``fire[..., 0]``. A cell fires only if
    decidable; the walk stops at the first firing cell, and the first ended cell ends it
    (later cells of an ended arm are ended too).
    """
    if y1 is None:
        if len(cells.operations) != 1:
            raise CirValueError("walk: give y1 (the chosen operation's outcomes) when the cells have several")
        y1 = cells.y1[..., 0]
    decidable = cells.status == DECIDE
    ended = cells.status == ENDED
    allowed = decidable & (np.cumsum(ended, axis=1) == 0)  # cells before the first ended cell
    outcome = np.broadcast_to(cells.y0, fire.shape[:-1]).copy()
    decided = np.zeros(fire.shape[:-1], dtype=bool)
    first = np.full(fire.shape[:-1], -1)
    for j in range(fire.shape[-1]):  # few delays: one vectorised pass each
        f = fire[..., j] & allowed[:, j] & ~decided
        outcome[f] = np.broadcast_to(y1[:, j], f.shape)[f]
        first[f] = j
        decided |= f
    return outcome, decided, first


def summarize(cells: Cells, outcome: np.ndarray, intervened: np.ndarray) -> dict[str, Any]:
    """Objective and constraint of a policy's walk (paper, eq. 4), as counts and rates."""
    clean = cells.clean
    y0 = cells.y0
    err = (~clean).astype(np.int64)
    if cells.expected:  # expected outcomes: a clean harm is a drop in the chance of success
        gain = outcome @ err - float(y0 @ err)
        harm = np.maximum(y0 - outcome, 0.0) @ clean.astype(float)
    else:
        gain = outcome.astype(np.int64) @ err - int(y0 @ err)
        harm = (1 - outcome.astype(np.int64)) @ (y0 * clean).astype(np.int64)
    n_err, n_clean = int((~clean).sum()), int(clean.sum())
    return {
        "gain_count": gain, "clean_harm_count": harm, "interventions": intervened.sum(axis=-1, dtype=np.int64),
        "net_gain": gain / max(n_err, 1), "clean_harm": harm / max(n_clean, 1),
        "intervention_rate": intervened.sum(axis=-1) / max(len(y0), 1),
        "n_err": n_err, "n_clean": n_clean,
    }
