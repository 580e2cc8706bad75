"""A run's settings: one object, every value checked where it is built, with an error that names
the setting (in Python) or its option (on the command line)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from support.replay import make_fake_agent

from cir.cli import main
from cir.pairs.settings import ReplaySettings, RunSettings
from cir.util.errors import CirError, SettingError


def test_comma_lists_and_sequences_give_the_same_grid() -> None:
    parsed = ReplaySettings.parse("clean, stale2", "0,1, 4", "refresh,replan", max_turns=20)
    built = ReplaySettings(conditions=("clean", "stale2"), delays=(0, 1, 4), operations=("refresh", "replan"),
                           max_turns=20)
    assert parsed == built and parsed.delays == (0, 1, 4) and parsed.operations == ("refresh", "replan")
    assert len(built.cells()) == 2 * 3 * 2


@pytest.mark.parametrize(("kwargs", "python", "option"), [
    (dict(jobs=0), "--jobs 0: expected an integer >= 1", "--jobs 0: expected an integer >= 1"),
    (dict(backend="spark"), "backend 'spark': expected one of loky, threading, dask",
     "--backend 'spark': expected one of loky, threading, dask"),
    (dict(scheduler="tcp://x:1"), "--scheduler needs --backend dask", "--scheduler needs --backend dask"),
    (dict(snapshots="slow"), "snapshots 'slow': expected fast or replay", "--snapshots 'slow': expected fast or replay"),
    (dict(seed=-1), "seed -1: expected an integer from 0 to 4294967295",
     "--seed -1: expected an integer from 0 to 4294967295"),
    (dict(replay=None), "replay: expected ReplaySettings, got NoneType", None),
])
def test_a_bad_setting_is_refused_where_the_settings_are_built(kwargs, python, option) -> None:
    with pytest.raises(CirError) as err:
        RunSettings(**kwargs)
    assert str(err.value) == python
    if option is not None:
        text = err.value.as_option() if isinstance(err.value, SettingError) else str(err.value)
        assert text == option


@pytest.mark.parametrize(("kwargs", "python", "option"), [
    (dict(max_turns=0), "max_turns 0: expected an integer from 1 to 100000",
     "--max-turns 0: expected an integer from 1 to 100000"),
    (dict(delays=(0, -1)), "delay -1: expected an integer from 0 to 1000000",
     "--delays: delay -1: expected an integer from 0 to 1000000"),
    (dict(delays=(1, 1)), "delays: [1, 1] lists a delay twice", None),
    (dict(operations=("nap",)), "unknown operation 'nap': expected one of refresh, refresh_ablated, replan, "
                                "rewind, placebo", None),
])
def test_a_bad_grid_is_refused_where_it_is_built(kwargs, python, option) -> None:
    with pytest.raises(CirError) as err:
        ReplaySettings(**kwargs)
    assert str(err.value) == python
    if option is not None:
        assert err.value.as_option() == option


def test_the_settings_are_frozen_travel_to_workers_and_take_another_grid() -> None:
    settings = RunSettings(agent="fake", agent_factory=make_fake_agent, jobs=2, cache_dir="/tmp/cache")
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.jobs = 3  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(settings)) == settings  # what a worker process gets
    other = settings.with_replay(ReplaySettings(delays=(2,)))
    assert other.replay.delays == (2,) and dataclasses.replace(other, replay=settings.replay) == settings
    with pytest.raises(CirError, match="jobs"):
        dataclasses.replace(settings, jobs=-1)  # a changed copy is checked too


def test_cir_run_names_the_option_of_a_bad_setting(tmp_path, capsys) -> None:
    for argv, line in [(["--max-turns", "0"], "cir: error: --max-turns 0: expected an integer from 1 to 100000"),
                       (["--seed", "-3"], "cir: error: --seed -3: expected an integer from 0 to 4294967295"),
                       (["--delays", "2,x"], "cir: error: --delays: delay 'x': expected an integer from 0 to 1000000")]:
        assert main(["run", "--tasks", str(tmp_path), "--out", str(tmp_path / "out"), *argv]) == 2
        assert capsys.readouterr().err.strip() == line
    assert not (tmp_path / "out").exists()


def test_the_request_limits_are_one_object_inside_the_run_settings():
    from dataclasses import fields

    from cir.agents.limits import RequestLimits

    names = {f.name for f in fields(RunSettings)}
    assert "requests" in names and not names & {"concurrency", "rpm", "tpm", "request_timeout", "retries", "patience"}
    settings = RunSettings(requests=RequestLimits(concurrency=6, rpm=60), jobs=2)
    assert settings.limits() is settings.requests and settings.limits(2) == RequestLimits(concurrency=3, rpm=30)
    assert RunSettings().requests == RequestLimits(concurrency=1)  # one request at a time by default
    with pytest.raises(SettingError, match="concurrency None"):
        RunSettings(requests=RequestLimits())  # a run shares its requests in flight out: a number


def test_a_random_perturbation_point_per_task() -> None:
    """perturb_between: a point from LO..HI keyed by the task id alone, the same in every run,
    every point of the range drawn; absent from the run record unless set."""
    from cir.episode.perturb import random_point
    from cir.pairs.record import RunIdentity

    settings = ReplaySettings(conditions=("clean", "stale2"), perturb_between=(3, 7))
    points = [settings.point_at(f"task{i:03d}") for i in range(400)]
    assert set(points) == {3, 4, 5, 6, 7} and min(points.count(p) for p in range(3, 8)) > 50
    assert points == [random_point(f"task{i:03d}", 3, 7) for i in range(400)]
    assert ReplaySettings(perturb_at=4).point_at("x") == 4 and ReplaySettings().point_at("x") is None
    assert "perturb_between" not in ReplaySettings().as_dict()
    assert settings.as_dict()["perturb_between"] == [3, 7]
    run = RunSettings(replay=settings, agent="fake", agent_factory=make_fake_agent)
    identity = RunIdentity.of(run, ["a"], "fake@x")
    assert RunIdentity.from_dict(identity.to_dict(), "run.json") == identity
    for bad in ((7, 3), (0, 2), (3,), (3, 4, 5)):
        with pytest.raises(CirError, match="perturb"):
            ReplaySettings(perturb_between=bad)
    with pytest.raises(CirError, match="no perturb_at"):
        ReplaySettings(perturb_at=3, perturb_between=(3, 7))


def test_cir_run_takes_a_random_point_range(tmp_path, capsys) -> None:
    from support.replay import fake_settings, fake_tasks

    from cir.pairs.run import run_experiment

    for text in ("3", "3,x", "7,3"):
        assert main(["run", "--tasks", str(tmp_path), "--out", str(tmp_path / "out"), "--perturb-between", text]) == 2
        assert "perturb" in capsys.readouterr().err
    out = tmp_path / "run"
    record = run_experiment(fake_tasks(6), out, fake_settings(ReplaySettings(conditions=("clean", "stale1"),
                                                                            perturb_between=(2, 3))),
                            progress=False, echo=lambda s: None)
    assert record.settings.replay.perturb_between == (2, 3)
    from cir.episode.perturb import random_point
    from cir.pairs.store import read_episodes
    for ep in read_episodes(out):
        if ep.role == "no_recovery" and ep.transcript is not None:
            at = random_point(ep.task_id, 2, 3)
            step = ep.transcript.steps[ep.transcript.steps_until_env_action(at) - 1]
            assert "perturb:stale1" in step.events


def test_an_agent_with_the_former_settings_method_keeps_its_label_and_is_told_the_new_name() -> None:
    from cir.pairs.settings import agent_label
    from cir.util.deprecation import CirDeprecationWarning

    class Former:
        name = "mine"

        def act(self, context):
            return "look"

        def settings(self):
            return {"v": 1}

    class Now(Former):
        def params(self):
            return {"v": 1}

    with pytest.warns(CirDeprecationWarning, match=r"Agent.settings\(\) is deprecated .* use Agent.params\(\); "
                      r"rename the method .*Former.settings \(.*test_settings.py, line \d+\)"):
        label = agent_label(Former())
    assert label == agent_label(Now())  # the same params: the same agent
    assert agent_label(make_fake_agent()).startswith(make_fake_agent().name + "@")
