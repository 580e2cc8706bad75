"""The built-in agent on the real ALFWorld engine (generated tasks in a tmp folder)."""

from __future__ import annotations

import pytest

pytest.importorskip("alfworld")


@pytest.fixture(scope="module")
def simple_task(tmp_path_factory):
    from cir.families.alfworld.generate import generate_split
    from cir.families.alfworld.tasks import load_tasks

    out = tmp_path_factory.mktemp("builtin_tasks")
    generate_split(out, "valid_unseen", 1, seed=3, types=["pick_and_place_simple"], progress=False)
    (task,) = load_tasks(out / "valid_unseen")
    return task


def test_strong_profile_wins_a_short_real_episode(simple_task):
    from cir.episode.harness import Harness
    from cir.families.alfworld.agent.builtin import BuiltinAgent

    env = simple_task.make_env()
    tr = Harness(BuiltinAgent("strong")).episode(env, simple_task.task_id)
    assert tr.won, "\n".join(f"{s.reply} -> {s.shown}" for s in tr.steps)
    # it explores like an agent: at least the optimal plan, usually more
    if simple_task.plan_length:
        assert tr.env_actions >= simple_task.plan_length
    # every reply was an action in ALFWorld syntax or a thought
    from cir.families.alfworld.text import parse_action

    for s in tr.steps:
        assert s.reply.startswith("think:") or parse_action(s.reply) is not None


def test_same_episode_twice_is_identical(simple_task):
    from cir.episode.harness import Harness
    from cir.families.alfworld.agent.builtin import BuiltinAgent

    env = simple_task.make_env()
    a = Harness(BuiltinAgent("default", seed=5)).episode(env, simple_task.task_id)
    b = Harness(BuiltinAgent("default", seed=5)).episode(env, simple_task.task_id)
    assert a.fingerprint() == b.fingerprint()


@pytest.mark.slow
def test_profiles_order_on_a_few_tasks(tmp_path):
    """Over a few generated tasks the strong profile does at least as well as the weak one."""
    from cir.episode.harness import Harness
    from cir.families.alfworld.agent.builtin import BuiltinAgent
    from cir.families.alfworld.generate import generate_split
    from cir.families.alfworld.tasks import load_tasks

    types = ["pick_and_place_simple", "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
             "pick_clean_then_place_in_recep", "pick_two_obj_and_place", "look_at_obj_in_light"]
    generate_split(tmp_path, "valid_unseen", 6, seed=3, types=types, progress=False)
    wins = {"weak": 0, "strong": 0}
    for task in load_tasks(tmp_path / "valid_unseen"):
        env = task.make_env()
        for prof in wins:
            wins[prof] += Harness(BuiltinAgent(prof)).episode(env, task.task_id).won
    assert wins["strong"] >= wins["weak"]
    assert wins["strong"] >= 4


def test_lag_arms_on_the_real_engine_show_the_answer_of_k_env_actions_earlier(simple_task):
    """lagK on ALFWorld: the env's own snapshots give the same answer as a fresh engine sent the
    earlier actions (snapshots fast and replay)."""
    from support.replay import check_lag_arms

    from cir.families.alfworld.agent.builtin import BuiltinAgent
    from cir.pairs.replay import ReplaySettings

    settings = ReplaySettings(conditions=("clean", "lag2", "lag1"), delays=(0, 1), operations=("refresh",))
    for snapshots in ("fast", "replay"):
        assert check_lag_arms(simple_task, BuiltinAgent(seed=0), lambda t, s=snapshots: t.make_env(snapshots=s),
                              settings) == 2
