"""A family of one's own (tests/support/keydoor.py, written from docs/own-environment.md) through
every command: tasks, run (parallel, killed and resumed), fit, evaluate, explain, episode
--router, check-env; and a restore that forgets one field caught by check-env and the replayer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = "tests.support.keydoor:FAMILY"
FORGETFUL = "tests.support.keydoor:FORGETFUL"
GRID = ["--conditions", "clean,stale1,missing", "--delays", "0,1,2", "--operations", "refresh,replan", "--quiet"]


def _cir(*args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "cir", *args], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, **(env or {})})
    if check and out.returncode != 0:
        raise AssertionError(f"cir {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keydoor-tasks")
    for split, n in (("train", 40), ("test", 24)):
        out = _cir("tasks", "generate", "--env", ENV, "--split", split, "--n", str(n), "--out", str(folder))
        assert f"{n} keydoor tasks" in out.stdout
    return folder


@pytest.fixture(scope="module")
def runs(tasks, tmp_path_factory):
    """The train run killed mid-way at --jobs 2 and resumed; the same run straight at --jobs 1; the test run."""
    base = tmp_path_factory.mktemp("keydoor-runs")
    killed, straight, test = base / "killed", base / "straight", base / "test"
    args = ["run", "--env", ENV, "--tasks", str(tasks / "train"), *GRID]
    proc = subprocess.Popen([sys.executable, "-m", "cir", *args, "--out", str(killed), "--jobs", "2"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "KEYDOOR_STEP_SECONDS": "0.01"})
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        record = killed / "run.json"
        if record.exists() and json.loads(record.read_text() or "{}").get("counts", {}).get("tasks_done", 0) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    interrupted = json.loads((killed / "run.json").read_text())
    assert not interrupted["complete"] and 3 <= interrupted["counts"]["tasks_done"] < 40
    resumed = _cir(*args, "--out", str(killed), "--jobs", "2")
    _cir(*args, "--out", str(straight), "--jobs", "1")
    _cir("run", "--env", ENV, "--tasks", str(tasks / "test"), *GRID, "--out", str(test))
    return {"killed": killed, "straight": straight, "test": test, "interrupted": interrupted,
            "resumed": resumed.stdout}


def test_a_run_of_ones_own_family_resumes_byte_identical_at_any_jobs(runs):
    assert (runs["killed"] / "paired.csv").read_bytes() == (runs["straight"] / "paired.csv").read_bytes()
    record = json.loads((runs["killed"] / "run.json").read_text())
    assert record["complete"] and record["settings"]["family"] == ENV and len(record["timings"]["sessions"]) == 2
    # the store is written before run.json's counts: a kill between the two leaves one more task stored
    done = runs["interrupted"]["counts"]["tasks_done"]
    assert done <= record["timings"]["sessions"][1]["resumed_tasks"] <= done + 2
    paired = pd.read_csv(runs["killed"] / "paired.csv")
    assert {"f_moves_left", "f_holding"} <= set(paired.columns)
    assert set(paired["outcome"]) == {"rescue", "harm", "stable_success", "stable_failure"}


def test_fit_evaluate_explain_and_episode_on_ones_own_family(runs, tasks, tmp_path):
    router = tmp_path / "keydoor-router.json"
    _cir("fit", str(runs["killed"]), "--out", str(router), "--delays", "1,2")  # the family from run.json
    saved = json.loads(router.read_text())
    assert saved["family"] == ENV and saved["extractor"] == "keydoor"
    assert "f_moves_left" in saved["features"]
    assert set(saved["features"]) <= {"f_delay", "f_moves_left", "f_holding", "f_suspect_has_cell"}
    evaluated = _cir("evaluate", str(router), str(runs["test"]))
    assert "| cir" in evaluated.stdout and "oracle" in evaluated.stdout
    explained = _cir("explain", str(runs["killed"]))
    assert "refresh_shows_key" in explained.stdout
    test_id = sorted(pd.read_csv(runs["test"] / "paired.csv")["task_id"])[0]
    episode = _cir("episode", test_id, "--tasks", str(tasks / "test"), "--router", str(router),
                   "--condition", "stale1")
    assert f"task {test_id}" in episode.stdout and "router d=" in episode.stdout
    wrong = _cir("explain", str(runs["killed"]), "--env", "alfworld", check=False)
    assert wrong.returncode == 2 and f"is a run of env {ENV!r}" in wrong.stderr


def test_check_env_and_the_replayer_catch_a_restore_that_forgets_a_field(tasks, tmp_path):
    good = _cir("check-env", "--env", ENV, "--tasks", str(tasks / "train"), "--n", "3")
    assert "failure" not in good.stdout and good.stdout.strip().endswith(": ok")
    bad = _cir("check-env", "--env", FORGETFUL, "--tasks", str(tasks / "train"), "--n", "3", check=False)
    assert bad.returncode == 1
    first = bad.stdout.splitlines()[0]
    assert first.startswith("task keydoor-train-000: step ") and "after restore answered" in first
    assert "The door locks." in first and "the uninterrupted walk answered" in first
    run = _cir("run", "--env", FORGETFUL, "--tasks", str(tasks / "train"), "--limit", "2", *GRID,
               "--out", str(tmp_path / "forgetful"), check=False)
    assert run.returncode == 2
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("cir: error: task keydoor-train-000: the env's restore is not exact")
    # the other task may finish (and be kept) before the error stops the run: never the bad one's rows
    paired = tmp_path / "forgetful" / "paired.csv"
    assert not paired.exists() or "keydoor-train-000" not in set(pd.read_csv(paired)["task_id"])
    table = _cir("table", str(tmp_path / "forgetful"), check=False)
    assert table.returncode == 2 and "partial run" in table.stderr  # never read as a whole
