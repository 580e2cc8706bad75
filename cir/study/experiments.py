"""Experiment configs: one TOML file per experiment of the paper (``experiments/``).

A config names a cohort (split, number of tasks, full and ``--quick``), its environment
family (``family``: a name such as ``textworld-cooking`` or ``MODULE:ATTR``, ``env`` its former
name; ALFWorld without it; every config of a folder names the same one, whose splits the ``split`` is one of), the grid of
conditions, delays and operations, and its role in the study: ``effects`` (when does
refresh help or harm), ``mechanism`` (why), ``eval`` (CIR's held-out evaluation) or
``train`` (a cohort run only to fit CIR). ``persistence`` (optional: ``"once"``, the default,
``"refresh"`` or a number N) says how long a perturbed read lasts (:class:`~cir.episode.perturb.Persistence`).
The ``eval`` config may name the study's primary comparisons (``comparisons``, a list of ``"POLICY -
VERSUS"`` or ``"POLICY - VERSUS on GROUP"``, :mod:`cir.study.comparisons`), fixed before it runs.
Exactly one config says ``fit_cir = SUBSET``:
CIR is fitted on that subset of its tasks (``factual-success`` or ``all``), as the paper
fits it on the primary cohort's factual-success tasks; its split must share no layout
with the evaluation cohort's. Cohorts on the same split take consecutive, disjoint
slices of one generated split in ``order``, so they never share tasks.

The grid is a :class:`~cir.pairs.settings.ReplaySettings`, the same settings object ``cir run``
builds from its options (and checks there); the perturbation fraction and the budgets are the
protocol's (:mod:`cir.episode.protocol`). The study runs each cohort with its grid and the
study's :class:`~cir.pairs.settings.RunSettings` otherwise.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from cir.episode.perturb import ONCE, parse_persistence
from cir.families.registry import DEFAULT_FAMILY, get_family
from cir.pairs.settings import ReplaySettings
from cir.stats.decompose import SUBSETS
from cir.study.comparisons import check_comparisons, parse_comparisons
from cir.util.errors import CirError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROLES = ("effects", "mechanism", "train", "eval")
_FIELDS = {
    "name": str,
    "role": str,
    "order": int,
    "split": str,
    "n_tasks": int,
    "quick_n_tasks": int,
    "conditions": list,
    "delays": list,
    "operations": list,
}
# env: family's former name; persistence: how long a perturbed read lasts (once, refresh or N)
# comparisons: the held-out cohort's primary comparisons (cir.study.comparisons)
_OPTIONAL = {"fit_cir": str, "family": str, "env": str, "persistence": (str, int), "comparisons": list}


@dataclass(frozen=True)
class Experiment:
    """One cohort of the study and the paired grid it runs."""

    name: str
    role: str
    order: int
    split: str
    n_tasks: int
    quick_n_tasks: int
    replay: ReplaySettings
    source: str = ""
    fit_cir: str | None = None
    family: str = DEFAULT_FAMILY
    #: the primary comparisons, named before the study runs (the held-out cohort's; cir.study.comparisons)
    comparisons: tuple[str, ...] = ()

    def size(self, quick: bool) -> int:
        return self.quick_n_tasks if quick else self.n_tasks

    def identity(self) -> dict[str, object]:
        """The config as the study record holds it (its fields, the file by name)."""
        return {"name": self.name, "role": self.role, "order": self.order, "split": self.split,
                "n_tasks": self.n_tasks, "quick_n_tasks": self.quick_n_tasks,
                "conditions": list(self.replay.conditions), "delays": list(self.replay.delays),
                "operations": list(self.replay.operations), "fit_cir": self.fit_cir,
                "source": Path(self.source).name,
                # one-shot perturbations (the default) leave the study record as it was
                **({} if self.replay.persistence == ONCE else {"persistence": self.replay.persistence}),
                # named before the study runs: a resume with other comparisons is refused
                **({"comparisons": list(self.comparisons)} if self.comparisons else {}),
                # ALFWorld's configs name no family: their study records stay as they were
                **({} if self.family == DEFAULT_FAMILY else {"family": self.family})}


def load_experiment(path: str | Path) -> Experiment:
    """Read and check one config; errors name the file and the field."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CirError(f"{path}: no such experiment config") from None
    except tomllib.TOMLDecodeError as err:
        raise CirError(f"{path}: not valid TOML ({err})") from None
    unknown = sorted(set(data) - set(_FIELDS) - set(_OPTIONAL))
    if unknown:
        raise CirError(f"{path}: unknown field(s) {', '.join(unknown)}; expected "
                       f"{', '.join(_FIELDS)} (and optionally {', '.join(_OPTIONAL)})")
    if "fit_cir" in data and data["fit_cir"] not in SUBSETS:
        raise CirError(f"{path}: field 'fit_cir' must be one of {', '.join(SUBSETS)}, got {data['fit_cir']!r}")
    for field, kind in _FIELDS.items():
        if field not in data:
            raise CirError(f"{path}: missing field {field!r}")
        if not isinstance(data[field], kind) or (kind is int and isinstance(data[field], bool)):
            raise CirError(f"{path}: field {field!r} must be a {kind.__name__}, got {data[field]!r}")
    if data["role"] not in ROLES:
        raise CirError(f"{path}: role {data['role']!r} is not one of {', '.join(ROLES)}")
    for field, kind in _OPTIONAL.items():
        if field in data and (not isinstance(data[field], kind) or isinstance(data[field], bool)):
            what = " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
            raise CirError(f"{path}: field {field!r} must be a {what}, got {data[field]!r}")
    if "family" in data and "env" in data:
        raise CirError(f"{path}: fields 'family' and 'env' both given; 'env' is the former name of 'family': keep one")
    field = "env" if "env" in data else "family"
    family = data.get(field, DEFAULT_FAMILY)
    try:
        splits = get_family(family).splits
    except CirError as err:
        raise CirError(f"{path}: field {field!r}: {err}") from None
    if data["split"] not in splits:
        raise CirError(f"{path}: split {data['split']!r} is not one of {family}'s: {', '.join(splits)}")
    for field in ("n_tasks", "quick_n_tasks"):
        if data[field] < 1:
            raise CirError(f"{path}: field {field!r} must be >= 1, got {data[field]}")
    try:
        persistence = parse_persistence(data.get("persistence", ONCE)).text
    except CirError as err:
        raise CirError(f"{path}: field 'persistence': {err}") from None
    try:
        replay = ReplaySettings(conditions=tuple(str(c) for c in data["conditions"]),
                                delays=tuple(data["delays"]),
                                operations=tuple(str(o) for o in data["operations"]), persistence=persistence)
    except CirError as err:
        raise CirError(f"{path}: the grid (conditions, delays, operations): {err}") from None
    comparisons: tuple[str, ...] = ()
    if "comparisons" in data:
        if data["role"] != "eval":
            raise CirError(f"{path}: field 'comparisons' belongs to the held-out cohort's config (role 'eval'), "
                           f"not to a {data['role']!r} cohort")
        try:
            comparisons = tuple(c.text for c in parse_comparisons([str(c) for c in data["comparisons"]]))
        except CirError as err:
            raise CirError(f"{path}: field 'comparisons': {err}") from None
    return Experiment(
        name=data["name"],
        role=data["role"],
        order=data["order"],
        split=data["split"],
        n_tasks=data["n_tasks"],
        quick_n_tasks=data["quick_n_tasks"],
        replay=replay,
        source=str(path),
        fit_cir=data.get("fit_cir"),
        family=family,
        comparisons=comparisons,
    )


def load_experiments(folder: str | Path | None = None, family: str | None = None) -> list[Experiment]:
    """All configs of a folder, in ``order``; one cohort to fit CIR on, one to evaluate it;
    all of one family (``family``, when given, must be theirs). Without ``folder``: the family's
    experiments folder (``Family.experiments``, which travels with the package; ALFWorld's
    without ``family``)."""
    folder = Path(folder) if folder else get_family(family).experiments_dir()
    if not folder.is_dir():
        raise CirError(f"{folder}: no experiments folder; pass --experiments DIR")
    experiments = sorted((load_experiment(p) for p in folder.glob("*.toml")), key=lambda e: e.order)
    if not experiments:
        raise CirError(f"{folder}: no *.toml experiment configs")
    names = [e.name for e in experiments]
    if len(set(names)) != len(names):
        raise CirError(f"{folder}: experiment names must be unique, got {names}")
    evals = [e for e in experiments if e.role == "eval"]
    fits = [e for e in experiments if e.fit_cir]
    if len(evals) != 1:
        raise CirError(f"{folder}: need exactly one experiment with role 'eval' (found {len(evals)})")
    if len(fits) != 1:
        raise CirError(f"{folder}: need exactly one experiment with fit_cir = \"factual-success\" or \"all\" "
                       f"(found {len(fits)})")
    families = sorted({e.family for e in experiments})
    if len(families) != 1:
        raise CirError(f"{folder}: its configs name different environment families ({', '.join(families)}); "
                       "a study is of one")
    if family is not None and get_family(family).name != get_family(families[0]).name:
        raise CirError(f"{folder}: its configs are of family {families[0]!r}, not {family!r}; pass --experiments "
                       f"DIR with configs of {family!r}")
    fit, ev = fits[0], evals[0]
    if fit is ev:
        raise CirError(f"{fit.source}: CIR cannot be fitted on its own evaluation cohort")
    if fit.split == ev.split or frozenset({fit.split, ev.split}) in get_family(fit.family).shared_layouts:
        raise CirError(f"{fit.source}: CIR is fitted on {fit.split} tasks, which share layouts with the "
                       f"{ev.split} evaluation cohort ({ev.source}); fit and evaluate on splits that share "
                       "none (ALFWorld: valid_unseen and valid_seen)")
    for e in experiments:
        if e.role == "train" and not e.fit_cir:
            raise CirError(f"{e.source}: a 'train' cohort is run only to fit CIR: set fit_cir")
    if ev.comparisons:  # one the study cannot measure is refused now, not after its cohorts ran
        from cir.study.selective import experiment_operations, study_policies, study_routers

        operations = experiment_operations(experiments)
        check_comparisons(ev.comparisons, list(study_routers(operations)), study_policies(operations),
                          ev.replay.conditions, ev.source)
    return experiments


def task_slices(experiments: list[Experiment], quick: bool) -> dict[str, tuple[str, int, int]]:
    """Map experiment name -> (split, start, stop): disjoint slices per split, in order."""
    offsets: dict[str, int] = {}
    slices: dict[str, tuple[str, int, int]] = {}
    for exp in experiments:
        start = offsets.get(exp.split, 0)
        stop = start + exp.size(quick)
        slices[exp.name] = (exp.split, start, stop)
        offsets[exp.split] = stop
    return slices
