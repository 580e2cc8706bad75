"""The study report reads and checks each run folder once, and fits its routers before it writes a section."""

from __future__ import annotations

from pathlib import Path

from cir.pairs import paired
from cir.pairs.record import RunRecord
from cir.pairs.settings import RunSettings
from cir.pairs.store import RunStore
from cir.study import report as study_report
from cir.study.reproduce import reproduce, study_experiments

KEYDOOR = "tests.support.keydoor:FAMILY"
ROOT = Path(__file__).resolve().parents[2]


def _config(folder: Path, name: str, role: str, order: int, split: str, n: int, extra: str = "") -> None:
    (folder / f"{name}.toml").write_text(
        f'env = "{KEYDOOR}"\nname = "{name}"\nrole = "{role}"\norder = {order}\nsplit = "{split}"\n'
        f'n_tasks = {n}\nquick_n_tasks = {n}\nconditions = ["clean", "stale2", "missing"]\n'
        f'delays = [0, 1, 2]\noperations = ["refresh", "replan"]\n{extra}')


def test_each_run_folder_is_read_once_and_the_routers_come_first(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    configs = tmp_path / "configs"
    configs.mkdir()
    _config(configs, "primary", "effects", 1, "train", 16, 'fit_cir = "all"\n')
    _config(configs, "mechanism", "mechanism", 2, "train", 6)
    _config(configs, "cir_eval", "eval", 3, "test", 10)
    out = tmp_path / "study"
    settings = RunSettings(family=KEYDOOR, jobs=1)
    reproduce(out, settings, quick=True, resamples=50, experiments_dir=configs, progress=False, echo=lambda _: None)
    experiments = study_experiments(settings, configs)
    runs = {e.name: RunRecord.read(RunStore(out / "runs" / e.name)) for e in experiments}

    checked: list[Path] = []
    real_check = paired._check_run
    monkeypatch.setattr(paired, "_check_run", lambda run_dir, allow: checked.append(run_dir) or real_check(run_dir, allow))
    routers_first: list[bool] = []
    real_effects = study_report._effects_section

    def effects(report, out_, *args, **kwargs):
        routers_first.append((out_ / "router.json").is_file() and (out_ / "router_paired.json").is_file())
        return real_effects(report, out_, *args, **kwargs)

    monkeypatch.setattr(study_report, "_effects_section", effects)
    for name in ("router.json", "router_paired.json"):
        (out / name).unlink()
    before = (out / "report.md").read_text()
    study_report.write_study_report(out, experiments, runs, resamples=50, seed=0, agent="builtin", quick=True,
                                    validation=1)  # the planted worlds, as reproduce --quick checks them
    assert sorted(p.name for p in checked) == ["cir_eval", "mechanism", "primary"]  # once each
    assert routers_first == [True]
    assert (out / "report.md").read_text() == before  # the same report as the study's own
