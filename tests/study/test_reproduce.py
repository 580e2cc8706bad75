"""``cir reproduce`` end to end on a tiny study: outputs, resume, refusal of other settings.

The configs below keep the shipped structure (effects with CIR fitted on its factual-success
tasks, mechanism, eval) at a few tasks each, so the whole pipeline runs on the real engine
in about a minute.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from cir.agents.limits import RequestLimits
from cir.pairs.settings import RunSettings
from cir.study.reproduce import reproduce
from cir.util.errors import CirError

TINY = {
    "primary": ("effects", 1, "valid_unseen", 8, ["refresh", "replan"]),
    "mechanism": ("mechanism", 2, "valid_unseen", 2, ["refresh", "refresh_ablated", "placebo"]),
    "cir_eval": ("eval", 4, "valid_seen", 3, ["refresh", "replan"]),
}


def _write_configs(folder: Path) -> Path:
    folder.mkdir()
    for name, (role, order, split, n, ops) in TINY.items():
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\nrole = "{role}"\norder = {order}\nsplit = "{split}"\n'
            f"n_tasks = {n + 1}\nquick_n_tasks = {n}\n"
            'conditions = ["clean", "stale2"]\ndelays = [1, 2]\n'
            f"operations = {json.dumps(ops)}\n"
            + ('fit_cir = "factual-success"\n' if name == "primary" else ""),
            encoding="utf-8",
        )
    return folder


def _digests(out: Path) -> dict[str, str]:
    files = [*sorted((out / "tables").glob("*.csv")), out / "router.json", out / "report.md"]
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    root = tmp_path_factory.mktemp("study")
    configs = _write_configs(root / "experiments")
    lines: list[str] = []
    reproduce(root / "out", quick=True, experiments_dir=configs, resamples=200, progress=False,
              echo=lines.append, validation=0)  # the planted worlds: tests/study/test_validation.py
    return root / "out", configs, lines


def test_writes_report_tables_figures_and_router(study) -> None:
    out, _, lines = study
    assert lines[-1].startswith("[4/4] report:")
    report = (out / "report.md").read_text(encoding="utf-8")
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Findings"
    for heading in ("## 1. Effects of refresh by condition and delay",
                    "## 2. Mechanism controls: what part of refresh acts",
                    "## 3. Selective recovery: CIR on held-out tasks"):
        assert heading in headings
    # the findings: one sentence per question, its numbers those of the tables below
    findings = report.split("## Findings")[1].split("## Setup")[0]
    cir = pd.read_csv(out / "tables" / "cir_eval.csv").query("policy == 'cir' and condition == 'all'").iloc[0]
    effect = f"{'+' if cir['effect_pp'] > 0 else ''}{cir['effect_pp']:.1f} pp against never recovering"
    assert effect in findings and f"95% CI {cir['ci_low_pp']:.1f} to {cir['ci_high_pp']:.1f} pp" in findings
    assert findings.count("**1. ") == findings.count("**2. ") == findings.count("**3. ") == 1
    assert ("> **Warning.**" in findings) == ("includes zero" in findings)
    # no table twice: a cohort whose complete and factual-success tables agree shows one
    captions = [line for line in report.splitlines() if line.startswith("*") and line.endswith("*")]
    assert len(captions) == len(set(captions))
    # every table the report cites is written beside it
    cited = {line.split("`")[1] for line in report.splitlines() if line.startswith("<sub>source:")}
    assert cited and all((out / path).is_file() for path in cited)
    cohorts = pd.read_csv(out / "tables" / "cohorts.csv").set_index("experiment")
    assert cohorts["tasks"].to_dict() == {name: spec[3] for name, spec in TINY.items()}
    assert (cohorts["pairs"] > 0).all()
    assert json.loads((out / "router.json").read_text())["thresholds"]
    # CIR: fitted on the primary cohort's factual-success tasks; gamma >= 0; the size of the
    # threshold search and the out-of-fold estimate beside the held-out one
    fit = pd.read_csv(out / "tables" / "cir_fit.csv").iloc[0]
    factual = pd.read_csv(out / "runs" / "primary" / "paired.csv").groupby("task_id")["factual_success"].first()
    assert fit["train_tasks"] <= factual.sum() and fit["candidates_searched"] > 1
    assert pd.isna(fit["gamma"]) or fit["gamma"] >= 0
    optimism = pd.read_csv(out / "tables" / "cir_optimism.csv")
    assert list(optimism["estimate"]) == ["out of fold (fitting tasks)", "held out"] * 4
    assert list(optimism["router"]) == [r for r in ("cir", "cir_paired", "cir_paired_replan", "cir_multi")
                                        for _ in range(2)]
    # with replan run too: a paired router per operation and one that chooses between them
    assert "## Which recovery?" in headings
    fits = pd.read_csv(out / "tables" / "cir_fit.csv")
    assert list(fits["router"]) == ["cir", "cir_paired", "cir_paired_replan", "cir_multi"]
    assert list(fits["operations"]) == ["refresh", "refresh", "replan", "refresh,replan"]
    assert {json.loads((out / f).read_text())["operations"] == ops for f, ops in (
        ("router_multi.json", ["refresh", "replan"]), ("router_paired_replan.json", ["replan"]))} == {True}
    mix = pd.read_csv(out / "tables" / "cir_mix.csv")
    assert set(mix["operation"]) <= {"refresh", "replan", "none"}
    assert mix.groupby("condition")["share"].sum().round(9).eq(1).all()
    # the built-in agent's mechanisms explain every divergence of the study
    assert "0 divergences have no such mechanism at all since the recovery" in report
    split = pd.read_csv(out / "tables" / "attribution_split.csv").set_index("operation")
    assert (split[["mechanism", "budget", "unattributed"]].sum(axis=1) == split["diverged"]).all()
    explained = pd.read_csv(out / "tables" / "mechanisms_explained.csv")
    assert set(explained["operation"]) <= {"refresh", "refresh_ablated", "placebo", "replan"}
    assert list((out / "figures").glob("*.png"))
    html = (out / "report.html").read_text(encoding="utf-8")
    # self-contained: every figure is embedded, none is linked; a section's twice, wide and drawn for a
    # phone, and each finding's figure beside it once more, drawn for a narrow column (the phone's)
    figures = {p.stem for p in (out / "figures").glob("*.png")}
    beside = len(re.findall(r"<div class='finding'><p>.*?</p><figure><img ", html))  # findings with a figure
    only_beside = {f for f in figures if f.startswith("finding_")}  # drawn for a finding alone
    assert beside == html.count("<div class='finding'>") >= 2 and html.count("<picture>") == len(figures - only_beside)
    assert html.count("data:image/png;base64,") == 2 * len(figures - only_beside) + beside
    assert "src='figures/" not in html and 'src="figures/' not in html


def _stamps(out: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(out)): (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*")
            if p.is_file() and not p.name.endswith(".lock")}


def test_second_call_rewrites_nothing_and_an_output_gone_is_analysed_again(study) -> None:
    """A call on a finished study with its settings finds every run complete and the analysis
    of these runs whole (analysis.json): it writes nothing, not even study.json. A table gone
    makes the analysis run again, to the same bytes, and study.json records that call."""
    out, configs, _ = study
    before = _digests(out)
    stamps = _stamps(out)
    lines: list[str] = []
    reproduce(out, quick=True, experiments_dir=configs, resamples=200, progress=False, echo=lines.append,
              validation=0)
    assert sum("nothing to do" in line for line in lines) == len(TINY)
    assert any("analysis: unchanged since the last call" in line for line in lines)
    assert _stamps(out) == stamps
    first = json.loads((out / "study.json").read_text())
    (out / "tables" / "cir_eval.csv").unlink()
    lines = []
    reproduce(out, quick=True, experiments_dir=configs, resamples=200, progress=False, echo=lines.append,
              validation=0)
    assert any(line.startswith("[3/4] analysis: tables") for line in lines)
    assert _digests(out) == before
    record = json.loads((out / "study.json").read_text())
    assert record["earlier_calls"][-1] == first["timings"] and "analysis_seconds" in record["timings"]
    assert "runs_seconds" not in record["timings"]  # the runs had nothing to do


def test_other_settings_are_refused_by_name(study) -> None:
    out, configs, _ = study
    with pytest.raises(CirError, match=r"written by other settings \(seed: 0 there, 1 now\)"):
        reproduce(out, RunSettings(seed=1), quick=True, experiments_dir=configs, resamples=200, progress=False,
                  echo=lambda line: None, validation=0)


def test_the_hard_worlds_are_a_setting_of_the_study(study) -> None:
    """--hard-worlds N: refused when not a count, and a study folder written without them resumes
    only without them (the section itself: tests/study/test_hard_worlds.py)."""
    out, configs, _ = study
    with pytest.raises(CirError, match="hard worlds' replicates -1"):
        reproduce(out, quick=True, experiments_dir=configs, resamples=200, progress=False,
                  echo=lambda line: None, validation=0, hard_worlds=-1)
    with pytest.raises(CirError, match=r"written by other settings \(hard_worlds_replicates: the default there, 2 now\)"):
        reproduce(out, quick=True, experiments_dir=configs, resamples=200, progress=False,
                  echo=lambda line: None, validation=0, hard_worlds=2)


def test_an_edited_config_is_refused_by_experiment_and_field(study, tmp_path: Path) -> None:
    out, configs, _ = study
    edited = tmp_path / "edited"
    edited.mkdir()
    for f in configs.glob("*.toml"):
        text = f.read_text(encoding="utf-8")
        if f.stem == "cir_eval":
            text = text.replace("quick_n_tasks = 3", "quick_n_tasks = 4")
        (edited / f.name).write_text(text, encoding="utf-8")
    with pytest.raises(CirError, match=r"\(experiment cir_eval, quick_n_tasks: 3 there, 4 now\)"):
        reproduce(out, quick=True, experiments_dir=edited, resamples=200, progress=False,
                  echo=lambda line: None, validation=0)


def test_llm_settings_are_checked_before_the_study_folder_and_part_of_its_settings(tmp_path: Path) -> None:
    from cir.agents.factory import LLMConfig
    from cir.study.reproduce import StudySettings, _differences

    with pytest.raises(CirError, match="--max-tokens"):  # a built-in agent takes --temperature only
        reproduce(tmp_path / "out", RunSettings(llm=LLMConfig(max_tokens=20)), quick=True, progress=False,
                  echo=lambda line: None)
    with pytest.raises(CirError, match="LLM option 'seed'"):
        reproduce(tmp_path / "out", RunSettings(agent="openai:m", base_url="http://127.0.0.1:9/v1",
                                                llm=LLMConfig(options={"seed": 3})),
                  quick=True, progress=False, echo=lambda line: None)
    assert not (tmp_path / "out").exists()
    greedy = StudySettings(agent="openai:m").__dict__
    warm = StudySettings(agent="openai:m", llm=LLMConfig(temperature=0.7).as_dict()).__dict__
    assert [key for key, _, _ in _differences(greedy, warm)] == ["llm"]


@pytest.fixture(scope="module")
def replicated(study, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    _, configs, _ = study
    out = tmp_path_factory.mktemp("replicated") / "out"
    lines: list[str] = []
    reproduce(out, quick=True, experiments_dir=configs, resamples=200, replicates=2, progress=False,
              echo=lines.append, validation=0)
    return out, lines


@pytest.mark.slow  # two whole quick studies (minutes)
def test_replicates_are_whole_studies_pooled_in_one_report(study, replicated) -> None:
    single, _, _ = study
    out, lines = replicated
    seeds = [0, 1000]
    assert [line for line in lines if line.startswith("== replicate")] == [
        f"== replicate {i}/2 (seed {s}) in {out / 'replicates' / f'seed-{s}'}" for i, s in enumerate(seeds, 1)]
    study_json = json.loads((out / "study.json").read_text())
    assert study_json["settings"]["replicates"] == 2 and study_json["replicate_seeds"] == seeds
    # replicate 0 is the single study of the same seed, file for file
    first = out / "replicates" / "seed-0"
    assert _digests(first) == _digests(single)
    # one row per replicate and headline; the pooled rows have the same headlines
    per = pd.read_csv(out / "tables" / "replicates.csv")
    pooled = pd.read_csv(out / "tables" / "headlines_pooled.csv")
    assert sorted(set(per["seed"])) == seeds and len(per) == 2 * len(pooled)
    assert set(per["headline"]) == {"effect", "stale2 minus clean", "mechanism control", "held-out policy",
                                    "held-out margin"}
    # the pooled evaluation walks every replicate's held-out arms with that replicate's routers
    evaluation = pd.read_csv(out / "tables" / "cir_eval_pooled.csv")
    assert list(dict.fromkeys(evaluation["policy"])) == [
        "never", "always", "anomaly", "anomaly_rate_matched", "anomaly_rate_matched_heldout", "cir",
        "anomaly_matched_cir_paired", "anomaly_matched_heldout_cir_paired", "cir_paired",
        "anomaly_matched_cir_paired_replan", "anomaly_matched_heldout_cir_paired_replan", "cir_paired_replan",
        "always_cir_multi", "anomaly_matched_cir_multi", "anomaly_matched_heldout_cir_multi",
        "always_refresh", "always_replan", "anomaly_refresh", "anomaly_replan", "cir_multi",
        "oracle_refresh", "oracle_replan", "oracle"]
    each = [pd.read_csv(out / "replicates" / f"seed-{s}" / "tables" / "cir_eval.csv") for s in seeds]
    n_tasks = lambda t: int(t.query("policy == 'never' and condition == 'all'")["n_tasks"].iloc[0])  # noqa: E731
    assert n_tasks(evaluation) == sum(n_tasks(t) for t in each)
    rescues = lambda t: int(t.query("policy == 'cir_paired' and condition == 'all'")["rescues"].iloc[0])  # noqa: E731
    assert rescues(evaluation) == sum(rescues(t) for t in each)
    margins = pd.read_csv(out / "tables" / "cir_margins_pooled.csv")
    assert {"cir", "cir_paired", "cir_paired_replan", "cir_multi"} == set(margins["policy"])
    assert "## Which recovery?" in (out / "report.md").read_text(encoding="utf-8")
    assert (out / "tables" / "cir_mix_pooled.csv").is_file()
    spread = pd.read_csv(out / "tables" / "replicate_spread.csv")
    assert (spread["replicates"] == 2).all() and (spread["min_pp"] <= spread["max_pp"]).all()
    report = (out / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# cir reproduction (quick), 2 replicates")
    assert "seeds 0, 1000" in report and (out / "figures" / "replicates_spread.png").is_file()
    # the held-out table leaves out n and success_never, the same in every row, and names them
    every = pd.read_csv(out / "tables" / "cir_eval_pooled.csv").query("condition == 'all'")
    assert every["n"].nunique() == 1 and every["success_never"].nunique() == 1
    assert (f"pooled ({every['n'].iloc[0]:,} arms; success without recovery "
            f"{every['success_never'].iloc[0]:.3f})*") in report
    assert " - anomaly " in report  # a margin's row in the spread table names both policies
    cited = {line.split("`")[1] for line in report.splitlines() if line.startswith("<sub>source:")}
    assert cited and all((out / path).is_file() for path in cited)


@pytest.mark.slow  # two whole quick studies (minutes)
def test_replicates_resume_and_refuse_another_count(study, replicated) -> None:
    _, configs, _ = study
    out, _ = replicated
    before = {p.name: p.read_bytes() for p in (out / "tables").glob("*.csv")}
    lines: list[str] = []
    reproduce(out, quick=True, experiments_dir=configs, resamples=200, replicates=2, progress=False,
              echo=lines.append, validation=0)
    assert sum("nothing to do" in line for line in lines) == 2 * len(TINY)
    assert {p.name: p.read_bytes() for p in (out / "tables").glob("*.csv")} == before
    with pytest.raises(CirError, match=r"replicates: 2 there, 3 now"):
        reproduce(out, quick=True, experiments_dir=configs, resamples=200, replicates=3, progress=False,
                  echo=lambda line: None, validation=0)
    with pytest.raises(CirError, match="replicates 0: expected an integer >= 1"):
        reproduce(out, quick=True, experiments_dir=configs, replicates=0, progress=False, echo=lambda line: None)


@pytest.mark.slow
def test_all_cohorts_share_one_queue_longest_first_with_the_same_tables(study, tmp_path, monkeypatch) -> None:
    import cir.pairs.run as run_module

    out, configs, _ = study
    calls: list[list[tuple[int, int]]] = []
    real_farm = run_module.farm

    def spy(runs, jobs, work, handle, channel=None, manager=None):
        calls.append([(job.run, len(runs[job.run].settings.replay.cells())) for job in jobs])
        return real_farm(runs, jobs, work, handle, channel, manager)

    monkeypatch.setattr(run_module, "farm", spy)
    settings = RunSettings(jobs=2, requests=RequestLimits(concurrency=4))
    reproduce(tmp_path / "out", settings, quick=True, experiments_dir=configs, resamples=200,
              progress=False, echo=lambda _: None, validation=0)
    assert len(calls) == 1  # one farm of workers for every cohort
    order = calls[0]
    assert {run for run, _ in order} == {0, 1, 2}
    assert [cells for _, cells in order] == sorted((cells for _, cells in order), reverse=True)
    assert _digests(tmp_path / "out") == _digests(out)
    for name in TINY:  # each cohort its own complete run folder
        record = json.loads((tmp_path / "out" / "runs" / name / "run.json").read_text())
        assert record["complete"] and record["timings"]["sessions"][-1]["requests"]["concurrency"] == 4
