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

from cir.pairs.store import scan_store

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
        out = _cir("tasks", "generate", "--family", ENV, "--split", split, "--n", str(n), "--out", str(folder))
        assert f"{n} keydoor tasks" in out.stdout
    return folder


@pytest.fixture(scope="module")
def runs(tasks, tmp_path_factory):
    """The train run killed mid-way at --jobs 2 and resumed; the same run straight at --jobs 1; the test run."""
    base = tmp_path_factory.mktemp("keydoor-runs")
    killed, straight, test = base / "killed", base / "straight", base / "test"
    args = ["run", "--family", ENV, "--tasks", str(tasks / "train"), *GRID]
    proc = subprocess.Popen([sys.executable, "-m", "cir", *args, "--out", str(killed), "--jobs", "2"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "KEYDOOR_STEP_SECONDS": "0.01"})
    store = killed / "episodes.jsonl.gz"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if store.exists() and len(scan_store(store).summaries()) >= 3:  # the store, not run.json: it is
            break                                                       # written after every task
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    interrupted = json.loads((killed / "run.json").read_text())
    stored = len(scan_store(store).summaries())  # the truth; run.json's counts may lag it (FLUSH_SPACING)
    assert not interrupted["complete"] and 3 <= stored < 40 and interrupted["counts"]["tasks_done"] <= stored
    resumed = _cir(*args, "--out", str(killed), "--jobs", "2")
    _cir(*args, "--out", str(straight), "--jobs", "1")
    _cir("run", "--family", ENV, "--tasks", str(tasks / "test"), *GRID, "--out", str(test))
    return {"killed": killed, "straight": straight, "test": test, "interrupted": interrupted,
            "stored": stored, "resumed": resumed.stdout}


def test_a_run_of_ones_own_family_resumes_byte_identical_at_any_jobs(runs):
    assert (runs["killed"] / "paired.csv").read_bytes() == (runs["straight"] / "paired.csv").read_bytes()
    record = json.loads((runs["killed"] / "run.json").read_text())
    assert record["complete"] and record["settings"]["family"] == ENV and len(record["timings"]["sessions"]) == 2
    # the resume takes every task the store held at the kill, which run.json may not count yet
    assert record["timings"]["sessions"][1]["resumed_tasks"] == runs["stored"]
    paired = pd.read_csv(runs["killed"] / "paired.csv")
    assert {"f_moves_left", "f_holding"} <= set(paired.columns)
    assert set(paired["outcome"]) == {"rescue", "harm", "stable_success", "stable_failure"}


def test_fit_evaluate_explain_and_episode_on_ones_own_family(runs, tasks, tmp_path):
    router = tmp_path / "keydoor-router.json"
    _cir("fit", str(runs["killed"]), "--out", str(router), "--candidate-delays", "1,2")  # the family from run.json
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
    wrong = _cir("explain", str(runs["killed"]), "--family", "alfworld", check=False)
    assert wrong.returncode == 2 and f"is a run of family {ENV!r}" in wrong.stderr


def test_check_env_and_the_replayer_catch_a_restore_that_forgets_a_field(tasks, tmp_path):
    good = _cir("check-env", "--family", ENV, "--tasks", str(tasks / "train"), "--n", "3")
    assert "failure" not in good.stdout and good.stdout.strip().endswith(": ok")
    assert "the built-in agent's walk " in good.stdout  # walked where the agent walks too
    bad = _cir("check-env", "--family", FORGETFUL, "--tasks", str(tasks / "train"), "--n", "3", check=False)
    assert bad.returncode == 1
    first = bad.stdout.splitlines()[0]
    assert first.startswith("task keydoor-train-000: step ") and "after restore answered" in first
    assert "The door locks." in first and "the uninterrupted walk answered" in first
    run = _cir("run", "--family", FORGETFUL, "--tasks", str(tasks / "train"), "--limit", "2", *GRID,
               "--out", str(tmp_path / "forgetful"), check=False)
    assert run.returncode == 2
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith(f"cir: error: {tmp_path / 'forgetful'}: quarantined: the env's restore failed its "
                           "check in task keydoor-train-000")
    table = _cir("table", str(tmp_path / "forgetful"), "--allow-partial", check=False)
    assert table.returncode == 2 and "quarantined" in table.stderr  # never read, even in part


FORGETS_KEY = "tests.support.keydoor:FORGETS_KEY"


@pytest.fixture(scope="module")
def quarantined(tmp_path_factory):
    """FORGETS_KEY (its restore drops the key) run at the branch-point check over tasks whose
    first three pass it: three tasks stored with wrong rows, then task 003 fails."""
    base = tmp_path_factory.mktemp("forgets-key")
    _cir("tasks", "generate", "--family", ENV, "--split", "train", "--n", "8", "--seed", "1", "--out", str(base))
    out = base / "run"
    args = ["run", "--family", FORGETS_KEY, "--tasks", str(base / "train"), *GRID, "--out", str(out),
            "--restore-check", "branches", "--jobs", "1"]
    return {"tasks": base / "train", "out": out, "args": args, "run": _cir(*args, check=False)}


def test_a_failed_branch_point_check_quarantines_the_run_folder(quarantined):
    from cir.pairs.store import read_task_summaries

    out, run = quarantined["out"], quarantined["run"]
    assert run.returncode == 2
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith(
        f"cir: error: {out}: quarantined: the env's restore failed its check in task keydoor-train-003 "
        "(restored to the state after env action 5 (where the clean arm's delay-2 branches start) and sent "
        "'open door', it answered 'Nothing happens.' (done False, won False); the clean arm had 'The door "
        "opens. You win.' (done True, won True)), so no row of its 3 stored task(s) is read, --allow-partial "
        "or not")
    assert f"`cir check-env --family {FORGETS_KEY} --run {out}`" in line and "run into a new --out folder" in line
    assert "same `cir run` command" not in line  # that command would fail again
    record = json.loads((out / "run.json").read_text())
    assert record["restore_failed"]["task_id"] == "keydoor-train-003" and not record["complete"]
    # nothing deleted: the three tasks before it are in the store (with wrong labels)
    assert sorted(read_task_summaries(out / "episodes.jsonl.gz")) == [f"keydoor-train-00{i}" for i in range(3)]


@pytest.mark.parametrize("command", [
    ["table"], ["table", "--allow-partial"], ["contrast", "--allow-partial", "--a", "clean", "--b", "stale1"], ["joint", "--allow-partial"],
    ["fit", "--allow-partial", "--out", "ROUTER"], ["explain", "--allow-partial"], ["explain"],
])
def test_no_reader_returns_a_row_of_a_quarantined_folder(quarantined, command, tmp_path):
    out = quarantined["out"]
    args = [a if a != "ROUTER" else str(tmp_path / "router.json") for a in command]
    got = _cir(args[0], str(out), *args[1:], check=False)
    assert got.returncode == 2, got.stdout
    assert got.stderr.strip().splitlines()[-1].startswith(f"cir: error: {out}: quarantined: ")
    assert not (tmp_path / "router.json").exists()


def test_python_readers_and_a_resume_refuse_a_quarantined_folder(quarantined):
    from cir.pairs.paired import read_paired
    from cir.stats.explain import explain_run
    from cir.util.errors import CirError

    out = quarantined["out"]
    for read in (lambda: read_paired(out), lambda: read_paired(out, allow_partial=True),
                 lambda: read_paired(out / "paired.csv", allow_partial=True),
                 lambda: explain_run(out, allow_partial=True)):
        with pytest.raises(CirError, match="quarantined: the env's restore failed its check in task keydoor-train-003"):
            read()
    before = (out / "episodes.jsonl.gz").read_bytes()
    again = _cir(*quarantined["args"], check=False)  # the same command: refused, nothing run
    assert again.returncode == 2 and "quarantined" in again.stderr
    assert (out / "episodes.jsonl.gz").read_bytes() == before
    repaired = _cir("repair", str(out))  # a repair keeps the quarantine and says what to do
    assert "quarantined" in repaired.stdout.strip().splitlines()[-1]
    assert json.loads((out / "run.json").read_text())["restore_failed"]["task_id"] == "keydoor-train-003"


def test_check_env_finds_the_late_field_at_its_defaults_and_in_the_quarantined_run(quarantined):
    tasks = str(quarantined["tasks"])
    found = _cir("check-env", "--family", FORGETS_KEY, "--tasks", tasks, check=False)
    assert found.returncode == 1
    assert "task keydoor-train-000: the built-in agent's walk: step 7 ('open door') after restore answered " \
           "'Nothing happens." in found.stdout
    walked = _cir("check-env", "--run", str(quarantined["out"]), "--no-agent-walk", check=False)
    assert walked.returncode == 1 and "family 'keydoor-forgets-key'" in walked.stdout
    assert f"task keydoor-train-000: the factual run in {quarantined['out']}: step 7 ('open door') after " \
           "restore answered 'Nothing happens.'" in walked.stdout
    exact = _cir("check-env", "--family", ENV, "--run", str(quarantined["out"]), check=False)
    assert exact.returncode == 2 and f"is a run of family {FORGETS_KEY!r}" in exact.stderr


def test_the_default_check_of_ones_own_family_stops_at_the_first_task(quarantined, tmp_path):
    out = tmp_path / "full"
    args = [a for a in quarantined["args"] if a not in ("--restore-check", "branches")]
    args[args.index("--out") + 1] = str(out)
    run = _cir(*args, check=False)
    assert run.returncode == 2 and "in task keydoor-train-000 " in run.stderr
    assert json.loads((out / "run.json").read_text())["timings"]["sessions"][0]["restore_check"] == "full"


def test_a_family_named_by_its_file_runs_in_worker_processes(tasks, tmp_path):
    # --family path/to/file.py:ATTR: the workers import the file by its path, as the parent did
    (tmp_path / "mykd.py").write_text((ROOT / "tests" / "support" / "keydoor.py").read_text())
    spec = f"{tmp_path / 'mykd.py'}:FAMILY"
    args = ["run", "--family", spec, "--tasks", str(tasks / "train"), "--limit", "8", *GRID]
    outs = {how: tmp_path / how for how in ("jobs1", "jobs2", "threads")}
    _cir(*args, "--out", str(outs["jobs1"]), "--jobs", "1")
    jobs2 = _cir(*args, "--out", str(outs["jobs2"]), "--jobs", "2")
    _cir(*args, "--out", str(outs["threads"]), "--jobs", "2", "--backend", "threading")
    assert "Traceback" not in jobs2.stderr
    table = (outs["jobs1"] / "paired.csv").read_bytes()
    assert table == (outs["jobs2"] / "paired.csv").read_bytes() == (outs["threads"] / "paired.csv").read_bytes()
    assert json.loads((outs["jobs2"] / "run.json").read_text())["settings"]["family"] == spec
    assert _cir("table", str(outs["jobs2"])).returncode == 0  # a reader resolves the file again
