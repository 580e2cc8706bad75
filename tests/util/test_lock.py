"""One writer per run folder, stale locks of dead processes, workers that end with their parent."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.replay import fake_settings, fake_tasks

from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.store import EPISODES, scan_store
from cir.util.errors import CirError
from cir.util.lock import LOCK_FILE, FolderLock

HERE = Path(__file__).resolve().parents[1]  # the tests folder

HOLD = """
import sys, time
from cir.util.lock import FolderLock
FolderLock({folder!r}).acquire()
print("locked", flush=True)
time.sleep(60)
"""


def _holder(folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD.format(folder=str(folder))],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_live_writer_keeps_the_folder(tmp_path):
    proc = _holder(tmp_path)
    try:
        with pytest.raises(CirError, match=rf"another cir process is writing this run folder \(pid "
                                           rf"{proc.pid} on host {socket.gethostname()}, started "):
            FolderLock(tmp_path).acquire()
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_of_a_killed_process_is_taken_over_with_a_note(tmp_path, caplog):
    proc = _holder(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == proc.pid  # left behind
    with caplog.at_level(logging.WARNING, logger="cir"), FolderLock(tmp_path) as lock:
        assert lock.taken_over_["pid"] == proc.pid
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert f"took over the lock of a cir process that is no longer running (pid {proc.pid}" in caplog.text
    assert not (tmp_path / LOCK_FILE).exists()  # released: removed


def test_a_lock_written_on_another_host_is_refused_with_a_hint(tmp_path):
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": "x"}))
    with pytest.raises(CirError, match=rf"locked by a cir process on another host.*remove {tmp_path / LOCK_FILE}"):
        FolderLock(tmp_path).acquire()


def test_a_lock_is_reentrant_in_its_owner_and_released_once(tmp_path):
    lock = FolderLock(tmp_path)
    assert lock.acquire() is lock.acquire() and lock.held
    with pytest.raises(CirError):
        FolderLock(tmp_path).acquire()  # another holder in this process is refused too
    lock.release()
    lock.release()
    with FolderLock(tmp_path):
        pass


RUN = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from support.replay import fake_settings, fake_tasks
from cir.pairs import store
from cir.pairs.run import run_experiment
from cir.pairs.settings import ReplaySettings

append, signals = store.RunStore.append_task, Path({signals!r})

def append_then_wait(self, *args, **kwargs):
    # the first task stored, the run holds its lock until the test says go
    member = append(self, *args, **kwargs)
    (signals / "stored").touch()
    deadline = time.monotonic() + 600
    while not (signals / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return member

store.RunStore.append_task = append_then_wait
run_experiment(fake_tasks(4), {out!r}, fake_settings(ReplaySettings(operations=("refresh",)), "fake"),
               tasks_source="fake", progress=False, echo=lambda s: None)
"""


def test_two_runs_on_one_folder_one_is_refused_and_nothing_is_doubled(tmp_path):
    out, signals = tmp_path / "run", tmp_path / "signals"
    signals.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", RUN.format(tests=str(HERE), out=str(out), signals=str(signals))],
                            stderr=subprocess.PIPE)
    try:
        # the other run is mid-way (a task stored, the others to come) however slow this machine is
        deadline = time.monotonic() + 600
        while not (signals / "stored").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the other run ended before its first task was stored"
        with pytest.raises(CirError, match="another cir process is writing this run folder"):
            run_experiment(fake_tasks(4), out,
                           fake_settings(ReplaySettings(operations=("refresh",)), "fake"),
                           tasks_source="fake", progress=False, echo=lambda s: None)
    finally:
        (signals / "go").touch()
        _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()[-2000:]
    scan = scan_store(out / EPISODES)
    assert len(scan.members) == 4 and scan.sound
    record = json.loads((out / "run.json").read_text())
    assert len(record["timings"]["sessions"]) == 1 and record["counts"]["tasks_done"] == 4


WORKERS = """
import os, sys, time
from pathlib import Path
from cir.util.parallel import parallel_map

def work(i, folder):
    Path(folder, f"worker{{i}}").write_text(str(os.getpid()))
    time.sleep(120)
    return i

list(parallel_map(work, range(2), {folder!r}, jobs=2, backend="loky"))
"""


def test_workers_end_when_their_parent_is_killed(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WORKERS.format(folder=str(tmp_path))],
                            stderr=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 600
        while len(pids) < 2 and time.monotonic() < deadline:
            pids = [int(p.read_text()) for p in tmp_path.glob("worker*") if p.read_text()]
            time.sleep(0.05)
        assert len(pids) == 2 and proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 120  # a bound on a hang: they end within a second or so
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids)
    finally:
        for pid in pids:  # never leave a worker behind, whatever happened
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


IDLE = """
import os, time
from pathlib import Path
from cir.util.parallel import parallel_map

def slow(i, folder):
    Path(folder, "busy").write_text(str(os.getpid()))
    time.sleep(120)
    return i

list(parallel_map(slow, range(1), {folder!r}, jobs=2, backend="loky"))  # two workers, one task
"""


def test_a_worker_without_a_task_ends_when_its_parent_is_killed(tmp_path):
    """The idle worker ends with its parent too: every worker watches from its start."""
    import psutil

    proc = subprocess.Popen([sys.executable, "-c", IDLE.format(folder=str(tmp_path))], stderr=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 600
        while (len(pids) < 2 or not (tmp_path / "busy").exists()) and time.monotonic() < deadline:
            pids = [k.pid for k in psutil.Process(proc.pid).children() if "popen_loky" in " ".join(k.cmdline())]
            time.sleep(0.05)
        assert len(pids) == 2 and proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 120  # a bound on a hang: they end within a second or so
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids)
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(("argv", "what"), [
    (["tasks", "generate", "--split", "train", "--n", "2", "--out", "{folder}"], "task folder"),
    (["reproduce", "--quick", "--out", "{folder}"], "study folder"),
])
def test_two_generators_or_studies_on_one_folder_one_is_refused(tmp_path, capsys, argv, what):
    """Two generators would share (and delete) one temporary split."""
    from cir.cli import main

    proc = _holder(tmp_path)
    try:
        assert main([a.format(folder=tmp_path) for a in argv]) == 2
    finally:
        proc.kill()
        proc.wait()
    err = capsys.readouterr().err
    assert err.startswith(f"cir: error: {tmp_path}: another cir process is writing this {what} (pid {proc.pid}")
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILE]  # nothing written
