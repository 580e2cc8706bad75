"""The replayer checks the env's restore where the arms start, and stops before a wrong label."""

from __future__ import annotations

import pytest
from support.keydoor import FAMILY, FORGETFUL, KeyDoorAgent, generate_tasks, load_tasks

from cir.envs.branching import BranchingEnv
from cir.pairs.replay import ReplaySettings, RestoreError, run_task_pairs

SETTINGS = ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1), operations=("refresh",))


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kd")
    generate_tasks(folder, "train", 1, 0)
    return load_tasks(folder / "train")[0]


def test_a_restore_that_forgets_a_field_stops_the_task(task):
    with pytest.raises(RestoreError) as err:
        run_task_pairs(task, KeyDoorAgent(), FORGETFUL.env(task), SETTINGS, extractor=FORGETFUL.extractor)
    message = str(err.value)
    assert message.startswith(f"task {task.task_id}: the env's restore is not exact: restored to the state "
                              "after env action ")
    assert "The door locks." in message and "(done True, won False)" in message and "cir check-env" in message


def test_the_check_costs_the_grid_nothing(task):
    env = BranchingEnv(FAMILY.env(task))
    env.reset()
    for action in ("right", "right", "right"):
        env.step(action)
    stats = dict(env.stats)
    assert env.verify_restore(("right", "right")) is None
    assert env.stats == stats  # not the grid's work
    # the real env is back where it was: the next step needs no restore
    env.step("right")
    assert env.stats["env_restores"] == stats["env_restores"] and env.stats["env_steps"] == stats["env_steps"] + 1
    result = run_task_pairs(task, KeyDoorAgent(), FAMILY.env(task), SETTINGS, extractor=FAMILY.extractor)
    assert result.feasible and result.rows and all(r["prefix_match"] for r in result.rows)
