"""The branching replayer on the fake env/agent: structure, prefix checks, determinism, cost."""

from __future__ import annotations

import pytest
from support.replay import FakeAgent, fake_settings, fake_tasks, make_fake_env

from cir.episode.delays import check_delays
from cir.pairs.paired import PAIRED_COLUMNS, validate_paired
from cir.pairs.replay import ReplayError, ReplaySettings, check_arm, run_task_pairs
from cir.pairs.run import run_experiment
from cir.router.live import run_episode
from cir.util.errors import CirError

ALL_OPS = ("refresh", "refresh_ablated", "replan", "rewind")


def run_one(task, ops=ALL_OPS, **kw):
    settings = ReplaySettings(operations=ops, **kw)
    return run_task_pairs(task, FakeAgent(), make_fake_env(task), settings)


def test_rows_cover_the_grid_and_prefixes_match():
    task = fake_tasks(1)[0]
    r = run_one(task)
    assert r.feasible and r.point == -(-r.factual_env_actions // 4) + 1
    assert len(r.rows) == 4 * 4 * 4
    assert all(row["prefix_match"] for row in r.rows)
    assert set(PAIRED_COLUMNS) <= set(r.rows[0])
    df = validate_paired(__import__("pandas").DataFrame(r.rows))
    assert len(df) == 64
    clean = [row for row in r.rows if row["condition"] == "clean"]
    assert all(row["y0"] == int(r.factual_success) for row in clean)
    # not executed -> carried forward
    for row in r.rows:
        if not row["executed"]:
            assert row["y1"] == row["y0"]


def _eps(r, role, cond=None):
    return [e for e in r.episodes if e.role == role and (cond is None or e.condition == cond)]


def test_arms_and_branches_are_consistent_with_a_from_scratch_run():
    """A perturbed arm built from the factual snapshot equals running it from reset."""
    from cir.episode.harness import Harness
    from cir.episode.perturb import Perturbation, parse_condition

    task = fake_tasks(3)[0]
    r = run_one(task, ops=("refresh",))
    for cond in ("stale2", "stale1", "missing"):
        arm = _eps(r, "no_recovery", cond)[0].transcript
        env = make_fake_env(task)
        scratch = Harness(FakeAgent()).episode(env, task.task_id,
                                               perturbation=Perturbation(parse_condition(cond), r.point))
        assert scratch.fingerprint() == arm.fingerprint()
    # a refresh branch from scratch: run to the branch point, recover, continue
    for ep in _eps(r, "recovery", "stale2"):
        if not ep.executed:
            continue
        branch = ep.transcript
        env = make_fake_env(task)
        h = Harness(FakeAgent())
        t = h.reset(env, task.task_id)
        h.play(env, t, until_env_actions=r.point + ep.delay,
              perturbation=Perturbation(parse_condition("stale2"), r.point))
        assert len(t.steps) == ep.branch_step
        h.recover(env, t, "refresh")
        h.play(env, t)
        assert t.fingerprint() == branch.fingerprint()


def test_rewind_branch_restores_before_the_perturbed_step():
    task = fake_tasks(1)[0]
    r = run_one(task, ops=("rewind",), conditions=("stale2",))
    for ep in _eps(r, "recovery"):
        if ep.executed:
            t = ep.transcript
            rw = [s for s in t.steps if s.rewind_to is not None]
            assert len(rw) == 1
            factual = _eps(r, "factual")[0].transcript
            assert rw[0].rewind_to == factual.steps_until_env_action(r.point - 1)
            assert t.env_actions >= r.point + ep.delay


def test_infeasible_task_is_recorded_not_dropped():
    # find a task whose factual run is too short for stale2
    for task in fake_tasks(12):
        r = run_one(task, ops=("refresh",))
        if not r.feasible:
            assert "stale2" in r.reason or "not reached" in r.reason
            assert r.rows == [] and len(r.episodes) == 1
            break
    else:  # pragma: no cover
        pytest.skip("every fake task was prefix-feasible: no infeasible one to check")


def test_no_work_done_twice():
    """Agent calls equal distinct contexts; env steps equal distinct env histories."""
    from cir.episode.transcript import context_hash

    task = fake_tasks(1)[0]
    agent = FakeAgent()
    r = run_task_pairs(task, agent, make_fake_env(task), ReplaySettings(operations=ALL_OPS))
    contexts, env_keys = set(), set()
    for ep in r.episodes:
        if ep.transcript is None:
            continue
        t = ep.transcript
        for i, step in enumerate(t.steps):
            if step.actor == "agent":
                contexts.add(context_hash(t.prefix(i).context(), agent.params()))
            if step.action is not None:
                env_keys.add(tuple(t.env_path(i + 1)))
    assert r.costs["agent_calls"] == agent.calls == len(contexts)
    assert r.costs["env_steps"] == len(env_keys)


def test_prefix_mismatch_names_the_task():
    task = fake_tasks(1)[0]
    r = run_one(task, ops=("refresh",), conditions=("clean",))
    factual = _eps(r, "factual")[0].transcript
    other = factual.prefix(len(factual.steps))
    other.steps[0].reply = "think: something else"
    with pytest.raises(ReplayError, match=task.task_id):
        check_arm(task.task_id, "stale2", factual, other, 4)


def test_settings_validation():
    with pytest.raises(CirError, match="delay -1"):
        check_delays("0,-1")
    with pytest.raises(CirError, match="delay 'x'"):
        check_delays("0,x")
    with pytest.raises(CirError, match="delay"):
        ReplaySettings(delays=(-2,))
    with pytest.raises(CirError, match="unknown operation"):
        ReplaySettings(operations=("nap",))
    with pytest.raises(CirError, match="unknown condition"):
        ReplaySettings(conditions=("foo",))


def test_run_episode_router_and_condition():
    task = fake_tasks(1)[0]

    class Yes:
        delays = (1, 2, 4)

        def decide(self, transcript, delay):
            return type("D", (), {"recover": delay == 2, "operation": "refresh"})()

    factual, ep, info = run_episode(task.task_id, FakeAgent(), make_fake_env(task), "stale2", router=Yes())
    assert info["point"] and info["router_decisions"][:2] == [
        {"delay": 1, "recover": False, "operation": None},
        {"delay": 2, "recover": True, "operation": "refresh"}]
    assert sum(1 for s in ep.steps if s.actor == "harness") == 1
    f2, e2, info2 = run_episode(task.task_id, FakeAgent(), make_fake_env(task))
    assert f2 is e2 and info2["point"] is None


def _experiment(out, jobs=1, backend="loky", n=5, **kw):
    return run_experiment(
        fake_tasks(n), out, fake_settings(ReplaySettings(operations=("refresh", "rewind")), "fake",
                                          jobs=jobs, backend=backend, **kw),
        tasks_source="fake", progress=False, echo=lambda s: None)


def test_experiment_deterministic_and_jobs_independent(tmp_path):
    _experiment(tmp_path / "a")
    _experiment(tmp_path / "b")
    _experiment(tmp_path / "d", jobs=2, backend="threading")
    a = (tmp_path / "a" / "paired.csv").read_bytes()
    assert a == (tmp_path / "b" / "paired.csv").read_bytes()
    assert a == (tmp_path / "d" / "paired.csv").read_bytes()
    from cir.pairs.paired import read_paired

    df = read_paired(tmp_path / "a")
    assert df["prefix_match"].all() and len(df) > 0


@pytest.mark.slow
def test_loky_and_dask_give_identical_tables(tmp_path):
    _experiment(tmp_path / "a")
    _experiment(tmp_path / "loky", jobs=2, backend="loky")
    _experiment(tmp_path / "dask", jobs=2, backend="dask")
    a = (tmp_path / "a" / "paired.csv").read_bytes()
    assert a == (tmp_path / "loky" / "paired.csv").read_bytes()
    assert a == (tmp_path / "dask" / "paired.csv").read_bytes()
    import json

    rec = json.loads((tmp_path / "dask" / "run.json").read_text())
    assert rec["complete"] and rec["timings"]["sessions"][-1]["backend"] == "dask"
    # an existing scheduler, by address
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        _experiment(tmp_path / "sched", jobs=2, backend="dask", scheduler=cluster.scheduler_address)
    assert a == (tmp_path / "sched" / "paired.csv").read_bytes()


def test_rerun_does_nothing_and_other_settings_refused(tmp_path):
    msgs = []
    rec = _experiment(tmp_path / "r")
    assert rec.complete and rec.counts.tasks_done == 5
    run_experiment(fake_tasks(5), tmp_path / "r",
                   fake_settings(ReplaySettings(operations=("refresh", "rewind")), "fake"),
                   tasks_source="fake", progress=False, echo=msgs.append)
    assert "nothing to do" in msgs[0]
    with pytest.raises(CirError, match="delays"):
        run_experiment(fake_tasks(5), tmp_path / "r",
                       fake_settings(ReplaySettings(operations=("refresh", "rewind"), delays=(0, 1)), "fake"),
                       tasks_source="fake", progress=False, echo=msgs.append)
    with pytest.raises(CirError, match="backend .spark.: expected one of loky"):
        _experiment(tmp_path / "x", backend="spark")
    with pytest.raises(CirError, match="no tasks"):
        run_experiment([], tmp_path / "y", progress=False)


def test_branching_env_does_each_transition_once():
    from cir.envs.branching import BranchingEnv

    task = fake_tasks(1)[0]
    real = make_fake_env(task)
    env = BranchingEnv(real)
    intro = env.reset()
    assert env.reset() == intro and real.resets == 1
    a = env.step("go to drawer 1")
    s1 = env.snapshot()
    b = env.step("go to shelf 1")
    env.restore(())
    assert env.step("go to drawer 1") == a  # memo hit, real env not touched
    assert real.steps == 2 and env.stats["env_memo_hits"] == 1
    env.restore(s1)
    assert env.step("go to shelf 1") == b
    c = env.step("look")  # real env is already at this path: no restore needed
    assert env.stats["env_restores"] == 0 and real.steps == 3 and "facing the shelf 1" in c[0]
    env.restore(())
    env.step("go to shelf 1")  # new transition from an old state: one restore
    assert env.stats["env_restores"] == 1 and real.steps == 4
    with pytest.raises(CirError, match="unknown state"):
        env.restore(("fly",))


def test_a_fixed_perturbation_point_is_the_same_env_action_in_every_task():
    from cir.episode.perturb import feasibility, parse_conditions, perturbation_point
    from cir.pairs.replay import run_task_pairs

    settings = ReplaySettings(conditions=("clean", "stale2"), delays=(0, 1), perturb_at=3)
    points = set()
    for task in fake_tasks(6):
        result = run_task_pairs(task, FakeAgent(), make_fake_env(task), settings)
        assert result.feasible, result.reason
        points.add(result.point)
    assert points == {3}
    assert perturbation_point(40, 0.25, at=3) == 3 and perturbation_point(40, 0.25) == 11
    ok, reason = feasibility(2, parse_conditions("stale2"), at=3)
    assert not ok and "env action 3" in reason
    ok, reason = feasibility(10, parse_conditions("stale2"), at=2)
    assert not ok and "stale2 needs 2 env actions before" in reason
    with pytest.raises(CirError, match="perturbation point 0"):
        ReplaySettings(perturb_at=0)


def test_a_lag_arm_is_the_run_shown_the_answer_its_command_got_k_env_actions_earlier():
    """lagK: the perturbed step shows what a fresh env, sent the factual actions up to K env
    actions before, answers to the same command; the arm is the from-scratch run shown that
    text; the lag's env step is counted (one request, one real step per distinct state)."""
    from cir.episode.harness import Harness
    from cir.episode.perturb import Perturbation, parse_condition

    for task in fake_tasks(4):
        base = run_one(task, ops=("refresh",), conditions=("clean", "stale2"))
        r = run_one(task, ops=("refresh",), conditions=("clean", "stale2", "lag2", "lag1"))
        if not r.feasible:
            continue
        factual = _eps(r, "factual")[0].transcript
        actions = [s.action for s in factual.steps if s.action is not None]
        for cond in ("lag2", "lag1"):
            k = int(cond[-1])
            env = make_fake_env(task)
            env.reset()
            for a in actions[: r.point - 1 - k]:
                env.step(a)
            answer, _, _ = env.step(actions[r.point - 1])
            arm = _eps(r, "no_recovery", cond)[0].transcript
            k_at = factual.steps_until_env_action(r.point)
            assert arm.steps[k_at - 1].shown == answer
            assert arm.steps[k_at - 1].observation == factual.steps[k_at - 1].observation
            scratch = Harness(FakeAgent()).episode(make_fake_env(task), task.task_id, perturbation=Perturbation(
                parse_condition(cond), r.point, lagged=answer))
            assert scratch.fingerprint() == arm.fingerprint()
        # the staleK rows are those of a run without the lag conditions, and the lag queries are counted
        assert [row for row in r.rows if row["condition"] in ("clean", "stale2")] == base.rows
        assert r.costs["env_step_requests"] > base.costs["env_step_requests"]
        assert r.costs["env_steps"] >= base.costs["env_steps"]


def test_run_episode_under_lag():
    task = fake_tasks(1)[0]
    factual, ep, info = run_episode(task.task_id, FakeAgent(), make_fake_env(task), "lag2")
    k_at = factual.steps_until_env_action(info["point"])
    assert "perturb:lag2" in ep.steps[k_at - 1].events
    assert ep.steps[k_at - 1].observation == factual.steps[k_at - 1].observation
    # the factual run, the episode after the perturbed action, and the lag's one query
    assert info["costs"]["env_steps"] == factual.env_actions + ep.env_actions - info["point"] + 1
