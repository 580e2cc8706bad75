"""The paired table: its columns, reading and validation.

One row per task x condition x delay x operation (DESIGN.md). It is the input of
every statistics and policy command, so bad input is caught here, once, with an
error that names the column or value.

Columns:

=================  ===========================================================
task_id            the task (cluster for the bootstrap)
split              ALFWorld split the task came from
task_type          one of the six ALFWorld task types
agent              agent name with its settings digest
condition          clean, staleK, missing
delay              env actions between the modified observation and the decision
operation          refresh, refresh_ablated, replan, rewind
y0                 success without recovery (0/1)
y1                 success with the operation at this delay (0/1)
executed           whether the recovery ran (False: episode ended before delay)
factual_success    whether the clean, no-recovery run succeeded
prefix_match       both arms identical up to the branch point
outcome            rescue, harm, stable_success, stable_failure
f_*                features at the decision point, from the no-recovery arm
=================  ===========================================================
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cir.errors import CirError

KEY_COLUMNS = ["task_id", "condition", "delay", "operation"]
REQUIRED_COLUMNS = [
    "task_id",
    "condition",
    "delay",
    "operation",
    "y0",
    "y1",
    "executed",
    "factual_success",
    "prefix_match",
]
PAIRED_COLUMNS = [
    "task_id",
    "split",
    "task_type",
    "agent",
    "condition",
    "delay",
    "operation",
    "y0",
    "y1",
    "executed",
    "factual_success",
    "prefix_match",
    "outcome",
]
OUTCOMES = ["stable_success", "rescue", "harm", "stable_failure"]
FEATURE_PREFIX = "f_"


def outcome_of(y0: int, y1: int) -> str:
    """The paired outcome of one row."""
    if y0 and y1:
        return "stable_success"
    if y1:
        return "rescue"
    if y0:
        return "harm"
    return "stable_failure"


def add_outcome(df: pd.DataFrame) -> pd.DataFrame:
    """A copy with the derived ``outcome`` column (re)computed from y0, y1."""
    out = df.copy()
    out["outcome"] = [outcome_of(a, b) for a, b in zip(out["y0"], out["y1"], strict=True)]
    return out


def feature_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith(FEATURE_PREFIX)]


def _as_binary(df: pd.DataFrame, column: str, source: str) -> pd.Series:
    values = df[column]
    if values.dtype == bool:
        return values.astype(int)
    if values.dtype == object:
        # True == 1 in a dict, so the bool keys also cover the integers 1 and 0.
        mapped = values.map({"True": 1, "False": 0, "true": 1, "false": 0, True: 1, False: 0})
        bad = values[mapped.isna()]
    else:
        mapped = values
        bad = values[~values.isin([0, 1])]
    if len(bad):
        row = bad.index[0]
        raise CirError(
            f"{source}: column {column!r} must hold 0/1 (or true/false); "
            f"row {row} has {_plain(bad.iloc[0])!r}"
        )
    return mapped.astype(int)


def _plain(value: object) -> object:
    """A numpy scalar as the Python value (so messages say 3, not np.int64(3))."""
    return value.item() if hasattr(value, "item") else value


def validate_paired(df: pd.DataFrame, source: str = "paired table", require_features: bool = False) -> pd.DataFrame:
    """Check a paired table and return a normalised copy (ints for flags, outcome added).

    Raises :class:`CirError` naming the column or value on: an empty table, a missing
    column, a non-binary y0/y1/flag, a negative delay, or duplicate rows for the same
    task, condition, delay and operation.
    """
    if df is None or len(df) == 0:
        raise CirError(f"{source}: the paired table is empty (no rows)")
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise CirError(
            f"{source}: missing column(s) {', '.join(repr(c) for c in missing)}; "
            f"a paired table needs {', '.join(REQUIRED_COLUMNS)}"
        )
    out = df.copy()
    for column in ["y0", "y1", "executed", "factual_success", "prefix_match"]:
        out[column] = _as_binary(out, column, source)
    out["task_id"] = out["task_id"].astype(str)
    out["condition"] = out["condition"].astype(str)
    out["operation"] = out["operation"].astype(str)
    delay = pd.to_numeric(out["delay"], errors="coerce")
    if delay.isna().any() or (delay < 0).any() or (delay != delay.round()).any():
        bad = _plain(out["delay"][delay.isna() | (delay < 0) | (delay != delay.round())].iloc[0])
        raise CirError(f"{source}: column 'delay' must hold integers >= 0; found {bad!r}")
    out["delay"] = delay.astype(int)
    dup = out.duplicated(KEY_COLUMNS, keep=False)
    if dup.any():
        first = {k: _plain(v) for k, v in out.loc[dup, KEY_COLUMNS].iloc[0].to_dict().items()}
        raise CirError(
            f"{source}: duplicate rows for task_id={first['task_id']!r}, condition={first['condition']!r}, "
            f"delay={first['delay']}, operation={first['operation']!r}: "
            "each task may have one row per condition, delay and operation"
        )
    if require_features and not feature_columns(out):
        raise CirError(
            f"{source}: no feature columns (f_*); run `cir run` with this version to write them"
        )
    return add_outcome(out)


def read_paired(path: str | Path, require_features: bool = False) -> pd.DataFrame:
    """Read a ``paired.csv`` / ``.parquet`` file, or the ``paired.csv`` of a RUN_DIR."""
    path = Path(path)
    if path.is_dir():
        candidates = [path / "paired.csv", path / "paired.parquet"]
        found = [c for c in candidates if c.exists()]
        if not found:
            raise CirError(f"{path}: no paired.csv or paired.parquet in this folder")
        path = found[0]
    if not path.exists():
        raise CirError(f"{path}: no such file")
    try:
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        elif path.suffix in {".csv", ".gz"}:
            df = pd.read_csv(path)
        else:
            raise CirError(f"{path}: expected a .csv or .parquet paired table, or a RUN_DIR")
    except CirError:
        raise
    except pd.errors.EmptyDataError:
        raise CirError(f"{path}: the file is empty") from None
    except Exception as err:  # parser errors differ between engines
        raise CirError(f"{path}: cannot read as a table ({type(err).__name__}: {err})") from None
    return validate_paired(df, source=str(path), require_features=require_features)
