"""Bounded resources and one-line errors: --jobs, --n, --resamples and budgets within what
the machine and the tools hold; full or read-only disks name the path and leave the run
resumable; task folders that would be skipped or mislabelled silently get a note."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import stat
from pathlib import Path

import pytest
from support.disk import FailingWrite
from support.replay import fake_settings, fake_tasks

from cir.cli import main
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.util.errors import CirError
from cir.util.files import write_atomic
from cir.util.parallel import MAX_JOBS_PER_CORE, cores, parallel_map

LIMIT = MAX_JOBS_PER_CORE * cores()


def _one_line(capsys, argv: list[str]) -> str:
    assert main([str(a) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("cir: error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err.strip()


@pytest.mark.parametrize("argv", [
    ["run", "--tasks", "{tmp}", "--out", "{tmp}/o", "--jobs", "1000"],
    ["tasks", "generate", "--split", "train", "--n", "2", "--out", "{tmp}/t", "--jobs", "1000"],
    ["reproduce", "--out", "{tmp}/r", "--jobs", "1000"],
])
def test_jobs_beyond_the_machine_are_refused(tmp_path, capsys, argv):
    err = _one_line(capsys, [a.format(tmp=tmp_path) for a in argv])
    assert err == (f"cir: error: --jobs 1000: at most {LIMIT} local workers on this machine "
                   f"({MAX_JOBS_PER_CORE} per core, {cores()} cores); for more, run on a Dask "
                   "cluster (--backend dask --scheduler ADDRESS)")
    assert not any(tmp_path.iterdir())


def test_a_remote_cluster_is_not_bounded_by_this_machine():
    from cir.util.parallel import check_jobs

    check_jobs(1000, "dask", "tcp://scheduler:8786")
    with pytest.raises(CirError, match="at most"):
        list(parallel_map(abs, [1], jobs=LIMIT + 1))


@pytest.mark.parametrize(("argv", "needle"), [
    (["tasks", "generate", "--split", "train", "--n", "1000000000000", "--out", "{tmp}/t"],
     "--n 1000000000000: expected an integer from 1 to 1000000"),
    (["reproduce", "--out", "{tmp}/r", "--resamples", "1000000000"],
     "--resamples 1000000000: expected an integer from 1 to 1000000"),
    (["run", "--tasks", "{tmp}", "--out", "{tmp}/o", "--max-actions", "10000000000"],
     "--max-actions 10000000000: expected an integer from 1 to 100000"),
    (["fit", "{tmp}", "--out", "{tmp}/r.json", "--max-turns", "0"], "--max-turns 0: expected an integer from 1 to 100000"),
    (["table", "{tmp}", "--seed", "-1"], "--seed -1: expected an integer from 0 to 4294967295"),
    (["fit", "{tmp}", "--out", "{tmp}/r.json", "--seed", "-1"], "--seed -1: expected an integer from 0 to 4294967295"),
    (["reproduce", "--out", "{tmp}/r", "--seed", "-1"], "--seed -1: expected an integer from 0 to 4294967295"),
])
def test_numbers_beyond_what_the_tools_hold_are_refused(tmp_path, capsys, argv, needle):
    assert _one_line(capsys, [a.format(tmp=tmp_path) for a in argv]) == f"cir: error: {needle}"


def test_generation_streams_the_task_indices(tmp_path, monkeypatch):
    """A huge n builds nothing up front: the worker pool gets a lazy iterator."""
    from cir.families.alfworld import generate

    seen = {}

    def fake_map(fn, items, *args, **kwargs):
        seen["sized"] = hasattr(items, "__len__")
        seen["first"] = next(iter(items))
        raise KeyboardInterrupt
        yield  # a generator, like parallel_map

    monkeypatch.setattr(generate, "parallel_map", fake_map)
    with pytest.raises(KeyboardInterrupt):
        generate.generate_split(tmp_path, "train", 10**12, 0, progress=False)
    assert seen == {"sized": False, "first": (0, generate.check_types(None)[0])}
    assert not any(tmp_path.iterdir())  # and no half-written split


# -- disks -------------------------------------------------------------------------------------------


def _run(out: Path):
    return run_experiment(fake_tasks(4), out,
                          fake_settings(ReplaySettings(operations=("refresh",)), "fake"),
                          tasks_source="fake", progress=False, echo=lambda s: None)


# each a write every run of 4 tasks makes, however its rewrites are spaced in time: the lock; the
# record and the table at the start (their first writes), then again at the latest at the end
# (their second); the store's member of the first and of the third task
@pytest.mark.parametrize(("name", "nth"), [
    ("run.lock", 1), ("run.json", 1), ("paired.csv", 1), ("episodes.jsonl.gz", 1),
    ("episodes.jsonl.gz", 3), ("run.json", 2), ("paired.csv", 2),
])
def test_a_full_disk_mid_run_names_the_file_and_the_run_resumes(tmp_path, monkeypatch, name, nth):
    _run(tmp_path / "straight")
    with monkeypatch.context() as m:
        fault = FailingWrite(name, nth).install(m)
        with pytest.raises(CirError) as err:
            _run(tmp_path / "run")
    assert fault.fired, dict(fault.writes)
    assert str(err.value) == f"{tmp_path / 'run' / name}: cannot write (No space left on device)"
    assert not list((tmp_path / "run").glob(".*.tmp"))  # no temp file left
    _run(tmp_path / "run")
    assert (tmp_path / "run" / "paired.csv").read_bytes() == (tmp_path / "straight" / "paired.csv").read_bytes()


def test_a_read_only_folder_gets_one_line(tmp_path, monkeypatch, capsys):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr("tempfile.mkstemp", read_only)
    with pytest.raises(CirError, match=r"x.json: cannot write \(Read-only file system\)"):
        write_atomic(tmp_path / "x.json", "{}")
    monkeypatch.setattr("os.open", read_only)
    with pytest.raises(CirError, match=r"run.lock: cannot create the lock file \(Read-only file system\)"):
        _run(tmp_path / "run")


def test_an_os_error_no_module_named_is_still_one_line(monkeypatch, capsys):
    import cir.cli.tasks as tasks_cli

    def broken(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/some/file")

    monkeypatch.setattr(tasks_cli, "_list", broken)
    assert _one_line(capsys, ["tasks", "list", "x"]) == "cir: error: /some/file: No space left on device"


def test_cir_episode_json_into_a_folder_is_refused_before_the_episode(tmp_path, capsys):
    err = _one_line(capsys, ["episode", tmp_path / "no-task", "--json", tmp_path])
    assert err == f"cir: error: --json {tmp_path}: is a folder; give a file name for the transcript"


def test_cir_table_out_on_a_full_device(tmp_path, capsys):
    from cir.pairs.synthetic import simulate_paired

    simulate_paired(5, seed=1).to_csv(tmp_path / "p.csv", index=False)
    if not Path("/dev/full").exists():
        pytest.skip("a full disk is simulated with /dev/full, which this system does not have")
    err = _one_line(capsys, ["table", tmp_path / "p.csv", "--resamples", "10", "--out", "/dev/full"])
    assert err == "cir: error: /dev/full: cannot write (No space left on device)"


def test_written_files_get_the_usual_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "a.json", "{}")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o666 & ~mask


# -- task folders -----------------------------------------------------------------------------------


def test_tasks_list_on_a_manifest_of_the_wrong_shape(tmp_path, capsys):
    (tmp_path / "valid_unseen").mkdir()
    manifest = tmp_path / "valid_unseen" / "manifest.json"
    manifest.write_text(json.dumps({"tasks": "abc"}))
    assert _one_line(capsys, ["tasks", "list", tmp_path]) == (
        f"cir: error: {manifest}: 'tasks' must be a list of task rows, got str")
    manifest.write_text(json.dumps({"tasks": [{"task_id": "a", "task_type": "x", "room": "r",
                                               "n_receptacles": "3", "n_objects": 1, "plan_length": 2}]}))
    assert _one_line(capsys, ["tasks", "list", tmp_path]) == (
        f"cir: error: {manifest}: task #0 field 'n_receptacles' must be a int, got '3'")


def test_symlinked_and_mislabelled_task_folders_get_a_note(pick_place_task, tmp_path, caplog):
    from cir.families.alfworld.tasks import load_tasks

    trial = pick_place_task.game_file.parent
    split = tmp_path / "valid_unseen"
    (split / "look_at_obj_in_light-Book-None-DeskLamp-301").mkdir(parents=True)
    shutil.copytree(trial, split / "look_at_obj_in_light-Book-None-DeskLamp-301" / trial.name)
    (split / "linked").symlink_to(trial.parent, target_is_directory=True)
    with caplog.at_level(logging.WARNING, logger="cir"):
        (ref,) = load_tasks(tmp_path)
    assert ref.task_type == "pick_and_place_simple"  # the game's own type, as the features see it
    assert "the folder name says look_at_obj_in_light, the game is pick_and_place_simple" in caplog.text
    assert f"{split / 'linked'}: a symbolic link to a folder, not followed" in caplog.text


def test_writing_to_a_device_writes_to_it_and_never_replaces_it(tmp_path):
    """`cir fit --out /dev/null` as root must not rename a file over the device."""
    if not Path("/dev/null").exists():
        pytest.skip("checks writing over /dev/null, which this system does not have")
    write_atomic("/dev/null", "{}")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    if Path("/dev/full").exists():
        with pytest.raises(CirError, match=r"/dev/full: cannot write \(No space left on device\)"):
            write_atomic("/dev/full", "{}")
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    with pytest.raises(CirError, match="is a folder, expected a file name"):
        write_atomic(tmp_path, "{}")


def test_a_full_disk_while_generating_leaves_no_half_split(tmp_path, monkeypatch):
    from cir.families.alfworld.generate import generate_split

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr("pathlib.Path.write_text", full)
    with pytest.raises(CirError, match=r"game.tw-pddl: cannot write the tasks \(No space left on device\)"):
        generate_split(tmp_path, "valid_unseen", 1, 0, progress=False, max_plan_length=9)
    assert list(tmp_path.iterdir()) == []
