"""`cir fit` and `cir evaluate` end to end on synthetic paired tables."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from cir.cli import main
from cir.pairs.synthetic import simulate


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli_policy")
    train = simulate(100, seed=21)
    test = simulate(60, seed=22)
    test["task_id"] = "held-" + test["task_id"]
    train.to_csv(root / "train.csv", index=False)
    test.to_csv(root / "test.csv", index=False)
    return root / "train.csv", root / "test.csv"


@pytest.fixture(scope="module")
def router_path(tables: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("router") / "router.json"
    assert main(["fit", str(tables[0]), "--out", str(out), "--threshold-steps", "11"]) == 0
    return out


def test_fit_prints_thresholds_and_oof_numbers(tables: tuple[Path, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    code = main(["fit", str(tables[0]), "--out", str(out), "--threshold-steps", "9", "--epsilon", "0.05",
                 "--lam", "1.5", "--delays", "1,2", "--folds", "4", "--seed", "3", "--report", str(tmp_path / "rep")])
    text = capsys.readouterr().out
    assert code == 0
    assert "thresholds: alpha=" in text and "out-of-fold: net gain" in text and "clean harm" in text
    assert "baseline anomaly" in text and "baseline always: delay" in text
    data = json.loads(out.read_text())
    assert data["params"]["delays"] == [1, 2] and data["params"]["lam"] == 1.5
    assert data["params"]["folds"] == 4 and data["params"]["seed"] == 3
    assert data["training"]["oof_clean_harm"] <= 0.05
    for name in ("calibration.csv", "calibration.png", "candidates.csv", "oof.csv"):
        assert (tmp_path / "rep" / name).stat().st_size > 0
    cal = pd.read_csv(tmp_path / "rep" / "calibration.csv")
    assert set(cal["model"]) == {"p_err", "p0", "p1[refresh]"} and (cal["brier"] < cal["brier_baseline"]).any()


def test_evaluate_formats(router_path: Path, tables: tuple[Path, Path], tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(router_path), str(tables[1]), "--resamples", "300"]) == 0
    md = capsys.readouterr().out
    assert re.search(r"\|\s*policy\s*\|\s*condition\s*\|", md) and "Margins of each router" in md
    assert re.search(r"\|\s*cir\s*\|\s*all\s*\|", md)
    widest = max(len(line) for line in md.splitlines() if line.startswith("|"))
    assert widest <= 150 and "oracle_fraction" not in md  # compact by default (all columns: 254 wide)
    assert main(["evaluate", str(router_path), str(tables[1]), "--resamples", "300", "--columns",
                 "effect_pp,margin_pp"]) == 0
    md = capsys.readouterr().out
    assert re.search(r"\|\s+effect_pp \|", md) and re.search(r"\|\s+margin_pp \|", md) and "ci_low_pp" not in md
    assert main(["evaluate", str(router_path), str(tables[1]), "--resamples", "300", "--columns", "nope"]) == 2
    assert "--columns: 'nope' not in the result" in capsys.readouterr().err
    assert main(["evaluate", str(router_path), str(tables[1]), "--resamples", "300", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    policies = {r["policy"] for r in data["summary"]}
    assert policies == {"never", "always", "anomaly", "anomaly_rate_matched", "anomaly_rate_matched_heldout", "cir",
                        "oracle"}
    assert {r["versus"] for r in data["margins"]} == policies - {"cir"}
    assert data["settings"]["resamples"] == 300
    out = tmp_path / "eval.csv"
    assert main(["evaluate", str(router_path), str(tables[1]), "--resamples", "300", "--format", "csv",
                 "--out", str(out), "--calibration", str(tmp_path / "cal.png")]) == 0
    table = pd.read_csv(out)
    assert set(table["table"]) == {"summary", "margins"}
    assert (tmp_path / "cal.png").stat().st_size > 0
    # same settings, same output
    assert main(["evaluate", str(router_path), str(tables[1]), "--resamples", "300", "--format", "csv",
                 "--out", str(tmp_path / "again.csv")]) == 0
    assert (tmp_path / "again.csv").read_text() == out.read_text()


def test_evaluate_refuses_training_tasks(router_path: Path, tables: tuple[Path, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(router_path), str(tables[0]), "--resamples", "50"]) == 2
    assert "were used to fit" in capsys.readouterr().err
    assert main(["evaluate", str(router_path), str(tables[0]), "--resamples", "50", "--allow-overlap"]) == 0


def test_bad_inputs_give_one_line_errors(router_path: Path, tables: tuple[Path, Path], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bare = pd.read_csv(tables[0])
    bare = bare[[c for c in bare.columns if not c.startswith("f_")]]
    bare.to_csv(tmp_path / "bare.csv", index=False)
    assert main(["fit", str(tmp_path / "bare.csv"), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "no feature columns" in err and "Traceback" not in err
    noclean = pd.read_csv(tables[0])
    noclean[noclean["condition"] != "clean"].to_csv(tmp_path / "noclean.csv", index=False)
    assert main(["fit", str(tmp_path / "noclean.csv"), "--out", str(tmp_path / "r.json")]) == 2
    assert "no clean rows" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text(router_path.read_text()[:100])
    assert main(["evaluate", str(broken), str(tables[1])]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and err.count("\n") == 1
    with pytest.raises(SystemExit):
        main(["fit", str(tables[0]), "--out", str(tmp_path / "r.json"), "--candidate-delays", "a,b"])


def test_evaluate_warns_when_the_agent_differs(router_path: Path, tables: tuple[Path, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    other = pd.read_csv(tables[1]).assign(agent="builtin:weak@0000")
    other.to_csv(tmp_path / "other.csv", index=False)
    assert main(["evaluate", str(router_path), str(tmp_path / "other.csv"), "--resamples", "50"]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "builtin:weak@0000" in err and "synthetic" in err
