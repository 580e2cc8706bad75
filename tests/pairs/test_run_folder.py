"""The run folder is the truth: a table derived from the store, checked on every read and
derived in memory (never rewritten by a reader) when it is missing, short or older; rewritten
by the next `cir run`, which keeps a copy; partial runs refused unless asked for; damage to
the store located by task; every analysis command and read_paired behave alike."""

from __future__ import annotations

import gzip
import json
import logging
import shutil
import socket
from pathlib import Path

import pandas as pd
import pytest
from support.replay import fake_settings, fake_tasks, make_fake_env

from cir import __version__
from cir.cli import main
from cir.pairs.paired import paired_text, read_paired, text_digest
from cir.pairs.record import RunIdentity, RunRecord
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.settings import RunSettings, task_set_digest
from cir.pairs.store import EPISODES, RunStore, read_episodes, read_task_summaries, scan_store
from cir.pairs.synthetic import simulate
from cir.util.errors import CirError

REPO = Path(__file__).resolve().parents[2]
SETTINGS = ReplaySettings(operations=("refresh", "replan"))


def _run(out: Path, n: int = 5, tasks=None, echo=None):
    return run_experiment(tasks or fake_tasks(n), out,
                          fake_settings(SETTINGS, "fake"),
                          tasks_source="fake", progress=False, echo=echo or (lambda s: None))


@pytest.fixture(scope="module")
def done_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("done") / "run"
    _run(out)
    return out


@pytest.fixture
def run(done_run, tmp_path) -> Path:
    """A fresh copy of a finished run to damage."""
    shutil.copytree(done_run, tmp_path / "run")
    return tmp_path / "run"


# -- a run folder built from a synthetic table (enough tasks to fit and evaluate) ---------------


def synthetic_run(folder: Path, df: pd.DataFrame, drop: int = 0) -> Path:
    """A run folder (store, table, record) holding ``df``, without its last ``drop`` tasks."""
    rows = json.loads(df.drop(columns=["outcome"], errors="ignore").to_json(orient="records"))
    ids = sorted({r["task_id"] for r in rows})
    summaries = []
    for task_id in ids:
        task_rows = [r for r in rows if r["task_id"] == task_id]
        summaries.append({"task_id": task_id, "rows": task_rows, "feasible": True, "reason": "ok",
                          "factual_env_actions": 10, "point": 3,
                          "factual_success": bool(task_rows[0]["factual_success"]), "costs": {}})
    kept = summaries[: len(summaries) - drop]
    store = RunStore(folder)
    store.open()
    for s in kept:
        store.append_task(s, [])
    replay = ReplaySettings(conditions=tuple(dict.fromkeys(df["condition"])),
                            delays=tuple(sorted({int(d) for d in df["delay"]})),
                            operations=tuple(dict.fromkeys(df["operation"])))
    settings = RunIdentity(tasks="synthetic", task_set=task_set_digest(ids), n_tasks=len(ids), limit=None,
                           agent="synthetic", agent_label="synthetic", seed=0, replay=replay)
    done = read_task_summaries(store.episodes_path)
    text = paired_text([done[i] for i in ids if i in done], replay.conditions, replay.operations)
    record = RunRecord.summarize(__version__, settings, ids, [done[i] for i in ids if i in done], [],
                                 complete=not drop)
    members = scan_store(store.episodes_path).stored()
    store.write_run_json(record.with_store(store.episodes_bytes(), text_digest(text), members).to_dict())
    store.write_paired(text)
    return folder


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("synthetic")
    train = simulate(80, seed=21)
    test = simulate(60, seed=22)
    test["task_id"] = "held-" + test["task_id"]
    out = {"train": synthetic_run(root / "train", train), "test": synthetic_run(root / "test", test),
           "partial": synthetic_run(root / "partial", test, drop=2)}
    assert main(["fit", str(out["train"]), "--out", str(root / "router.json"), "--threshold-steps", "7"]) == 0
    out["router"] = root / "router.json"
    return out


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- case 1: a table cut short or deleted is derived from the store; only a writer rewrites it ----


def test_a_cut_table_is_rebuilt_by_the_next_run_which_keeps_a_copy(run, done_run):
    text = (done_run / "paired.csv").read_text()
    (run / "paired.csv").write_text(text[: len(text) // 3])
    said: list[str] = []
    record = _run(run, echo=said.append)
    assert (run / "paired.csv").read_text() == text
    assert "rebuilt from the episode store" in said[0] and "nothing to do" in said[-1]
    assert record.counts.pairs == text.count("\n") - 1 and len(record.sessions) == 1
    kept = list(run.glob("paired.csv.replaced-*"))
    assert len(kept) == 1 and kept[0].read_text() == text[: len(text) // 3]  # what it replaced
    (run / "paired.csv").unlink()
    _run(run)
    assert (run / "paired.csv").read_text() == text


@pytest.mark.parametrize("damage", ["delete", "cut", "older"])
def test_a_reader_derives_a_missing_short_or_older_table_and_changes_no_file(run, done_run, damage, caplog):
    text = (done_run / "paired.csv").read_text()
    if damage == "delete":
        (run / "paired.csv").unlink()
    elif damage == "cut":
        (run / "paired.csv").write_text(text[:200])
    else:  # a table written before the last task was appended (kill between the two)
        lines = text.splitlines(keepends=True)
        (run / "paired.csv").write_text("".join(lines[: len(lines) // 2]))
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    with caplog.at_level(logging.WARNING, logger="cir"):
        df = read_paired(run / "paired.csv")  # the file of a run folder is checked as the folder
    assert "the table is derived from the episode store" in caplog.text and "left as it is" in caplog.text
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before  # reading wrote nothing
    assert len(df) == text.count("\n") - 1 and df.attrs["run"] == {
        "run_dir": str(run), "tasks": 5, "tasks_done": 5, "partial": False}
    assert df.equals(read_paired(done_run))


def test_a_consistent_folder_is_read_without_scanning_the_store(run, monkeypatch):
    def no_scan(path, foreign=None, recorded=None):
        raise AssertionError("scanned")

    monkeypatch.setattr("cir.pairs.store.scan_store", no_scan)
    assert len(read_paired(run)) > 0  # table digest and every store member match run.json: no scan
    (run / "paired.csv").write_text("task_id\n")
    with pytest.raises(AssertionError, match="scanned"):
        read_paired(run)


def test_a_finished_run_run_again_is_vouched_for_by_its_record_without_a_scan(run, monkeypatch):
    """The same command on a finished run: its record names the store's bytes and the table's, so
    nothing is scanned or rebuilt and no file changes; a store byte changed goes the whole way."""
    def no_scan(path, foreign=None, recorded=None):
        raise AssertionError("scanned")

    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    said: list[str] = []
    with monkeypatch.context() as m:
        m.setattr("cir.pairs.store.scan_store", no_scan)
        record = _run(run, echo=said.append)
    assert said == [f"{run}: run already complete (5 tasks, {record.counts.pairs} pairs); nothing to do"]
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    data = bytearray((run / EPISODES).read_bytes())
    data[-30] ^= 0xFF  # the last task's member no longer the recorded one
    (run / EPISODES).write_bytes(bytes(data))
    with monkeypatch.context() as m:
        m.setattr("cir.pairs.store.scan_store", no_scan)
        with pytest.raises(AssertionError, match="scanned"):
            _run(run)


def test_analysis_of_a_cut_table_uses_the_whole_run(run, done_run, capsys):
    cut = (done_run / "paired.csv").read_text()[:600]
    (run / "paired.csv").write_text(cut)
    code, out, err = _cli(capsys, "table", run, "--resamples", "50", "--by", "condition,operation")
    feasible = json.loads((run / "run.json").read_text())["counts"]["tasks_feasible"]
    assert code == 0 and f"tasks={feasible}_" in out and "partial" not in out
    assert "cir: note:" in err and "derived from the episode store" in err
    assert (run / "paired.csv").read_text() == cut  # an analysis command never rewrites


# -- case 2: partial runs are refused, unless asked for ---------------------------------------------


def test_python_read_of_a_partial_run(run):
    path = run / EPISODES
    members = scan_store(path).members
    path.write_bytes(path.read_bytes()[: members[3].start])  # as if killed after three tasks
    with pytest.raises(CirError, match=r"partial run: 2 of 5 tasks missing; finish it with the same "
                                       r"`cir run` command, or pass --allow-partial"):
        read_paired(run)
    df = read_paired(run, allow_partial=True)
    assert df.attrs["run"]["partial"] and df.attrs["run"]["tasks_done"] == 3
    assert df["task_id"].nunique() <= 3


@pytest.mark.parametrize("argv", [
    ["table", "{p}"], ["contrast", "{p}", "--a", "stale2", "--b", "clean"],
    ["joint", "{p}", "--a", "refresh", "--b", "refresh_ablated"], ["figures", "{p}", "--out", "{tmp}/f"],
    ["fit", "{p}", "--out", "{tmp}/r.json"], ["evaluate", "{router}", "{p}"],
])
def test_every_analysis_command_refuses_a_partial_run(synthetic, capsys, tmp_path, argv):
    argv = [a.format(p=synthetic["partial"], tmp=tmp_path, router=synthetic["router"]) for a in argv]
    code, out, err = _cli(capsys, *argv, "--resamples" if argv[0] != "fit" else "--folds", "20"
                          if argv[0] != "fit" else "3")
    assert code == 2 and out == ""
    assert err.strip() == (f"cir: error: {synthetic['partial']}: partial run: 2 of 60 tasks missing; "
                           "finish it with the same `cir run` command, or pass --allow-partial "
                           "(allow_partial=True in Python) to analyse the finished tasks")


def test_allowed_partial_results_say_so_in_every_format(synthetic, capsys, tmp_path):
    p = synthetic["partial"]
    code, out, err = _cli(capsys, "table", p, "--allow-partial", "--resamples", "20")
    assert code == 0 and "partial_run=58 of 60 tasks" in out and "2 of 60 tasks missing" in err
    code, out, _ = _cli(capsys, "table", p, "--allow-partial", "--resamples", "20", "--format", "csv")
    assert set(pd.read_csv(pd.io.common.StringIO(out))["partial_run"]) == {"58 of 60 tasks"}
    code, out, _ = _cli(capsys, "contrast", p, "--a", "stale2", "--b", "clean", "--allow-partial",
                        "--resamples", "20", "--format", "json")
    assert all(r["partial_run"] == "58 of 60 tasks" for r in json.loads(out))
    code, out, _ = _cli(capsys, "joint", p, "--on", "condition", "--a", "clean", "--b", "stale2",
                        "--by", "delay", "--allow-partial", "--resamples", "20")
    assert code == 0 and "partial_run=58 of 60 tasks" in out
    code, out, _ = _cli(capsys, "figures", p, "--out", tmp_path / "f", "--allow-partial", "--resamples", "20")
    assert code == 0 and "partial run: these figures show 58 of 60 tasks" in out
    code, out, _ = _cli(capsys, "fit", p, "--out", tmp_path / "r.json", "--allow-partial", "--threshold-steps", "5",
                        "--allow-partial")
    assert code == 0 and "note: fitted on a partial run (58 of 60 tasks)" in out
    code, out, _ = _cli(capsys, "evaluate", synthetic["router"], p, "--allow-partial", "--resamples", "20")
    assert code == 0 and out.startswith("Routers on 58 held-out tasks (partial run: 58 of 60 tasks)")


def test_a_complete_synthetic_run_reads_as_complete(synthetic, capsys):
    code, out, err = _cli(capsys, "evaluate", synthetic["router"], synthetic["test"], "--resamples", "20")
    assert code == 0 and "partial" not in out + err


# -- older records, missing stores, missing records -----------------------------------------------


def test_a_run_record_of_an_older_version_is_still_checked(run):
    data = json.loads((run / "run.json").read_text())
    del data["task_ids"], data["store"]
    (run / "run.json").write_text(json.dumps(data))
    assert not read_paired(run).attrs["run"]["partial"]
    path = run / EPISODES
    path.write_bytes(path.read_bytes()[: scan_store(path).members[-1].start])
    with pytest.raises(CirError, match="partial run: 1 of 5 tasks missing"):
        read_paired(run)
    _run(run)  # the writer rewrites the older record with the store's digests, keeping the old one
    (kept,) = run.glob("run.json.replaced-*")
    assert "store" not in json.loads(kept.read_text())
    assert len(json.loads((run / "run.json").read_text())["store"]["members"]) == 5


def test_kept_results_without_their_store_are_read_when_the_record_vouches_for_them(tmp_path):
    # the reference study's run folder, kept without its episode store
    published = REPO / "data" / "replicates" / "seed-0" / "runs" / "primary"
    kept = tmp_path / "published"
    kept.mkdir()
    for name in ("paired.csv", "run.json"):
        shutil.copyfile(published / name, kept / name)
    df = read_paired(kept)
    record = json.loads((kept / "run.json").read_text())
    assert len(df) == record["counts"]["pairs"] and not df.attrs["run"]["partial"]
    assert df.equals(read_paired(published))  # the same table as with the store beside it
    shutil.copytree(kept, tmp_path / "kept")
    text = (kept / "paired.csv").read_text()
    (tmp_path / "kept" / "paired.csv").write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + "\n")
    with pytest.raises(CirError, match=r"paired.csv has \d+ rows, the run record \d+ for a complete run "
                                       r"of \d+ tasks, and there is no episodes.jsonl.gz to derive it from"):
        read_paired(tmp_path / "kept")
    assert read_paired(tmp_path / "kept", allow_partial=True).attrs["run"]["partial"]


def test_a_store_without_its_record_is_refused(run):
    (run / "run.json").unlink()
    with pytest.raises(CirError, match="has episodes.jsonl.gz but no run.json"):
        read_paired(run)
    with pytest.raises(CirError, match="folder is not empty and has no run.json"):
        _run(run)


def test_leftovers_of_a_writer_killed_before_its_first_record_do_not_block_a_resume(tmp_path, done_run):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.lock").write_text(json.dumps({"pid": 999999, "host": socket.gethostname()}))
    (out / ".run.json.abc123.tmp").write_text('{"half')
    _run(out)
    assert (out / "paired.csv").read_text() == (done_run / "paired.csv").read_text()
    assert not list(out.glob(".*.tmp")) and not (out / "run.lock").exists()


# -- case 4: damage inside the store ---------------------------------------------------------------


def _member(lines: list[str]) -> bytes:
    return gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=6, mtime=0)


@pytest.mark.parametrize("broken", ["task", "episode"])
def test_a_broken_line_is_located_and_only_its_task_runs_again(run, done_run, broken):
    path = run / EPISODES
    members = scan_store(path).members
    data = path.read_bytes()
    second = members[1]
    lines = gzip.decompress(data[second.start:second.end]).decode().splitlines()
    index = 0 if broken == "task" else 2
    lines[index] = lines[index][: len(lines[index]) // 2]  # valid gzip, broken JSON
    path.write_bytes(data[: second.start] + _member(lines) + data[second.end:])
    with pytest.raises(CirError, match=rf"damaged: task {second.task_id} \(bytes \d+-\d+: line {index + 1} "):
        list(read_episodes(run))
    with pytest.raises(CirError, match=rf"partial run: 1 of 5 tasks missing \(damaged in episodes.jsonl.gz: "
                                       rf"task {second.task_id}"):
        read_paired(run)
    record = _run(run)
    assert record.sessions[-1].tasks_run == 1 and record.sessions[-1].resumed_tasks == 4
    assert (run / "paired.csv").read_text() == (done_run / "paired.csv").read_text()
    assert len(list(read_episodes(run))) == len(list(read_episodes(done_run)))


def test_a_task_stored_twice_is_kept_once_with_a_note(run, done_run, caplog):
    path = run / EPISODES
    first = scan_store(path).members[0]
    data = path.read_bytes()
    path.write_bytes(data + data[first.start:first.end])  # what two writers used to leave
    assert len(list(read_episodes(run))) == len(list(read_episodes(done_run)))
    with caplog.at_level(logging.WARNING, logger="cir"):
        _run(run)
    assert f"1 task(s) stored twice ({first.task_id})" in caplog.text
    assert path.read_bytes() == data


# -- case 5: every session's timings and counters are kept -------------------------------------------


def test_every_session_is_recorded(tmp_path):
    out = tmp_path / "run"
    _run(out, tasks=fake_tasks(5)[:2] + fake_tasks(5)[3:])  # another task set: refused below
    shutil.rmtree(out)
    from test_store import _Interrupting

    with pytest.raises(KeyboardInterrupt):
        run_experiment(fake_tasks(5), out,
                       RunSettings(replay=SETTINGS, agent="fake", agent_factory=_Interrupting(500),
                                   env_factory=make_fake_env),
                       tasks_source="fake", progress=False, echo=lambda s: None)
    record = _run(out)
    data = json.loads((out / "run.json").read_text())
    assert len(record.sessions) == 2 and len(data["timings"]["sessions"]) == 2
    first, second = data["timings"]["sessions"]
    assert first["tasks_run"] + second["tasks_run"] == 5 and second["resumed_tasks"] == first["tasks_run"]
    assert data["task_ids"] == [t.task_id for t in fake_tasks(5)]
    assert data["store"]["episodes_bytes"] == (out / EPISODES).stat().st_size
    assert data["store"]["paired_sha256"] == text_digest((out / "paired.csv").read_text())


def test_damage_besides_intact_tasks_is_noted_not_refused(run, done_run, caplog):
    path = run / EPISODES
    path.write_bytes(path.read_bytes() + bytes.fromhex("1f8b0800000000000003") + b"not deflate")
    (run / "paired.csv").unlink()  # so that the reader scans the store
    with caplog.at_level(logging.WARNING, logger="cir"):
        df = read_paired(run)
    assert not df.attrs["run"]["partial"]
    assert "holds damaged parts besides the intact tasks (task unknown" in caplog.text
    _run(run)
    assert scan_store(path).sound and list(run.glob(f"{EPISODES}.set-aside-*"))


def test_a_deleted_store_is_noted_and_its_tasks_run_again(run, done_run, caplog):
    (run / EPISODES).unlink()
    assert not read_paired(run).attrs["run"]["partial"]  # the table is vouched for by its digest
    with caplog.at_level(logging.WARNING, logger="cir"):
        record = _run(run)
    assert "the run record lists 5 finished task(s), the episode store holds 0; the others run again" \
        in caplog.text
    assert record.sessions[-1].tasks_run == 5
    assert (run / "paired.csv").read_text() == (done_run / "paired.csv").read_text()


def test_table_and_record_catch_up_when_rewrites_are_spaced_and_when_interrupted(tmp_path, monkeypatch):
    """Rewrites spaced by their cost (FLUSH_SPACING) skip tasks, never lose them: the end
    and an interruption bring the table and record up to the store."""
    from test_store import _Interrupting

    import cir.pairs.run as run_module

    writes = []
    real = RunStore.write_paired
    monkeypatch.setattr(RunStore, "write_paired", lambda self, text: writes.append(1) or real(self, text))
    monkeypatch.setattr(run_module, "FLUSH_SPACING", 0.0)
    _run(tmp_path / "every", n=5)
    assert len(writes) == 1 + 5 + 1  # the start, after each task, the end
    monkeypatch.setattr(run_module, "FLUSH_SPACING", 1e9)  # as if a rewrite cost forever
    writes.clear()
    _run(tmp_path / "spaced", n=5)
    assert len(writes) == 1 + 1  # the start and the end
    for name in ("paired.csv", "run.json"):
        every = (tmp_path / "every" / name).read_text()
        spaced = (tmp_path / "spaced" / name).read_text()
        if name == "run.json":  # the sessions' wall seconds differ between any two runs
            every, spaced = (json.loads(t)["counts"] for t in (every, spaced))
        assert every == spaced

    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(fake_tasks(5), out,
                       RunSettings(replay=SETTINGS, agent="fake", agent_factory=_Interrupting(500),
                                   env_factory=make_fake_env),
                       tasks_source="fake", progress=False, echo=lambda s: None)
    data = json.loads((out / "run.json").read_text())
    stored = read_task_summaries(out / EPISODES)
    assert 1 < len(stored) < 5  # more tasks finished than the spaced rewrites wrote
    assert data["counts"]["tasks_done"] == len(stored)
    assert data["store"]["episodes_bytes"] == (out / EPISODES).stat().st_size
    assert data["store"]["paired_sha256"] == text_digest((out / "paired.csv").read_text())
