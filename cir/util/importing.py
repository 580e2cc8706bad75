"""Importing a user's module by name: ``MODULE`` or ``path/to/file.py``, for ``MODULE:ATTR`` specs
(a family, a framework agent); the current folder is searched too, as ``python -m`` would.

A file is imported under a name that says its path (:func:`file_module_name`), and a finder for
such names is installed when this module is imported, so that any process that meets the name in
a pickle (a worker unpickling a task of the family's own class, the queues' manager) imports the
same file by path, as the parent did.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path
from typing import Any

from cir.util.usercode import import_error

#: The module name a file is imported under: this prefix and the hex of its absolute path.
FILE_MODULE_PREFIX = "cir_family_"


def file_module_name(path: str | Path) -> str:
    """The module name of a file (:data:`FILE_MODULE_PREFIX`): one name per file, in every process."""
    return FILE_MODULE_PREFIX + str(Path(path).expanduser().resolve()).encode("utf-8").hex()


class _FileModules(importlib.abc.MetaPathFinder):
    """Finds the module of a file by its name (:func:`file_module_name`)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(FILE_MODULE_PREFIX) or "." in fullname:
            return None
        try:
            file = Path(bytes.fromhex(fullname[len(FILE_MODULE_PREFIX):]).decode("utf-8"))
        except ValueError:
            return None
        return importlib.util.spec_from_file_location(fullname, file) if file.is_file() else None


if not any(isinstance(f, _FileModules) for f in sys.meta_path):
    sys.meta_path.append(_FileModules())


def import_module(name: str, what: str | None = None) -> Any:
    """The module ``name``: a dotted name (the current folder searched too, as ``python -m``
    would) or a ``path/to/file.py`` (imported under :func:`file_module_name`). The module is a
    user's: an error its code raises while it is imported (a syntax error, an exception,
    ``sys.exit``) is a :class:`~cir.util.usercode.UserCodeError` of importing it (``what``: how
    to name it); a module that is not there is a ModuleNotFoundError, for the caller to name."""
    try:
        return _import(name)
    except ModuleNotFoundError:
        raise  # the module, or one it imports, is not installed: the caller names it in one line
    except (Exception, SystemExit) as err:
        raise import_error(err, what or f"importing {name}") from None


def _import(name: str) -> Any:
    if name.endswith(".py"):
        path = Path(name).expanduser().resolve()
        if not path.is_file():
            raise ModuleNotFoundError(f"no file {path}")
        return importlib.import_module(file_module_name(path))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        here = str(Path.cwd())
        # the console script does not put the current folder on the path, as `python -m` does
        if err.name is None or not name.startswith(err.name) or here in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(name)
