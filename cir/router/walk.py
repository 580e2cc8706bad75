"""The sequential walk: a policy's decisions over the (episode x delay) cells of a paired table.

One *episode* is a (task, condition) pair; its *cells* are the candidate delays. A
policy walks the cells in order and refreshes at the first cell where its rule fires,
at most once; a task that already ended before a delay (``executed = 0``) keeps its
no-recovery outcome. Fitting (:mod:`cir.router.policy`) and the held-out evaluation
(:mod:`cir.router.evaluation`) walk every policy this way, on the precomputed branches.

The *decision cells* are the rows of the chosen operation at a candidate delay whose
recovery actually ran (``executed = 1``) and whose arms matched up to the branch
point (``prefix_match = 1``): a cell whose episode had already ended is not a decision
a policy could make.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cir.episode.extractor import FeatureExtractor, resolve_extractor
from cir.pairs.paired import feature_columns
from cir.router.rule import passes
from cir.util.errors import CirError

# Status of one cell of the walk.
DECIDE, ENDED, MISSING = 0, 1, 2


@dataclass
class Grid:
    """The cells of a paired table for one operation, shaped (episodes, delays)."""

    episodes: pd.DataFrame  # task_id, condition, y0
    delays: tuple[int, ...]
    status: np.ndarray  # DECIDE / ENDED / MISSING
    y1: np.ndarray
    row: np.ndarray  # index into the decision-cell table, -1 where none
    cells: pd.DataFrame  # the decision cells (rows with status DECIDE)
    meta: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> np.ndarray:
        return (self.episodes["condition"] == "clean").to_numpy()

    @property
    def y0(self) -> np.ndarray:
        return self.episodes["y0"].to_numpy(dtype=int)

    def delay_ok(self, d_min: int) -> np.ndarray:
        """(1, delays): which candidate delays are at least ``d_min``."""
        return np.asarray(self.delays)[None, :] >= d_min

    def spread(self, cell_values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per-decision-cell values onto the (episodes, delays) grid (NaN where not decidable)."""
        out = {}
        has = self.row >= 0
        for name, values in cell_values.items():
            a = np.full(self.row.shape, np.nan)
            a[has] = values[self.row[has]]
            out[name] = a
        return out

    def rule_fires(self, g: dict[str, np.ndarray], thresholds: dict[str, float | None],
                   d_min: int) -> np.ndarray:
        """Where the CIR rule fires, given scores ``g`` spread on the grid."""
        with np.errstate(invalid="ignore"):
            return (self.delay_ok(d_min) & passes(g["p_err"], thresholds["alpha"])
                    & passes(g["p_fail"], thresholds["beta"]) & passes(g["utility"], thresholds["gamma"]))


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
                           f"{known.name!r} extractor, so a router could not compute it live")
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


def build_grid(df: pd.DataFrame, delays: tuple[int, ...], operation: str, source: str) -> Grid:
    """Arrange the rows of one operation into episodes x candidate delays.

    A cell is *decidable* when its row exists, ran (``executed``) and passed the prefix
    check; *ended* when its row says the episode ended before that delay (the walk stops
    there and keeps y0); *missing* otherwise (the walk skips it).
    """
    if operation not in set(df["operation"]):
        raise CirError(f"{source}: no rows with operation {operation!r} "
                       f"(found {', '.join(sorted(set(df['operation'])))})")
    sub = df[(df["operation"] == operation) & (df["delay"].isin(delays))]
    if sub.empty:
        raise CirError(f"{source}: no {operation!r} rows at the candidate delays "
                       f"{','.join(map(str, delays))} (found delays "
                       f"{','.join(map(str, sorted(set(df['delay']))))})")
    all_op = df[df["operation"] == operation]
    y0 = all_op.groupby(["task_id", "condition"], sort=True)["y0"].agg(["min", "max"])
    if (y0["min"] != y0["max"]).any():
        bad = y0.index[(y0["min"] != y0["max"]).to_numpy()][0]
        raise CirError(f"{source}: task {bad[0]!r}, condition {bad[1]!r} has different y0 across "
                       "delays; the no-recovery arm is shared by all delays")
    episodes = y0["min"].rename("y0").reset_index()
    index = {key: i for i, key in enumerate(zip(episodes["task_id"], episodes["condition"], strict=True))}
    n, m = len(episodes), len(delays)
    status = np.full((n, m), MISSING, dtype=int)
    y1 = np.zeros((n, m), dtype=int)
    row = np.full((n, m), -1, dtype=int)
    col = {d: j for j, d in enumerate(delays)}
    ok = (sub["executed"] == 1) & (sub["prefix_match"] == 1)
    cells = sub[ok].reset_index(drop=True)
    ei = np.array([index[k] for k in zip(sub["task_id"], sub["condition"], strict=True)], dtype=int)
    dj = np.array([col[d] for d in sub["delay"]], dtype=int)
    executed = sub["executed"].to_numpy() == 1
    prefix = sub["prefix_match"].to_numpy() == 1
    status[ei[~executed], dj[~executed]] = ENDED
    sel = executed & prefix
    status[ei[sel], dj[sel]] = DECIDE
    y1[ei[sel], dj[sel]] = sub["y1"].to_numpy()[sel]
    row[ei[sel], dj[sel]] = np.arange(int(sel.sum()))
    meta = {"episodes": n, "tasks": int(episodes["task_id"].nunique()), "cells": int(sel.sum()),
            "ended_cells": int((~executed).sum()), "prefix_mismatch_cells": int((executed & ~prefix).sum())}
    return Grid(episodes, tuple(delays), status, y1, row, cells, meta)


def walk(grid: Grid, fire: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the sequential policy: ``fire`` (..., episodes, delays) says where the rule fires.

    Returns (outcome, intervened, delay index or -1), each shaped like ``fire[..., 0]``.
    A cell fires only if decidable; the walk stops at the first firing cell, and the
    first ended cell ends it (later cells of an ended episode are ended too).
    """
    decidable = grid.status == DECIDE
    ended = grid.status == ENDED
    # cells before the first ended cell
    allowed = decidable & (np.cumsum(ended, axis=1) == 0)
    outcome = np.broadcast_to(grid.y0, fire.shape[:-1]).copy()
    decided = np.zeros(fire.shape[:-1], dtype=bool)
    first = np.full(fire.shape[:-1], -1)
    for j in range(fire.shape[-1]):  # few delays: one vectorised pass each
        f = fire[..., j] & allowed[:, j] & ~decided
        outcome[f] = np.broadcast_to(grid.y1[:, j], f.shape)[f]
        first[f] = j
        decided |= f
    return outcome, decided, first


def summarize(grid: Grid, outcome: np.ndarray, intervened: np.ndarray) -> dict[str, Any]:
    """Objective and constraint of a policy's walk (paper, eq. 4), as counts and rates."""
    clean = grid.clean
    y0 = grid.y0
    err = (~clean).astype(np.int64)
    gain = outcome.astype(np.int64) @ err - int(y0 @ err)
    harm = (1 - outcome.astype(np.int64)) @ (y0 * clean).astype(np.int64)
    n_err, n_clean = int((~clean).sum()), int(clean.sum())
    return {
        "gain_count": gain, "clean_harm_count": harm, "interventions": intervened.sum(axis=-1, dtype=np.int64),
        "net_gain": gain / max(n_err, 1), "clean_harm": harm / max(n_clean, 1),
        "intervention_rate": intervened.sum(axis=-1) / max(len(y0), 1),
        "n_err": n_err, "n_clean": n_clean,
    }
