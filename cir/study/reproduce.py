"""The whole study of the paper, end to end: tasks -> paired runs -> analysis -> CIR -> report.

``reproduce(out)`` generates the tasks, runs every experiment config through the
paired replayer (each cohort a resumable RUN_DIR under ``out/runs``), writes the
analysis tables under ``out/tables`` and the figures under ``out/figures``, fits
CIR on the training cohort, evaluates it with its baselines on the held-out cohort,
and writes ``report.md`` / ``report.html``. A second call with the same settings
resumes where the first stopped; different settings for the same ``out`` are refused.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from cir import __version__
from cir.episode.protocol import DEFAULT_RESAMPLES, DEFAULT_SEED, PLANTED_WORLD_REPLICATES
from cir.families.registry import get_family
from cir.pairs.record import RunRecord
from cir.pairs.run import RunSpec, run_agent_identity, run_experiments
from cir.pairs.settings import RunSettings
from cir.pairs.store import RunStore
from cir.study import outputs
from cir.study.experiments import Experiment, load_experiments, task_slices
from cir.util.errors import CirError
from cir.util.files import read_json, write_atomic
from cir.util.parallel import one_thread_each

STUDY_JSON = "study.json"
STUDY_REPLICATES = PLANTED_WORLD_REPLICATES  # of each planted world, quick or not (the benchmark runs 200 too)
# The analysis (scikit-learn, matplotlib: seconds to import) is imported when a call analyses:
# a call on a finished study has nothing to analyse and returns in seconds.


@dataclass(frozen=True)
class StudySettings:
    """Everything that changes the study's results (recorded in ``study.json``): the size of
    its cohorts, its agent (from the runs' settings) and the bootstrap's resamples."""

    quick: bool = False
    agent: str = "builtin"
    seed: int = DEFAULT_SEED
    resamples: int = DEFAULT_RESAMPLES
    base_url: str | None = None
    llm: dict[str, Any] | None = None  # the LLM agent's params (LLMConfig), None for the default
    perturb_at: int | None = None  # a fixed perturbed env action for every cohort (None: the paper's 25%)
    samples: int = 1  # draws per arm and branch in every cohort (--samples; recorded only above 1)

    @classmethod
    def of(cls, run: RunSettings, quick: bool, resamples: int, perturb_at: int | None = None,
           samples: int = 1) -> StudySettings:
        return cls(quick=quick, agent=run.agent, seed=run.seed, resamples=resamples, base_url=run.base_url,
                   llm=None if run.llm.is_default() else run.llm.as_dict(), perturb_at=perturb_at,
                   samples=samples)


def validation_replicates(quick: bool, replicates: int | None) -> int:
    """The planted worlds' replicates a study's report runs (None: the default of its size)."""
    if replicates is None:
        return STUDY_REPLICATES[bool(quick)]
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 0:
        raise CirError(f"validation replicates {replicates!r}: expected an integer >= 0 (0: none)")
    return replicates


def _identity(settings: RunSettings, quick: bool, resamples: int, perturb_at: int | None,
              experiments: list[Experiment], samples: int = 1, validation: int | None = None,
              hard_worlds: int = 0) -> dict[str, Any]:
    """What study.json records as the study's settings (the family in its configs' records; a
    prompt file by its content's version; the samples only above 1 and the planted worlds'
    replicates only when not the default, so the records of studies written before them read
    as before; the hard worlds' replicates only when some)."""
    identity = {**asdict(StudySettings.of(settings, quick, resamples, perturb_at, samples)),
                "experiments": [e.identity() for e in experiments]}
    if samples == 1:
        del identity["samples"]
    if validation is not None and validation != STUDY_REPLICATES[bool(quick)]:
        identity["validation_replicates"] = validation
    if hard_worlds:
        identity["hard_worlds_replicates"] = hard_worlds
    if settings.prompt_file:
        identity["prompt"] = settings.env_family().prompt.from_file(settings.prompt_file).version
    return identity


def _experiments(settings: RunSettings, experiments_dir: str | Path | None) -> list[Experiment]:
    """The study's configs: ``experiments_dir``, else the family's folder; of the run's family."""
    return load_experiments(experiments_dir, family=settings.family_spec())


def _check_study(out: Path, identity: dict[str, Any]) -> list[dict[str, Any]]:
    """Refuse a folder written by other settings; return the timings of earlier calls."""
    path = out / STUDY_JSON
    record = read_json(path, "study record", missing_ok=True)
    if record is None:
        return []
    try:
        old = record["settings"]
    except (KeyError, TypeError):
        raise CirError(f"{path}: unreadable study record; remove it or choose another --out") from None
    for key, there, now in _differences(old, identity):
        raise CirError(
            f"{out}: written by other settings ({key}: {_said(key, old, there)} there, "
            f"{_said(key, identity, now)} now); use another --out or the same settings to resume"
        )
    earlier = record.get("earlier_calls", [])
    return [*earlier, record["timings"]] if record.get("timings") else earlier


def _said(key: str, settings: dict[str, Any], value: Any) -> str:
    """A setting's value in a refusal: a setting a record leaves out is its default (study.json
    records the samples and the planted worlds' replicates only when they are not)."""
    if key in settings or key.startswith("experiment "):
        return repr(value)
    if key == "validation_replicates":
        quick = bool(settings.get("quick"))
        return f"the default ({STUDY_REPLICATES[quick]} with{'' if quick else 'out'} --quick)"
    return "the default"


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(setting, old value, new value) for each setting that differs; experiments by name
    and field, so the message names the one field that changed."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if key == "experiments" and isinstance(a, list) and a != b:
            by_name = {e.get("name"): e for e in a if isinstance(e, dict)}
            for exp in b:
                prev = by_name.pop(exp["name"], None)
                if prev is None:
                    diffs.append((f"experiment {exp['name']}", "absent", "present"))
                    continue
                diffs += [(f"experiment {exp['name']}, {field}", prev.get(field), exp.get(field))
                          for field in sorted(set(prev) | set(exp)) if prev.get(field) != exp.get(field)]
            diffs += [(f"experiment {name}", "present", "absent") for name in by_name]
        elif a != b:
            diffs.append((key, a, b))
    return diffs


def _write_study(out: Path, study: dict[str, Any]) -> None:
    write_atomic(out / STUDY_JSON, json.dumps(study, indent=2, sort_keys=True) + "\n")


def _mixed_order(task_id: str) -> str:
    """Cohort order: a hash of the id, so slices mix task types (ids sort by type)."""
    return hashlib.sha256(task_id.encode("utf-8")).hexdigest()


def cohort_tasks(out: Path, experiments: list[Experiment], quick: bool, seed: int,
                 progress: bool, jobs: int = 1, family_options: Any = None,
                 family: Any = None) -> dict[str, list[Any]]:
    """Generate each split once (as large as its cohorts need) with the family's
    ``generate_tasks`` and slice it into cohorts."""
    fam = get_family(family)
    slices = task_slices(experiments, quick)
    need: dict[str, int] = {}
    for split, _, stop in slices.values():
        need[split] = max(need.get(split, 0), stop)
    by_split = {}
    for split, n in sorted(need.items()):
        fam.generate(out / "tasks", split, n, seed, progress=progress, jobs=jobs, family_options=family_options)
        by_split[split] = sorted(fam.load_tasks(out / "tasks" / split), key=lambda t: _mixed_order(t.task_id))
    return {name: by_split[split][start:stop] for name, (split, start, stop) in slices.items()}


def reproduce(out: str | Path, settings: RunSettings | None = None, *, quick: bool = False,
              replicates: int = 1, perturb_at: int | None = None, resamples: int = DEFAULT_RESAMPLES,
              experiments_dir: str | Path | None = None, progress: bool = True,
              echo: Callable[[str], None] = print, samples: int = 1, validation: int | None = None,
              hard_worlds: int = 0) -> Path:
    """Run the study into ``out``; return the path of ``report.md``.

    ``settings`` are every cohort's run settings but the grid (each experiment's): the agent,
    whose seed is also the seed of task generation and of the analysis, the parallelism, the
    reply cache (``cache_dir``: one for every cohort, which a later study can share; default
    each run folder's own) and the family's own options (``family_options``, which generating
    the tasks is given too: ALFWorld's ``engine_savings=False`` generates and runs on
    textworld's engine unmodified, slower, the same files and tables).

    ``replicates`` > 1 runs that many independent replicates of the whole study (seeds
    :func:`cir.study.replicates.replicate_seeds`: replicate 0 is this study), each a complete
    study folder under ``out/replicates/seed-S/``, and writes the pooled report into ``out``
    (:mod:`cir.study.pooled`). ``perturb_at`` perturbs the same env action in every task
    instead of the one after 25% of the factual run (:mod:`cir.episode.perturb`). ``samples``
    runs every cohort with that many draws per arm and branch (``--samples``: a sampling agent).
    ``validation``: replicates of each planted world the report checks the routers on
    (:mod:`cir.study.validation`; None: 1 for ``quick``, else 200; 0: none), once per call (the
    pooled report's, not each replicate's). ``hard_worlds``: replicates of each hard planted world
    (:mod:`cir.study.hard_worlds`; 0, the default: none), likewise.
    """
    out = Path(out)
    settings = settings or RunSettings()
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 1:
        raise CirError(f"replicates {replicates!r}: expected an integer >= 1")
    worlds = validation_replicates(quick, validation)
    if isinstance(hard_worlds, bool) or not isinstance(hard_worlds, int) or hard_worlds < 0:
        raise CirError(f"hard worlds' replicates {hard_worlds!r}: expected an integer >= 0 (0: none)")
    kwargs = dict(quick=quick, perturb_at=perturb_at, resamples=resamples, experiments_dir=experiments_dir,
                  progress=progress, echo=echo, samples=samples)
    if replicates == 1:
        return _study(out, settings, validation=worlds, hard_worlds=hard_worlds, **kwargs)[0]
    from cir.study.replicates import replicate_dir, replicate_seeds

    experiments = _experiments(settings, experiments_dir)
    seeds = replicate_seeds(settings.seed, replicates)
    identity = {**_identity(settings, quick, resamples, perturb_at, experiments, samples, worlds, hard_worlds),
                "replicates": replicates}
    out.mkdir(parents=True, exist_ok=True)
    earlier = _check_study(out, identity)
    study = {"cir_version": __version__, "settings": identity, "replicate_seeds": seeds, "timings": {},
             "earlier_calls": earlier}
    worked = not (out / STUDY_JSON).exists()  # this call changed something: study.json says what it took
    if worked:
        _write_study(out, study)
    t_start = time.perf_counter()
    studies = {}
    for i, s in enumerate(seeds, 1):
        echo(f"== replicate {i}/{replicates} (seed {s}) in {replicate_dir(out, s)}")
        t0 = time.perf_counter()
        _, changed = _study(replicate_dir(out, s), replace(settings, seed=s), validation=0, **kwargs)
        studies[s] = replicate_dir(out, s)
        study["timings"][f"replicate_seed_{s}_seconds"] = round(time.perf_counter() - t0, 1)
        if changed:
            worked = True
            _write_study(out, study)
    digest = outputs.inputs_digest({**identity, "validation_replicates": worlds},
                                   {str(s): _analysis_of(d) for s, d in studies.items()})
    report = out / "report.md"
    t0 = time.perf_counter()
    if outputs.unchanged(out, digest):
        echo(f"== pooled: {replicates} replicates: unchanged since the last call ({outputs.ANALYSIS_JSON}); "
             "nothing rewritten")
    else:
        echo(f"== pooled: {replicates} replicates, tables, figures and the report")
        from cir.study.pooled import POOLED_WEIGHTS, write_pooled_report
        from cir.study.report import analysis_steps

        outputs.begin(out)
        with one_thread_each(), analysis_steps(worlds, settings.jobs, enabled=progress, what="pooled analysis",
                                               weights=POOLED_WEIGHTS) as steps:
            report = write_pooled_report(out, experiments, studies, resamples=resamples, seed=settings.seed,
                                         agent=settings.agent, quick=quick, validation=worlds, jobs=settings.jobs,
                                         progress=steps, hard_worlds=hard_worlds)
        outputs.record(out, digest)
        worked = True
        study["timings"]["pooled_analysis_seconds"] = round(time.perf_counter() - t0, 1)
    total = round(time.perf_counter() - t_start, 1)
    if worked:
        study["timings"]["total_seconds"] = total
        _write_study(out, study)
    echo(f"report: {report} and {report.with_suffix('.html')} ({total:.0f} s in this call)")
    return report


def _analysis_of(study: Path) -> Any:
    """A replicate's analysis record (what it read and wrote), as the pooled report's input."""
    return read_json(study / outputs.ANALYSIS_JSON, "analysis record", missing_ok=True)


def study_experiments(settings: RunSettings, experiments_dir: str | Path | None,
                      perturb_at: int | None = None, samples: int = 1) -> list[Experiment]:
    """The study's experiment configs (of the run's family), each perturbed at ``perturb_at``
    when given, each with ``samples`` draws per arm and branch."""
    experiments = _experiments(settings, experiments_dir)
    if perturb_at is not None:
        try:
            experiments = [replace(e, replay=replace(e.replay, perturb_at=perturb_at)) for e in experiments]
        except CirError as err:
            raise CirError(f"--perturb-at: {err}") from None
    if samples != 1:
        try:
            experiments = [replace(e, replay=replace(e.replay, samples=samples)) for e in experiments]
        except CirError as err:
            raise CirError(f"--samples: {err}") from None
    return experiments


def study_runs(out: str | Path, settings: RunSettings, *, quick: bool = False, perturb_at: int | None = None,
               experiments_dir: str | Path | None = None,
               progress: bool = True, samples: int = 1) -> list[tuple[str, list[Any], RunSettings]]:
    """Each run of the study ``reproduce`` would make: its name, its tasks (generated under
    ``out/tasks`` as the study does) and its settings (for ``cir estimate --study``)."""
    out = Path(out)
    experiments = study_experiments(settings, experiments_dir, perturb_at, samples)
    cohorts = cohort_tasks(out, experiments, quick, settings.seed, progress, settings.jobs,
                           settings.family_options, settings.family)
    return [(e.name, cohorts[e.name], settings.with_replay(e.replay)) for e in experiments]


def _study(out: Path, settings: RunSettings, *, quick: bool, perturb_at: int | None, resamples: int,
           experiments_dir: str | Path | None, progress: bool, echo: Callable[[str], None],
           samples: int = 1, validation: int = 0, hard_worlds: int = 0) -> tuple[Path, bool]:
    """One study (one replicate) into ``out``: the path of its ``report.md`` (with ``validation``
    replicates of each planted world checked in it) and whether this call changed anything (a
    call on a finished study with the same settings does not: it rewrites nothing, not even
    ``study.json``)."""
    experiments = study_experiments(settings, experiments_dir, perturb_at, samples)
    run_agent_identity(settings)  # a bad agent setting: before any folder
    identity = _identity(settings, quick, resamples, perturb_at, experiments, samples, validation or None,
                         hard_worlds)
    out.mkdir(parents=True, exist_ok=True)
    earlier = _check_study(out, identity)
    # a resumed study keeps what earlier calls took; "timings" is this call's
    study = {"cir_version": __version__, "settings": identity, "timings": {}, "earlier_calls": earlier}
    worked = not (out / STUDY_JSON).exists()  # this call changed something: study.json says what it took
    if worked:
        _write_study(out, study)
    t_start = time.perf_counter()

    echo(f"[1/4] tasks: generating {'quick' if quick else 'full'} cohorts under {out / 'tasks'}")
    t0 = time.perf_counter()
    cohorts = cohort_tasks(out, experiments, quick, settings.seed, progress, settings.jobs,
                           settings.family_options, settings.family)
    study["timings"]["tasks_seconds"] = round(time.perf_counter() - t0, 1)
    runs, ran = _run_cohorts(out, experiments, cohorts, settings, study, progress, echo)
    worked |= ran

    digest = outputs.inputs_digest({**identity, "validation_replicates": validation},
                                   outputs.run_inputs([out / "runs" / e.name for e in experiments]))
    report = out / "report.md"
    if outputs.unchanged(out, digest):
        echo(f"[3/4] analysis: unchanged since the last call ({outputs.ANALYSIS_JSON}); nothing rewritten")
    else:
        echo("[3/4] analysis: tables, figures, CIR fit and held-out evaluation")
        from cir.study.report import analysis_steps, write_study_report  # seconds: said first

        t0 = time.perf_counter()
        outputs.begin(out)
        with one_thread_each(), analysis_steps(validation, settings.jobs, enabled=progress) as steps:
            report = write_study_report(out, experiments, runs, resamples=resamples, seed=settings.seed,
                                        agent=settings.agent, quick=quick, validation=validation,
                                        jobs=settings.jobs, progress=steps, hard_worlds=hard_worlds)
        outputs.record(out, digest)
        worked = True
        study["timings"]["analysis_seconds"] = round(time.perf_counter() - t0, 1)
    total = round(time.perf_counter() - t_start, 1)
    if worked:
        study["timings"]["total_seconds"] = total
        _write_study(out, study)
    echo(f"[4/4] report: {report} and {report.with_suffix('.html')} ({total:.0f} s in this call)")
    return report, worked


def _run_cohorts(out: Path, experiments: list[Experiment], cohorts: dict[str, list[Any]],
                 settings: RunSettings, study: dict[str, Any], progress: bool,
                 echo: Callable[[str], None]) -> tuple[dict[str, RunRecord], bool]:
    """Every experiment's paired run (its grid, the study's settings otherwise), each its own
    resumable run folder, their tasks in one queue (the largest grids first) through one set
    of worker processes kept for all of them (:func:`cir.pairs.run.run_experiments`), timed;
    and whether any run had work to do (a session of this call in its record)."""
    specs = []
    sessions = []
    for i, exp in enumerate(experiments, 1):
        grid = exp.replay
        echo(f"[2/4] run {i}/{len(experiments)}: {exp.name} ({len(cohorts[exp.name])} {exp.split} tasks, "
             f"{', '.join(grid.conditions)} x delays {','.join(map(str, grid.delays))} x "
             f"{', '.join(grid.operations)})")
        specs.append(RunSpec(cohorts[exp.name], out / "runs" / exp.name, settings.with_replay(grid),
                             tasks_source=f"{exp.split}[{exp.name}]"))
        before = RunRecord.read(RunStore(out / "runs" / exp.name)) if (out / "runs" / exp.name).is_dir() else None
        sessions.append(None if before is None else len(before.sessions))
    t0 = time.perf_counter()
    records = run_experiments(specs, progress=progress, echo=echo)
    ran = any(before != len(record.sessions) for before, record in zip(sessions, records, strict=True))
    if ran:
        study["timings"]["runs_seconds"] = round(time.perf_counter() - t0, 1)
        for exp, record in zip(experiments, records, strict=True):  # each cohort's share of the shared session
            study["timings"][f"run_{exp.name}_seconds"] = record.sessions[-1].seconds if record.sessions else 0.0
        _write_study(out, study)
    return {exp.name: record for exp, record in zip(experiments, records, strict=True)}, ran
