"""Lazy exports for a package's ``__init__`` (PEP 562): names load on first use.

A package's face (``from cir import Router``) must not import what its user does not use:
the runtime router needs neither pandas nor scikit-learn, and ``import cir`` stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, where: dict[str, str], former: dict[str, str] | None = None,
                 ) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package``; ``where`` maps name -> module.
    ``former`` maps former names (deprecated: ``cir.util.deprecation``) to the module that still
    answers them (with its warning); they are not in ``__all__``."""
    former = former or {}

    def __getattr__(name: str) -> Any:
        if name in former:
            return getattr(importlib.import_module(former[name]), name)
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(where[name]), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return sorted(where), __getattr__, __dir__
