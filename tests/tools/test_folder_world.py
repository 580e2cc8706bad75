"""examples/folder_world.py: a folder as a tool world, its exact restore (contents, modes, files
created and deleted), check-env on it, and a restore that forgets one file caught by check-env at
its defaults and quarantined by cir run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cir.families.registry import get_family
from cir.util.errors import RestoreError

ROOT = Path(__file__).resolve().parents[2]
ENV = "examples.folder_world:FAMILY"
GRID = ["--conditions", "clean,stale1,missing", "--delays", "0,1", "--operations", "refresh", "--quiet"]


@pytest.fixture(autouse=True)
def _from_the_checkout(monkeypatch):
    monkeypatch.chdir(ROOT)  # examples.folder_world is found from here, as `cir --family` finds it


def _cir(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "cir", *args], cwd=ROOT, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise AssertionError(f"cir {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("folder-tasks")
    _cir("tasks", "generate", "--family", ENV, "--split", "train", "--n", "4", "--out", str(folder))
    return folder / "train"


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_folder_is_restored_exactly_contents_modes_and_deletions(tasks):
    family = get_family(ENV)
    env = family.make_env(family.load_tasks(tasks)[0])
    env.reset()
    root = env.handle
    assert (root / "run.sh").stat().st_mode & 0o777 == 0o755  # the task file's mode survived the round trip
    before, snap = _files(root), env.snapshot()
    (root / "calc" / "ops.py").write_text("broken\n")
    (root / "scratch.txt").write_text("new\n")
    (root / "new_folder" / "deep").mkdir(parents=True)
    (root / "NOTES.txt").unlink()
    os.chmod(root / "run.sh", 0o600)
    os.symlink("calc/ops.py", root / "link.py")
    env.restore(snap)
    assert _files(root) == before
    assert not (root / "new_folder").exists() and not (root / "link.py").is_symlink()
    # a step from the restored state answers as from the original one
    assert json.loads(env.step('read_file(path="NOTES.txt")')[0])["path"] == "NOTES.txt"


def test_the_teammates_commit_is_a_silent_event_that_a_snapshot_holds(tasks):
    family = get_family(ENV)
    task = family.load_tasks(tasks)[0]
    env = family.make_env(task)
    env.reset()
    at = task.data["commit_at"]
    for _ in range(at - 1):
        env.step('list_dir(path=".")')
    quiet = env.snapshot()
    shown, _, _ = env.step('list_dir(path=".")')  # the event fires after this action, silently
    assert "NOTES.txt" in shown and not (env.handle / "NOTES.txt").exists()
    assert env.handle.joinpath("calc", "ops.py").read_text().startswith("# Maintained by the calc team.")
    env.restore(quiet)
    assert (env.handle / "NOTES.txt").exists()


def test_check_env_passes_and_a_restore_that_forgets_a_file_fails_at_the_defaults(tasks, tmp_path):
    good = _cir("check-env", "--family", ENV, "--tasks", str(tasks))
    assert good.stdout.strip().endswith(": ok"), good.stdout
    bad = _cir("check-env", "--family", "examples.folder_world:FORGETS_FILE", "--tasks", str(tasks), check=False)
    assert bad.returncode == 1
    first = bad.stdout.splitlines()[0]
    assert first.startswith("task folder-train-000: ") and \
        "the folder state's restore is not exact: path 'calc/ops.py' differs" in first, first
    out = tmp_path / "run"
    run = _cir("run", "--family", "examples.folder_world:FORGETS_FILE", "--tasks", str(tasks), *GRID,
               "--out", str(out), check=False)
    assert run.returncode == 2
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith(f"cir: error: {out}: quarantined: the env's restore failed its check in task "), line
    assert "its folder state's content was not the snapshot's: path 'calc/ops.py' differs" in line


def test_the_example_runs_and_its_agent_fixes_the_bug():
    out = subprocess.run([sys.executable, "examples/folder_world.py"], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert "\nwon\n" in out.stdout and "0o755" in out.stdout


def test_a_restore_that_forgets_a_file_names_it(tasks):
    family = get_family("examples.folder_world:FORGETS_FILE")
    env = family.make_env(family.load_tasks(tasks)[0])
    env.reset()
    snap = env.snapshot()
    env.step('edit_file(path="calc/ops.py", old="\\"\\"\\"Arithmetic.\\"\\"\\"", new="# changed")')
    with pytest.raises(RestoreError, match="task folder-train-000: folder state: the restore is not exact: "
                                           "path 'calc/ops.py' differs") as err:
        env.restore(snap)
    assert err.value.failure["task_id"] == "folder-train-000" and err.value.failure["kind"] == "folder"
