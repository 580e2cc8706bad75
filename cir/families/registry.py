"""Environment families by name: ``--family NAME`` and ``--family MODULE:ATTR`` resolve here.

A built-in family is registered by name and the module that holds it (:data:`BUILTIN`),
imported only when it is asked for: the core never imports a family's code directly. An
installed package registers its own in the entry point group :data:`ENTRY_POINT_GROUP`
(``[project.entry-points."cir.families"] keydoor = "keydoor.family:FAMILY"``), and any other
family is named as ``MODULE:ATTR`` (``examples.counter:FAMILY``; the current folder is
searched too, as ``python -m`` would) or ``path/to/file.py:ATTR`` (imported by its path, under a
name that says the path: :func:`cir.util.importing.file_module_name`).

Worker processes get a run's family as this text and resolve it again, so a family is never
pickled; a task of a family file's own class, unpickled in a worker or in the queues' manager
process before anything resolved the family there, imports the file by that name. The other
functions here give a family's parts to the layers below (:func:`make_agent`,
:func:`resolve_extractor`).
"""

from __future__ import annotations

from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from cir.adapters.frameworks import framework_agent
from cir.agents.factory import DEFAULT_AGENT, AgentIdentity, agent_from_spec, identity_from_spec
from cir.families.family import Family, check_family
from cir.util.errors import CirError
from cir.util.importing import import_module

#: The default family: ALFWorld.
DEFAULT_FAMILY = "alfworld"
#: Built-in families, by name: the ``MODULE:ATTR`` that holds each.
BUILTIN: dict[str, str] = {
    "alfworld": "cir.families.alfworld.family:FAMILY",
    "textworld-cooking": "cir.families.textworld_cooking.family:FAMILY",
    "service-desk": "cir.families.service_desk.family:FAMILY",
}
ENTRY_POINT_GROUP = "cir.families"


def family_names() -> list[str]:
    """The names ``--family`` knows without ``MODULE:ATTR``: built-in and installed families."""
    return sorted({*BUILTIN, *_entry_points()})


def _entry_points() -> dict[str, str]:
    try:
        return {ep.name: ep.value for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    except Exception:  # pragma: no cover - a broken installation's metadata
        return {}


def get_family(spec: str | Family | None = None) -> Family:
    """The family ``spec`` names (a name, ``MODULE:ATTR`` or ``FILE.py:ATTR``), or ``spec``
    itself when it is one, checked; None: ALFWorld. A CirError names what could not be found."""
    if spec is None:
        spec = DEFAULT_FAMILY
    if isinstance(spec, Family):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise CirError(f"family {spec!r}: expected a family name ({', '.join(family_names())}), MODULE:ATTR "
                       "or FILE.py:ATTR")
    return _resolve(spec.strip())


@cache
def _resolve(spec: str) -> Family:
    if ":" not in spec or spec in BUILTIN:
        target = BUILTIN.get(spec) or _entry_points().get(spec)
        if target is None:
            raise CirError(f"family {spec!r}: no such environment family; expected one of "
                           f"{', '.join(family_names())}, or MODULE:ATTR or FILE.py:ATTR naming your own Family")
        family = _load(target, spec, builtin=spec in BUILTIN)
    else:
        family = _load(spec, spec, builtin=False)
    if not isinstance(family, Family):
        check_family(family)  # a duck-typed family: the same parts, checked
    return family


def _load(target: str, spec: str, builtin: bool) -> Any:
    module_name, _, attr = target.rpartition(":")
    if not module_name or not attr:
        raise CirError(f"family {spec!r}: expected MODULE:ATTR (e.g. examples.counter:FAMILY)")
    try:
        module = import_module(module_name, f"family {spec!r}: importing {module_name}")
    except ModuleNotFoundError as err:
        if builtin:
            raise CirError(f"family {spec!r}: the family's module {module_name} is not part of this "
                           f"installation of cir ({err})") from None
        raise CirError(f"family {spec!r}: cannot import {module_name} ({err}); run from the folder "
                       "that holds it or install it") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise CirError(f"family {spec!r}: {module_name} has no attribute {attr!r}") from None


def family_name(spec: str | Family | None) -> str:
    """The family's name (what run.json and routers record)."""
    return get_family(spec).name


# -- a family's parts for the layers below it ------------------------------------------------
def make_agent(spec: str = DEFAULT_AGENT, *, family: str | Family | None = None,
               prompt_file: str | Path | None = None, **options: Any) -> Any:
    """:func:`cir.agents.factory.agent_from_spec` with the family's built-in agent and LLM prompt
    (``prompt_file``: a TOML file's instructions and examples instead, the family's parser), and
    the framework agents' adapters (:func:`cir.adapters.frameworks.framework_agent`)."""
    fam = get_family(family)
    prompt = fam.prompt.from_file(prompt_file) if prompt_file else fam.prompt
    return agent_from_spec(spec, builtin=fam.builtin_agent, prompt=prompt, family=f"family {fam.name!r}",
                           framework=framework_agent, **options)


def agent_identity(spec: str = DEFAULT_AGENT, *, family: str | Family | None = None,
                   prompt_file: str | Path | None = None, **options: Any) -> AgentIdentity:
    """:func:`cir.agents.factory.identity_from_spec` with the family's parts, as :func:`make_agent`
    would build the agent: its name and settings without the agent."""
    fam = get_family(family)
    prompt = fam.prompt.from_file(prompt_file) if prompt_file else fam.prompt
    return identity_from_spec(spec, builtin=fam.builtin_agent, prompt=prompt, family=f"family {fam.name!r}",
                              framework=framework_agent, **options)


def builtin_extractors() -> dict[str, Any]:
    """The extractors of the built-in families that this installation has, by name (a router
    names one of these, or its own)."""
    out = {}
    for name in BUILTIN:
        try:
            family = get_family(name)
        except CirError:
            continue  # a built-in family whose module this installation lacks
        out[family.extractor.name] = family.extractor
    return out


def resolve_extractor(extractor: Any = None, family: str | Family | None = None) -> Any:
    """``extractor`` checked; None: the family's (ALFWorld's without one)."""
    from cir.episode.extractor import check_extractor

    return check_extractor(get_family(family).extractor if extractor is None else extractor)


def resolve_anomalous(anomalous: Any = None, family: str | Family | None = None) -> Any:
    """``anomalous`` (a family's test of a shown text, :attr:`Family.anomalous`); None: the family's
    (ALFWorld's without one), which may itself be None (then only the missing text is anomalous)."""
    if anomalous is not None and not callable(anomalous):
        raise CirError(f"anomalous: expected a function (action, shown) -> bool, got {anomalous!r:.80}")
    return get_family(family).anomalous if anomalous is None else anomalous
