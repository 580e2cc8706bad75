"""What each perturbed arm showed: the paired table's ``shown`` column, and where it is absent.

The replayer writes ``shown`` on every row (:func:`cir.episode.perturb.shown_kind`: ``true``,
``anomalous`` or ``looks_right``, by the family's ``anomalous`` test; ``clean`` rows ``true``).
A run folder written before the column existed still reads as it was (its table is not
changed); a reader that needs the split derives it here from the run's episode store, where each
no-recovery arm holds its perturbed step (the step of the ``perturb:<condition>`` event: its
action, true observation and shown text), with the family the run recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from cir.episode.perturb import SHOWN_TRUE, Anomalous, shown_kind
from cir.families.registry import get_family
from cir.pairs.episode_record import ARM
from cir.pairs.paired import SHOWN, CheckedRun, read_run
from cir.pairs.store import StoreScan, read_records
from cir.util.errors import CirError

ARM_SHOWN_COLUMNS = ["task_id", "condition", SHOWN]


def arm_shown(run_dir: str | Path, anomalous: Anomalous | None, scan: StoreScan | None = None) -> pd.DataFrame:
    """Per perturbed no-recovery arm of a run's episode store: what its perturbed observation
    showed (``task_id, condition, shown``), by ``anomalous`` (a family's test; None: only the
    missing text is anomalous). ``scan``: the store's members a reader already checked."""
    rows = []
    for rec in read_records(run_dir, scan):
        if rec.get("kind") != "episode" or rec.get("role") != ARM or rec.get("sample") or not rec.get("transcript"):
            continue
        condition = str(rec["condition"])
        event = f"perturb:{condition}"
        step = next((s for s in rec["transcript"]["steps"] if event in (s.get("events") or ())), None)
        if step is None:
            continue
        rows.append({"task_id": str(rec["task_id"]), "condition": condition,
                     SHOWN: shown_kind(step.get("action"), step.get("observation"), step.get("shown"), anomalous)})
    return pd.DataFrame(rows, columns=ARM_SHOWN_COLUMNS)


def with_shown(run: CheckedRun | str | Path, anomalous: Anomalous | None | Callable[..., Any] = None) -> pd.DataFrame:
    """A run's paired table with its ``shown`` column: the table's own, or, for a run written
    before the column existed, derived from its episode store (:func:`arm_shown`) with
    ``anomalous`` (default: the test of the family the run recorded). A perturbed arm the store
    does not show is a CirError naming it."""
    checked = run if isinstance(run, CheckedRun) else read_run(run)
    table = checked.table
    if SHOWN in table.columns:
        return table
    if anomalous is None and checked.record is not None:
        anomalous = get_family(checked.record.settings.family).anomalous
    arms = arm_shown(checked.run_dir, anomalous, checked.scan)
    out = table.merge(arms, on=["task_id", "condition"], how="left", validate="m:1")
    out.loc[out["condition"] == "clean", SHOWN] = SHOWN_TRUE
    lost = out[SHOWN].isna()
    if lost.any():
        row = out[lost].iloc[0]
        raise CirError(f"{checked.run_dir}: the {row['condition']} arm of task {row['task_id']!r} has no perturbed "
                       "step in the episode store, so what it showed cannot be told")
    out.attrs = dict(table.attrs)
    return out
