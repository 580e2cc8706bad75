"""What a newcomer trips on, each once: a closed pipe, an error text that stutters, a JSON file that
is no router, a table cut outside its run folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.replay import fake_settings, fake_tasks

from cir.cli import main
from cir.pairs.run import run_experiment
from cir.pairs.settings import ReplaySettings
from cir.pairs.synthetic import simulate

ROOT = Path(__file__).resolve().parents[2]


def _into_a_closed_pipe(*argv: str) -> subprocess.CompletedProcess:
    """``cir ARGV | head -0``, without the race: the pipe's reader is closed before cir starts."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "cir", *argv], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, timeout=600)
    finally:
        os.close(write)


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tables")
    simulate(100, seed=21).to_csv(folder / "train.csv", index=False)
    run = folder / "run"
    run_experiment(fake_tasks(3), run, fake_settings(ReplaySettings(operations=("refresh", "replan")), "fake"),
                   tasks_source="fake", progress=False, echo=lambda s: None)
    return folder / "train.csv", run


@pytest.mark.parametrize("command", [["table", "{run}", "--resamples", "20"],
                                     ["fit", "{train}", "--out", "{tmp}/r.json", "--threshold-steps", "5"]])
def test_a_closed_pipe_ends_the_command_quietly(tables, tmp_path, command):
    train, run = tables
    done = _into_a_closed_pipe(*[a.format(run=run, train=train, tmp=tmp_path) for a in command])
    assert done.returncode == 0, done.stderr
    assert "error" not in done.stderr and "Broken pipe" not in done.stderr and "Traceback" not in done.stderr


def test_a_json_error_says_where_once(tmp_path, capsys):
    broken = tmp_path / "router.json"
    broken.write_text('{"format": "cir-router", "format_version": 4, "cir_version": "0.1')
    assert main(["evaluate", str(broken), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Unterminated string starting at line 1 column 62" in err and "at at" not in err


def test_a_json_file_that_is_no_router_is_told_so(tmp_path, capsys):
    other = tmp_path / "thresholds.json"
    other.write_text(json.dumps({"thresholds": 3}))
    assert main(["evaluate", str(other), str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"cir: error: {other}: not a cir router file: it has no 'format' and no 'format_version' key "
        "(its keys: 'thresholds'); a router file is what `cir fit` writes\n")
    (tmp_path / "v.json").write_text(json.dumps({"format": "cir-router", "format_version": None}))
    assert main(["evaluate", str(tmp_path / "v.json"), str(tmp_path)]) == 2
    assert "key 'format_version' must be int, got null" in capsys.readouterr().err


def test_a_table_cut_outside_its_run_folder_is_analysed_with_a_note(tables, tmp_path, capsys):
    _, run = tables
    whole = (run / "paired.csv").read_text().splitlines(keepends=True)
    cut = tmp_path / "paired.csv"
    keep = 1 + (len(whole) - 1) // 2 + 1  # the header, half the rows and one more: a task cut in two
    cut.write_text("".join(whole[:keep]))
    import pandas as pd

    rows = pd.read_csv(cut)
    grid = rows["condition"].nunique() * rows["delay"].nunique() * rows["operation"].nunique()
    short = {t: n for t, n in rows.groupby("task_id").size().items() if n < grid}
    assert short  # the cut left a task with some of its rows
    assert main(["table", str(cut), "--resamples", "20"]) == 0
    captured = capsys.readouterr()
    assert "| condition" in captured.out  # analysed
    for task, n in short.items():
        assert f"{task} ({n} of {grid})" in captured.err
    assert "lack rows of the table's grid" in captured.err and captured.err.startswith("cir: note: ")
    # the whole table, read where the run wrote it, has no such note
    assert main(["table", str(run), "--resamples", "20"]) == 0
    assert "lack rows" not in capsys.readouterr().err
