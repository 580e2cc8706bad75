"""A typed-tool world (tests/support/shop.py: SQLite orders, three tools, orders that ship while
the agent works) through every command, and restores that forget a table or a row caught by
check-env at its defaults and by the replayer, which quarantines the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = "tests.support.shop:FAMILY"
GRID = ["--conditions", "clean,stale1,lag1,missing", "--delays", "0,1,2", "--operations", "refresh", "--quiet"]


def _cir(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "cir", *args], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ))
    if check and out.returncode != 0:
        raise AssertionError(f"cir {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shop-tasks")
    for split, n in (("train", 30), ("test", 20)):
        out = _cir("tasks", "generate", "--family", ENV, "--split", split, "--n", str(n), "--out", str(folder))
        assert f"{n} shop tasks" in out.stdout
    return folder


@pytest.fixture(scope="module")
def runs(tasks, tmp_path_factory):
    base = tmp_path_factory.mktemp("shop-runs")
    for split in ("train", "test"):
        _cir("run", "--family", ENV, "--tasks", str(tasks / split), "--out", str(base / split), "--jobs", "2", *GRID)
    return base


def test_the_tasks_are_files_a_user_could_write(tasks):
    folder = tasks / "train" / "shop-train-000"
    assert sorted(p.name for p in folder.iterdir()) == ["state.sqlite", "task.json"]
    data = json.loads((folder / "task.json").read_text())
    assert data["instruction"].startswith("Cancel orders ") and data["orders"] == ["W1000", "W1001", "W1002"]
    assert all(set(e) <= {"at", "sql", "note"} for e in data["events"])


def test_check_env_passes_at_its_defaults(tasks):
    out = _cir("check-env", "--family", ENV, "--tasks", str(tasks / "train"))
    assert out.stdout.strip().endswith(": ok"), out.stdout
    assert "the built-in agent's walk" in out.stdout


@pytest.mark.parametrize("variant, says", [
    ("FORGETS_TABLE", "the sqlite state's restore is not exact: table 'notes' differs"),
    ("FORGETS_ROW", "the sqlite state's restore is not exact: table 'orders' differs: row 5 is "),
])
def test_a_restore_that_forgets_a_table_or_a_row_fails_check_env_and_quarantines_a_run(tasks, tmp_path, variant,
                                                                                        says):
    spec = f"tests.support.shop:{variant}"
    bad = _cir("check-env", "--family", spec, "--tasks", str(tasks / "train"), check=False)
    assert bad.returncode == 1
    first = bad.stdout.splitlines()[0]
    assert first.startswith("task shop-train-000: ") and says in first, first
    assert "restoring the state before it failed" in first or "the walk's reset failed" in first
    out = tmp_path / "run"
    run = _cir("run", "--family", spec, "--tasks", str(tasks / "train"), "--limit", "3", *GRID, "--out", str(out),
               check=False)
    assert run.returncode == 2
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith(f"cir: error: {out}: quarantined: the env's restore failed its check in task shop-train-"), line
    assert "state's content was not the snapshot's: table '" in line and "nothing here was deleted" in line
    record = json.loads((out / "run.json").read_text())
    assert record["restore_failed"]["kind"] == "sqlite" and not record["complete"]
    table = _cir("table", str(out), "--allow-partial", check=False)
    assert table.returncode == 2 and "quarantined" in table.stderr


def test_a_study_of_the_tool_world_runs_through_every_command(runs, tmp_path):
    paired = pd.read_csv(runs / "train" / "paired.csv")
    assert set(paired["condition"]) == {"clean", "stale1", "lag1", "missing"}
    assert {"f_suspect_read_only", "f_suspect_anomalous", "f_mutations_after"} <= set(paired.columns)
    # both ways a recovery can change an outcome are reachable by the world's named mechanisms
    counts = paired["outcome"].value_counts()
    assert counts.get("rescue", 0) > 0 and counts.get("harm", 0) > 0
    table = _cir("table", str(runs / "train"), "--format", "csv")
    assert table.stdout.startswith("condition,")
    router = tmp_path / "router.json"
    _cir("fit", str(runs / "train"), "--out", str(router), "--candidate-delays", "1,2")
    assert json.loads(router.read_text())["family"] == ENV
    evaluated = _cir("evaluate", str(router), str(runs / "test"))
    assert "cir" in evaluated.stdout and "oracle" in evaluated.stdout
    explained = _cir("explain", str(runs / "train"))
    assert "refresh_correction" in explained.stdout or "shipped_first" in explained.stdout


def test_the_same_table_at_any_parallelism(tasks, runs, tmp_path):
    _cir("run", "--family", ENV, "--tasks", str(tasks / "train"), "--out", str(tmp_path / "one"), "--jobs", "1", *GRID)
    assert (tmp_path / "one" / "paired.csv").read_bytes() == (runs / "train" / "paired.csv").read_bytes()
