"""The replayer checks the env's restore where the arms start and at every branch point, and
stops before a wrong label."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest
from support.keydoor import FAMILY, FORGETFUL, FORGETS_KEY, KeyDoorAgent, generate_tasks, load_tasks

from cir.envs.branching import BranchingEnv
from cir.pairs.replay import ReplaySettings, RestoreError, run_task_pairs

SETTINGS = ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1), operations=("refresh",))
#: the grid of tests/families/test_family_cli.py
GRID = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1, 2), operations=("refresh", "replan"))


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kd")
    generate_tasks(folder, "train", 1, 0)
    return load_tasks(folder / "train")[0]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kd8")
    generate_tasks(folder, "train", 8, 0)
    return load_tasks(folder / "train")


def _run(task, family, settings=GRID, check="branches"):
    return run_task_pairs(task, KeyDoorAgent(), family.env(task), settings, extractor=family.extractor,
                          restore_check=check)


def test_a_restore_that_forgets_a_field_stops_the_task(task):
    with pytest.raises(RestoreError) as err:
        run_task_pairs(task, KeyDoorAgent(), FORGETFUL.env(task), SETTINGS, extractor=FORGETFUL.extractor)
    message = str(err.value)
    assert message.startswith(f"task {task.task_id}: the env's restore is not exact: restored to the state "
                              "after env action ")
    assert "The door locks." in message and "(done True, won False)" in message and "cir check-env" in message
    failure = err.value.failure
    assert failure["task_id"] == task.task_id and failure["answered"][1] is True
    assert failure["answered"] != failure["recorded"]


def test_a_field_that_matters_only_late_passes_the_first_check_and_is_caught_at_a_branch_point(tasks, task):
    # the key dropped by every restore matters only at the door: one check per task misses it in
    # every task, and the rows it leaves are wrong (clean refreshes harm where the exact env's
    # succeed)
    wrong = []
    for t in tasks:
        exact, once = _run(t, FAMILY).rows, _run(t, FORGETS_KEY, check="task").rows
        wrong += [(a["outcome"], b["outcome"]) for a, b in zip(exact, once, strict=True)
                  if a["outcome"] != b["outcome"]]
    assert len(wrong) >= 30 and wrong.count(("stable_success", "harm")) >= 20
    with pytest.raises(RestoreError) as err:
        _run(task, FORGETS_KEY)
    message = str(err.value)
    assert "(where the clean arm's delay-2 branches start) and sent 'open door', it answered " \
           "'Nothing happens. The door locks.' (done True, won False); the clean arm answered " \
           "'The door opens. You win.' (done True, won True)" in message
    assert err.value.failure == {
        "task_id": task.task_id, "after_env_action": 5, "where": "where the clean arm's delay-2 branches start",
        "sent": "open door", "answered": ["Nothing happens. The door locks.", True, False],
        "recorded": ["The door opens. You win.", True, True], "by": "the clean arm"}


def test_the_full_check_meets_the_late_field_in_more_tasks(tasks):
    caught = {check: [t.task_id for t in tasks if _raises(t, check)] for check in ("task", "branches", "full")}
    assert caught["task"] == [] and len(caught["branches"]) == 2 and len(caught["full"]) == len(tasks)
    assert set(caught["branches"]) < set(caught["full"])


def _raises(task, check):
    try:
        _run(task, FORGETS_KEY, check=check)
    except RestoreError:
        return True
    return False


@pytest.mark.parametrize("operations", [("refresh", "replan"), ("rewind",)])
def test_the_checks_change_no_row_and_no_cost(tasks, operations):
    settings = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1, 2), operations=operations)
    for t in tasks[:4]:
        results = [_run(t, FAMILY, settings, check) for check in ("task", "branches", "full")]
        assert all(r.rows == results[0].rows and r.costs == results[0].costs for r in results)
        assert [e.to_dict() for e in results[1].episodes] == [e.to_dict() for e in results[0].episodes]


class _SometimesSilent(KeyDoorAgent):
    """Replies nothing on its third turn: an env action of the budget that never reaches the env."""

    def act_traced(self, context):
        reply = super().act_traced(context)
        return ("", *reply[1:]) if len(context) == 5 else reply


@pytest.mark.parametrize("check", ["branches", "full"])
def test_an_empty_action_is_not_sent_again(tasks, check):
    settings = ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1, 2), operations=("refresh", "rewind"))
    for t in tasks[:4]:
        runs = [run_task_pairs(t, _SometimesSilent(), FAMILY.env(t), settings, extractor=FAMILY.extractor,
                               restore_check=c) for c in ("task", check)]
        assert any(s.action == "" for e in runs[0].episodes if e.transcript for s in e.transcript.steps)
        assert runs[0].rows == runs[1].rows and runs[0].costs == runs[1].costs


def test_a_rewind_is_checked_where_it_returns_to(task):
    # a restore that forgets the counter: the state before the perturbed action is checked too
    settings = ReplaySettings(conditions=("clean",), delays=(0,), operations=("rewind",))
    with pytest.raises(RestoreError):
        _run(task, FORGETFUL, settings)


def test_an_unknown_check_is_refused(task):
    with pytest.raises(Exception, match="restore_check 'some': expected one of task, branches, full"):
        _run(task, FAMILY, check="some")


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


def test_verify_restores_sends_each_state_its_actions_and_names_the_first_that_differs(task):
    env = BranchingEnv(FORGETS_KEY.env(task))
    first = env.reset()
    assert "cell 0" in first
    answers = [env.step(a) for a in ("right", "take key", "right")]
    stats = dict(env.stats)
    # from the start: the same three answers (no restore past the key)
    assert env.verify_restores([((), list(zip(("right", "take key", "right"), answers, strict=True)))]) is None
    # after the key: it is dropped, so a look says where it lies
    lied = env.verify_restores([(("right",), [("take key", answers[1])]),
                                (("right", "take key"), [("right", answers[2]), ("look", ("x", False, False))])])
    assert lied is not None and lied[:2] == (1, ("right", "take key", "right", "look"))
    assert "A key lies in cell" in lied[3][0]
    assert env.stats == stats  # none of it is the grid's work


def test_every_run_of_the_farm_is_quarantined_and_each_names_the_failing_task(tmp_path):
    # a study's cohorts share the env: a failed check in one quarantines all that ran with it
    from cir.pairs.paired import read_paired
    from cir.pairs.record import RunRecord
    from cir.pairs.run import RunSpec, run_experiments
    from cir.pairs.settings import RunSettings
    from cir.pairs.store import RunStore
    from cir.util.errors import CirError

    generate_tasks(tmp_path / "t", "train", 6, 1)
    tasks = load_tasks(tmp_path / "t" / "train")
    settings = RunSettings(family=FORGETS_KEY, replay=GRID, restore_check="branches")
    specs = [RunSpec(tasks[:4], tmp_path / "a", settings), RunSpec(tasks[4:], tmp_path / "b", settings)]
    with pytest.raises(CirError, match=f"{tmp_path / 'a'}: quarantined: the env's restore failed its check in "
                                       "task keydoor-train-003 "):
        run_experiments(specs, progress=False, echo=lambda _: None)
    for folder, own in ((tmp_path / "a", True), (tmp_path / "b", False)):
        record = RunRecord.read(RunStore(folder))
        assert record.restore_failed["task_id"] == "keydoor-train-003"
        assert ("run" in record.restore_failed) is not own
        with pytest.raises(CirError, match="quarantined") as err:
            read_paired(folder, allow_partial=True)
        if not own:
            assert f"in task keydoor-train-003 of {tmp_path / 'a'} (restored" in str(err.value)


def test_the_full_check_names_the_restored_state_and_the_later_action_that_differed(task):
    with pytest.raises(RestoreError) as err:
        _run(task, FORGETS_KEY, check="full")
    assert "restored to the state after env action 3 (where the clean arm starts) and sent the actions " \
           "after it, to env action 6 ('open door'), it answered 'Nothing happens. The door locks.'" in str(err.value)
    assert err.value.failure["after_env_action"] == 3 and err.value.failure["env_action"] == 6


class _SamplingKeyDoor(KeyDoorAgent):
    """The key-and-door agent drawing sample ``index``: above 0 it turns the other way with chance
    3/8, keyed by the index and the context (a pure function of both)."""

    name = "keydoor-sampling"

    def __init__(self, index: int = 0) -> None:
        self.index = index

    def params(self):
        return {"version": 1, **({"sample": self.index} if self.index else {})}

    def sample(self, index: int) -> _SamplingKeyDoor:
        return _SamplingKeyDoor(index)

    def act_traced(self, context):
        reply, read, decided = super().act_traced(context)
        key = hashlib.sha256(json.dumps([self.index, context]).encode()).digest()
        if self.index and key[0] < 96 and reply in ("left", "right"):
            reply = "left" if reply == "right" else "right"
        return reply, read, decided


def test_the_further_draws_of_an_arm_are_checked_from_their_branch_points(tasks, monkeypatch):
    # a further draw (--samples) starts from a restored branch point like the arm; its own next
    # env action, where it differs from the arm's, is sent from there as well
    sent = []
    real = BranchingEnv.verify_restores

    def spy(self, checks):
        checks = list(checks)
        sent.extend(checks)
        return real(self, checks)

    monkeypatch.setattr(BranchingEnv, "verify_restores", spy)
    wanted = set()
    for t in tasks:
        result = run_task_pairs(t, _SamplingKeyDoor(), FAMILY.env(t), replace(GRID, samples=3),
                                extractor=FAMILY.extractor)
        arms = {e.condition: e.transcript for e in result.episodes if e.is_arm and not e.sample}
        arms["clean"] = next(e.transcript for e in result.episodes if e.role == "factual")
        for e in (e for e in result.episodes if e.is_arm and e.sample):
            j = result.point + e.delay + 1
            acts = [s.action for s in e.transcript.steps if s.action is not None]
            arm = [s.action for s in arms[e.condition].steps if s.action is not None]
            if len(acts) >= j and (len(arm) < j or arm[j - 1] != acts[j - 1]):
                wanted.add((tuple(acts[: j - 1]), acts[j - 1]))
    checked = {(state, actions[0][0]) for state, actions in sent}
    assert len(wanted) >= 3 and wanted <= checked
    # at one draw the check is the arm's alone: the rows and the checks of one draw are as before
    sent.clear()
    one = run_task_pairs(tasks[0], _SamplingKeyDoor(), FAMILY.env(tasks[0]), GRID, extractor=FAMILY.extractor)
    alone = list(sent)
    sent.clear()
    plain = run_task_pairs(tasks[0], KeyDoorAgent(), FAMILY.env(tasks[0]), GRID, extractor=FAMILY.extractor)
    assert alone == sent and [dict(r, agent="") for r in one.rows] == [dict(r, agent="") for r in plain.rows]
