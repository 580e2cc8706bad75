"""``cir run`` / ``cir episode`` on the command line: bad input gives one clear error line;
slow: real generated tasks end to end, determinism across jobs/backends, kill and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cir.cli import main


def _err(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("cir: error: "), err
    return err[0]


def test_empty_task_folder(tmp_path, capsys):
    (tmp_path / "tasks").mkdir()
    msg = _err(capsys, ["run", "--tasks", str(tmp_path / "tasks"), "--out", str(tmp_path / "o")])
    assert "no tasks" in msg and "tasks" in msg
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flag,value,needle", [
    ("--conditions", "clean,stale0", "stale0"),
    ("--conditions", "clean,foo", "unknown condition 'foo'"),
    ("--operations", "refresh,nap", "unknown operation 'nap'"),
    ("--backend", "spark", "--backend 'spark'"),
    ("--delays", "0,-1", "delay -1"),
    ("--delays", "0,x", "delay 'x'"),
    ("--jobs", "0", "--jobs 0"),
    ("--limit", "0", "--limit 0"),
    ("--concurrency", "0", "--concurrency 0: expected an integer from 1 to 4096"),
    ("--rpm", "-5", "--rpm -5.0: expected a number > 0"),
    ("--tpm", "0", "--tpm 0.0: expected a number > 0"),
    ("--request-timeout", "0", "--request-timeout 0.0: expected seconds > 0"),
    ("--retries", "-1", "--retries -1: expected an integer from 0 to 100"),
    ("--patience", "-1", "--patience -1.0: expected seconds > 0"),
    ("--base-url", "ftp://x", "--base-url 'ftp://x': expected an http(s):// address"),
])
def test_bad_settings(tmp_path, capsys, flag, value, needle):
    (tmp_path / "tasks").mkdir()
    msg = _err(capsys, ["run", "--tasks", str(tmp_path / "tasks"), "--out", str(tmp_path / "o"),
                        f"{flag}={value}"])
    assert needle in msg


def test_missing_task_folder_and_episode_errors(tmp_path, capsys):
    msg = _err(capsys, ["run", "--tasks", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert "nope" in msg
    msg = _err(capsys, ["episode", str(tmp_path / "nope"), "--condition", "stalex"])
    assert "stalex" in msg


# -- real tasks (slow) ---------------------------------------------------------------------------

def _tasks(tmp_path_factory) -> Path:
    """Generated valid_unseen tasks (or /work/devdata when ready)."""
    dev = Path("/work/devdata/valid_unseen")
    if (dev.parent / "READY").exists() and dev.exists():
        return dev
    out = tmp_path_factory.mktemp("tasks")
    from cir.families.alfworld.generate import generate_split

    generate_split(out, "valid_unseen", 3, seed=7)
    return out / "valid_unseen"


@pytest.fixture(scope="module")
def real_tasks(tmp_path_factory):
    pytest.importorskip("alfworld")
    return _tasks(tmp_path_factory)


def _cir(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "cir", *args], capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


COMMON = ["--limit", "3", "--conditions", "clean,stale2,missing", "--delays", "0,2",
          "--operations", "refresh,rewind", "--quiet"]


@pytest.mark.slow
def test_real_run_resume_and_refusal(real_tasks, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "cir", "run", "--tasks", str(real_tasks),
                             "--out", str(out), *COMMON], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    episodes = out / "episodes.jsonl.gz"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if episodes.exists() and episodes.stat().st_size > 0:
            break
        time.sleep(0.1)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _cir("run", "--tasks", str(real_tasks), "--out", str(out), *COMMON)
    straight = tmp_path / "straight"
    _cir("run", "--tasks", str(real_tasks), "--out", str(straight), *COMMON)
    assert (out / "paired.csv").read_bytes() == (straight / "paired.csv").read_bytes()
    again = _cir("run", "--tasks", str(real_tasks), "--out", str(out), *COMMON)
    assert "nothing to do" in again.stdout
    rec = json.loads((out / "run.json").read_text())
    assert rec["complete"] and rec["counts"]["tasks_done"] == 3
    import pandas as pd

    df = pd.read_csv(out / "paired.csv")
    assert df["prefix_match"].all()
    bad = _cir("run", "--tasks", str(real_tasks), "--out", str(out),
               *[a if a != "0,2" else "0,1" for a in COMMON], check=False)
    assert bad.returncode == 2 and "delays" in bad.stderr and "was written with" in bad.stderr
    # jobs 2 (loky) and the dask backend give the same bytes
    for extra in (["--jobs", "2"], ["--jobs", "2", "--backend", "dask"]):
        other = tmp_path / ("run_" + "_".join(extra).replace("-", ""))
        _cir("run", "--tasks", str(real_tasks), "--out", str(other), *COMMON, *extra)
        assert (other / "paired.csv").read_bytes() == (straight / "paired.csv").read_bytes()


@pytest.mark.slow
def test_real_episode_prints_transcript(real_tasks, tmp_path):
    from cir.families.alfworld.tasks import load_tasks

    game = load_tasks(real_tasks)[0].game_file
    proc = _cir("episode", str(game), "--condition", "stale2", "--show", "--json", str(tmp_path / "e.json"))
    assert "Your task is to:" in proc.stdout
    assert "perturb:stale2" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].split(":")[0] in {"WON", "LOST", "LOST (budget)"}
    data = json.loads((tmp_path / "e.json").read_text())
    assert data["info"]["point"] >= 3


def test_format_episode_marks_perturbation_and_recovery():
    from support.replay import FakeAgent, fake_tasks, make_fake_env

    from cir.cli.episode import Painter, format_episode
    from cir.router.live import run_episode

    task = fake_tasks(1)[0]

    class At2:
        delays = (2,)

        def decide(self, transcript, delay):
            return type("D", (), {"recover": True, "operation": "refresh"})()

    _, ep, info = run_episode(task.task_id, FakeAgent(), make_fake_env(task), "stale2", router=At2())
    plain = format_episode(ep, task, info, Painter(False))
    assert "(true: " in plain and "perturb:stale2" in plain and "H refresh (look)" in plain
    assert plain.splitlines()[-1].startswith(("WON", "LOST"))
    assert "router d=2:refresh" in plain
    coloured = format_episode(ep, task, info, Painter(True), full=True)
    assert "\033[" in coloured and "Your task is to:" in coloured


@pytest.mark.parametrize("command", ["run", "reproduce", "episode"])
def test_request_flags_are_documented_with_their_defaults(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in [("--rpm", "no limit"), ("--tpm", "no limit"), ("--request-timeout", "(default: 120)"),
                          ("--retries", "4"), ("--patience", "(default: 600)")]:
        assert flag in text and default in text.split(flag, 2)[-1][:400], (flag, command)
    if command == "episode":
        assert "--concurrency" not in text  # one episode: one request at a time
    else:
        assert "--concurrency N" in text and "N / jobs" in text and "(default: 1)" in text
