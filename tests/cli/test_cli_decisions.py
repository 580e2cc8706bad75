"""``cir evaluate --decisions FILE``: each router's decision on each held-out arm, written as a CSV, the
offline side of a live run's comparison (before, the per-arm decisions existed only in Python)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
from support.keydoor import generate_tasks

from cir import Router
from cir.pairs.paired import read_paired
from cir.router.evaluation import DECISION_COLUMNS, walk_policies

ROOT = Path(__file__).resolve().parents[2]
ENV = "tests.support.keydoor:FAMILY"
GRID = ["--conditions", "clean,stale2,missing", "--delays", "0,1,2", "--operations", "refresh,replan",
        "--max-turns", "30", "--max-actions", "30"]


def _cir(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "cir", *args], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_cir_evaluate_writes_each_routers_decision_on_each_held_out_arm(tmp_path):
    generate_tasks(tmp_path / "tasks", "train", 16, 0)
    generate_tasks(tmp_path / "tasks", "test", 8, 0)
    for split in ("train", "test"):
        _cir("run", "--family", ENV, "--tasks", str(tmp_path / "tasks" / split), "--out", str(tmp_path / split),
             "--quiet", *GRID)
    fit = ["--estimator", "paired", "--operations", "refresh,replan", "--candidate-delays", "1,2", "--folds", "4"]
    _cir("fit", str(tmp_path / "train"), "--out", str(tmp_path / "router.json"), *fit)
    _cir("fit", str(tmp_path / "train"), "--out", str(tmp_path / "refresh.json"), *fit[:2], "--operations",
         "refresh", "--delays", "1,2", "--folds", "4")
    out = tmp_path / "decisions.csv"
    done = _cir("evaluate", str(tmp_path / "router.json"), str(tmp_path / "test"), "--compare",
                f"refresh_only={tmp_path / 'refresh.json'}", "--decisions", str(out))
    assert f"wrote {out}" in done.stderr
    decisions = pd.read_csv(out, keep_default_na=False)
    assert list(decisions.columns) == DECISION_COLUMNS
    assert len(decisions) == 2 * 8 * 3 and set(decisions["router"]) == {"cir", "refresh_only"}
    table = read_paired(tmp_path / "test")
    for name, path in (("cir", "router.json"), ("refresh_only", "refresh.json")):
        walked = walk_policies(Router.load(tmp_path / path), table).set_index(["task_id", "condition"])
        mine = decisions[decisions["router"] == name].set_index(["task_id", "condition"])
        assert len(mine) == len(walked)
        for key, row in mine.iterrows():
            arm = walked.loc[key]
            assert bool(row["recover"]) == bool(arm["int_cir"]) and row["y"] == arm["y_cir"]
            assert row["delay"] == arm["delay_cir"] and row["operation"] == arm["op_cir"]
            assert (row["delay"] > 0) == bool(row["recover"]) and (row["operation"] != "") == bool(row["recover"])
    assert decisions["recover"].any()  # (the routers recover on some arms: the file is not all "no")
