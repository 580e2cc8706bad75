"""Finding tasks on disk: single files, generated splits, the real ALFWorld layout, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cir.families.alfworld.tasks import (
    TASK_TYPES,
    TaskRef,
    load_tasks,
    room_of_scene,
    task_type_of_problem,
)
from cir.util.errors import CirError

GAME = {
    "pddl_domain": "(define (domain alfred))",
    "grammar": "{}",
    "pddl_problem": "(define)",
    "solvable": True,
    "walkthrough": ["go to desk 1", "take cd 1 from desk 1"],
}


def make_trial(
    root: Path, folder: str, trial: str, *, task_type: str | None = None, game: dict | None = None
) -> Path:
    d = root / folder / trial
    d.mkdir(parents=True)
    (d / "game.tw-pddl").write_text(json.dumps(game or GAME))
    if task_type is not None:
        traj = {
            "task_type": task_type,
            "scene": {"floor_plan": "FloorPlan" + folder.split("-")[-1]},
        }
        (d / "traj_data.json").write_text(json.dumps(traj))
        (d / "initial_state.pddl").write_text("(define)")
    return d / "game.tw-pddl"


@pytest.fixture
def alfworld_data(tmp_path: Path) -> Path:
    """The real data set's layout: json_2.1.1/<split>/<task>/<trial>/."""
    root = tmp_path / "alfworld"
    base = root / "json_2.1.1"
    make_trial(
        base / "train",
        "pick_and_place_simple-Mug-None-Desk-301",
        "trial_T2",
        task_type="pick_and_place_simple",
    )
    make_trial(
        base / "train",
        "pick_and_place_simple-Mug-None-Desk-301",
        "trial_T1",
        task_type="pick_and_place_simple",
    )
    make_trial(
        base / "train",
        "look_at_obj_in_light-CD-None-DeskLamp-308",
        "trial_T3",
        task_type="look_at_obj_in_light",
    )
    # Skipped exactly like ALFWorld's loader does.
    make_trial(
        base / "train",
        "pick_and_place_with_movable_recep-Mug-Pan-Sink-5",
        "trial_T4",
        task_type="pick_and_place_simple",
    )
    make_trial(
        base / "train",
        "pick_heat_then_place_in_recep-AppleSliced-None-Fridge-12",
        "trial_T5",
        task_type="pick_heat_then_place_in_recep",
    )
    make_trial(
        base / "valid_unseen",
        "pick_cool_then_place_in_recep-Apple-None-Microwave-10",
        "trial_T6",
        task_type="pick_cool_then_place_in_recep",
    )
    # Folder name that does not say the type: read traj_data.json.
    make_trial(
        base / "valid_seen", "custom_task", "trial_T7", task_type="pick_clean_then_place_in_recep"
    )
    return root


def test_real_alfworld_layout(alfworld_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refs = load_tasks(alfworld_data)
    ids = [r.task_id for r in refs]
    assert ids == sorted(ids)
    assert not any("movable" in i or "Sliced" in i for i in ids)
    assert {r.split for r in refs} == {"train", "valid_seen", "valid_unseen"}
    train = load_tasks(alfworld_data, split="train")
    assert [r.task_id for r in train] == [
        "look_at_obj_in_light-CD-None-DeskLamp-308/trial_T3",
        "pick_and_place_simple-Mug-None-Desk-301/trial_T1",
        "pick_and_place_simple-Mug-None-Desk-301/trial_T2",
    ]
    assert train[1].room == "bedroom" and train[1].task_type == "pick_and_place_simple"
    assert (
        train[1].game_file == alfworld_data / "json_2.1.1/train" / train[1].task_id / "game.tw-pddl"
    )
    (seen,) = load_tasks(alfworld_data / "json_2.1.1", split="valid_seen")
    assert (
        seen.task_type == "pick_clean_then_place_in_recep"
        and seen.task_id == "custom_task/trial_T7"
    )
    # A split folder by itself, and $ALFWORLD_DATA.
    assert load_tasks(alfworld_data / "json_2.1.1" / "train") == train
    monkeypatch.setenv("ALFWORLD_DATA", str(alfworld_data))
    assert load_tasks(split="train") == train
    assert all(isinstance(r, TaskRef) for r in refs)
    with pytest.raises(AttributeError):
        refs[0].task_id = "x"  # type: ignore[misc]


def test_generated_split_with_manifest(tmp_path: Path) -> None:
    split = tmp_path / "gen" / "valid_unseen"
    for i, t in enumerate(TASK_TYPES):
        make_trial(split, f"{t}-Obj-None-Rec-{30 + i}", f"trial_T00000000_3_{i:06d}", task_type=t)
    rows = [
        {
            "task_id": f"{t}-Obj-None-Rec-{30 + i}/trial_T00000000_3_{i:06d}",
            "task_type": t,
            "room": "kitchen",
            "scene": 30 + i,
            "plan_length": 5 + i,
        }
        for i, t in enumerate(TASK_TYPES)
    ]
    (split / "manifest.json").write_text(json.dumps({"settings": {}, "tasks": rows}))
    refs = load_tasks(tmp_path / "gen")
    assert len(refs) == 6 and {r.split for r in refs} == {"valid_unseen"}
    assert sorted(r.plan_length for r in refs) == [5, 6, 7, 8, 9, 10]
    assert {r.room for r in refs} == {"kitchen"}
    assert load_tasks(split) == refs
    assert load_tasks(tmp_path / "gen", split="valid_unseen") == refs


def test_folder_without_manifest_any_depth(tmp_path: Path) -> None:
    make_trial(tmp_path / "a" / "b", "pick_two_obj_and_place-Pen-None-Desk-205", "trial_1")
    (ref,) = load_tasks(tmp_path)
    assert ref.task_id == "a/b/pick_two_obj_and_place-Pen-None-Desk-205/trial_1"
    assert (ref.task_type, ref.room, ref.split, ref.plan_length) == (
        "pick_two_obj_and_place",
        "livingroom",
        "custom",
        None,
    )


def test_single_game_file(alfworld_data: Path, tmp_path: Path) -> None:
    game = (
        alfworld_data
        / "json_2.1.1/train/pick_and_place_simple-Mug-None-Desk-301/trial_T1/game.tw-pddl"
    )
    (ref,) = load_tasks(game)
    assert ref.task_id == "pick_and_place_simple-Mug-None-Desk-301/trial_T1"
    assert ref.split == "train" and ref.plan_length == 2
    assert ref == TaskRef(
        **{**load_tasks(alfworld_data, split="train")[1].__dict__, "plan_length": 2}
    )
    loose = make_trial(tmp_path, "x", "look_at_obj_in_light-Book-None-DeskLamp-301")
    (ref2,) = load_tasks(loose)
    assert ref2.task_type == "look_at_obj_in_light" and ref2.split == "custom"


def test_lone_game_file_type_from_goal(tmp_path: Path) -> None:
    goal = "(:goal (and (exists (?o - object) (and (isHot ?o) (inReceptacle ?o ?r)))))"
    game = make_trial(
        tmp_path, "mine", "t1", game={**GAME, "pddl_problem": "(define " + goal + ")"}
    )
    (ref,) = load_tasks(game)
    assert ref.task_type == "pick_heat_then_place_in_recep" and ref.task_id == "t1"
    assert task_type_of_problem("(:goal (and (inReceptacle ?o1 ?r) (inReceptacle ?o2 ?r)))") == (
        "pick_two_obj_and_place"
    )
    assert task_type_of_problem("(:goal (and (isToggled ?l) (holds ?a ?o)))") == (
        "look_at_obj_in_light"
    )
    assert task_type_of_problem("(define (problem x))") is None


def test_room_of_scene() -> None:
    assert [room_of_scene(s) for s in ("FloorPlan1", "FloorPlan230", 301, "418", None, "x")] == [
        "kitchen",
        "livingroom",
        "bedroom",
        "bathroom",
        None,
        None,
    ]


# -- bad input ----------------------------------------------------------------------------


def test_missing_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CirError, match=f"{re.escape(str(tmp_path / 'none'))}: not found"):
        load_tasks(tmp_path / "none")
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(CirError, match=r"\$ALFWORLD_DATA is not set"):
        load_tasks()


def test_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(CirError, match=f"{re.escape(str(tmp_path))}: no tasks found"):
        load_tasks(tmp_path)


def test_unknown_or_absent_split(alfworld_data: Path) -> None:
    with pytest.raises(
        CirError, match="unknown split 'validation'; expected one of train, valid_seen"
    ):
        load_tasks(alfworld_data, split="validation")
    with pytest.raises(
        CirError, match="no split 'tests_seen' here; found train, valid_seen, valid_unseen"
    ):
        load_tasks(alfworld_data, split="tests_seen")


def test_corrupt_single_file(tmp_path: Path) -> None:
    bad = make_trial(tmp_path, "pick_and_place_simple-A-None-B-1", "t")
    bad.write_text('{"pddl_domain": "x", ')
    with pytest.raises(CirError, match=f"{re.escape(str(bad))}: invalid JSON"):
        load_tasks(bad)
    bad.write_text(json.dumps({"pddl_domain": "x"}))
    with pytest.raises(CirError, match=r"missing key\(s\) grammar, pddl_problem"):
        load_tasks(bad)


def test_bad_task_metadata(tmp_path: Path) -> None:
    make_trial(tmp_path, "mystery", "trial_1")
    with pytest.raises(CirError, match="cannot tell the task type"):
        load_tasks(tmp_path)
    traj = (
        make_trial(tmp_path / "b", "other", "trial_1", task_type="make_coffee").parent
        / "traj_data.json"
    )
    with pytest.raises(CirError, match=f"{re.escape(str(traj))}: unknown task type 'make_coffee'"):
        load_tasks(tmp_path / "b")
    traj.write_text("{oops")
    with pytest.raises(CirError, match=f"{re.escape(str(traj))}: invalid JSON"):
        load_tasks(tmp_path / "b")
    split = tmp_path / "c" / "train"
    make_trial(split, "pick_and_place_simple-A-None-B-1", "t")
    (split / "manifest.json").write_text('{"tasks": 3}')
    with pytest.raises(CirError, match="manifest.json: expected a list of tasks"):
        load_tasks(split)
