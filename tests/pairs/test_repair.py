"""`cir repair`: the explicit repair of a run folder; readers never repair, this does, keeping a
copy of everything it replaces or removes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.replay import fake_settings, fake_tasks

from cir.cli import main
from cir.pairs.paired import read_paired
from cir.pairs.repair import repair_run
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.store import EPISODES, scan_store
from cir.util.errors import CirError

GRID = ReplaySettings(operations=("refresh",))


def _run(out: Path):
    return run_experiment(fake_tasks(4), out, fake_settings(GRID), tasks_source="fake", progress=False,
                          echo=lambda s: None)


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("done") / "run"
    _run(out)
    return out


@pytest.fixture
def run(done, tmp_path) -> Path:
    shutil.copytree(done, tmp_path / "run")
    return tmp_path / "run"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_sound_folder_is_left_as_it_is(run) -> None:
    before = _files(run)
    said: list[str] = []
    record = repair_run(run, echo=said.append)
    assert _files(run) == before and record.complete
    assert said == [f"{run}: 4 of 4 tasks in the store, {record.counts.pairs} pairs; complete"]


def test_a_cut_table_is_rebuilt_and_the_old_one_kept(run, done) -> None:
    cut = (done / "paired.csv").read_text()[:300]
    (run / "paired.csv").write_text(cut)
    said: list[str] = []
    repair_run(run, echo=said.append)
    assert (run / "paired.csv").read_bytes() == (done / "paired.csv").read_bytes()
    (kept,) = run.glob("paired.csv.replaced-*")
    assert kept.read_text() == cut and "the old one kept as paired.csv.replaced-" in said[0]


def test_a_damaged_task_is_set_aside_and_the_same_run_finishes_it(run, done, capsys) -> None:
    store = run / EPISODES
    m = scan_store(store).members[1]
    data = bytearray(store.read_bytes())
    data[(m.start + m.end) // 2] ^= 0xFF
    store.write_bytes(bytes(data))
    assert main(["repair", str(run)]) == 0
    out, err = capsys.readouterr()
    assert "3 of 4 tasks in the store" in out and "1 task(s) missing: the same `cir run` command runs them" in out
    assert f"damaged part(s): task {m.task_id}" in err
    (aside,) = run.glob(f"{EPISODES}.set-aside-*")
    assert aside.read_bytes() == bytes(data)  # the damaged file, whole
    assert list(run.glob("run.json.replaced-*")) and scan_store(store).sound
    with pytest.raises(CirError, match="partial run: 1 of 4 tasks missing"):  # no damage left to name
        read_paired(run)
    record = _run(run)
    assert record.sessions[-1].tasks_run == 1
    assert (run / "paired.csv").read_bytes() == (done / "paired.csv").read_bytes()


def test_a_torn_tail_is_cut_off_and_kept(run) -> None:
    store = run / EPISODES
    whole = store.read_bytes()
    m = scan_store(store).members[0]
    cut = whole[m.start:m.end][: (m.end - m.start) // 2]  # a write of a task cut short (a kill)
    store.write_bytes(whole + cut)
    assert scan_store(store).torn == len(whole)
    repair_run(run, echo=lambda s: None)
    assert store.read_bytes() == whole
    (torn,) = run.glob(f"{EPISODES}.torn-*")
    assert torn.read_bytes() == cut


@pytest.mark.parametrize(("prepare", "needle"), [
    (lambda d: d.mkdir(), "not a run folder (no run.json or episodes.jsonl.gz)"),
    (lambda d: None, "not a run folder"),
    (lambda d: (d.mkdir(), (d / EPISODES).write_bytes(b"")), "has no run.json, so nothing says which tasks"),
])
def test_what_is_no_run_folder_is_refused_in_one_line(tmp_path, capsys, prepare, needle) -> None:
    folder = tmp_path / "x"
    prepare(folder)
    assert main(["repair", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cir: error: ") and err.count("\n") == 1 and needle in err
