"""A run is never overwritten by a command: every output goes through one writer that refuses a run
folder's own files and a record of another kind; a resume runs on the tasks the run began with;
a store member that is not the bytes the run recorded is never read as the run's."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from support.keydoor import FAMILY, generate_tasks

from cir.cli import main
from cir.pairs.outputs import (
    ROUTER,
    RUN_RECORD,
    STORE,
    STUDY,
    TABLE,
    check_output,
    sniff,
    write_output,
)
from cir.pairs.paired import read_paired
from cir.pairs.repair import repair_run
from cir.pairs.run import run_experiment
from cir.pairs.settings import ReplaySettings, RunSettings, task_digest
from cir.pairs.store import scan_store
from cir.util.errors import CirError

GRID = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1), operations=("refresh",),
                      perturb_fraction=0.5)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _run(tasks_dir: Path, out: Path):
    return run_experiment(FAMILY.load_tasks(tasks_dir), out,
                          RunSettings(family="tests.support.keydoor:FAMILY", replay=GRID, jobs=1),
                          tasks_source="kd-tasks/test", progress=False, echo=lambda _: None)


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> tuple[Path, Path, Path]:
    """Tasks, a finished keydoor run of them, and a router fitted on it."""
    root = tmp_path_factory.mktemp("outputs")
    generate_tasks(root / "tasks", "test", 5, 0)
    _run(root / "tasks" / "test", root / "run")
    assert main(["fit", str(root / "run"), "--out", str(root / "router.json"), "--candidate-delays", "1"]) == 0
    return root / "tasks", root / "run", root / "router.json"


@pytest.fixture
def lab(done, tmp_path) -> dict[str, Path]:
    tasks, run, router = done
    shutil.copytree(tasks, tmp_path / "tasks")
    shutil.copytree(run, tmp_path / "run")
    shutil.copy(router, tmp_path / "router.json")
    return {"tasks": tmp_path / "tasks" / "test", "run": tmp_path / "run", "router": tmp_path / "router.json",
            "root": tmp_path}


# -- the one writer ---------------------------------------------------------------------------------
def test_sniff_knows_each_kind_of_cir_file(lab: dict[str, Path], tmp_path: Path) -> None:
    run = lab["run"]
    assert sniff(run / "run.json") == RUN_RECORD
    assert sniff(run / "episodes.jsonl.gz") == STORE
    assert sniff(run / "paired.csv") == TABLE
    assert sniff(lab["router"]) == ROUTER
    (tmp_path / "study.json").write_text(json.dumps({"cir_version": "0.2.0", "settings": {}, "timings": {},
                                                     "earlier_calls": []}))
    assert sniff(tmp_path / "study.json") == STUDY
    (tmp_path / "notes.json").write_text('{"a": 1}')
    (tmp_path / "other.gz").write_bytes(gzip.compress(b"hello"))
    assert sniff(tmp_path / "notes.json") is None and sniff(tmp_path / "other.gz") is None
    assert sniff(tmp_path / "absent.json") is None


@pytest.mark.parametrize("name", ["run.json", "episodes.jsonl.gz", "paired.csv", "run.lock",
                                  "paired.csv.replaced-20260101T000000Z", "agent_cache/replies.jsonl"])
def test_no_output_is_written_over_a_run_folders_own_files(lab: dict[str, Path], name: str) -> None:
    run = lab["run"]
    before = _files(run)
    with pytest.raises(CirError, match=r"of the run folder .*only `cir run` and `cir repair` write; write the "
                                       r"output to another file \(nothing was written\)"):
        write_output(run / name, "x", "table", "--out")
    assert _files(run) == before


def test_a_link_to_a_runs_file_is_that_file(lab: dict[str, Path]) -> None:
    link = lab["root"] / "link.json"
    os.symlink(lab["run"] / "run.json", link)
    with pytest.raises(CirError, match=r"--out .*link.json: is run.json of the run folder"):
        check_output(link, "table", "--out")


def test_an_output_never_replaces_a_record_of_another_kind(lab: dict[str, Path], tmp_path: Path) -> None:
    elsewhere = tmp_path / "kept"
    elsewhere.mkdir()
    for name in ("run.json", "episodes.jsonl.gz", "paired.csv"):  # copies outside any run folder
        shutil.copy(lab["run"] / name, elsewhere / f"copy-{name}")
    for name, kind in (("copy-run.json", "run record"), ("copy-episodes.jsonl.gz", "episode store"),
                       ("copy-paired.csv", "paired table")):
        with pytest.raises(CirError, match=f"holds a {kind}, which this table would replace"):
            check_output(elsewhere / name, "table")
    with pytest.raises(CirError, match="holds a router file, which this table would replace"):
        check_output(lab["router"], "table", "--out")
    assert check_output(lab["router"], ROUTER) == lab["router"]  # a refit replaces the router it wrote


def test_what_may_be_written(lab: dict[str, Path], tmp_path: Path) -> None:
    assert write_output(tmp_path / "effects.txt", "| a |\n", "table").read_text() == "| a |\n"
    assert write_output(tmp_path / "effects.txt", "| b |\n", "table").read_text() == "| b |\n"  # its own kind again
    write_output(lab["run"] / "my-table.txt", "x", "table")  # a new file beside a run's files
    assert read_paired(lab["run"]).shape[0] > 0  # the run reads as before
    write_output("/dev/null", "x", "table")  # a device is written to, never replaced
    with pytest.raises(CirError, match="is a folder, expected a file name"):
        check_output(tmp_path, "table", "--out")


@pytest.mark.parametrize("argv", [
    ["table", "{run}", "--out", "{run}/episodes.jsonl.gz"],
    ["table", "{run}", "--out", "{run}/paired.csv", "--format", "csv"],
    ["fit", "{run}", "--out", "{run}/run.json", "--candidate-delays", "1"],
    ["evaluate", "{router}", "{run}", "--out", "{run}/run.json"],
    ["evaluate", "{router}", "{run}", "--calibration", "{run}/paired.csv"],
    ["fit", "{run}", "--out", "{root}/r2.json", "--candidate-delays", "1", "--report", "{run}/agent_cache"],
    ["figures", "{run}", "--out", "{run}/agent_cache"],
    ["table", "{run}", "--out", "{router}"],
    ["episode", "--family", "tests.support.keydoor:FAMILY", "--tasks", "{tasks}", "keydoor-test-000",
     "--json", "{run}/run.json"],
    ["estimate", "--family", "tests.support.keydoor:FAMILY", "--tasks", "{tasks}", "--agent", "openai:m",
     "--json", "{run}/run.json"],
    ["reproduce", "--quick", "--out", "{run}"],
])
def test_a_command_never_writes_over_a_run(lab: dict[str, Path], argv: list[str], capsys) -> None:
    """The hostile campaign's runs destroyed by their own command: each now one line, exit 2,
    and every file of the run and the router as it was."""
    argv = [a.format(**{k: str(v) for k, v in lab.items()}) for a in argv]
    before, router = _files(lab["run"]), lab["router"].read_bytes()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("cir: error: ") and ("nothing was written" in err[-1] or "a study" in err[-1]), err
    assert _files(lab["run"]) == before and lab["router"].read_bytes() == router
    assert main(["table", str(lab["run"]), "--resamples", "100"]) == 0


def test_a_router_saved_from_python_is_guarded_too(lab: dict[str, Path]) -> None:
    from cir import Router

    router = Router.load(lab["router"])
    with pytest.raises(CirError, match="is episodes.jsonl.gz of the run folder"):
        router.save(lab["run"] / "episodes.jsonl.gz")


# -- a resume runs on the tasks the run began with ---------------------------------------------------
def test_a_resume_refuses_a_task_whose_files_changed(lab: dict[str, Path]) -> None:
    record = json.loads((lab["run"] / "run.json").read_text())
    tasks = FAMILY.load_tasks(lab["tasks"])
    assert record["task_digests"] == {str(t.task_id): task_digest(t) for t in tasks}
    data = json.loads((lab["tasks"] / "tasks.json").read_text())
    data[2]["key"] = data[2]["key"] + 1  # the same task id, another task
    (lab["tasks"] / "tasks.json").write_text(json.dumps(data))
    before = _files(lab["run"])
    with pytest.raises(CirError, match=r"task keydoor-test-002 is not the one this run began with: its files "
                                       r"\(its fields\) differ from those the run recorded"):
        _run(lab["tasks"], lab["run"])
    assert _files(lab["run"]) == before


def test_a_task_file_replaced_is_named(tmp_path: Path) -> None:
    """A task that points to files (as ALFWorld's game file): the message names them."""
    from dataclasses import dataclass

    @dataclass
    class FileTask:
        task_id: str
        game_file: Path

    game = tmp_path / "game.txt"
    game.write_text("one")
    first = task_digest(FileTask("t", game))
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(game, moved / "game.txt")
    assert task_digest(FileTask("t", moved / "game.txt")) == first  # the same bytes elsewhere: the same task
    game.write_text("two")
    assert task_digest(FileTask("t", game)) != first


def test_a_run_record_of_an_earlier_cir_without_task_digests_is_read_and_resumed(lab: dict[str, Path]) -> None:
    path = lab["run"] / "run.json"
    record = json.loads(path.read_text())
    record.pop("task_digests")
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    table = read_paired(lab["run"])
    assert len(table) > 0
    _run(lab["tasks"], lab["run"])  # the resume records them from now on
    assert "task_digests" in json.loads(path.read_text())


# -- a store member that is not the bytes the run recorded -------------------------------------------
def _reencode_with_y1_flipped(run: Path, index: int) -> str:
    store = run / "episodes.jsonl.gz"
    data = store.read_bytes()
    m = scan_store(store).members[index]
    lines = gzip.decompress(data[m.start:m.end]).decode().splitlines()
    task = json.loads(lines[0])
    task["rows"][0]["y1"] = 1 - task["rows"][0]["y1"]
    task["rows"][0]["executed"] = True
    lines[0] = json.dumps(task, sort_keys=True, ensure_ascii=False)
    member = gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=6, mtime=0)
    store.write_bytes(data[:m.start] + member + data[m.end:])
    return m.task_id


def test_a_member_whose_digest_is_not_the_records_is_refused_then_set_aside_and_run_again(lab: dict[str, Path]) -> None:
    pristine = (lab["run"] / "paired.csv").read_bytes()
    task = _reencode_with_y1_flipped(lab["run"], 1)
    with pytest.raises(CirError, match=rf"partial run: 1 of 5 tasks missing .*task {task} .*not the bytes the run "
                                       r"recorded for this task"):
        read_paired(lab["run"])
    assert len(read_paired(lab["run"], allow_partial=True)["task_id"].unique()) == 4  # never read as the run's
    repair_run(lab["run"], echo=lambda _: None)
    assert any(p.name.startswith("episodes.jsonl.gz.set-aside-") for p in lab["run"].iterdir())  # kept
    _run(lab["tasks"], lab["run"])
    assert (lab["run"] / "paired.csv").read_bytes() == pristine
