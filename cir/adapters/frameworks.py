"""Framework agents by their spec (``langgraph:MODULE:ATTR``, ``openai-agents:...``, ``inspect:...``):
which adapter builds each, which distributions it needs, and the agent built from a spec.

This is the adapters layer's part of :func:`cir.agents.factory.agent_from_spec`: the agents layer
knows the built-in and LLM agents, and takes a ``framework`` builder for the rest, which
:func:`cir.families.registry.make_agent` gives it (:func:`framework_agent`), so no arrow runs from
``agents/`` up to ``adapters/``. Each adapter is imported only when its agent is asked for.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cir.adapters.protocol import FRAMEWORK_SAMPLES
from cir.agents.factory import LLMConfig
from cir.util.errors import CirError

#: Framework agents by the spec's kind: the adapter that builds each, imported only when one is
#: asked for, and the extra that installs it.
FRAMEWORKS: dict[str, tuple[str, str]] = {
    "langgraph": ("cir.adapters.langgraph", "langgraph"),
    "openai-agents": ("cir.adapters.openai_agents", "openai-agents"),
    "inspect": ("cir.adapters.inspect_ai", "inspect"),
}
# The distributions each adapter needs. Checked by distribution, not by import: the SDK's import
# name ``agents`` is also any folder called agents/ on the path (a namespace package).
FRAMEWORK_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "langgraph": ("langgraph", "langchain", "langchain-openai"),
    "openai-agents": ("openai-agents",),
    "inspect": ("inspect-ai",),
}


__all__ = ["FRAMEWORKS", "FRAMEWORK_DISTRIBUTIONS", "FRAMEWORK_SAMPLES", "framework_agent", "is_framework",
           "missing_framework", "preload_agent"]


def missing_framework(kind: str) -> list[str]:
    """The distributions the ``kind`` adapter needs that are not installed (empty when ready)."""
    from importlib.metadata import PackageNotFoundError, version

    missing = []
    for dist in FRAMEWORK_DISTRIBUTIONS[kind]:
        try:
            version(dist)
        except PackageNotFoundError:
            missing.append(dist)
    return missing


def is_framework(spec: str) -> bool:
    """Whether ``spec`` names a framework agent."""
    return spec.partition(":")[0] in FRAMEWORKS


def framework_agent(spec: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                    cache_dir: str | Path | None = None, cache_fallback: Sequence[str | Path] = (),
                    llm: LLMConfig | None = None, **_: Any) -> Any:
    """The framework agent ``spec`` names, through its adapter; None when ``spec`` names no framework
    (:func:`cir.agents.factory.agent_from_spec` then reads it as its own)."""
    kind, _, target = spec.partition(":")
    if kind not in FRAMEWORKS:
        return None
    if llm is not None and not llm.is_default():
        raise CirError(f"agent {spec!r}: the LLM options are the framework's (set them on its model)")
    module, extra = FRAMEWORKS[kind]
    missing = missing_framework(kind)
    if missing:
        raise CirError(f"agent {kind}:{target}: the {kind} adapter needs {', '.join(missing)}, "
                       f'not installed; pip install "cir[{extra}]"')
    try:
        adapter = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] == "cir":
            raise
        raise CirError(f"agent {kind}:{target}: the {kind} adapter needs its framework ({err}); "
                       f'pip install "cir[{extra}]"') from None
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    return adapter.framework_agent(target, base_url=url, api_key_env=api_key_env, cache_dir=cache_dir,
                                   cache_fallback=cache_fallback)


def preload_agent(spec: str, base_url: str | None = None) -> None:
    """Import a framework agent's module (``KIND:MODULE:ATTR``) now, its model pointed at ``base_url``
    as the agent's will be, so that what it registers (its harness's own recovery operations,
    ``cir.episode.recovery.register_operation``) is known before a grid is read; other specs need
    nothing."""
    kind, _, target = spec.partition(":")
    module = target.rpartition(":")[0]
    if kind in FRAMEWORKS and module and not missing_framework(kind):
        from cir.adapters.driver import serve_from
        from cir.util.importing import import_module

        try:
            serve_from(base_url or os.environ.get("OPENAI_BASE_URL"))
            import_module(module)
        except ModuleNotFoundError:
            pass  # the agent's own build says what is missing, with the extra to install
