"""Generating and loading cooking games: deterministic per seed, splits kept apart, clear errors."""

from __future__ import annotations

import json

import pytest

from cir.families.textworld_cooking.generate import (
    SERIAL,
    CookingSettings,
    game_seed,
    generate_split,
    generate_tasks,
)
from cir.families.textworld_cooking.tasks import load_tasks
from cir.util.errors import CirError, SettingError


@pytest.mark.slow  # one game made again: about 10-20 s
def test_the_same_seed_gives_byte_identical_games(cooking_root, cooking_spec, tmp_path):
    """Game 1 of the shared folder, made again alone in another folder: the same bytes."""
    import shutil

    seed, settings = cooking_spec
    again = tmp_path / "again"
    (again / "train").mkdir(parents=True)
    # keep game 0 so that only game 1 is made here (the generator resumes a folder)
    for suffix in (".z8", ".json", ".ni"):
        shutil.copy(cooking_root / "train" / f"train-000{suffix}", again / "train" / f"train-000{suffix}")
    manifest = json.loads((cooking_root / "train" / "manifest.json").read_text())
    manifest["tasks"] = manifest["tasks"][:1]
    (again / "train" / "manifest.json").write_text(json.dumps(manifest))
    games = generate_split(again, "train", 2, seed, settings=CookingSettings(**settings))
    assert [g.task_id for g in games] == ["train-000", "train-001"]
    assert games[0].seconds == 0.0 and games[1].seconds > 0  # kept, then made
    for name in ("train-001.z8", "train-001.json", "train-001.ni"):
        assert (again / "train" / name).read_bytes() == (cooking_root / "train" / name).read_bytes(), name
    rows = json.loads((again / "train" / "manifest.json").read_text())["tasks"]
    assert rows == json.loads((cooking_root / "train" / "manifest.json").read_text())["tasks"][:2]


def test_seeds_and_splits_never_meet():
    seeds = {game_seed(s, split, i) for s in (0, 1, 2) for split in ("train", "valid", "test") for i in range(50)}
    assert len(seeds) == 3 * 3 * 50


def test_loaded_tasks_name_their_split_type_and_game(cooking_root, cooking_tasks):
    assert [t.task_id for t in cooking_tasks] == ["train-000", "train-001", "train-002"]
    for task in cooking_tasks:
        assert task.split == "train" and task.game_file.is_file() and task.walkthrough
        assert task.game_file.read_bytes()[0x12:0x18] == SERIAL  # not the compile date
        assert task.task_type.startswith("recipe2")
        assert task.task_type == "recipe2" + ("-cut" if any(a.split()[0] in ("slice", "dice", "chop")
                                                          for a in task.walkthrough) else "") + (
            "-cook" if any(a.startswith("cook ") for a in task.walkthrough) else "")
    assert load_tasks(cooking_root, split="train") == cooking_tasks
    assert load_tasks(cooking_root / "train") == cooking_tasks
    assert load_tasks(cooking_root, split="test") == []
    single = load_tasks(cooking_tasks[0].game_file)
    assert single[0].task_type == cooking_tasks[0].task_type and single[0].task_id == "train-000"


def test_a_folder_of_other_settings_is_refused(cooking_root, cooking_spec):
    seed, settings = cooking_spec
    with pytest.raises(CirError, match="other settings or another seed"):
        generate_split(cooking_root, "train", 1, seed + 1, settings=CookingSettings(**settings))


@pytest.mark.parametrize("kwargs, message", [
    ({"recipe": 0}, "recipe 0: expected an integer from 1 to 5"),
    ({"recipe": 2, "take": 3}, "take 3: expected an integer from 0 to recipe"),
    ({"go": 5}, "go 5: expected one of 1, 6, 9, 12"),
    ({"cut": "yes"}, "cut 'yes': expected true or false"),
])
def test_bad_settings_name_the_setting(kwargs, message):
    with pytest.raises(SettingError, match=message):
        CookingSettings(**kwargs)


def test_bad_calls_and_folders_are_one_clear_error(tmp_path):
    with pytest.raises(SettingError, match="split 'dev'"):
        generate_split(tmp_path, "dev", 1, 0)
    with pytest.raises(SettingError, match="n -1"):
        generate_split(tmp_path, "train", -1, 0)
    with pytest.raises(CirError, match="counts"):
        generate_tasks(tmp_path, {})
    with pytest.raises(CirError, match="no manifest.json"):
        load_tasks(tmp_path)
    with pytest.raises(CirError, match="split 'dev'"):
        load_tasks(tmp_path, split="dev")
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "manifest.json").write_text(json.dumps({"family": "alfworld", "tasks": []}))
    with pytest.raises(CirError, match="not a textworld-cooking manifest"):
        load_tasks(tmp_path)
    (tmp_path / "train" / "manifest.json").write_text(json.dumps(
        {"family": "textworld-cooking", "version": 1, "tasks": [
            {"task_id": "train-000", "split": "train", "task_type": "recipe1", "game_file": "train-000.z8"}]}))
    with pytest.raises(CirError, match=r"tasks\[0\] \(train-000\): game file .* is missing"):
        load_tasks(tmp_path)
