"""The environment family contract: everything a study needs of one environment, in one object.

A :class:`Family` bundles small parts, each plain Python a user writes for their own
environment (``docs/own-environment.md`` walks through one):

- ``name``: what ``--env NAME`` says, what ``run.json`` and router files record;
- ``load_tasks(path, split=None)``: the tasks of a folder (each with ``task_id``, and
  ``split`` and ``task_type`` when it has them), sorted by id; ``splits``: the split names;
- ``generate_tasks(folder, split, n, seed, *, progress=True, jobs=1)`` (optional): write ``n``
  tasks of ``split`` into ``folder/split``, which ``load_tasks`` then reads (the same call
  again leaves them as they are);
- ``make_env(task, **options)``: a fresh :class:`~cir.envs.base.Env` for a task, with its
  ``refresh_query`` and exact snapshots; ``env_options`` names the run options it takes
  (ALFWorld's: ``snapshots`` and ``engine_savings``), none by default;
- ``extractor``: its :class:`~cir.episode.extractor.FeatureExtractor`;
- ``prompt``: its :class:`~cir.agents.prompt.LLMPrompt` (system text, worked examples, how a
  reply becomes an action);
- ``builtin_agent(profile, seed=)`` (optional): an agent that needs no model (``--agent
  builtin[:PROFILE]``); ``mechanisms``: the names of the trace events by which that agent's
  recovery can change an episode (``cir explain`` counts a divergence they do not cover as
  unexplained);
- ``walk_actions(env, observation)`` (optional): the actions a random walk may take there, for
  :func:`cir.envs.check.check_env` (without it the env's ``admissible_commands()``);
- ``experiments``: the folder of experiment configs ``cir reproduce --env NAME`` runs (each
  names this family: ``env = "NAME"``); ``shared_layouts``: pairs of splits whose tasks share
  layouts, which CIR's fitting and evaluation cohorts must not span.

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
#: The run options a family's ``make_env`` may declare in ``env_options``.
ENV_OPTIONS = ("snapshots", "engine_savings")


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

    def __post_init__(self) -> None:
        check_family(self)

    def env(self, task: Any, **options: Any) -> Any:
        """``make_env(task)`` with the run options it declares (others are left out)."""
        return self.make_env(task, **{k: v for k, v in options.items() if k in self.env_options})

    def generate(self, folder: str | Path, split: str, n: int, seed: int, *, progress: bool = True,
                 jobs: int = 1, **options: Any) -> Any:
        """``generate_tasks(...)`` with the run options it declares; a CirError without one."""
        if self.generate_tasks is None:
            raise CirError(f"env {self.name!r}: cannot generate tasks (no Family.generate_tasks); "
                           "pass a folder of tasks")
        if split not in self.splits:
            raise CirError(f"env {self.name!r}: unknown split {split!r}; expected one of {', '.join(self.splits)}")
        return self.generate_tasks(folder, split, n, seed, progress=progress, jobs=jobs,
                                   **{k: v for k, v in options.items() if k in self.env_options})

    def check(self, tasks: Sequence[Any], *, steps: int = 20, seed: int = 0, agent: bool = True,
              walks: Callable[[Any], Sequence[tuple[str, Any]]] | None = None, **options: Any) -> Any:
        """:func:`cir.envs.check.check_env` on this family's envs and walk actions: a random walk
        per task, the built-in agent's episode (``agent``, when the family has one: it walks where
        a study's runs walk) and ``walks(task)`` (a run's factual runs, ``cir check-env --run``)."""
        from cir.envs.check import check_env

        agent_walk = _agent_walk(self.builtin_agent("default", seed=seed)) \
            if agent and self.builtin_agent is not None else None

        def all_walks(task: Any) -> list[tuple[str, Any]]:
            out = [] if agent_walk is None else [(AGENT_WALK, agent_walk)]
            return out + list(walks(task) if walks is not None else ())

        return check_env(lambda task: self.env(task, **options), tasks, steps=steps, seed=seed,
                         actions=self.walk_actions, walks=all_walks)

    def experiments_dir(self) -> Path:
        if self.experiments is None:
            raise CirError(f"env {self.name!r}: has no experiments folder (Family.experiments); "
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
    value = getattr(family, name)
    if value is None and optional:
        return
    if not callable(value):
        raise CirError(f"env {family.name!r}: {name} must be a function {what}, got {value!r:.80}")


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
        raise CirError(f"env {name!r}: extractor: {err}") from None
    if not isinstance(family.prompt, LLMPrompt):
        raise CirError(f"env {name!r}: prompt must be a cir.agents.prompt.LLMPrompt, got {family.prompt!r:.80}")
    splits = family.splits
    if not isinstance(splits, tuple) or not splits or not all(isinstance(s, str) and s for s in splits):
        raise CirError(f"env {name!r}: splits must be a non-empty tuple of names, got {splits!r}")
    if not isinstance(family.mechanisms, frozenset):
        raise CirError(f"env {name!r}: mechanisms must be a frozenset of names, got {family.mechanisms!r:.80}")
    bad = [o for o in family.env_options if o not in ENV_OPTIONS]
    if bad:
        raise CirError(f"env {name!r}: env_options {bad[0]!r} is not one of {', '.join(ENV_OPTIONS)}")
