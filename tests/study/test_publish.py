"""experiments/publish.py: a reproduce output becomes data/ and figures/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _publish_module():
    spec = importlib.util.spec_from_file_location("publish", ROOT / "experiments" / "publish.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _study(folder: Path) -> Path:
    (folder / "tables").mkdir(parents=True)
    (folder / "figures").mkdir()
    (folder / "runs" / "primary").mkdir(parents=True)
    (folder / "tasks" / "valid_unseen" / "some-task").mkdir(parents=True)
    (folder / "report.md").write_text("# title\n\n![effects](figures/effects.png)\n")
    for name in ("report.html", "router.json", "study.json"):
        (folder / name).write_text(name)
    (folder / "tables" / "cohorts.csv").write_text("a\n1\n")
    (folder / "figures" / "effects.png").write_bytes(b"png")
    for name in ("paired.csv", "run.json", "episodes.jsonl.gz", "run.lock"):
        (folder / "runs" / "primary" / name).write_text(name)
    (folder / "tasks" / "valid_unseen" / "manifest.json").write_text("{}")
    (folder / "tasks" / "valid_unseen" / "some-task" / "game.tw-pddl").write_text("game")
    return folder


def test_publish_copies_the_data_and_rewrites_figure_links(tmp_path):
    publish = _publish_module()
    study = _study(tmp_path / "study")
    data, figures = tmp_path / "repo" / "data", tmp_path / "repo" / "figures"
    data.mkdir(parents=True)
    (data / "README.md").write_text("hand-written")
    (data / "stale.csv").write_text("from an older publish")
    publish.publish(study, data, figures)
    report = (data / "report.md").read_text()
    assert "](../figures/effects.png)" in report and "reference study" in report
    assert (figures / "effects.png").read_bytes() == b"png"
    assert sorted(p.name for p in (data / "runs" / "primary").iterdir()) == [
        "episodes.jsonl.gz", "paired.csv", "run.json"]  # the lock is not data
    assert (data / "tasks" / "valid_unseen" / "manifest.json").exists()
    assert not (data / "tasks" / "valid_unseen" / "some-task").exists()  # games are left out
    assert (data / "README.md").read_text() == "hand-written" and not (data / "stale.csv").exists()


def test_publish_refuses_an_unfinished_study(tmp_path):
    publish = _publish_module()
    study = _study(tmp_path / "study")
    (study / "router.json").unlink()
    with pytest.raises(SystemExit, match="router.json"):
        publish.publish(study, tmp_path / "data", tmp_path / "figures")
