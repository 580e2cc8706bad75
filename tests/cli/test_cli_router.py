"""The router's operation at run time (`cir episode --router`) and `cir fit`'s budgets from the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.replay import fake_settings, fake_tasks

from cir.cli import main
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.synthetic import simulate
from cir.router.policy import CIRPolicy


def _eager_router(tmp_path: Path, operation: str) -> Path:
    """A router fitted for ``operation`` whose gates always pass: it recovers at its first delay."""
    policy = CIRPolicy(operations=(operation,), threshold_steps=5).fit(simulate(60, seed=2, operation=operation))
    data = policy.to_router().to_dict()
    data["thresholds"] = {"alpha": 0.0, "beta": 0.0, "gamma": -1e9}
    path = tmp_path / f"{operation}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("operation", ["rewind", "replan"])
def test_a_router_fitted_for_an_operation_applies_it_in_cir_episode(
        pick_place_task, operation: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    router = _eager_router(tmp_path, operation)
    out = tmp_path / "episode.json"
    code = main(["episode", str(pick_place_task.game_file), "--condition", "stale2", "--router", str(router),
                 "--json", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert f"router d=1:{operation}" in printed
    data = json.loads(out.read_text())
    assert data["info"]["router_decisions"][0] == {"delay": 1, "recover": True, "operation": operation}
    harness = [s for s in data["transcript"]["steps"] if s["actor"] == "harness"]
    assert len(harness) == 1 and f"recovery:{operation}" in harness[0]["events"]
    if operation == "rewind":
        assert harness[0]["shown"].startswith("[Rewind]")


@pytest.fixture(scope="module")
def short_budget_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("budgets") / "run"
    settings = ReplaySettings(conditions=("clean", "stale2"), delays=(0, 1, 2, 4), max_turns=30, max_actions=40)
    run_experiment(fake_tasks(12), out, fake_settings(settings), tasks_source="fake", progress=False,
                   echo=lambda _: None)
    return out


def test_cir_fit_takes_the_budgets_of_the_run_it_is_given(short_budget_run: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    router = tmp_path / "router.json"
    assert main(["fit", str(short_budget_run), "--out", str(router), "--threshold-steps", "5"]) == 0
    assert "harness budgets: 30 model turns, 40 env actions" in capsys.readouterr().out
    params = json.loads(router.read_text())["params"]
    assert (params["max_turns"], params["max_actions"]) == (30, 40)
    # repeating the run's budget is fine; another is refused, naming both
    assert main(["fit", str(short_budget_run), "--out", str(router), "--threshold-steps", "5", "--max-turns", "30"]) == 0
    capsys.readouterr()
    assert main(["fit", str(short_budget_run), "--out", str(tmp_path / "x.json"), "--max-actions", "64"]) == 2
    err = capsys.readouterr().err
    assert "--max-actions 64" in err and "--max-actions 40" in err and not (tmp_path / "x.json").exists()


def test_cir_fit_on_a_table_uses_the_flags_or_the_paper_budgets(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "train.csv"
    simulate(60, seed=4).to_csv(table, index=False)
    router = tmp_path / "router.json"
    assert main(["fit", str(table), "--out", str(router), "--threshold-steps", "5", "--max-turns", "20"]) == 0
    params = json.loads(router.read_text())["params"]
    assert (params["max_turns"], params["max_actions"]) == (20, 64)
    assert main(["fit", str(table), "--out", str(router), "--threshold-steps", "5", "--estimator", "paired",
                 "--budget", "certified"]) == 0
    printed = capsys.readouterr().out
    assert "fitted the paired estimator for refresh" in printed and "budget (certified)" in printed
    data = json.loads(router.read_text())
    assert data["estimator"] == "paired" and data["budget"]["kind"] == "certified"


@pytest.fixture(scope="module")
def multi_router_data() -> dict:
    ops = ("refresh", "replan", "rewind")
    policy = CIRPolicy(estimator="paired", operations=ops, threshold_steps=5, Cs=(0.1,))
    return policy.fit(simulate(60, seed=7, operations=ops)).to_router().to_dict()


@pytest.mark.parametrize("operation", ["refresh", "replan", "rewind"])
def test_a_router_over_several_operations_applies_the_one_it_chooses_live(
        pick_place_task, multi_router_data: dict, operation: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A multi-operation router whose utilities favour ``operation`` recovers with it live."""
    data = json.loads(json.dumps(multi_router_data))
    data["thresholds"] = {"alpha": 0.0, "gamma": -1e9}  # its gates always pass
    for name, model in data["models"].items():
        if name.startswith("p_rescue[") or name.startswith("p_harm["):
            model["coef"] = [0.0] * len(model["coef"])
            chosen = name in (f"p_rescue[{operation}]",)
            model["intercept"] = 5.0 if chosen else -5.0
    path = tmp_path / "multi.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "episode.json"
    assert main(["episode", str(pick_place_task.game_file), "--condition", "stale2", "--router", str(path),
                 "--json", str(out), "--quiet"]) == 0
    assert f"router d=1:{operation}" in capsys.readouterr().out
    steps = json.loads(out.read_text())["transcript"]["steps"]
    harness = [s for s in steps if s["actor"] == "harness"]
    assert len(harness) == 1 and harness[0]["events"] == [f"recovery:{operation}"]
