"""check_env: restores, resets and the refresh query checked on seeded random walks."""

from __future__ import annotations

import pytest
from support.keydoor import FAMILY, FORGETFUL, KeyDoorEnv, generate_tasks, load_tasks, walk_actions

from cir.envs.check import check_env
from cir.util.errors import CirError


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kd")
    generate_tasks(folder, "train", 6, 0)
    return load_tasks(folder / "train")


def test_an_exact_env_passes(tasks):
    report = FAMILY.check(tasks[:3], steps=15, seed=0)
    assert report.ok and report.failures == []
    assert report.tasks == 3 and report.steps >= 3 and report.restores >= report.steps
    assert report.summary().endswith("checked: ok")


def test_a_restore_that_forgets_the_move_counter_is_caught_with_one_line_per_step(tasks):
    report = FORGETFUL.check(tasks[:3], steps=15, seed=0)
    assert not report.ok
    line = report.failures[0]
    assert line.startswith(f"task {tasks[0].task_id}: step ") and "after restore answered" in line
    assert "The door locks." in line and "(done True, won False)" in line
    assert "the uninterrupted walk answered" in line and "(done False, won False)" in line
    assert report.summary().endswith(f"{len(report.failures)} failure(s)")


class LiveSnapshot(KeyDoorEnv):
    """A snapshot that is the live state object (later steps change it)."""

    def reset(self) -> str:
        text = super().reset()
        self.box = [self.state]
        return text

    def step(self, action: str):
        out = super().step(action)
        self.box[0] = self.state
        return out

    def snapshot(self):
        return self.box

    def restore(self, snapshot) -> None:
        self.state = snapshot[0]


class Nondeterministic(KeyDoorEnv):
    made = 0

    def reset(self) -> str:
        Nondeterministic.made += 1
        return super().reset() + (" (again)" if Nondeterministic.made % 2 == 0 else "")


class ChangingRefresh(KeyDoorEnv):
    def step(self, action: str):
        if action == self.refresh_query:  # reading moves the agent: not a read
            return super().step("right")
        return super().step(action)


@pytest.mark.parametrize("env, needle", [
    (LiveSnapshot, "after restore answered"),
    (Nondeterministic, "reset: a new env's first observation"),
    (ChangingRefresh, "it must read the state, not change it"),
])
def test_each_kind_of_inexact_env_is_named(tasks, env, needle):
    report = check_env(env, tasks[:2], steps=12, seed=1, actions=walk_actions)
    assert any(needle in line for line in report.failures), report.failures


def test_the_walk_is_seeded(tasks):
    a = FORGETFUL.check(tasks[:2], steps=10, seed=3).failures
    assert a == FORGETFUL.check(tasks[:2], steps=10, seed=3).failures


def test_bad_arguments(tasks):
    with pytest.raises(CirError, match="has no admissible_commands"):
        check_env(KeyDoorEnv, tasks[:1])
    with pytest.raises(CirError, match="steps=0"):
        check_env(KeyDoorEnv, tasks[:1], steps=0, actions=walk_actions)
    with pytest.raises(CirError, match="no tasks"):
        check_env(KeyDoorEnv, [], actions=walk_actions)
