"""The run record: run.json round-trips through RunRecord exactly; a damaged record names the field."""

from __future__ import annotations

import json

import pytest
from support.replay import fake_settings, fake_tasks

from cir.pairs.record import RunRecord
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.store import RunStore
from cir.util.errors import CirError


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("record") / "run"
    run_experiment(fake_tasks(4), out,
                   fake_settings(ReplaySettings(operations=("refresh", "replan")), "fake"),
                   tasks_source="fake", progress=False, echo=lambda s: None)
    return out


def test_run_json_round_trips_exactly(run_dir):
    data = json.loads((run_dir / "run.json").read_text())
    record = RunRecord.from_dict(data)
    assert record.to_dict() == data
    assert RunRecord.read(RunStore(run_dir)) == record
    assert record.complete and record.counts.tasks_done == 4 and record.settings.replay.operations == (
        "refresh", "replan")
    assert record.counts.pairs == sum(1 for _ in (run_dir / "paired.csv").open()) - 1
    assert record.costs.cache_hit_rate == data["costs"]["cache_hit_rate"]


def test_a_damaged_record_names_the_field(run_dir):
    data = json.loads((run_dir / "run.json").read_text())
    del data["counts"]["pairs"]
    with pytest.raises(CirError, match="run.json \\(counts\\): the run record has no field 'pairs'"):
        RunRecord.from_dict(data)
    data = json.loads((run_dir / "run.json").read_text())
    data["settings"]["delays"] = [-1]
    with pytest.raises(CirError, match="settings: delay -1"):
        RunRecord.from_dict(data)
