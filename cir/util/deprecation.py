"""Former names that keep working: each warns once, naming its new name and the release that drops it.

A public name (DESIGN.md, "Public names and deprecation") changes only through here. The former
name stays an alias of the new one for two minor releases; its first use in a process raises one
:class:`CirDeprecationWarning` (a ``DeprecationWarning``) saying what to write instead and when
the alias goes; the ``cir`` command prints it as one ``cir: deprecated: ...`` line. Every former
name is a :class:`Former` of :data:`FORMER`, the one list the changelog's *Deprecated* section,
the public-API test and the compatibility suite (``tests/compat/``) are checked against.

Python shows a ``DeprecationWarning`` only in ``__main__`` by default; a user's agent is read by
``cir``'s code, never by theirs, so :func:`show_former_names` (called when ``cir`` is imported,
unless the interpreter was given ``-W`` options) lets these warnings through, attributed to the
user's own line where there is one (the ``def settings`` of their agent, the call of a former
function). Worker processes stay quiet (:func:`quiet`): the parent has said it.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class CirDeprecationWarning(DeprecationWarning):
    """A former name of ``cir`` was used: it works, and goes in the release the message names."""


@dataclass(frozen=True)
class Former:
    """One former name: how a user meets it (``name``), what replaces it (``new``), the release
    that deprecated it (``since``) and the first that may drop it (``removed_in``), and the
    public-API entries it keeps (``public``: keys of ``tests/support/api_surface.py``; a name of
    the command line, a file key or a file format has none)."""

    name: str
    new: str
    since: str = "0.2.0"
    removed_in: str = "0.4.0"
    public: tuple[str, ...] = ()

    def message(self, detail: str = "") -> str:
        return (f"{self.name} is deprecated since cir {self.since} and will be removed in cir "
                f"{self.removed_in}: use {self.new}" + (f"; {detail}" if detail else ""))


#: the functions that took ``cohort=`` (0.1), as ``cir`` and their subpackage export them
_COHORT = ("contrast_table", "decompose", "effect_table", "joint_outcomes", "plot_effects", "plot_mechanisms",
           "plot_partitions", "write_figures")
_COHORT_PUBLIC = (*(f"cir.{n}" for n in _COHORT),
                  *(f"cir.stats.{n}" for n in (*_COHORT[:4], "joint_effects")),
                  *(f"cir.study.{n}" for n in (*_COHORT[4:], "plot_joint")))

#: Every former name still read, by ``name``.
FORMER: dict[str, Former] = {f.name: f for f in (
    # the agent contract (cir.agents.base.agent_params reads it, the one reader)
    Former("Agent.settings()", "Agent.params()",
           public=("cir.Agent.settings", "cir.agents.Agent.settings", "cir.adapters.Framework.settings",
                   "cir.FrameworkAgent.settings", "cir.adapters.FrameworkAgent.settings")),
    Former("FrameworkAgent(settings=)", "FrameworkAgent(params=)",
           public=("cir.FrameworkAgent", "cir.adapters.FrameworkAgent")),
    # one episode
    Former("Harness.run()", "Harness.play()",
           public=("cir.Harness.run", "cir.episode.Harness.run", "cir.adapters.FrameworkHarness.run")),
    # statistics and figures: the all/factual-success filter is a subset
    Former("cohort=", "subset=", public=_COHORT_PUBLIC),
    Former("cir.stats.select_cohort()", "cir.stats.select_subset()", public=("cir.stats.select_cohort",)),
    Former("cir.stats.decompose.COHORTS", "cir.stats.decompose.SUBSETS"),
    # the policy and the router: parameters are params, the threshold search's are candidates
    Former("CIRPolicy(grid_size=)", "CIRPolicy(threshold_steps=)", public=("cir.CIRPolicy", "cir.router.CIRPolicy")),
    Former("CIRPolicy.grid_", "CIRPolicy.candidates_"),
    Former("Router(settings=)", "Router(params=)", public=("cir.Router", "cir.router.Router")),
    Former("Router.settings", "Router.params"),
    Former("Decision.refresh", "Decision.recover and Decision.operation"),
    # the run record, the study's configs
    Former("RunRecord(agent_settings=)", "RunRecord(agent_params=)",
           public=("cir.pairs.RunRecord", "cir.pairs.RunRecord.summarize")),
    Former("RunRecord.agent_settings", "RunRecord.agent_params", public=("cir.pairs.RunRecord.agent_settings",)),
    Former("Experiment(env=)", "Experiment(family=)", public=("cir.study.Experiment",)),
    Former("Experiment.env", "Experiment.family", public=("cir.study.Experiment.env",)),
    Former("load_experiments(env=)", "load_experiments(family=)", public=("cir.study.load_experiments",)),
    # the agent factory's functions (cir.make_agent is the public one)
    Former("cir.agents.factory.make_agent()", "cir.make_agent() or cir.agents.factory.agent_from_spec()"),
    Former("cir.agents.factory.agent_identity()", "cir.agents.factory.identity_from_spec()"),
    Former("cir.agents.sampling.sampling_settings()", "cir.agents.sampling.sampling_params()"),
    Former("ModelFreeAgent.sampling_settings()", "ModelFreeAgent.sampling_params()"),
    # the command line
    Former("--env", "--family"),
    Former("--cohort", "--subset"),
    Former("--grid-size", "--threshold-steps"),
    Former("--delays", "--candidate-delays"),  # of cir fit only: cir run's --delays is the grid's
    # files
    Former("an experiment config's env key", "family"),
    Former("router file format 1", "format 4 (Router.load(path).save(path) rewrites it)"),
    Former("router file format 2", "format 4 (Router.load(path).save(path) rewrites it)"),
    Former("router file format 3", "format 4 (Router.load(path).save(path) rewrites it)"),
)}

_said: set[str] = set()
_lock = threading.Lock()
_quiet = False


def warn_former(name: str, detail: str = "", *, stacklevel: int = 2,
                at: tuple[str, int, str] | None = None) -> None:
    """One :class:`CirDeprecationWarning` for the former ``name`` (a key of :data:`FORMER`), the
    first time it is met in this process (``detail`` says where: the first use's); ``at`` (file, line, module) names
    the user's line it comes from, else the caller ``stacklevel`` frames up (2: the caller of the
    function that calls this)."""
    entry = FORMER[name]
    with _lock:  # once per former name: the first use says where
        if _quiet or name in _said:
            return
        _said.add(name)
    message = entry.message(detail)
    if at is not None:
        filename, lineno, module = at
        warnings.warn_explicit(message, CirDeprecationWarning, filename, lineno, module=module)
    else:
        warnings.warn(message, CirDeprecationWarning, stacklevel=stacklevel + 1)


def forget() -> None:
    """Say every former name again (a new command in this process, a new test)."""
    with _lock:
        _said.clear()


def quiet() -> None:
    """This process says no former name (a worker: its parent has said them)."""
    global _quiet
    _quiet = True


def show_former_names() -> None:
    """Let :class:`CirDeprecationWarning` through Python's default filters (which show a
    DeprecationWarning only in ``__main__``), unless the user chose filters with ``-W`` or
    ``PYTHONWARNINGS``; :func:`warn_former` says each once."""
    if not sys.warnoptions:
        warnings.filterwarnings("default", category=CirDeprecationWarning)


def defined_at(obj: Any) -> tuple[str, int, str] | None:
    """(file, line, module) where a user's function or class was written, for :func:`warn_former`."""
    target = getattr(obj, "__func__", obj)
    try:
        filename = inspect.getsourcefile(target) or inspect.getfile(target)
        line = target.__code__.co_firstlineno if hasattr(target, "__code__") else inspect.getsourcelines(target)[1]
    except (TypeError, OSError):
        return None
    return filename, int(line), getattr(target, "__module__", "") or ""


def renamed_parameters(former: str, **renames: str) -> Callable[[F], F]:
    """A function that also takes its parameters' former names (``old="new"``): each given under
    its former name is passed under the new one, with the :data:`FORMER` ``former``'s warning
    naming the function; both names at once is a TypeError. Its signature stays the new one."""

    def wrap(fn: F) -> F:
        what = fn.__qualname__.replace(".__init__", "")
        named = former.startswith(what + "(")  # the former name says the function: no detail

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{what}() got both {old}= and {new}=; {old} is the former name of {new}")
                    warn_former(former, "" if named else f"{what}({old}=)", stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap


def former_function(former: str, new: Callable[..., Any]) -> Callable[..., Any]:
    """``new`` under its former name (the :data:`FORMER` ``former``): it warns, then calls ``new``."""

    @functools.wraps(new)
    def call(*args: Any, **kwargs: Any) -> Any:
        warn_former(former, stacklevel=2)
        return new(*args, **kwargs)

    return call


def former_method(former: str, new: Callable[..., Any]) -> Callable[..., Any]:
    """A method under its former name (the :data:`FORMER` ``former``): it warns, then calls the
    instance's method of ``new``'s name (so a subclass's override is the one called)."""
    name = new.__name__

    @functools.wraps(new)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        warn_former(former, stacklevel=2)
        return getattr(self, name)(*args, **kwargs)

    call.__doc__ = f"Former name of :meth:`{name}` ({FORMER[former].message()})."
    return call


def former_attribute(former: str, new: str) -> property:
    """A property under a former attribute name that reads (and writes) ``new``, warning once."""

    def get(self: Any) -> Any:
        warn_former(former, stacklevel=2)
        return getattr(self, new)

    def set_(self: Any, value: Any) -> None:
        warn_former(former, stacklevel=2)
        setattr(self, new, value)

    return property(get, set_, doc=f"Former name of ``{new}`` ({FORMER[former].message()}).")
