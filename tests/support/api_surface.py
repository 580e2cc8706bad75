"""The public surface of the installed ``cir``: every name a user may hold on to, with its call shape.

Public is what ``cir.__all__`` and each public subpackage's ``__all__`` name (DESIGN.md,
"Public names"), the methods, properties and fields of the public classes among them, and every
option of every ``cir`` command. :func:`surface` maps each to plain data: a function's or method's
parameters (name, kind, whether it has a default), a class's constructor, ``attribute`` for the
rest. :func:`breaks` compares two surfaces the way a caller meets them: a name gone, a parameter
gone or renamed, a parameter that lost its default, a new one without a default, a positional
parameter moved, are breaks; a new name or a new parameter with a default is not.

``python tests/support/api_surface.py OUT.json`` writes the surface of the ``cir`` that Python
imports (run it with ``PYTHONPATH`` at an old checkout to take an earlier release's).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

#: The packages whose ``__all__`` is public (``cir.util`` and ``cir.cli`` are not: the command
#: line is public through its options, below).
PUBLIC_PACKAGES = ("cir", "cir.agents", "cir.envs", "cir.episode", "cir.families", "cir.pairs",
                   "cir.stats", "cir.router", "cir.study", "cir.testing", "cir.adapters")
_SKIP_CLASS_NAMES = {"__init__", "__new__", "__class_getitem__", "__init_subclass__", "__subclasshook__"}
_BASES = (object, Exception, BaseException, dict, tuple, str)


def _params(fn: Any, drop_first: bool = False) -> list[list[Any]] | None:
    """[[name, kind, has_default], ...] of a callable, or None when Python cannot tell."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if drop_first and params and params[0].name in ("self", "cls"):
        params = params[1:]
    return [[p.name, p.kind.name, p.default is not inspect.Parameter.empty] for p in params]


def _class_members(cls: type) -> dict[str, Any]:
    """The public members a user reaches on a class (its own and its public bases')."""
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass in _BASES or klass.__module__ in ("typing", "abc", "builtins", "enum"):
            continue
        if not klass.__module__.startswith("cir"):  # a library's base (scikit-learn's): not ours to keep
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in _SKIP_CLASS_NAMES:
                continue
            if isinstance(value, property):
                out[name] = {"kind": "property"}
            elif isinstance(value, classmethod | staticmethod):
                out[name] = {"kind": "method", "params": _params(value.__func__, drop_first=isinstance(value, classmethod))}
            elif inspect.isfunction(value):
                out[name] = {"kind": "method", "params": _params(value, drop_first=True)}
            else:
                out[name] = {"kind": "attribute"}
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if not f.name.startswith("_"):
                out.setdefault(f.name, {"kind": "attribute"})
    for name in getattr(cls, "__annotations__", {}):
        if not name.startswith("_"):
            out.setdefault(name, {"kind": "attribute"})
    return out


def _entry(obj: Any) -> dict[str, Any]:
    if inspect.isclass(obj):
        init = obj.__dict__.get("__init__") if "__init__" in obj.__dict__ else None
        ctor = _params(obj) if init is not None or dataclasses.is_dataclass(obj) else None
        return {"kind": "class", "params": ctor}
    if callable(obj):
        return {"kind": "function", "params": _params(obj)}
    return {"kind": "attribute"}


def python_surface() -> dict[str, dict[str, Any]]:
    """Every public Python name: ``package.NAME`` and ``package.CLASS.MEMBER``."""
    out: dict[str, dict[str, Any]] = {}
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            key = f"{package}.{name}"
            out[key] = _entry(obj)
            if inspect.isclass(obj):
                for member, entry in _class_members(obj).items():
                    out[f"{key}.{member}"] = entry
    return out


def cli_surface() -> dict[str, dict[str, Any]]:
    """Every command and option of ``cir``: ``cir COMMAND [SUB] --option``."""
    from cir.cli import build_parser

    out: dict[str, dict[str, Any]] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        out[path] = {"kind": "command"}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            elif action.option_strings:
                for option in action.option_strings:
                    out[f"{path} {option}"] = {"kind": "option", "takes": action.nargs != 0}
            else:
                out[f"{path} <{action.dest}>"] = {"kind": "argument"}

    walk(build_parser(), "cir")
    return out


def surface() -> dict[str, dict[str, Any]]:
    return {**python_surface(), **cli_surface()}


def _param_breaks(old: list[list[Any]], new: list[list[Any]]) -> list[str]:
    """How a call that fitted ``old`` may fail on ``new`` (names of the parameters)."""
    out = []
    names = {p[0]: p for p in new}
    var_kw = any(p[1] == "VAR_KEYWORD" for p in new)
    positional = [p[0] for p in new if p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
    old_positional = [p[0] for p in old if p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
    for name, kind, has_default in old:
        if kind in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            if not any(p[1] == kind for p in new):
                out.append(f"{'*' if kind == 'VAR_POSITIONAL' else '**'}{name} gone")
            continue
        now = names.get(name)
        if now is None:
            if not (var_kw and kind == "KEYWORD_ONLY"):
                out.append(f"parameter {name!r} gone")
            continue
        if has_default and not now[2]:
            out.append(f"parameter {name!r} lost its default")
        if kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"):
            if now[1] == "KEYWORD_ONLY":
                out.append(f"parameter {name!r} is keyword-only now")
            elif name in positional and old_positional.index(name) != positional.index(name):
                out.append(f"parameter {name!r} moved from position {old_positional.index(name)} "
                           f"to {positional.index(name)}")
        if kind == "KEYWORD_ONLY" and now[1] == "POSITIONAL_ONLY":
            out.append(f"parameter {name!r} is positional-only now")
    old_names = {p[0] for p in old}
    for name, kind, has_default in new:
        if name not in old_names and not has_default and kind not in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            out.append(f"new parameter {name!r} without a default")
    return out


def breaks(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]) -> dict[str, str]:
    """What of ``old`` a caller cannot use the same way in ``new``: {name: what changed}."""
    out: dict[str, str] = {}
    for name, was in old.items():
        now = new.get(name)
        if now is None:
            out[name] = "gone"
            continue
        if was["kind"] != now["kind"] and not {was["kind"], now["kind"]} <= {"attribute", "property"}:
            out[name] = f"was a {was['kind']}, is a {now['kind']}"
            continue
        if was.get("takes") is not None and was.get("takes") != now.get("takes"):
            out[name] = "takes a value now" if now.get("takes") else "takes no value now"
            continue
        if was.get("params") is not None and now.get("params") is not None:
            changed = _param_breaks(was["params"], now["params"])
            if changed:
                out[name] = "; ".join(changed)
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.write_text(json.dumps(surface(), indent=1, sort_keys=True) + "\n")
    print(f"{target}: {len(json.loads(target.read_text()))} public names")
