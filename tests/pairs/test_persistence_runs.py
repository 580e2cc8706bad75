"""A run whose perturbed reads last (ReplaySettings.persistence) is another run: recorded in run.json
(absent for one-shot runs, whose records read as before), refused by a resume or an extension with
another persistence, its store's tasks foreign to a one-shot run; `cir run`, `cir episode`, an
experiment config and a live episode take it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.replay import fake_settings, fake_tasks
from support.tally import Scripted, Tally

from cir.cli import main
from cir.episode.perturb import MISSING_TEXT
from cir.families.registry import get_family
from cir.pairs.paired import read_paired
from cir.pairs.record import RunIdentity, RunRecord, check_extension, foreign_member
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.store import RunStore, read_episodes, read_task_summaries
from cir.router.live import run_episode
from cir.study.experiments import load_experiment
from cir.util.errors import CirError

GRID = dict(conditions=("clean", "stale2", "missing"), delays=(0, 2), operations=("refresh", "rewind"))
KEYDOOR = "tests.support.keydoor:FAMILY"


def _run(out: Path, persistence: str = "once", n: int = 4) -> None:
    run_experiment(fake_tasks(n), out, fake_settings(ReplaySettings(**GRID, persistence=persistence)),
                   progress=False, echo=lambda s: None)


def _served_again(run: Path) -> list:
    return [s for e in read_episodes(run) if e.transcript is not None
            for s in e.transcript.steps if any(x.endswith(":again") for x in s.events)]


def test_a_persistent_run_records_its_persistence_and_is_another_run(tmp_path):
    _run(tmp_path / "once")
    _run(tmp_path / "cache", "refresh")
    once = json.loads((tmp_path / "once" / "run.json").read_text())
    cache = json.loads((tmp_path / "cache" / "run.json").read_text())
    assert "persistence" not in once["settings"] and cache["settings"]["persistence"] == "refresh"
    with pytest.raises(CirError, match="persistence=None, this command has persistence='refresh'"):
        _run(tmp_path / "once", "refresh")  # a resume with another persistence is refused
    # an extension keeps it
    old = RunRecord.read(RunStore(tmp_path / "once"))
    new = RunIdentity.from_dict(cache["settings"], "run.json")
    with pytest.raises(CirError, match="persistence='once', this run 'refresh'"):
        check_extension(old, new, old.task_ids or [], "once")
    # a task of the persistent run is foreign to the one-shot run, and one of the one-shot run is not
    summary = next(iter(read_task_summaries(tmp_path / "cache").values()))
    assert summary["persistence"] == "refresh"
    problem = foreign_member(old.settings, None)(summary)
    assert problem is not None and "perturbed reads last 'refresh'" in problem
    one_shot = next(iter(read_task_summaries(tmp_path / "once").values()))
    assert "persistence" not in one_shot and foreign_member(old.settings, None)(one_shot) is None
    # the fake agent goes back to a receptacle whose arrival it was not shown: behind a persistent
    # cache it is shown the missing text again, which a one-shot run never does
    again = _served_again(tmp_path / "cache")
    missing = [s for s in again if s.events[-1] == "perturb:missing:again"]
    assert missing and {s.shown for s in missing} == {MISSING_TEXT}
    assert all(s.shown != s.observation for s in missing)
    assert not _served_again(tmp_path / "once")


def test_an_experiment_config_takes_it(tmp_path):
    config = tmp_path / "primary.toml"
    text = ('name = "primary"\nrole = "effects"\norder = 1\nsplit = "valid_unseen"\nn_tasks = 3\n'
            'quick_n_tasks = 2\nconditions = ["clean", "lag2"]\ndelays = [0]\noperations = ["refresh", "rewind"]\n')
    assert load_experiment(_write(config, text)).replay.persistence == "once"
    assert "persistence" not in load_experiment(config).identity()
    exp = load_experiment(_write(config, text + 'persistence = "refresh"\n'))
    assert exp.replay.persistence == "refresh" and exp.identity()["persistence"] == "refresh"
    assert load_experiment(_write(config, text + "persistence = 3\n")).replay.persistence == "3"
    with pytest.raises(CirError, match="primary.toml: field 'persistence': persistence 'always': expected once"):
        load_experiment(_write(config, text + 'persistence = "always"\n'))
    with pytest.raises(CirError, match="field 'persistence' must be a str or int"):
        load_experiment(_write(config, text + "persistence = true\n"))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_live_episode_keeps_the_cache_stale():
    _, once, _ = run_episode("tally", Scripted(), Tally(), "lag2")
    _, cache, info = run_episode("tally", Scripted(), Tally(), "lag2", persistence="refresh")
    assert once.won and not cache.won and info["persistence"] == "refresh"
    reads = [s.shown for s in cache.steps if s.action == "read"]
    assert reads == ["The counter shows 0."] * 4


def test_cir_run_and_cir_episode_take_it(tmp_path, capsys):
    assert main(["tasks", "generate", "--family", KEYDOOR, "--split", "test", "--n", "3", "--out",
                 str(tmp_path / "tasks")]) == 0
    grid = ["--conditions", "clean,stale1,missing", "--delays", "0,1", "--operations", "refresh,replan", "--quiet"]
    assert main(["run", "--family", KEYDOOR, "--tasks", str(tmp_path / "tasks" / "test"), "--out",
                 str(tmp_path / "run"), *grid, "--persistence", "2"]) == 0
    assert json.loads((tmp_path / "run" / "run.json").read_text())["settings"]["persistence"] == "2"
    # the family's own test of an anomalous text splits what the arms showed
    table = read_paired(tmp_path / "run")
    shown = table.drop_duplicates(["task_id", "condition"]).set_index(["task_id", "condition"])["shown"]
    assert set(shown.xs("missing", level="condition")) == {"anomalous"}
    assert set(shown.xs("clean", level="condition")) == {"true"}
    assert set(shown.xs("stale1", level="condition")) <= {"true", "anomalous", "looks_right"}
    capsys.readouterr()
    assert main(["run", "--family", KEYDOOR, "--tasks", str(tmp_path / "tasks" / "test"), "--out",
                 str(tmp_path / "bad"), *grid, "--persistence", "never"]) == 2
    assert "cir: error: --persistence 'never': expected once" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    task = get_family(KEYDOOR).load_tasks(tmp_path / "tasks" / "test")[0].task_id
    assert main(["episode", task, "--family", KEYDOOR, "--tasks", str(tmp_path / "tasks" / "test"),
                 "--condition", "missing", "--persistence", "refresh", "--json", str(tmp_path / "ep.json"),
                 "--quiet"]) == 0
    assert json.loads((tmp_path / "ep.json").read_text())["info"]["persistence"] == "refresh"
