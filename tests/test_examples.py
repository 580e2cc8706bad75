"""examples/counter.py: a non-ALFWorld environment through the replayer, the analysis and CIR."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from cir.router.runtime import Router
from cir.util.errors import CirError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "counter.py"


@pytest.fixture(scope="module")
def counter():
    spec = importlib.util.spec_from_file_location("counter_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def study(counter, tmp_path_factory):
    return counter.main(out=tmp_path_factory.mktemp("counter"), resamples=200)


def test_the_counter_env_keeps_the_env_contract(counter):
    from cir.envs.base import Env, refresh_query

    task = counter.make_tasks(3, "t", seed=0)[1]
    env = counter.CounterEnv(task)
    assert isinstance(env, Env) and refresh_query(env) == "read counter"
    env.reset()
    env.step("add 2")
    snap = env.snapshot()
    after = [env.step(a) for a in ("add 2", "read counter", "add 1")]
    env.restore(snap)
    assert [env.step(a) for a in ("add 2", "read counter", "add 1")] == after


def test_refresh_sends_the_envs_query_and_the_replayer_writes_its_features(study, counter):
    train = study["train"]
    assert set(train.filter(like="f_").columns) == set(counter.COUNTER_FEATURES.features)
    # refresh rescues runs that lost count; the content-ablated query shows nothing and never does
    outcomes = study["test"].groupby("operation")["outcome"].value_counts().unstack(fill_value=0)
    assert outcomes.loc["refresh", "rescue"] > 0 and outcomes.loc["refresh", "harm"] > 0
    assert outcomes.loc["refresh_ablated", "rescue"] == 0
    # clean refresh can only harm (a move spent), and it does on tasks with no move to spare
    clean = study["effects"].query("operation == 'refresh' and condition == 'clean' and delay == 0").iloc[0]
    assert clean["rescues"] == 0 and clean["harms"] > 0 and clean["ci_high_pp"] < 0


def test_cir_on_the_counter_gains_without_clean_harm(study):
    s = study["summary"].set_index(["policy", "condition"])
    assert s.loc[("cir", "all"), "success_policy"] >= s.loc[("never", "all"), "success_policy"]
    assert s.loc[("cir", "clean"), "clean_harm_rate"] == 0
    assert s.loc[("oracle", "all"), "success_policy"] >= s.loc[("cir", "all"), "success_policy"]


def test_the_router_records_its_extractor_and_refuses_another(study, tmp_path):
    router = study["router"]
    path = router.save(tmp_path / "r.json")
    assert json.loads(path.read_text())["extractor"] == "counter"
    with pytest.raises(CirError, match="'counter' feature extractor"):
        Router.load(path)  # cir ships no counter extractor: it must be given
    from cir.families.alfworld.features import ALFWORLD_FEATURES

    with pytest.raises(CirError, match="refusing to run it with 'alfworld'"):
        Router.load(path, extractor=ALFWORLD_FEATURES)


def test_the_chat_harness_logs_the_refresh_the_router_asked_for(study):
    log = study["log"]
    asked = [e for e in log if e.get("recover") == "refresh"]
    done = [e for e in log if e.get("recovery") == "refresh"]
    assert len(asked) == 1 and len(done) == 1 and done[0]["query"] == "read counter"
    assert all(e["blocked_by"] == "already_recovered" for e in log if "delay" in e and e["move"] > asked[0]["move"])
    assert study["won"]


def test_its_paired_table_goes_through_the_command_line(study, tmp_path, capsys):
    from cir.cli import main

    test = study["test"]
    test.to_csv(tmp_path / "paired.csv", index=False)
    assert main(["table", str(tmp_path / "paired.csv"), "--operation", "refresh", "--by", "condition",
                 "--resamples", "100", "--format", "json"]) == 0
    rows = {r["condition"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["clean"]["rescues"] == 0 and rows["stale1"]["rescues"] > 0
