"""The settings of a paired run: what is run per task, and everything else a run is given.

:class:`ReplaySettings` is what the replayer runs for every task (the grid of conditions,
delays and operations, the perturbation point and the budgets): everything that changes
the paired table. :class:`RunSettings` is the one object a run is given: that grid, the
environment family (``family``: a name or ``MODULE:ATTR``, :mod:`cir.families.registry`), the
agent (spec, seed, server, LLM options, a prompt file), the parallelism (workers, backend, scheduler) and
how the env and the reply cache are kept. Both are frozen and check every value once, where
they are built, so a bad value is one :class:`~cir.util.errors.CirError` before any folder is
touched; a new setting is a field here and a line of :meth:`RunSettings.check`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cir.adapters.frameworks import FRAMEWORK_SAMPLES, FRAMEWORKS
from cir.agents.factory import DEFAULT_AGENT, LLMConfig
from cir.agents.limits import RequestLimits
from cir.agents.sampling import check_samples
from cir.episode.delays import check_delays
from cir.episode.operations import check_operations
from cir.episode.perturb import (
    ONCE,
    Condition,
    parse_conditions,
    parse_persistence,
    perturbation_point,
    random_point,
)
from cir.episode.protocol import (
    DEFAULT_CONDITIONS,
    DEFAULT_DELAYS,
    DEFAULT_FRACTION,
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    DEFAULT_OPERATIONS,
    MAX_BUDGET,
    MAX_SEED,
)
from cir.families.family import Family
from cir.families.registry import BUILTIN, DEFAULT_FAMILY, get_family
from cir.util.errors import CirError, SettingError
from cir.util.parallel import BACKENDS, check_jobs

SNAPSHOT_MODES = ("fast", "replay")
#: How the replayer checks the env's restore (:func:`cir.pairs.replay.run_task_pairs`): once per
#: task where the arms start (``task``); at every branch point, the next env action
#: (``branches``); at every branch point, every later env action of the episode that passed
#: there (``full``). None in :class:`RunSettings`: the family's default (:meth:`RunSettings.restore_check_mode`).
RESTORE_CHECKS = ("task", "branches", "full")


def _check_int(setting: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SettingError(setting, value, f"an integer from {low} to {high}")
    return value


@dataclass(frozen=True)
class ReplaySettings:
    """What is run per task (everything that changes the paired table)."""

    conditions: tuple[str, ...] = DEFAULT_CONDITIONS
    delays: tuple[int, ...] = DEFAULT_DELAYS
    operations: tuple[str, ...] = DEFAULT_OPERATIONS
    perturb_fraction: float = DEFAULT_FRACTION
    #: a fixed perturbed env action for every task instead of the fraction (None: the paper's)
    perturb_at: int | None = None
    max_turns: int = DEFAULT_MAX_TURNS
    max_actions: int = DEFAULT_MAX_ACTIONS
    #: continuations per arm and branch from each branch point, each its own draw of a sampling
    #: agent (:mod:`cir.agents.sampling`); 1: one draw, the table of a run without sampling
    samples: int = 1
    #: a perturbed env action drawn per task from LO..HI by its id (random_point); None: not so
    perturb_between: tuple[int, int] | None = None
    #: how long a perturbed read lasts (cir.episode.perturb.Persistence): ``once`` (the point only),
    #: ``refresh`` (the same command is shown it again until a refresh) or N env actions
    persistence: str = "once"

    def __post_init__(self) -> None:
        conditions = tuple(c.name for c in parse_conditions(self.conditions))
        object.__setattr__(self, "conditions", conditions)
        object.__setattr__(self, "delays", check_delays(self.delays))
        object.__setattr__(self, "operations", check_operations(self.operations))
        _check_int("max_turns", self.max_turns, 1, MAX_BUDGET)
        _check_int("max_actions", self.max_actions, 1, MAX_BUDGET)
        perturbation_point(10, self.perturb_fraction, self.perturb_at)  # checks the point rule
        check_samples(self.samples)
        object.__setattr__(self, "persistence", parse_persistence(self.persistence).text)
        if self.perturb_between is not None:
            between = tuple(self.perturb_between)
            if len(between) != 2 or self.perturb_at is not None:
                raise SettingError("perturb_between", self.perturb_between,
                                   "two env-action numbers LO, HI (and no perturb_at)")
            random_point("", *between)  # checks them
            object.__setattr__(self, "perturb_between", between)

    def parsed_conditions(self) -> list[Condition]:
        return parse_conditions(list(self.conditions))

    def point_at(self, task_id: str) -> int | None:
        """The task's fixed perturbed env action (``perturb_at``, or its draw from
        ``perturb_between``); None: the fraction of its factual run decides."""
        if self.perturb_between is not None:
            return random_point(task_id, *self.perturb_between)
        return self.perturb_at

    def as_dict(self) -> dict[str, Any]:
        """Plain data (run.json); ``samples`` only above 1, so a record of one draw reads as before."""
        data = asdict(self)
        if self.samples == 1:
            del data["samples"]
        if data["perturb_between"] is None:  # absent unless set: run records stay as they were
            del data["perturb_between"]
        if data["persistence"] == ONCE:  # likewise: a record of one-shot perturbations reads as before
            del data["persistence"]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    def cells(self) -> set[tuple[str, int, str]]:
        """Every (condition, delay, operation) a feasible task has one paired row for."""
        return {(c, d, o) for c in self.conditions for d in self.delays for o in self.operations}

    @classmethod
    def parse(cls, conditions: str, delays: str, operations: str, **budgets: Any) -> ReplaySettings:
        """From comma lists (``clean,stale2``, ``0,1,2,4``, ``refresh``) as on the command line."""
        return cls(conditions=conditions, delays=delays, operations=operations, **budgets)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunSettings:
    """Everything a paired run is given (checked here, once).

    ``replay``: what runs per task. ``family``: the environment family (a name such as
    ``alfworld`` or ``textworld-cooking``, ``MODULE:ATTR``, or a :class:`~cir.families.family.Family`),
    whose ``make_env``, extractor, LLM prompt and built-in agent the run uses. The agent:
    ``agent`` (a spec, ``cir.agents.factory``), ``seed``, ``base_url``, ``llm`` and
    ``prompt_file`` (a TOML prompt instead of the family's) for an LLM agent, or an
    ``agent_factory(spec, seed=)`` that builds it. The parallelism: ``jobs``, ``backend`` (loky, threading, dask) and a Dask
    ``scheduler``. How the work is kept: ``snapshots`` (``fast`` engine state ids or
    ``replay``), ``family_options`` (the family's own options, ``Family.options``, such as
    ALFWorld's ``engine_savings``: a mapping or ``(name, value)`` pairs, kept as sorted pairs),
    ``cache_dir`` (the LLM agent's replies; default
    ``RUN_DIR/agent_cache``), ``extend`` (an earlier run folder this one extends), an
    ``env_factory(task, snapshots=)`` instead of the family's ``make_env``, and a feature
    ``extractor`` instead of the family's.
    How hard the LLM agent presses its server: ``requests``, one
    :class:`~cir.agents.limits.RequestLimits` (``concurrency``: agent requests in flight across
    the run, shared out to the worker processes, one by default; ``rpm``/``tpm``: requests /
    tokens per minute; ``timeout``: seconds per attempt; ``retries``: attempts after the first
    for faults; ``patience``: seconds of refusals, 429/503, before the run stops);
    ``base_url`` may be a comma list of servers to spread requests over.
    Nothing but ``replay``, the agent and the tasks changes the paired table; factories and
    the extractor must pickle for worker processes.
    """

    replay: ReplaySettings = field(default_factory=ReplaySettings)
    agent: str = DEFAULT_AGENT
    seed: int = 0
    base_url: str | None = None
    llm: LLMConfig = field(default_factory=LLMConfig)
    jobs: int = 1
    backend: str = "loky"
    scheduler: str | None = None
    snapshots: str = "fast"
    family_options: Any = ()
    restore_check: str | None = None  # RESTORE_CHECKS; None: the family's default
    cache_dir: str | None = None
    extend: str | None = None
    agent_factory: Callable[..., Any] | None = None
    env_factory: Callable[..., Any] | None = None
    extractor: Any = None
    family: Any = DEFAULT_FAMILY
    prompt_file: str | None = None
    # how hard the LLM agent presses its server: never part of the table, recorded per session
    requests: RequestLimits = field(default_factory=lambda: RequestLimits(concurrency=1))

    def __post_init__(self) -> None:
        for name in ("cache_dir", "extend", "prompt_file"):  # paths as plain text: the settings travel to workers
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, str(value))
        try:
            options = tuple(sorted(dict(self.family_options or {}).items()))
        except (TypeError, ValueError):
            raise SettingError("family_options", self.family_options, "a mapping or (name, value) pairs") from None
        object.__setattr__(self, "family_options", options)
        self.check()

    def check(self) -> None:
        """Every setting's value, or a CirError naming it."""
        if not isinstance(self.replay, ReplaySettings):
            raise CirError(f"replay: expected ReplaySettings, got {type(self.replay).__name__}")
        if not isinstance(self.agent, str) or not self.agent.strip():
            raise SettingError("agent", self.agent, "an agent spec (builtin, openai:MODEL, ...)")
        if self.replay.samples > 1 and self.agent_factory is None and self.agent.partition(":")[0] in FRAMEWORKS:
            raise SettingError("samples", self.replay.samples, f"1 for agent {self.agent!r}: {FRAMEWORK_SAMPLES}")
        _check_int("seed", self.seed, 0, MAX_SEED)
        if self.backend not in BACKENDS:
            raise SettingError("backend", self.backend, f"one of {', '.join(BACKENDS)}")
        if self.scheduler and self.backend != "dask":
            raise CirError("--scheduler needs --backend dask")
        check_jobs(self.jobs, self.backend, self.scheduler)
        if self.snapshots not in SNAPSHOT_MODES:
            raise SettingError("snapshots", self.snapshots, " or ".join(SNAPSHOT_MODES))
        if self.restore_check is not None and self.restore_check not in RESTORE_CHECKS:
            raise SettingError("restore_check", self.restore_check, ", ".join(RESTORE_CHECKS))
        family = get_family(self.family)  # a CirError naming --family when it cannot be found
        family.option_values(self.family_options)  # each a family option of a kind it takes
        family.option_values(self.family_options, generate=True)
        if self.prompt_file is not None:
            family.prompt.from_file(self.prompt_file)  # read and checked once, here
        self._check_requests()

    def env_family(self) -> Family:
        """The run's environment family."""
        return get_family(self.family)

    def restore_check_mode(self) -> str:
        """How the replayer checks the env's restore: ``restore_check``, else the family's
        default: ``full`` for a family of one's own, ``branches`` for a built-in family (whose
        snapshots are exact by construction and tested; the full check costs them more)."""
        if self.restore_check is not None:
            return self.restore_check
        return "branches" if self.family_spec() in BUILTIN else "full"

    def family_spec(self) -> str:
        """The family as run.json records it: the spec as given (a name or ``MODULE:ATTR``, which a
        reader resolves again), or the name of a Family object."""
        return self.family.name if isinstance(self.family, Family) else str(self.family).strip()

    def _check_requests(self) -> None:
        """The request limits (each checked by RequestLimits itself) and the servers."""
        if not isinstance(self.requests, RequestLimits):
            raise CirError(f"requests: expected cir.agents.limits.RequestLimits, got {type(self.requests).__name__}")
        if self.requests.concurrency is None:  # a run's requests in flight are shared out: a number
            raise SettingError("concurrency", None, "an integer from 1 (requests in flight across the run)")
        if self.base_url is not None:
            urls = self.base_urls()
            if not urls or any(not u.startswith(("http://", "https://")) for u in urls):
                raise SettingError("base_url", self.base_url,
                                   "an http(s):// address, or a comma list of them")

    def base_urls(self) -> list[str]:
        """The servers of ``base_url`` (a comma list spreads requests over several)."""
        return [u.strip() for u in (self.base_url or "").split(",") if u.strip()]

    @property
    def processes(self) -> int:
        """Worker processes the run's requests are shared out to (threads share one process)."""
        return 1 if self.backend == "threading" else self.jobs

    def limits(self, parts: int = 1) -> RequestLimits:
        """The run-wide request limits, or each of ``parts`` processes' share of them."""
        return self.requests.share(parts)

    def with_replay(self, replay: ReplaySettings) -> RunSettings:
        """These settings for another grid (a study's cohorts share everything else)."""
        return replace(self, replay=replay)


def agent_label(agent: Any) -> str:
    """The agent's name with a short digest of its parameters (the ``agent`` column): a changed
    agent, seed or LLM option is another agent."""
    if not hasattr(agent, "params") and hasattr(agent, "settings"):
        raise CirError(f"agent {getattr(agent, 'name', agent)!r}: the Agent contract's settings() is now "
                       "called params(); rename the method")
    params = json.dumps(agent.params(), sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(params.encode("utf-8")).hexdigest()[:8]
    return f"{agent.name}@{digest}"


def task_set_digest(task_ids: Sequence[str]) -> str:
    """A short digest of a run's task ids, in order (``settings.task_set`` of run.json)."""
    return hashlib.sha256("\n".join(task_ids).encode("utf-8")).hexdigest()[:16]


def resolved(path: str | Path | None) -> str | None:
    """An absolute path as text (recorded in a session), or None."""
    return str(Path(path).resolve()) if path else None
