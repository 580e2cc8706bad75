"""The cooking env: exact snapshots at every step of a walk, the refresh query, errors."""

from __future__ import annotations

import pickle
import random

import pytest

from cir.families.textworld_cooking.env import CookingEnv, CookingSnapshot
from cir.families.textworld_cooking.family import walk_actions
from cir.families.textworld_cooking.text import GAME_OVER_TEXT
from cir.util.errors import CirError


def _walk(env: CookingEnv, task, seed: int, length: int) -> list[str]:
    """The walkthrough's first half, then random commands the observations suggest."""
    rng = random.Random(seed)
    obs = env.reset()
    actions = list(task.walkthrough[: len(task.walkthrough) // 2])
    for a in actions:
        obs, done, _ = env.step(a)
    while len(actions) < length:
        a = rng.choice(walk_actions(env, obs))
        actions.append(a)
        obs, done, _ = env.step(a)
    return actions


@pytest.mark.parametrize("mode", ["fast", "replay"])
def test_restore_then_step_equals_the_uninterrupted_walk(cooking_tasks, mode):
    for k, task in enumerate(cooking_tasks[:2] if mode == "replay" else cooking_tasks):
        env = CookingEnv(task.game_file, snapshots=mode)
        actions = _walk(env, task, seed=k, length=24)
        first = env.reset()
        walk, snaps = [], [env.snapshot()]
        for a in actions:
            walk.append((*env.step(a), env.score))
            snaps.append(env.snapshot())
        assert env.reset() == first  # reset is deterministic
        # out of order, and through pickling (a worker process's copy)
        for i in reversed(range(len(actions))):
            snap = pickle.loads(pickle.dumps(snaps[i])) if i % 2 else snaps[i]
            env.restore(snap)
            assert (*env.step(actions[i]), env.score) == walk[i], (task.task_id, i, actions[i])


def test_the_walkthrough_wins_and_the_game_then_stays_over(cooking_tasks):
    task = cooking_tasks[0]
    env = CookingEnv(task.game_file)
    intro = env.reset()
    assert intro.startswith("You are hungry!") and "-= " in intro and "$$" not in intro  # no banner
    for a in task.walkthrough:
        obs, done, won = env.step(a)
    assert (done, won) == (True, True) and env.score > 0
    assert env.step("look") == (GAME_OVER_TEXT, True, True)


def test_the_refresh_query_leaves_the_game_as_it_was(cooking_tasks):
    task = cooking_tasks[1]
    env = CookingEnv(task.game_file)
    assert env.refresh_query == "look"
    env.reset()
    half = task.walkthrough[: len(task.walkthrough) // 2]
    for a in half:
        env.step(a)
    snap = env.snapshot()
    rest = [env.step(a) for a in task.walkthrough[len(half):]]
    env.restore(snap)
    looked = env.step("look")[0]
    assert looked.startswith("-= ")  # a room description
    assert [env.step(a) for a in task.walkthrough[len(half):]] == rest


def test_bad_use_is_one_clear_error(cooking_tasks, tmp_path):
    with pytest.raises(CirError, match="not a cooking game"):
        CookingEnv(tmp_path / "game.tw-pddl")
    with pytest.raises(CirError, match="snapshots="):
        CookingEnv(cooking_tasks[0].game_file, snapshots="quick")
    env = CookingEnv(cooking_tasks[0].game_file)
    with pytest.raises(CirError, match="before reset"):
        env.step("look")
    env.reset()
    other = CookingEnv(cooking_tasks[1].game_file)
    other.reset()
    with pytest.raises(CirError, match="cannot restore a snapshot of"):
        env.restore(other.snapshot())
    with pytest.raises(CirError, match="expected a CookingSnapshot"):
        env.restore(("ram",))
    env.close()
    with pytest.raises(CirError, match="closed"):
        env.reset()
    assert isinstance(other.snapshot(), CookingSnapshot)
