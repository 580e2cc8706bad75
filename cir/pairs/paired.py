"""The paired table: its columns, reading and validation.

One row per task x condition x delay x operation (DESIGN.md). It is the input of
every statistics and policy command, so bad input is caught here, once, with an
error that names the column or value.

Columns:

=================  ===========================================================
task_id            the task (cluster for the bootstrap)
split              ALFWorld split the task came from
task_type          one of the six ALFWorld task types
agent              agent name with its params digest
condition          clean, staleK, lagK, missing
delay              env actions between the modified observation and the decision
operation          refresh, refresh_ablated, replan, rewind
y0                 success without recovery (0/1)
y1                 success with the operation at this delay (0/1)
executed           whether the recovery ran (False: episode ended before delay)
factual_success    whether the clean, no-recovery run succeeded
prefix_match       both arms identical up to the branch point
outcome            rescue, harm, stable_success, stable_failure
shown              what the arm's perturbed observation showed: true, anomalous or
                   looks_right (:func:`cir.episode.perturb.shown_kind`; clean: true;
                   absent from runs of earlier versions: :mod:`cir.pairs.shown`)
k, y0_sum, ...     with ``--samples`` above 1: draws per arm, success counts and
                   outcome probabilities (:mod:`cir.pairs.samples`)
f_*                features at the decision point, from the no-recovery arm
=================  ===========================================================

A run folder's ``paired.csv`` is derived from its episode store (:func:`paired_text`),
so :func:`read_paired` on a run folder checks the table against the store and the run
record, and only reads: a table that is missing, shorter or older than the store is derived
from the store in memory, with a note (the file is left as it is; ``cir repair RUN_DIR`` or
the same ``cir run`` rewrites it, keeping a copy); tasks of another run in the store are
refused like damage; a run that lacks tasks is refused unless partial results are asked for
(``allow_partial``); then ``df.attrs["run"]`` says how partial. A run whose env failed a restore
check is quarantined (its run.json says so) and refused whatever is asked: none of its rows can
be trusted.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cir.episode.delays import MAX_DELAY
from cir.episode.perturb import SHOWN_TRUE, SHOWN_VALUES
from cir.pairs.record import RunRecord, foreign_member
from cir.pairs.samples import check_sample_columns, has_samples
from cir.pairs.store import EPISODES, PAIRED, RUN_JSON, RunStore, StoreScan, verify_members
from cir.util.errors import CirError
from cir.util.files import check_regular
from cir.util.memo import memoized

log = logging.getLogger(__name__)

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
#: what the arm's perturbed observation showed (SHOWN_VALUES), one value per arm
SHOWN = "shown"
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


# -- the table of a run, derived from its task summaries -------------------------------------
RowSorter = Callable[[dict[str, Any]], tuple]


def row_sort_key(conditions: Sequence[str], operations: Sequence[str]) -> RowSorter:
    """Deterministic row order: task, then conditions/operations in settings order, delay."""
    cond_index = {c: i for i, c in enumerate(conditions)}
    op_index = {m: i for i, m in enumerate(operations)}

    def key(row: dict[str, Any]) -> tuple:
        return (str(row["task_id"]), cond_index.get(row["condition"], len(cond_index)),
                row["condition"], int(row["delay"]), op_index.get(row["operation"], len(op_index)),
                row["operation"])

    return key


def paired_columns(rows: list[dict[str, Any]]) -> list[str]:
    """PAIRED_COLUMNS then the feature columns in first-seen order."""
    columns = dict.fromkeys(PAIRED_COLUMNS)  # a dict keeps first-seen order, and looks up fast
    for row in rows:
        columns.update(dict.fromkeys(row))
    return list(columns)


def paired_text(summaries: list[dict[str, Any]], conditions: Sequence[str],
                operations: Sequence[str]) -> str:
    """The CSV text of a run's paired table from its task summaries (the store's task
    records): byte-identical whatever the order the tasks finished in."""
    rows = sorted((r for s in summaries for r in s["rows"]), key=row_sort_key(conditions, operations))
    columns = paired_columns(rows)
    if SHOWN in columns and not all(SHOWN in r for r in rows):
        # a run begun by a version without the column and resumed by this one: a column holds it
        # for all rows or for none (readers derive it from the store: cir.pairs.shown)
        columns.remove(SHOWN)
    df = pd.DataFrame(rows, columns=columns)
    return df.to_csv(index=False, lineterminator="\n")


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


@memoized(ignore=("source",))  # a table is checked once per process, whoever reads it
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
    blank = out["task_id"].isna() | (out["task_id"].astype(str).str.strip() == "")
    if blank.any():
        raise CirError(f"{source}: row {_plain(blank.idxmax())} has an empty task_id; every row "
                       "belongs to a task (the bootstrap resamples tasks)")
    out["task_id"] = out["task_id"].astype(str)
    out["condition"] = out["condition"].astype(str)
    out["operation"] = out["operation"].astype(str)
    delay = pd.to_numeric(out["delay"], errors="coerce")
    bad = delay.isna() | (delay < 0) | (delay != delay.round()) | (delay > MAX_DELAY)
    if bad.any():
        raise CirError(f"{source}: column 'delay' must hold integers from 0 to {MAX_DELAY}; "
                       f"row {_plain(bad.idxmax())} has {_plain(out['delay'][bad].iloc[0])!r}")
    out["delay"] = delay.astype(int)
    dup = out.duplicated(KEY_COLUMNS, keep=False)
    if dup.any():
        first = {k: _plain(v) for k, v in out.loc[dup, KEY_COLUMNS].iloc[0].to_dict().items()}
        raise CirError(
            f"{source}: duplicate rows for task_id={first['task_id']!r}, condition={first['condition']!r}, "
            f"delay={first['delay']}, operation={first['operation']!r}: "
            "each task may have one row per condition, delay and operation"
        )
    _check_consistency(out, source)
    if SHOWN in out.columns:
        out[SHOWN] = _check_shown(out, source)
    if has_samples(out):
        out = check_sample_columns(out, source, _row_text)
    if require_features and not feature_columns(out):
        raise CirError(
            f"{source}: no feature columns (f_*); run `cir run` with this version to write them"
        )
    return add_outcome(out)


def _check_shown(df: pd.DataFrame, source: str) -> pd.Series:
    """The ``shown`` column as text, each value one of SHOWN_VALUES and one per arm."""
    # a column of nothing but "true" is read from CSV as booleans
    values = df[SHOWN].map(lambda v: SHOWN_TRUE if isinstance(v, (bool, np.bool_)) and v else str(v))
    bad = ~values.isin(SHOWN_VALUES)
    if bad.any():
        row = bad.idxmax()
        raise CirError(f"{source}: {_row_text(df, row)} has shown={_plain(df.at[row, SHOWN])!r}; expected one "
                       f"of {', '.join(SHOWN_VALUES)} (what the arm's perturbed observation showed)")
    mixed = values.groupby([df["task_id"], df["condition"]], sort=False).transform("nunique") > 1
    if mixed.any():
        row = mixed.idxmax()
        raise CirError(f"{source}: task {df.at[row, 'task_id']!r} has more than one value of 'shown' under "
                       f"{df.at[row, 'condition']!r}: an arm showed one observation, so one value on its rows")
    return values


def _row_text(df: pd.DataFrame, row: Any) -> str:
    key = ", ".join(f"{k}={_plain(df.at[row, k])!r}" for k in KEY_COLUMNS)
    return f"row {_plain(row)} ({key})"


def _check_consistency(df: pd.DataFrame, source: str) -> None:
    """Rows that cannot come from a paired run: the row and the rule it breaks."""
    moved = (df["executed"] == 0) & (df["y1"] != df["y0"])
    if moved.any():
        row = moved.idxmax()
        raise CirError(f"{source}: {_row_text(df, row)} has executed=0 but y1={df.at[row, 'y1']} != "
                       f"y0={df.at[row, 'y0']}: a recovery that did not run leaves y1 = y0")
    mixed = df.groupby("task_id", sort=False)["factual_success"].transform("nunique") > 1
    if mixed.any():
        task = df.loc[mixed.idxmax(), "task_id"]
        rows = df.index[df["task_id"] == task]
        values = df.loc[rows, "factual_success"]
        a, b = values.idxmax(), values.idxmin()
        raise CirError(f"{source}: task {task!r} has factual_success=1 in row {_plain(a)} and 0 in "
                       f"row {_plain(b)}: a task has one factual run, so one value on all its rows")


@dataclass(frozen=True)
class CheckedRun:
    """A run folder read and checked once (:func:`read_run`): its paired table (``attrs["run"]``
    its status), the scan of its store whose members are this run's (on the fast path the
    members the record names, their bytes verified: :meth:`StoreScan.vouched`; None: no store)
    and its record. What else reads the folder (the explanation traces) reads the members this
    check found, without checking again."""

    run_dir: Path
    table: pd.DataFrame
    scan: StoreScan | None
    record: RunRecord | None


def read_run(run_dir: str | Path, require_features: bool = False, allow_partial: bool = False) -> CheckedRun:
    """A run folder checked as every reader checks it (:func:`check_run`) and its table parsed, once."""
    run_dir = Path(run_dir)
    text, status, scan, record = _check_run(run_dir, allow_partial)
    source = str(run_dir / PAIRED)
    table = validate_paired(_parse(lambda: pd.read_csv(io.StringIO(text)), source), source=source,
                            require_features=require_features)
    table.attrs["run"] = status
    return CheckedRun(run_dir, table, scan, record)


def read_paired(path: str | Path, require_features: bool = False,
                allow_partial: bool = False) -> pd.DataFrame:
    """Read a ``paired.csv`` / ``.parquet`` file, or the table of a RUN_DIR.

    A RUN_DIR (or its ``paired.csv``) is checked against its episode store and run record
    first (module docstring); a partial run is a :class:`CirError` unless ``allow_partial``,
    and ``df.attrs["run"]`` holds ``tasks``, ``tasks_done`` and ``partial``.
    """
    path = Path(path)
    run_dir = path if path.is_dir() else path.parent if path.name == PAIRED else None
    if run_dir is not None and RunStore(run_dir).is_run():
        return read_run(run_dir, require_features, allow_partial).table
    if path.is_dir():
        candidates = [path / "paired.csv", path / "paired.parquet"]
        found = [c for c in candidates if c.exists()]
        if not found:
            raise CirError(f"{path}: no paired.csv or paired.parquet in this folder")
        path = found[0]
    if not path.exists():
        raise CirError(f"{path}: no such file")
    check_regular(path, "paired table")
    if path.suffix == ".parquet":
        df = _parse(lambda: pd.read_parquet(path), str(path))
    elif path.suffix in {".csv", ".gz"}:
        df = _parse(lambda: pd.read_csv(path), str(path))
    else:
        raise CirError(f"{path}: expected a .csv or .parquet paired table, or a RUN_DIR")
    table = validate_paired(df, source=str(path), require_features=require_features)
    _note_missing_rows(table, str(path))
    return table


def missing_rows(df: pd.DataFrame) -> tuple[int, dict[str, int]]:
    """The rows a task of the table's grid has (its conditions x delays x operations: a run writes
    every one for every task it keeps), and each task that has fewer, with how many it has."""
    grid = df["condition"].nunique() * df["delay"].nunique() * df["operation"].nunique()
    rows = df.groupby("task_id", sort=False).size()
    return grid, {str(t): int(n) for t, n in rows.items() if n < grid}


def _note_missing_rows(df: pd.DataFrame, source: str) -> None:
    """A table read outside its run folder, which nothing checks against a store: a note naming
    the tasks that lack some of their rows (a table cut short, or tables of several grids joined)."""
    grid, short = missing_rows(df)
    if not short:
        return
    named = ", ".join(f"{t} ({n} of {grid})" for t, n in list(short.items())[:5])
    more = f" and {len(short) - 5} more" if len(short) > 5 else ""
    log.warning("%s: %d of %d tasks lack rows of the table's grid (%d conditions x %d delays x %d "
                "operations = %d rows a task): %s%s; a table cut short, or tables of several grids joined? "
                "They are analysed as they are (a run folder's table is checked against its episode store)",
                source, len(short), df["task_id"].nunique(), df["condition"].nunique(), df["delay"].nunique(),
                df["operation"].nunique(), grid, named, more)


def _parse(read: Callable[[], pd.DataFrame], source: str) -> pd.DataFrame:
    try:
        return read()
    except pd.errors.EmptyDataError:
        raise CirError(f"{source}: the file is empty") from None
    except Exception as err:  # parser errors differ between engines
        raise CirError(f"{source}: cannot read as a table ({type(err).__name__}: {err})") from None


def _partial(run_dir: Path, tasks: int, done: int, damage: str, allow_partial: bool) -> dict[str, Any]:
    """The run's status; a CirError for a partial run unless partial results are asked for."""
    status = {"run_dir": str(run_dir), "tasks": tasks, "tasks_done": done, "partial": done < tasks}
    if not status["partial"]:
        if damage:  # every task has an intact copy: the damage is an extra, stale one
            log.warning("%s: %s holds damaged parts besides the intact tasks (%s); the next "
                        "`cir run` sets them aside", run_dir, EPISODES, damage)
        return status
    what = f"{run_dir}: partial run: {tasks - done} of {tasks} tasks missing" + (
        f" (damaged in {EPISODES}: {damage})" if damage else "")
    if not allow_partial:
        raise CirError(f"{what}; finish it with the same `cir run` command, or pass "
                       "--allow-partial (allow_partial=True in Python) to analyse the finished tasks")
    log.warning("%s; analysing the %d finished task(s), as asked", what, done)
    return status


def run_table(run_dir: str | Path, allow_partial: bool = False) -> tuple[str, dict[str, Any]]:
    """The paired table of a run folder as CSV text, checked, and the run's status; reads only
    (:func:`check_run`)."""
    text, status, _ = check_run(run_dir, allow_partial)
    return text, status


def check_run(run_dir: str | Path, allow_partial: bool = False) -> tuple[str, dict[str, Any], StoreScan | None]:
    """A run folder checked as every reader checks it: its table's text, its status and the
    scan of its store whose members are this run's (on the fast path the members the record
    names, whose bytes it verified: :meth:`StoreScan.vouched`; None: the run has no store).

    Fast path: the record says the run is complete, names the table digest on disk and the
    store's members, and every byte of the store is the one it names. Otherwise the table is
    derived from the store's members of this run (another run's are refused like damage)
    and, when it differs from ``paired.csv``, used with a note; nothing is written. A run
    that lacks tasks is a CirError unless ``allow_partial``; a run quarantined by a failed
    restore check (:meth:`RunRecord.quarantine`) is one whatever ``allow_partial`` says.
    """
    return _check_run(Path(run_dir), allow_partial)[:3]


def record_vouches(store: RunStore, record: RunRecord, table: str | None) -> bool:
    """Whether a complete run's record names its files byte for byte: the table on disk
    (``table``) by its sha256 and every member of the episode store by size and sha256
    (:func:`cir.pairs.store.verify_members`). Every reader's fast path, and a writer's that opens
    a finished run (``cir.pairs.run._vouched``)."""
    return (record.complete and table is not None and record.members is not None
            and text_digest(table) == record.paired_sha256
            and verify_members(store.episodes_path, record.members) is None)


def _check_run(run_dir: Path, allow_partial: bool) -> tuple[str, dict[str, Any], StoreScan | None, RunRecord | None]:
    """:func:`check_run`, and the record it read."""
    store = RunStore(run_dir)
    current = store.read_paired_text()
    record = RunRecord.read(store)
    if record is None:
        if not allow_partial or current is None:
            raise CirError(f"{run_dir}: has {EPISODES} but no {RUN_JSON}, so it cannot tell "
                           "how many tasks the run has; pass --allow-partial to read its table")
        log.warning("%s: no %s; its paired.csv is read unchecked, as asked", run_dir, RUN_JSON)
        return current, {"run_dir": str(run_dir), "tasks": None, "tasks_done": None, "partial": True}, None, None
    quarantined = record.quarantine(run_dir)
    if quarantined:  # before anything else: no row of it is read, allow_partial or not
        raise CirError(quarantined)
    check_record(record, store)
    n = record.settings.n_tasks
    if not store.episodes_path.exists():
        digest = None if current is None else text_digest(current)
        return (*_without_store(run_dir, record, current, digest, allow_partial), None, record)
    if record_vouches(store, record, current):
        assert current is not None and record.members is not None
        return current, _partial(run_dir, n, n, "", allow_partial), StoreScan.vouched(record.members), record
    scan = store.scan(foreign_member(record.settings, record.task_ids), record.members)
    summaries = scan.summaries()
    ids = record.task_ids if record.task_ids is not None else sorted(summaries)
    done = [summaries[i] for i in ids if i in summaries]
    text = paired_text(done, record.settings.replay.conditions, record.settings.replay.operations)
    status = _partial(run_dir, n, len(done), scan.damage_text(), allow_partial)  # refused first
    if text != current:
        _note_derived(store, text, current)
    return text, status, scan, record


def check_record(record: RunRecord, store: RunStore) -> None:
    """A record that contradicts itself (an edited count) is refused with what contradicts."""
    problem = record.inconsistency()
    if problem:
        raise CirError(f"{store.run_json_path}: {problem}: the run record contradicts itself (was it "
                       f"edited?); `cir repair {store.dir}` rebuilds it from the episode store")


def _without_store(run_dir: Path, record: RunRecord, current: str | None, digest: str | None,
                   allow_partial: bool) -> tuple[str, dict[str, Any]]:
    """A run folder whose episode store is gone (e.g. results kept without transcripts):
    the table is trusted only when the record says complete and its digest or row count fits."""
    rows = None if current is None else max(0, current.count("\n") - 1)
    n, pairs = record.settings.n_tasks, record.counts.pairs
    fits = current is not None and record.complete and (
        digest == record.paired_sha256 if record.paired_sha256 else rows == pairs)
    if fits:
        assert current is not None
        return current, _partial(run_dir, n, n, "", allow_partial)
    problem = ("no paired.csv" if current is None else
               f"paired.csv has {rows} rows, the run record {pairs} for a "
               f"{'complete' if record.complete else 'partial'} run of {n} tasks")
    if not allow_partial or current is None:
        raise CirError(f"{run_dir}: {problem}, and there is no {EPISODES} to derive it from")
    log.warning("%s: %s; read as it is, as asked", run_dir, problem)
    return current, {"run_dir": str(run_dir), "tasks": n, "tasks_done": record.counts.tasks_done,
                     "partial": True}


def rows_of(text: str | None) -> int | None:
    """The number of rows of a table's CSV text (None for no table)."""
    return None if text is None else max(0, text.count("\n") - 1)


def _note_derived(store: RunStore, text: str, current: str | None) -> None:
    was = "missing" if current is None else f"{rows_of(current)} rows, differs from the store"
    log.warning("%s: %s; the table is derived from the episode store (%d rows) and the file is "
                "left as it is (`cir repair %s` or the same `cir run` rewrites it, keeping a copy)",
                store.paired_path, was, rows_of(text), store.dir)
