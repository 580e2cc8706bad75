"""The counting env: the one place an episode's env calls are counted, by the harness and the
operations alike, and consistent with the env work the branching env actually did."""

from __future__ import annotations

from support.replay import FakeAgent, fake_tasks, make_fake_env

from cir.envs.counting import CountingEnv
from cir.episode.harness import Harness
from cir.pairs.replay import ReplaySettings, run_task_pairs


def test_counts_calls_from_the_harness_and_the_operations():
    task = fake_tasks(1)[0]
    env = CountingEnv(make_fake_env(task))
    harness = Harness(FakeAgent())
    t = harness.reset(env, task.task_id)
    snap = env.snapshot()
    harness.play(env, t, until_env_actions=3)
    harness.recover(env, t, "refresh")  # the operation steps the same counting env
    env.restore(snap)
    assert env.counts.as_dict() == {"steps": 4, "resets": 1, "snapshots": 1, "restores": 1}
    assert env.env.steps == 4 and t.env_actions == 4
    assert harness.costs.as_dict() == {"agent_calls": t.model_turns, "cache_hits": 0}


def test_task_costs_requests_split_into_real_steps_and_memo_hits():
    task = fake_tasks(1)[0]
    settings = ReplaySettings(operations=("refresh", "refresh_ablated", "replan", "rewind"))
    costs = run_task_pairs(task, FakeAgent(), make_fake_env(task), settings).costs
    assert costs["env_step_requests"] == costs["env_steps"] + costs["env_memo_hits"]
    assert costs["env_resets"] == 1 and costs["env_memo_hits"] > 0
