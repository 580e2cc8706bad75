"""Importing a user's module by name: ``MODULE`` or ``path/to/file.py``, for ``MODULE:ATTR`` specs
(a family, a framework agent); the current folder is searched too, as ``python -m`` would."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any


def import_module(name: str) -> Any:
    """The module ``name``: a dotted name (the current folder searched too, as ``python -m``
    would) or a ``path/to/file.py``."""
    if name.endswith(".py"):
        path = Path(name).expanduser().resolve()
        if not path.is_file():
            raise ModuleNotFoundError(f"no file {path}")
        key = f"cir_family_{abs(hash(str(path)))}"
        if key in sys.modules:
            return sys.modules[key]
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[key] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        here = str(Path.cwd())
        # the console script does not put the current folder on the path, as `python -m` does
        if err.name is None or not name.startswith(err.name) or here in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(name)
