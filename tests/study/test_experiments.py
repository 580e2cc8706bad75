"""Experiment configs: the shipped ones load, cohorts are disjoint, bad configs are refused."""

from pathlib import Path

import pytest

from cir.study.experiments import load_experiment, load_experiments, task_slices
from cir.util.errors import CirError

GOOD = """
name = "x"
role = "effects"
order = 1
split = "valid_unseen"
n_tasks = 10
quick_n_tasks = 2
conditions = ["clean", "stale2"]
delays = [0, 1]
operations = ["refresh"]
"""


def test_shipped_configs_match_the_paper_cohorts():
    exps = {e.name: e for e in load_experiments()}
    assert exps["primary"].n_tasks == 106 and exps["primary"].split == "valid_unseen"
    assert exps["independent"].n_tasks == 100
    assert exps["mechanism"].n_tasks == 74
    assert set(exps["mechanism"].replay.operations) == {"refresh", "refresh_ablated", "replan", "rewind",
                                                         "placebo"}
    assert exps["cir_eval"].n_tasks == 76 and exps["cir_eval"].split == "valid_seen"
    # CIR as in the paper: fitted on the primary cohort's factual-success tasks, evaluated on
    # valid_seen tasks that share no layout with them
    assert exps["primary"].fit_cir == "factual-success" and exps["cir_eval"].role == "eval"
    assert [e.name for e in exps.values() if e.fit_cir] == ["primary"]
    for e in exps.values():
        # the paper's conditions, and lagK beside staleK (experiments/README.md, fixed in 7cc87fe)
        assert e.replay.conditions == ("clean", "stale2", "stale1", "lag2", "lag1", "missing")
        assert e.replay.delays == (0, 1, 2, 4)


@pytest.mark.parametrize("quick", [False, True])
def test_cohort_slices_never_share_tasks(quick):
    exps = load_experiments()
    slices = task_slices(exps, quick)
    by_split: dict[str, list[range]] = {}
    for name, (split, start, stop) in slices.items():
        exp = next(e for e in exps if e.name == name)
        assert stop - start == exp.size(quick)
        by_split.setdefault(split, []).append(range(start, stop))
    for ranges in by_split.values():
        seen: set[int] = set()
        for r in ranges:
            assert seen.isdisjoint(r)
            seen |= set(r)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s.replace('role = "effects"', 'role = "fun"'), "role 'fun'"),
        (lambda s: s.replace('split = "valid_unseen"', 'split = "test"'), "split 'test'"),
        (lambda s: s.replace("n_tasks = 10\n", "n_tasks = 0\n"), "'n_tasks' must be >= 1"),
        (lambda s: s.replace("delays = [0, 1]", "delays = [0, -1]"), "delays, operations): delay -1"),
        (lambda s: s.replace("delays = [0, 1]", "delays = [0, true]"), "delay True"),
        (lambda s: s.replace("order = 1\n", ""), "missing field 'order'"),
        (lambda s: s + "\ncolour = 1\n", "unknown field(s) colour"),
        (lambda s: s.replace("n_tasks = 10", 'n_tasks = "ten"'), "'n_tasks' must be a int"),
        (lambda s: s + "\n[[broken", "not valid TOML"),
    ],
)
def test_bad_config_names_the_file_and_field(tmp_path: Path, edit, message):
    path = tmp_path / "x.toml"
    path.write_text(edit(GOOD))
    with pytest.raises(CirError) as err:
        load_experiment(path)
    assert str(path) in str(err.value)
    assert message in str(err.value)


def test_folder_needs_one_fit_and_one_eval_cohort_sharing_no_layout(tmp_path: Path):
    (tmp_path / "a.toml").write_text(GOOD)
    with pytest.raises(CirError, match="role 'eval'"):
        load_experiments(tmp_path)
    (tmp_path / "b.toml").write_text(GOOD.replace('name = "x"', 'name = "y"').replace('"effects"', '"eval"')
                                      .replace("valid_unseen", "valid_seen"))
    with pytest.raises(CirError, match="fit_cir"):
        load_experiments(tmp_path)
    (tmp_path / "a.toml").write_text(GOOD + 'fit_cir = "factual-success"\n')
    assert [e.fit_cir for e in load_experiments(tmp_path)] == ["factual-success", None]
    # train and valid_seen tasks are drawn from the same room layouts: refused
    (tmp_path / "a.toml").write_text(GOOD.replace('"effects"', '"train"').replace("valid_unseen", "train")
                                     + 'fit_cir = "all"\n')
    with pytest.raises(CirError, match="share layouts"):
        load_experiments(tmp_path)
    (tmp_path / "a.toml").write_text(GOOD + 'fit_cir = "some"\n')
    with pytest.raises(CirError, match="fit_cir"):
        load_experiments(tmp_path)
    with pytest.raises(CirError, match="no experiments folder"):
        load_experiments(tmp_path / "missing")
