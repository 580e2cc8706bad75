"""The environment family contract: everything a study needs of one environment, in one object.

A :class:`Family` bundles small parts, each plain Python a user writes for their own
environment (``docs/own-environment.md`` walks through one):

- ``name``: what ``--family NAME`` says, what ``run.json`` and router files record;
- ``load_tasks(path, split=None)``: the tasks of a folder (each with ``task_id``, and
  ``split`` and ``task_type`` when it has them), sorted by id; ``splits``: the split names;
- ``generate_tasks(folder, split, n, seed, *, progress=True, jobs=1)`` (optional): write ``n``
  tasks of ``split`` into ``folder/split``, which ``load_tasks`` then reads (the same call
  again leaves them as they are);
- ``make_env(task, **options)``: a fresh :class:`~cir.envs.base.Env` for a task, with its
  ``refresh_query`` and exact snapshots; ``env_options`` names the run options of the core it
  takes (:data:`RUN_OPTIONS`: ``snapshots``), none by default;
- ``options`` (optional): the family's own options (:class:`FamilyOption`, ALFWorld's
  ``engine_savings``), which a run or a study is given as ``family_options`` (``--family-option
  NAME=VALUE``) and passes on to ``make_env`` and ``generate_tasks`` as keywords;
- ``extractor``: its :class:`~cir.episode.extractor.FeatureExtractor`;
- ``prompt``: its :class:`~cir.agents.prompt.LLMPrompt` (system text, worked examples, how a
  reply becomes an action);
- ``builtin_agent(profile, seed=)`` (optional): an agent that needs no model (``--agent
  builtin[:PROFILE]``); ``mechanisms``: the names of the trace events by which that agent's
  recovery can change an episode (``cir explain`` counts a divergence they do not cover as
  unexplained);
- ``anomalous(action, shown) -> bool`` (optional): whether a text shown for an env action is
  visibly anomalous to a harness (ALFWorld's: ``Nothing happens.`` to a command of its grammar, or
  a text that does not answer its command); it splits what each perturbed arm showed into the true
  text, an anomalous text and a wrong text that looks right (the paired table's ``shown`` column,
  :func:`cir.episode.perturb.shown_kind`). Without it only the missing text is anomalous;
- ``walk_actions(env, observation)`` (optional): the actions a random walk may take there, for
  :func:`cir.envs.check.check_env` (without it the env's ``admissible_commands()``);
- ``experiments``: the folder of experiment configs ``cir reproduce --family NAME`` runs (each
  names this family: ``env = "NAME"``); ``shared_layouts``: pairs of splits whose tasks share
  layouts, which CIR's fitting and evaluation cohorts must not span;
- ``list_tasks(path) -> str`` (optional): the table ``cir tasks list`` prints (without it, each
  task's id, type and split); ``tasks_text``: what the study's report calls its tasks.

Functions must be importable by name (module-level): the run's worker processes find the
family again by its name (``cir.families.registry``), never by pickling it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cir.agents.prompt import LLMPrompt
from cir.episode.extractor import check_extractor
from cir.util.errors import CirError

#: What check_env calls the walk of a family's built-in agent.
AGENT_WALK = "the built-in agent's walk"
#: The run options of the core a family's ``make_env`` may declare in ``env_options``.
RUN_OPTIONS = ("snapshots",)
#: The parts :meth:`Family.of` finds in a module by their names.
PART_NAMES = ("load_tasks", "make_env", "generate_tasks", "builtin_agent", "walk_actions", "list_tasks",
              "anomalous")
#: The kinds of value a family's own option takes.
OPTION_KINDS = (bool, int, float, str)
_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


@dataclass(frozen=True)
class FamilyOption:
    """One option of a family's own (ALFWorld's ``engine_savings``): its name (a keyword of the
    functions that take it), the kind of its value, one line of help, whether ``make_env``
    (``env``) and ``generate_tasks`` (``generate``) take it, and an optional ``check(value) ->
    value`` that reads or refuses it (a CirError naming what was expected). Its default is the
    one in those functions' signatures: an option not given is not passed."""

    name: str
    kind: type
    help: str
    env: bool = True
    generate: bool = False
    check: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name in RUN_OPTIONS:
            raise CirError(f"family option {self.name!r}: expected a Python name that is not a run option "
                           f"of the core ({', '.join(RUN_OPTIONS)})")
        if self.kind not in OPTION_KINDS:
            raise CirError(f"family option {self.name!r}: kind {self.kind!r}; expected one of bool, int, float, str")
        if not (self.env or self.generate):
            raise CirError(f"family option {self.name!r}: taken by neither make_env nor generate_tasks")

    def value(self, value: Any, family: str = "") -> Any:
        """``value`` as this option takes it: text (``NAME=VALUE`` on the command line) is read as
        the option's kind; a CirError names the option and what was expected."""
        where = f"family {family!r}: " if family else ""
        value = self._read(value, where)
        if self.check is None:
            return value
        try:
            return self.check(value)
        except CirError as err:
            raise CirError(f"{where}family option {self.name}: {err}") from None

    def _read(self, value: Any, where: str) -> Any:
        if isinstance(value, str) and self.kind is not str:
            text = value.strip().lower()
            try:
                if self.kind is bool:
                    if text not in _TRUE + _FALSE:
                        raise ValueError(text)
                    return text in _TRUE
                return self.kind(text)
            except ValueError:
                raise CirError(f"{where}family option {self.name}={value!r}: expected {self._expected()}") from None
        ok = isinstance(value, self.kind) and not (isinstance(value, bool) and self.kind is not bool)
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        if not ok:
            raise CirError(f"{where}family option {self.name}={value!r}: expected {self._expected()}")
        return value

    def _expected(self) -> str:
        return {bool: "true or false", int: "an integer", float: "a number", str: "text"}[self.kind]


@dataclass(frozen=True)
class Family:
    """One environment family (see the module docstring)."""

    name: str
    load_tasks: Callable[..., list[Any]]
    make_env: Callable[..., Any]
    extractor: Any
    prompt: LLMPrompt
    splits: tuple[str, ...] = ("train", "valid", "test")
    generate_tasks: Callable[..., Any] | None = None
    builtin_agent: Callable[..., Any] | None = None
    mechanisms: frozenset[str] = frozenset()
    walk_actions: Callable[[Any, str], Sequence[str]] | None = None
    experiments: str | Path | None = None
    shared_layouts: frozenset[frozenset[str]] = frozenset()
    env_options: tuple[str, ...] = ()
    options: tuple[FamilyOption, ...] = ()
    list_tasks: Callable[[Any], str] | None = None
    tasks_text: str = ""
    #: (the env action, the text shown for it) -> whether a harness sees that text is wrong; None:
    #: only the missing text is (:func:`cir.episode.perturb.shown_kind`)
    anomalous: Callable[[str | None, str], bool] | None = None

    def __post_init__(self) -> None:
        check_family(self)

    @classmethod
    def of(cls, namespace: dict[str, Any], **fields: Any) -> Family:
        """The family whose functions are a module's own, found by their contract names
        (:data:`PART_NAMES`: ``load_tasks``, ``make_env``, ``generate_tasks``, ``builtin_agent``,
        ``walk_actions``, ``list_tasks``, ``anomalous``) among the functions defined in the module whose
        ``globals()`` is ``namespace``, and whose ``experiments`` are the ``experiments/`` folder
        beside the module when it has one; ``fields`` give the rest (a part imported from another
        module is named there). Module-level functions are what the run's worker processes find
        again by name."""
        module = namespace.get("__name__")
        parts = {name: namespace[name] for name in PART_NAMES
                 if callable(namespace.get(name)) and getattr(namespace[name], "__module__", None) == module}
        folder = Path(namespace.get("__file__", "")).resolve().parent / "experiments"
        if "experiments" not in fields and namespace.get("__file__") and folder.is_dir():
            parts["experiments"] = folder
        return cls(**{**parts, **fields})

    def option_values(self, given: Any = None, *, generate: bool = False) -> dict[str, Any]:
        """The family's own options among ``given`` (a mapping or ``(name, value)`` pairs) that
        ``make_env`` (or, with ``generate``, ``generate_tasks``) takes, each read as its kind; a
        name the family does not declare is a CirError naming the ones it has."""
        declared = {o.name: o for o in self.options}
        out = {}
        for name, value in dict(given or {}).items():
            option = declared.get(name)
            if option is None:
                have = ", ".join(f"{o.name} ({o.help})" for o in self.options) or "none"
                raise CirError(f"family {self.name!r}: no family option {name!r}; its options: {have}")
            if option.generate if generate else option.env:
                out[name] = option.value(value, self.name)
        return out

    def env(self, task: Any, family_options: Any = None, **run_options: Any) -> Any:
        """``make_env(task)`` with the run options of the core it declares (others are left out)
        and the family's own options given."""
        return self.make_env(task, **{k: v for k, v in run_options.items() if k in self.env_options},
                             **self.option_values(family_options))

    def generate(self, folder: str | Path, split: str, n: int, seed: int, *, progress: bool = True,
                 jobs: int = 1, family_options: Any = None) -> Any:
        """``generate_tasks(...)`` with the family's own options it takes; a CirError without one."""
        if self.generate_tasks is None:
            raise CirError(f"family {self.name!r}: cannot generate tasks (no Family.generate_tasks); "
                           "pass a folder of tasks")
        if split not in self.splits:
            raise CirError(f"family {self.name!r}: unknown split {split!r}; expected one of {', '.join(self.splits)}")
        return self.generate_tasks(folder, split, n, seed, progress=progress, jobs=jobs,
                                   **self.option_values(family_options, generate=True))

    def check(self, tasks: Sequence[Any], *, steps: int = 20, seed: int = 0, agent: bool = True,
              walks: Callable[[Any], Sequence[tuple[str, Any]]] | None = None, family_options: Any = None,
              **run_options: Any) -> Any:
        """:func:`cir.envs.check.check_env` on this family's envs and walk actions: a random walk
        per task, the built-in agent's episode (``agent``, when the family has one: it walks where
        a study's runs walk) and ``walks(task)`` (a run's factual runs, ``cir check-env --run``)."""
        from cir.envs.check import check_env

        agent_walk = _agent_walk(self.builtin_agent("default", seed=seed)) \
            if agent and self.builtin_agent is not None else None

        def all_walks(task: Any) -> list[tuple[str, Any]]:
            out = [] if agent_walk is None else [(AGENT_WALK, agent_walk)]
            return out + list(walks(task) if walks is not None else ())

        return check_env(lambda task: self.env(task, family_options, **run_options), tasks, steps=steps,
                         seed=seed, actions=self.walk_actions, walks=all_walks)

    def experiments_dir(self) -> Path:
        if self.experiments is None:
            raise CirError(f"family {self.name!r}: has no experiments folder (Family.experiments); "
                           "pass --experiments DIR")
        return Path(self.experiments)


def _agent_walk(agent: Any) -> Callable[[Any], None]:
    """A check_env walk: one episode of ``agent`` on the env, within the protocol's budgets (the
    task id is the harness's label only)."""
    from cir.episode.harness import Harness

    def walk(env: Any) -> None:
        Harness(agent).episode(env, "check-env")

    return walk


def _need_callable(family: Any, name: str, what: str, optional: bool = False) -> None:
    value = getattr(family, name, None)
    if value is None and optional:
        return
    if not callable(value):
        raise CirError(f"family {family.name!r}: {name} must be a function {what}, got {value!r:.80}")


def check_family(family: Any) -> None:
    """Every part of a family, or a CirError naming the part and what was expected."""
    name = getattr(family, "name", None)
    if not isinstance(name, str) or not name.strip() or ":" in name:
        raise CirError(f"family name {name!r}: expected a non-empty name without ':' (e.g. 'keydoor')")
    _need_callable(family, "load_tasks", "(path, split=None) -> tasks")
    _need_callable(family, "make_env", "(task, **options) -> Env")
    _need_callable(family, "generate_tasks", "(folder, split, n, seed, *, progress, jobs)", optional=True)
    _need_callable(family, "builtin_agent", "(profile, seed=) -> Agent", optional=True)
    _need_callable(family, "walk_actions", "(env, observation) -> actions", optional=True)
    try:
        check_extractor(family.extractor)
    except CirError as err:
        raise CirError(f"family {name!r}: extractor: {err}") from None
    if not isinstance(family.prompt, LLMPrompt):
        raise CirError(f"family {name!r}: prompt must be a cir.agents.prompt.LLMPrompt, got {family.prompt!r:.80}")
    splits = family.splits
    if not isinstance(splits, tuple) or not splits or not all(isinstance(s, str) and s for s in splits):
        raise CirError(f"family {name!r}: splits must be a non-empty tuple of names, got {splits!r}")
    if not isinstance(family.mechanisms, frozenset):
        raise CirError(f"family {name!r}: mechanisms must be a frozenset of names, got {family.mechanisms!r:.80}")
    bad = [o for o in family.env_options if o not in RUN_OPTIONS]
    if bad:
        raise CirError(f"family {name!r}: env_options {bad[0]!r} is not a run option of the core "
                       f"({', '.join(RUN_OPTIONS)}); declare an option of its own in Family.options")
    options = getattr(family, "options", ())
    if not isinstance(options, tuple) or not all(isinstance(o, FamilyOption) for o in options):
        raise CirError(f"family {name!r}: options must be a tuple of cir.families.family.FamilyOption, got {options!r:.80}")
    _need_callable(family, "list_tasks", "(path) -> the table of its tasks", optional=True)
    _need_callable(family, "anomalous", "(action, shown) -> whether the shown text is visibly anomalous",
                   optional=True)
