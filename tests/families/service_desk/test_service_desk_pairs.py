"""The service desk through the paired replayer: every divergence on a small grid explained by a
named mechanism, and restores that forget a table or a row caught by check-env and quarantined
by cir run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cir.families.registry import get_family
from cir.pairs.run import run_experiment
from cir.pairs.settings import ReplaySettings, RunSettings
from cir.stats.explain import explain_run

ROOT = Path(__file__).resolve().parents[3]


def _cir(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "cir", *args], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ))
    if check and out.returncode != 0:
        raise AssertionError(f"cir {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("desk-tasks")
    get_family("service-desk").generate(folder, "train", 8, 4, progress=False)
    return folder / "train"


def test_every_divergence_on_a_small_grid_is_explained_by_a_named_mechanism(tasks, tmp_path):
    family = get_family("service-desk")
    settings = RunSettings(replay=ReplaySettings(conditions=("clean", "stale2", "stale1", "lag2", "lag1", "missing"),
                                                 delays=(0, 1, 2), operations=("refresh", "refresh_ablated", "replan",
                                                                               "rewind", "placebo")),
                           family="service-desk", jobs=1, seed=0)
    run_experiment(family.load_tasks(tasks), tmp_path / "run", settings, tasks_source=str(tasks), progress=False,
                   echo=lambda s: None)
    table = explain_run(tmp_path / "run")
    assert len(table) > 500 and table["diverged"].sum() > 50
    assert int((~table["explained"]).sum()) == 0
    assert set(table[table["outcome"].isin(["rescue", "harm"])]["outcome"]) == {"rescue", "harm"}


def test_check_env_passes_on_the_service_desk(tasks):
    out = _cir("check-env", "--family", "service-desk", "--tasks", str(tasks))
    assert out.stdout.strip().endswith(": ok"), out.stdout


@pytest.mark.parametrize("variant, says", [
    ("FORGETS_TABLE", "table 'refunds' differs"),
    ("FORGETS_ROW", "table 'orders' differs"),
])
def test_a_restore_that_forgets_a_table_or_a_row_fails_check_env_and_quarantines_a_run(tasks, tmp_path, variant,
                                                                                        says):
    spec = f"tests.support.service_desk_forgetful:{variant}"
    bad = _cir("check-env", "--family", spec, "--tasks", str(tasks), check=False)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert says in bad.stdout, bad.stdout
    out = tmp_path / "run"
    run = _cir("run", "--family", spec, "--tasks", str(tasks), "--limit", "4", "--conditions", "clean,lag1,missing",
               "--delays", "0,1", "--operations", "refresh", "--out", str(out), "--quiet", check=False)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "quarantined: the env's restore failed its check" in run.stderr.strip().splitlines()[-1]
    assert json.loads((out / "run.json").read_text())["restore_failed"]["kind"] == "sqlite"
