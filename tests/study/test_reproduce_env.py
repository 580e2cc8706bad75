"""``cir reproduce --family``: a study of another family, from configs that name it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cir.study.experiments import load_experiments
from cir.util.errors import CirError

ROOT = Path(__file__).resolve().parents[2]
KEYDOOR = "tests.support.keydoor:FAMILY"
COOKING = ROOT / "experiments" / "textworld-cooking"


def _config(folder: Path, name: str, role: str, order: int, split: str, n: int, extra: str = "") -> None:
    (folder / f"{name}.toml").write_text(
        f'family = "{KEYDOOR}"\nname = "{name}"\nrole = "{role}"\norder = {order}\nsplit = "{split}"\n'
        f'n_tasks = {n}\nquick_n_tasks = {n}\nconditions = ["clean", "stale2", "stale1", "missing"]\n'
        f'delays = [0, 1, 2]\noperations = ["refresh", "replan"]\n{extra}')


def test_a_study_of_ones_own_family(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    _config(configs, "primary", "effects", 1, "train", 20, 'fit_cir = "all"\n')
    _config(configs, "cir_eval", "eval", 2, "test", 12)
    out = tmp_path / "study"
    run = subprocess.run([sys.executable, "-m", "cir", "reproduce", "--family", KEYDOOR, "--experiments",
                          str(configs), "--quick", "--out", str(out), "--quiet", "--resamples", "100",
                          "--jobs", "1", "--validation-replicates", "0"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    study = json.loads((out / "study.json").read_text())
    assert {e["family"] for e in study["settings"]["experiments"]} == {KEYDOOR}
    assert json.loads((out / "router.json").read_text())["family"] == KEYDOOR
    assert json.loads((out / "runs" / "primary" / "run.json").read_text())["settings"]["family"] == KEYDOOR
    report = (out / "report.md").read_text()
    assert "Selective recovery: CIR on held-out tasks" in report and any((out / "tables").glob("*.csv"))
    # the configs are of keydoor: another --family is refused before any work
    other = subprocess.run([sys.executable, "-m", "cir", "reproduce", "--experiments", str(configs),
                            "--quick", "--out", str(tmp_path / "other"), "--quiet"], cwd=ROOT,
                           capture_output=True, text=True)
    assert other.returncode == 2 and f"its configs are of family {KEYDOOR!r}, not 'alfworld'" in other.stderr


def test_configs_name_one_family(tmp_path):
    _config(tmp_path, "primary", "effects", 1, "train", 4, 'fit_cir = "all"\n')
    (tmp_path / "cir_eval.toml").write_text(
        'name = "cir_eval"\nrole = "eval"\norder = 2\nsplit = "valid_seen"\nn_tasks = 4\nquick_n_tasks = 4\n'
        'conditions = ["clean"]\ndelays = [0]\noperations = ["refresh"]\n')
    with pytest.raises(CirError, match="name different environment families"):
        load_experiments(tmp_path)
    (tmp_path / "cir_eval.toml").write_text('env = "nope"\n' + (tmp_path / "cir_eval.toml").read_text())
    with pytest.raises(CirError, match="cir_eval.toml: field 'env': family 'nope': no such environment family"):
        load_experiments(tmp_path)


def test_the_cooking_configs_say_when_their_family_is_absent(monkeypatch):
    from cir.families import registry

    monkeypatch.setitem(sys.modules, "cir.families.textworld_cooking.family", None)  # an installation without it
    registry._resolve.cache_clear()
    try:
        with pytest.raises(CirError, match="field 'family': family 'textworld-cooking': the family's module "
                                           "cir.families.textworld_cooking.family is not part of this installation"):
            load_experiments(COOKING)
    finally:
        registry._resolve.cache_clear()


def test_the_cooking_configs_load():
    experiments = load_experiments(COOKING, family="textworld-cooking")
    assert [e.name for e in experiments] == ["primary", "mechanism", "cir_eval"]
    assert {e.family for e in experiments} == {"textworld-cooking"}


@pytest.mark.slow
def test_reproduce_textworld_cooking_quick(tmp_path):
    out = tmp_path / "cooking"
    run = subprocess.run([sys.executable, "-m", "cir", "reproduce", "--family", "textworld-cooking", "--quick",
                          "--out", str(out), "--quiet"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads((out / "router.json").read_text())["family"] == "textworld-cooking"
    assert (out / "report.md").is_file() and (out / "tables").is_dir()
