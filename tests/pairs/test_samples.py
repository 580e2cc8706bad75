"""K continuations per arm and branch (--samples): the replayer's further draws, the table's
sample columns and their checks, a run folder of samples, and what stays as it was at K = 1."""

from __future__ import annotations

import pandas as pd
import pytest
from support.replay import FakeAgent, SamplingFakeAgent, fake_tasks, make_fake_env

from cir.pairs.paired import read_paired, validate_paired
from cir.pairs.replay import ReplaySettings, run_task_pairs
from cir.pairs.run import run_experiment
from cir.pairs.samples import SAMPLE_COLUMNS, outcome_probabilities, sample_columns
from cir.pairs.settings import RunSettings
from cir.util.errors import CirError

OPS = ("refresh", "replan")


def run_one(task, samples, agent=None, concurrency=1, **kw):
    # budgets tight enough that a sampled detour changes outcomes
    settings = ReplaySettings(conditions=("clean", "stale2", "missing"), delays=(0, 1, 2), operations=OPS,
                              samples=samples, max_turns=12, max_actions=12, **kw)
    return run_task_pairs(task, agent or SamplingFakeAgent(), make_fake_env(task), settings,
                          concurrency=concurrency)


def _dicts(episodes):
    return [e.to_dict() for e in episodes]


def test_the_first_draw_is_the_run_of_one_draw_and_further_draws_share_the_prefix():
    task = fake_tasks(2)[1]
    one, four = run_one(task, 1), run_one(task, 4)
    assert four.feasible
    assert not any(c in one.rows[0] for c in SAMPLE_COLUMNS)
    # y0, y1, outcome and features are the first draw's: the rows of one draw, with columns added
    assert [{k: v for k, v in r.items() if k not in SAMPLE_COLUMNS} for r in four.rows] == one.rows
    assert _dicts([e for e in four.episodes if e.sample == 0]) == _dicts(one.episodes)
    further = [e for e in four.episodes if e.sample]
    assert {e.sample for e in further} == {1, 2, 3}
    arms = {(e.condition, e.delay, e.sample): e for e in further if e.is_arm}
    first = {e.condition: e.transcript for e in four.episodes if e.is_arm and e.sample == 0}
    first["clean"] = next(e.transcript for e in four.episodes if e.role == "factual")
    for e in further:  # every draw is the first draw's arm up to its branch point
        assert e.transcript.steps[:e.branch_step] == first[e.condition].steps[:e.branch_step]
    for row in four.rows:
        if not row["executed"]:
            assert (row["y0_sum"], row["y1_sum"], row["k"]) == (4 * row["y0"], 4 * row["y0"], 4)
            continue
        draws = [row["y0"]] + [int(arms[(row["condition"], row["delay"], s)].won) for s in (1, 2, 3)]
        branches = [row["y1"]] + [int(next(e.won for e in further if e.is_branch and e.sample == s
                                           and (e.condition, e.delay, e.operation)
                                           == (row["condition"], row["delay"], row["operation"])))
                                  for s in (1, 2, 3)]
        assert {c: row[c] for c in SAMPLE_COLUMNS} == sample_columns(draws, branches)
    assert sum(r["y0_sum"] != 4 * r["y0"] for r in four.rows) > 0  # the draws do differ


def test_draws_at_any_concurrency_are_the_sequential_draws():
    task = fake_tasks(3)[2]
    a, b = run_one(task, 3), run_one(task, 3, concurrency=6)
    assert a.rows == b.rows and _dicts(a.episodes) == _dicts(b.episodes)
    assert a.costs["agent_calls"] == b.costs["agent_calls"]


def test_an_agent_that_does_not_sample_is_refused_and_one_that_does_not_differ_costs_nothing():
    task = fake_tasks(1)[0]
    with pytest.raises(CirError, match="does not sample"):
        run_one(task, 2, agent=FakeAgent())
    cold_one, cold_three = run_one(task, 1, agent=SamplingFakeAgent(temperature=0.0)), \
        run_one(task, 3, agent=SamplingFakeAgent(temperature=0.0))
    assert all(r["y0_sum"] == 3 * r["y0"] and r["y1_sum"] == 3 * r["y1"] for r in cold_three.rows)
    assert [r["y0"] for r in cold_three.rows] == [r["y0"] for r in cold_one.rows]


def test_the_first_draw_of_the_builtin_agent_at_temperature_zero_needs_no_further_call(pick_place_task):
    from cir.families.alfworld.agent.builtin import BuiltinAgent
    from cir.families.alfworld.env import AlfworldEnv

    settings = ReplaySettings(conditions=("clean", "stale2"), delays=(0, 2), operations=("refresh",), samples=3)
    three = run_task_pairs(pick_place_task, BuiltinAgent(), AlfworldEnv(pick_place_task.game_file), settings)
    one = run_task_pairs(pick_place_task, BuiltinAgent(), AlfworldEnv(pick_place_task.game_file),
                         ReplaySettings(conditions=("clean", "stale2"), delays=(0, 2), operations=("refresh",)))
    assert three.costs["agent_calls"] == one.costs["agent_calls"]  # sample(i) is the agent itself
    assert all(r["y0_sum"] == 3 * r["y0"] for r in three.rows)


def _table(samples=3, n=3):
    rows = [r for t in fake_tasks(n) for r in run_one(t, samples).rows]
    return pd.DataFrame(rows)


def _moved_without_recovery(d):
    """Rows whose recovery did not run but whose recovery draws differ, otherwise consistent."""
    d = d.assign(executed=False, y1=d["y0"], y0_sum=d["y0"], y1_sum=d["y0"] + 1)
    d = d.assign(p0_hat=d["y0_sum"] / d["k"], p1_hat=d["y1_sum"] / d["k"])
    return d.assign(p_rescue=(d["p1_hat"] - d["p0_hat"]).clip(lower=0), p_harm=0.0,
                    outcome=["stable_success" if y else "stable_failure" for y in d["y0"]])


def test_the_sample_columns_are_checked():
    df = _table()
    validate_paired(df)
    executed = df.index[df["executed"]][0]
    bad = [("p0_hat", lambda d: d.assign(p0_hat=d["p0_hat"] + 0.1), "p0_hat = y0_sum / k"),
           ("y0_sum", lambda d: d.assign(y0_sum=d["k"] + 1), "expected a whole number of draws"),
           ("missing", lambda d: d.drop(columns="p_harm"), "not 'p_harm'"),
           ("first draw", lambda d: d.assign(y0_sum=0, p0_hat=0.0, y0=1, y1=1, y1_sum=1, p1_hat=1 / 3,
                                           p_rescue=1 / 3, p_harm=0.0, outcome="stable_success"),
            "first draws"),
           ("not run", _moved_without_recovery, "recovery did not run")]
    for name, edit, message in bad:
        broken = df.copy()
        broken.loc[[executed]] = edit(broken.loc[[executed]]).to_numpy() if name != "missing" else broken.loc[[executed]]
        broken = edit(broken) if name == "missing" else broken
        with pytest.raises(CirError, match=message):
            validate_paired(broken)


def test_probabilities_of_a_table_of_one_draw_are_its_outcomes():
    df = validate_paired(_table(samples=1))
    p = outcome_probabilities(df)
    assert (p["k"] == 1).all() and (p["p0"] == df["y0"]).all() and (p["p1"] == df["y1"]).all()
    assert ((p["p_rescue"] == 1) == (df["outcome"] == "rescue")).all()
    assert ((p["p_harm"] == 1) == (df["outcome"] == "harm")).all()


def test_a_run_folder_of_samples_resumes_and_an_extension_keeps_its_draws(tmp_path):
    tasks = fake_tasks(3)
    replay = ReplaySettings(conditions=("clean", "stale2"), delays=(0, 1), operations=OPS, samples=3)

    def settings(samples=3, **more):
        return RunSettings(replay=ReplaySettings(**{**replay.as_dict(), "samples": samples}),
                           agent="fake", agent_factory=lambda spec, seed=0: SamplingFakeAgent(seed),
                           env_factory=make_fake_env, **more)

    record = run_experiment(tasks, tmp_path / "run", settings(), progress=False, echo=lambda _: None)
    assert record.settings.replay.samples == 3
    df = read_paired(tmp_path / "run")
    assert (df["k"] == 3).all()
    again = run_experiment(tasks, tmp_path / "run", settings(), progress=False, echo=lambda _: None)
    assert again.counts == record.counts  # resumed: nothing to do
    with pytest.raises(CirError, match="keeps every draw"):
        run_experiment(tasks, tmp_path / "run2", settings(samples=2, extend=str(tmp_path / "run")),
                       progress=False, echo=lambda _: None)
    run1 = RunSettings(replay=ReplaySettings(conditions=("clean",), delays=(0,), operations=("refresh",)),
                       agent="fake", agent_factory=lambda spec, seed=0: FakeAgent(seed), env_factory=make_fake_env)
    assert "samples" not in run1.replay.as_dict()  # a run of one draw records none
