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


def _pooled_study(folder: Path) -> Path:
    """A replicates study's layout with tiny tables: the top-level report and pooled tables, and
    each replicate's own study folder."""
    (folder / "tables").mkdir(parents=True)
    (folder / "figures").mkdir()
    (folder / "report.md").write_text("# pooled\n")
    for name in ("report.html", "study.json"):
        (folder / name).write_text(name)
    (folder / "tables" / "headlines_pooled.csv").write_text("x\n1\n")
    (folder / "tables" / "replicate_spread.csv").write_text(
        "headline,cohort,subset,condition,delay,operation,policy,versus,pooled_n_tasks,pooled_pp,pooled_ci_low_pp,"
        "pooled_ci_high_pp,replicates,min_pp,median_pp,max_pp,sd_pp\n"
        "effect,primary,factual-success,clean,0,refresh,,,80,-4.0,-7.5,-1.25,2,-5.0,-4.0,-3.0,1.4\n"
        "effect,primary,factual-success,stale2,0,refresh,,,80,10.0,5.0,15.0,2,8.0,10.0,12.0,2.8\n"
        "held-out margin,eval,all,all,,,cir_paired,anomaly,70,2.5,0.5,4.5,2,1.0,2.5,4.0,2.1\n")
    (folder / "tables" / "cir_eval_pooled.csv").write_text(
        "policy,condition,n,n_tasks,effect_pp,ci_low_pp,ci_high_pp,sign_flip_p,intervention_rate,clean_harm_rate,"
        "oracle_fraction\n"
        "never,all,280,70,0,0,0,1,0,0,0\nnever,clean,70,70,0,0,0,1,0,0,\n"
        "cir_paired,all,280,70,4.0,1.0,7.0,0.004,0.12,0.014,0.6\ncir_paired,clean,70,70,0,0,0,1,0.1,0.014,\n"
        "oracle,all,280,70,6.6,4.0,9.0,0.0001,0.07,0,1\noracle,clean,70,70,0,0,0,1,0,0,\n")
    (folder / "tables" / "cir_margins_pooled.csv").write_text(
        "policy,versus,condition,n,margin_pp,ci_low_pp,ci_high_pp,sign_flip_p\n"
        "cir_paired,anomaly,all,280,2.5,0.5,4.5,0.039\ncir_paired,anomaly,clean,70,0,0,0,1\n"
        "cir_paired,oracle,all,280,-2.6,-4.0,-1.0,0.001\n")
    (folder / "tables" / "cir_fit_replicates.csv").write_text("router,budget_bound,seed\ncir_paired,True,0\n"
                                                              "cir_paired,False,1000\n")
    for seed in (0, 1000):
        _study(folder / "replicates" / f"seed-{seed}")
    return folder


def test_a_study_with_replicates_publishes_each_replicate_and_a_generated_summary(tmp_path):
    publish = _publish_module()
    study = _pooled_study(tmp_path / "study")
    data, figures = tmp_path / "repo" / "data", tmp_path / "repo" / "figures"
    publish.publish(study, data, figures)
    for seed in (0, 1000):
        replicate = data / "replicates" / f"seed-{seed}"
        assert (replicate / "runs" / "primary" / "paired.csv").exists() and (replicate / "router.json").exists()
        assert (replicate / "report.md").exists() and (replicate / "tables" / "cohorts.csv").exists()
    assert (data / "tables" / "cir_eval_pooled.csv").exists() and not (data / "runs").exists()
    text = publish.summary(study)
    assert "Pooled over 2 replicates" in text
    assert "delay 0: -4.0 pp [-7.5, -1.2] (replicates -5.0 to -3.0)" in text  # from the tables, not typed
    assert ("`cir_paired` +4.0 pp [+1.0, +7.0], p 0.004, 60% of the gain of `oracle`, recovering in 12.0% of arms, "
            "clean harm 1.4%") in text
    # no comparison named before the study: the margins it shows, each with its p and Holm's over them
    assert ("**Margins** (p: the task-level sign-flip test; Holm: adjusted for the 1 margin shown here; none named "
            "before the study ran): `cir_paired` - `anomaly` +2.5 pp [+0.5, +4.5] (replicates +1.0 to +4.0), p 0.039, "
            "Holm 0.039.") in text
    # named ones: with Holm's adjusted p, read as a difference only when it is at most 0.05, and how
    # many other margins there are
    (study / "tables" / "primary_comparisons_pooled.csv").write_text(
        "comparison,policy,versus,on,n,margin_pp,ci_low_pp,ci_high_pp,p_raw,p_holm,reads\n"
        "cir_paired - anomaly,cir_paired,anomaly,all,280,2.5,0.5,4.5,0.039,0.078,no difference shown\n"
        "cir_paired - oracle,cir_paired,oracle,all,280,-2.6,-4.0,-1.0,0.001,0.002,negative\n")
    text = publish.summary(study)
    assert ("**Primary comparisons** (named in `experiments/cir_eval.toml` before the study ran; p: the task-level "
            "sign-flip test, Holm: adjusted for the 2 named): `cir_paired` - `anomaly` +2.5 pp [+0.5, +4.5], p 0.039, "
            "Holm 0.078: no difference shown; `cir_paired` - `oracle` -2.6 pp [-4.0, -1.0], p 0.001, Holm 0.002: "
            "negative. The tables hold 1 other margin (3 in `tables/cir_margins_pooled.csv`)") in text
    assert "**Margins** (none named" not in text
    assert "bound the threshold search in 1 of 2 replicates for `cir_paired`" in text
    readme = tmp_path / "README.md"
    readme.write_text(f"kept\n{publish.BEGIN}\nold numbers\n{publish.END}\nkept too\n")
    assert publish.fill_summary(readme, text)
    assert readme.read_text() == f"kept\n{publish.BEGIN}\n{text}\n{publish.END}\nkept too\n"
    assert not publish.fill_summary(tmp_path / "absent.txt", text)


def test_publish_keeps_the_side_studies_and_a_family_study_goes_to_its_own_folder(tmp_path):
    """data/'s side studies (the service desk's, the planted worlds', the frameworks') survive a
    publish of the reference study; a family's study published into its own folder keeps its
    calibration files, links its figures inside that folder and says what it is."""
    publish = _publish_module()
    data, figures = tmp_path / "repo" / "data", tmp_path / "repo" / "figures"
    for side in ("service-desk", "planted", "frameworks", "fixed-point"):
        (data / side).mkdir(parents=True)
        (data / side / "kept.json").write_text(side)
    publish.publish(_study(tmp_path / "study"), data, figures)
    for side in ("service-desk", "planted", "frameworks", "fixed-point"):
        assert (data / side / "kept.json").read_text() == side
    desk = data / "service-desk"
    (desk / "calibration.json").write_text("calibrated")
    publish.publish(_study(tmp_path / "desk-study"), desk, desk / "figures", "the service desk's study")
    report = (desk / "report.md").read_text()
    assert "](figures/effects.png)" in report and "This is the service desk's study" in report
    assert (desk / "calibration.json").read_text() == "calibrated" and not (desk / "kept.json").exists()
