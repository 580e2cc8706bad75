"""Generated splits on the real engine: layout, manifest, determinism, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cir.families.alfworld.draw import draw_task
from cir.families.alfworld.generate import generate_split, generate_task, read_manifest
from cir.families.alfworld.tasks import TASK_TYPES
from cir.families.alfworld.verify import plan_problem, replay_on_game, verify_game_file
from cir.util.errors import CirError

N = 6  # one task of each type


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen")
    manifest = generate_split(out, "train", N, 0, progress=False)
    assert manifest["n_tasks"] == N
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_layout_on_disk(split_dir):
    split = split_dir / "train"
    manifest = json.loads((split / "manifest.json").read_text())
    assert manifest["settings"] == {"split": "train", "n": N, "seed": 0, "types": list(TASK_TYPES),
                                    "layout_seed": 0, "generator_version": 1}
    assert set(manifest["versions"]) == {"cir", "alfworld", "textworld"}
    rows = manifest["tasks"]
    assert sorted(r["task_type"] for r in rows) == sorted(TASK_TYPES)
    assert [r["task_id"] for r in rows] == sorted(r["task_id"] for r in rows)
    for row in rows:
        folder, trial = row["task_id"].split("/")
        ttype, obj, mrecep, parent, scene = folder.split("-")
        assert ttype == row["task_type"] and mrecep == "None" and trial.startswith("trial_T")
        assert int(scene) == row["scene"]
        trial_dir = split / row["task_id"]
        traj = json.loads((trial_dir / "traj_data.json").read_text())
        assert traj["task_type"] == ttype
        params = traj["pddl_params"]
        assert set(params) == {"object_target", "parent_target", "toggle_target",
                               "mrecep_target", "object_sliced"}
        assert params["object_target"] == obj and params["object_sliced"] is False
        assert parent == (params["toggle_target"] if ttype == "look_at_obj_in_light"
                          else params["parent_target"])
        game = json.loads((trial_dir / "game.tw-pddl").read_text())
        assert set(game) == {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
        assert game["solvable"] is True
        assert "UNKNOWN GOAL" not in game["grammar"]
        assert f"Your task is to: {row['goal']}." in game["grammar"]
        assert len(game["walkthrough"]) == row["plan_length"] > 0
        assert 8 <= row["n_receptacles"] <= 25 and 10 <= row["n_objects"] <= 40


def test_walkthroughs_win_on_the_engine(split_dir):
    """Each stored walkthrough wins its game when replayed (verify_game_file)."""
    for row in read_manifest(split_dir / "train")[0]["tasks"]:
        plan = verify_game_file(split_dir / "train" / row["task_id"])
        stored = json.loads((split_dir / "train" / row["task_id"] / "game.tw-pddl").read_text())
        assert plan == stored["walkthrough"]


def test_game_without_walkthrough_is_planned_and_replayed(split_dir, tmp_path):
    """No stored walkthrough: the engine's planner finds a plan and it wins on the game."""
    row = next(r for r in read_manifest(split_dir / "train")[0]["tasks"]
               if r["task_type"] == "look_at_obj_in_light")
    game = json.loads((split_dir / "train" / row["task_id"] / "game.tw-pddl").read_text())
    stored = game.pop("walkthrough")
    bare = tmp_path / "game.tw-pddl"
    bare.write_text(json.dumps(game))
    assert len(verify_game_file(bare)) == len(stored)


def test_same_settings_is_a_no_op_and_different_settings_is_an_error(split_dir):
    before = _files(split_dir)
    again = generate_split(split_dir, "train", N, 0, progress=False)
    assert "_stats" not in again and _files(split_dir) == before
    with pytest.raises(CirError, match="already holds different tasks.*seed=0 \\(asked 1\\)"):
        generate_split(split_dir, "train", N, 1, progress=False)
    with pytest.raises(CirError, match="already holds different tasks.*n=6 \\(asked 7\\)"):
        generate_split(split_dir, "train", N + 1, 0, progress=False)


def test_same_split_without_the_engine_savings(split_dir, tmp_path):
    """textworld's engine unmodified (two grammar parses and four translations per task)
    writes the same split, byte for byte, as the engine with its savings (the fixture)."""
    generate_split(tmp_path, "train", N, 0, progress=False, savings=False)
    assert _files(tmp_path / "train") == _files(split_dir / "train")


def test_foreign_folder_is_an_error(tmp_path):
    (tmp_path / "valid_seen").mkdir()
    (tmp_path / "valid_seen" / "notes.txt").write_text("mine")
    with pytest.raises(CirError, match="already holds files but no manifest.json"):
        generate_split(tmp_path, "valid_seen", 1, 0, progress=False)


def test_byte_identical_across_processes_and_hash_seeds(split_dir, tmp_path):
    """Another process with another PYTHONHASHSEED writes the same bytes (first 2 tasks)."""
    hashseed = "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "99"
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    code = ("import sys; from cir.families.alfworld.generate import generate_split; "
            "generate_split(sys.argv[1], 'train', 2, 0, progress=False)")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env=env)
    theirs = {k: v for k, v in _files(tmp_path / "train").items() if k != "manifest.json"}
    ours = _files(split_dir / "train")
    assert len(theirs) == 4 and all(ours[k] == v for k, v in theirs.items())


def test_worker_processes_write_the_same_bytes(split_dir, tmp_path):
    """``jobs=2`` (loky workers) writes the same task files as the in-process run."""
    generate_split(tmp_path, "train", 3, 0, progress=False, jobs=2)
    theirs = {k: v for k, v in _files(tmp_path / "train").items() if k != "manifest.json"}
    ours = _files(split_dir / "train")
    assert len(theirs) == 6 and all(ours[k] == v for k, v in theirs.items())


def test_prefix_property(split_dir):
    first = generate_task("train", 0, 0, TASK_TYPES[0])
    row = next(r for r in read_manifest(split_dir / "train")[0]["tasks"]
               if r["task_id"] == first.drawn.task_id)
    assert row["sha256"] == first.manifest_row()["sha256"]


@pytest.mark.parametrize("kwargs, message", [
    ({"types": ["pick_and_place"]}, "unknown task type 'pick_and_place'"),
    ({"split": "test"}, "unknown split 'test'"),
    ({"n": 0}, "n must be a positive number of tasks, got 0"),
    ({"n": -3}, "n must be a positive number of tasks, got -3"),
])
def test_bad_arguments(tmp_path, kwargs, message):
    args = {"split": "train", "n": 1, "seed": 0} | kwargs
    split, n, seed = args.pop("split"), args.pop("n"), args.pop("seed")
    with pytest.raises(CirError, match=message):
        generate_split(tmp_path, split, n, seed, progress=False, **args)
    assert not any(tmp_path.iterdir()), "nothing is written on bad input"


def test_unsolvable_problem_is_rejected(split_dir, tmp_path):
    row = read_manifest(split_dir / "train")[0]["tasks"][0]
    game = json.loads((split_dir / "train" / row["task_id"] / "game.tw-pddl").read_text())
    # Take away every receptacle's location: nothing can be reached.
    lines = [line for line in game["pddl_problem"].splitlines()
             if "(receptacleAtLocation" not in line]
    game["pddl_problem"] = "\n".join(lines)
    bad = tmp_path / "game.tw-pddl"
    bad.write_text(json.dumps(game))
    with pytest.raises(CirError, match=r"game\.tw-pddl: .*(unsolvable|does not load)"):
        verify_game_file(bad)
    with pytest.raises(CirError):
        plan_problem(game["pddl_problem"], row["goal"])


def test_unsolvable_draws_are_redrawn_then_reported():
    calls = []

    def planner(problem, sentence):
        calls.append(problem)
        if len(calls) < 3:
            raise CirError("the ALFWorld planner found no plan: the problem is unsolvable")
        return ["go to desk 1"]

    task = generate_task("train", 0, 0, TASK_TYPES[0], planner=planner, replay=False)
    assert task.attempts == 3 and len(set(calls)) == 3, "each redraw is a new draw"

    def never(problem, sentence):
        raise CirError("the ALFWorld planner found no plan: the problem is unsolvable")

    with pytest.raises(CirError, match="unsolvable after 4 draws; last reason: the ALFWorld planner"):
        generate_task("train", 0, 0, TASK_TYPES[0], planner=never, max_attempts=4, replay=False)


def test_plan_of_the_planning_problem_wins_the_full_game(split_dir):
    """The planner sees only goal classes; its plan must be admissible and win in the game."""
    # One type suffices here: every generated task is replayed on its game at generation.
    drawn = draw_task("train", 0, 1, "look_at_obj_in_light")
    small, full = drawn.planning_problem(), drawn.problem()
    assert len(small) < len(full)
    plan = plan_problem(small, drawn.sentence)
    replay_on_game(full, drawn.sentence, plan)
    with pytest.raises(CirError, match="does not win"):
        replay_on_game(full, drawn.sentence, plan[:-1])
    with pytest.raises(CirError, match="not admissible"):
        replay_on_game(full, drawn.sentence, ["take unicorn 1 from desk 1", *plan])


def test_max_plan_length_redraws_long_plans():
    plans = [["go to desk 1"] * 12, ["go to desk 1"] * 5]

    def planner(problem, sentence):
        return plans.pop(0)

    task = generate_task("train", 0, 0, TASK_TYPES[0], planner=planner, replay=False,
                         max_plan_length=9)
    assert task.attempts == 2 and len(task.walkthrough) == 5


def test_corrupt_or_missing_game_file(tmp_path):
    with pytest.raises(CirError, match="no such game file"):
        verify_game_file(tmp_path / "missing.tw-pddl")
    bad = tmp_path / "game.tw-pddl"
    bad.write_text('{"pddl_problem": "(define')
    with pytest.raises(CirError, match="not a readable game.tw-pddl JSON file"):
        verify_game_file(bad)


def test_read_manifest_errors(tmp_path):
    with pytest.raises(CirError, match="no manifest.json here"):
        read_manifest(tmp_path)
    with pytest.raises(CirError, match="no such folder"):
        read_manifest(tmp_path / "nope")
