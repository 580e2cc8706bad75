"""The paired-table validator refuses rows no paired run can produce, naming the row and the rule;
the router reader refuses duplicate keys and oversized files before reading them."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from cir.cli import main
from cir.episode.delays import MAX_DELAY
from cir.pairs.paired import read_paired, validate_paired
from cir.pairs.synthetic import simulate, simulate_paired
from cir.router.runtime import MAX_ROUTER_BYTES, Router
from cir.util.errors import CirError


@pytest.fixture
def table():
    return simulate_paired(6, seed=3)


def test_a_sound_table_passes(table):
    assert len(validate_paired(table)) == len(table)


def test_a_recovery_that_did_not_run_cannot_change_the_outcome(table):
    row = table.index[3]
    table.loc[row, ["executed", "y0", "y1"]] = [0, 1, 0]
    with pytest.raises(CirError, match=rf"row {row} \(task_id='task0000', condition='clean', delay=\d+, "
                                       r"operation='refresh'\) has executed=0 but y1=0 != y0=1: a recovery "
                                       r"that did not run leaves y1 = y0"):
        validate_paired(table, source="t.csv")


@pytest.mark.parametrize("blank", [np.nan, "", "   "])
def test_every_row_belongs_to_a_task(table, blank):
    table["task_id"] = table["task_id"].astype(object)
    table.loc[table.index[5], "task_id"] = blank
    with pytest.raises(CirError, match=rf"row {table.index[5]} has an empty task_id"):
        validate_paired(table)


def test_empty_task_ids_read_from_a_file_are_refused(table, tmp_path):
    table.loc[table.index[2], "task_id"] = ""
    table.to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(CirError, match="row 2 has an empty task_id"):
        read_paired(tmp_path / "p.csv")


def test_a_task_has_one_factual_outcome(table):
    task = table["task_id"].iloc[0]
    rows = table.index[table["task_id"] == task]
    table.loc[rows, "factual_success"] = 1
    table.loc[rows[4], "factual_success"] = 0
    with pytest.raises(CirError, match=rf"task '{task}' has factual_success=1 in row {rows[0]} and 0 in "
                                       rf"row {rows[4]}: a task has one factual run"):
        validate_paired(table)


@pytest.mark.parametrize("delay", ["99999999999999999999", str(MAX_DELAY + 1), "1e30"])
def test_delays_beyond_what_can_be_held_are_refused(table, delay):
    text = table.to_csv(index=False).replace(",refresh,", ",refresh,", 1)
    df = __import__("pandas").read_csv(io.StringIO(text))
    df["delay"] = df["delay"].astype(object)
    df.loc[df.index[1], "delay"] = delay
    with pytest.raises(CirError, match=rf"column 'delay' must hold integers from 0 to {MAX_DELAY}; "
                                       rf"row 1 has '{delay}'"):
        validate_paired(df)


def test_cir_run_refuses_a_delay_it_could_not_read_back(tmp_path, capsys):
    code = main(["run", "--tasks", str(tmp_path), "--out", str(tmp_path / "o"), "--delays",
                 "0,99999999999999999999"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == ("cir: error: --delays: delay 99999999999999999999: expected an "
                                         f"integer from 0 to {MAX_DELAY}")
    assert not (tmp_path / "o").exists()


# -- router files ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def router_file(tmp_path_factory):
    from cir.router.policy import CIRPolicy

    path = tmp_path_factory.mktemp("router") / "router.json"
    CIRPolicy(threshold_steps=5, folds=3).fit(simulate(60, seed=4)).to_router().save(path)
    return path


def test_a_key_given_twice_is_refused_not_last_one_wins(router_file, tmp_path):
    text = router_file.read_text()
    twice = text.replace('"thresholds": {', '"thresholds": {"alpha": 0.0, "beta": 0.0, "gamma": 0.0}, '
                                             '"thresholds": {', 1)
    (tmp_path / "r.json").write_text(twice)
    assert json.loads(twice)["thresholds"] == json.loads(text)["thresholds"]  # what json would do
    with pytest.raises(CirError, match="key 'thresholds' appears twice in one object of the router file"):
        Router.load(tmp_path / "r.json")


def test_an_oversized_router_file_is_refused_unread(tmp_path, monkeypatch):
    path = tmp_path / "huge.json"
    with open(path, "wb") as fh:  # sparse: 1 GB on paper, nothing on disk
        fh.truncate(1 << 30)

    def unread(*args, **kwargs):
        raise AssertionError("read")

    monkeypatch.setattr("pathlib.Path.read_text", unread)
    with pytest.raises(CirError, match=rf"huge.json: {1 << 30} bytes, more than a router file can be "
                                       rf"\({MAX_ROUTER_BYTES} bytes at most\)"):
        Router.load(path)
