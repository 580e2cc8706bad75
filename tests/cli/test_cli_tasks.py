"""``cir tasks generate|list|play`` end to end, and one-line errors for bad input."""

from __future__ import annotations

import io
import json

import pytest

from cir.cli import main


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    assert main(["tasks", "generate", "--split", "valid_unseen", "--n", "2", "--seed", "3",
                 "--out", str(out), "--quiet"]) == 0
    return out


def _one_line_error(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cir: error: ") and "\n" not in err and "Traceback" not in err
    assert needle in err, err


def test_generate_and_list(out, capsys):
    manifest = json.loads((out / "valid_unseen" / "manifest.json").read_text())
    assert [r["task_type"] for r in sorted(manifest["tasks"], key=lambda r: r["task_id"])] == \
        ["look_at_obj_in_light", "pick_and_place_simple"]
    capsys.readouterr()
    assert main(["tasks", "list", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("# ") and "split=valid_unseen n=2 seed=3" in lines[0]
    assert lines[1].split() == ["id", "type", "room", "receptacles", "objects", "plan"]
    for row in manifest["tasks"]:
        line = next(x for x in lines if x.startswith(row["task_id"]))
        cells = line.split()
        assert cells == [row["task_id"], row["task_type"], row["room"], str(row["n_receptacles"]),
                         str(row["n_objects"]), str(row["plan_length"])]
    # A split folder works as well as the parent.
    assert main(["tasks", "list", str(out / "valid_unseen")]) == 0
    assert capsys.readouterr().out == text


def test_generate_again_is_a_no_op(out, capsys):
    assert main(["tasks", "generate", "--split", "valid_unseen", "--n", "2", "--seed", "3",
                 "--out", str(out), "--quiet"]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_play_wins_with_the_walkthrough(out, monkeypatch, capsys):
    row = json.loads((out / "valid_unseen" / "manifest.json").read_text())["tasks"][0]
    trial = out / "valid_unseen" / row["task_id"]
    plan = json.loads((trial / "game.tw-pddl").read_text())["walkthrough"]
    monkeypatch.setattr("sys.stdin", io.StringIO("help\n\n" + "\n".join(plan) + "\n"))
    assert main(["tasks", "play", str(trial)]) == 0
    text = capsys.readouterr().out
    assert f"Your task is to: {row['goal']}." in text
    assert "Commands: go to X" in text and "admissible" in text  # help: the family's command syntax
    assert text.rstrip().endswith(f"-- won after {len(plan)} actions")


def test_play_stops_at_eof(out, monkeypatch, capsys):
    row = json.loads((out / "valid_unseen" / "manifest.json").read_text())["tasks"][0]
    game = out / "valid_unseen" / row["task_id"] / "game.tw-pddl"
    monkeypatch.setattr("sys.stdin", io.StringIO("look\nfly to the moon\n"))
    assert main(["tasks", "play", str(game)]) == 0
    text = capsys.readouterr().out
    assert "Nothing happens." in text
    assert text.rstrip().endswith("-- not won after 2 actions")


@pytest.mark.parametrize("argv, needle", [
    (["--split", "train", "--n", "1", "--family-option", "types=pick_and_place_simple,fly"],
     "unknown task type 'fly'"),
    (["--split", "test", "--n", "1"], "unknown split 'test'"),
    (["--split", "train", "--n", "0"], "--n 0: expected an integer from 1 to 1000000"),
    (["--split", "train", "--n", "1000000000000"], "--n 1000000000000: expected an integer from 1"),
    (["--split", "train", "--n", "3", "--jobs", "1000"], "--jobs 1000: at most"),
])
def test_generate_bad_input(tmp_path, capsys, argv, needle):
    _one_line_error(capsys, ["tasks", "generate", "--out", str(tmp_path), "--quiet", *argv], needle)
    assert not any(tmp_path.iterdir())


def test_generate_into_folder_with_other_tasks(out, capsys):
    _one_line_error(capsys, ["tasks", "generate", "--split", "valid_unseen", "--n", "2",
                             "--seed", "4", "--out", str(out), "--quiet"],
                    "already holds different tasks (seed=3 (asked 4))")


def test_list_and_play_bad_paths(tmp_path, capsys):
    _one_line_error(capsys, ["tasks", "list", str(tmp_path)], "no manifest.json here")
    _one_line_error(capsys, ["tasks", "play", str(tmp_path)], "no tasks found")
    bad = tmp_path / "game.tw-pddl"
    bad.write_text("{not json")
    _one_line_error(capsys, ["tasks", "play", str(bad)], str(bad))
