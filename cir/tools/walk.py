"""The actions of ``check_env``'s random walk in a tool world: calls of every tool, with
argument values the world has shown (ids that appeared in earlier results, tokens of the task's
instruction) and a few drawn from the schema (an enum's members, a default, a small number), so
that a walk reaches real records and changes them, as an agent does."""

from __future__ import annotations

import itertools
import re
from typing import Any

from cir.tools.calls import ToolCall, render_call
from cir.tools.typed import FINISH

#: How many calls of one tool a walk may choose among, at most.
PER_TOOL = 6
#: A token of the instruction that looks like an id or a name (has a digit, or is quoted).
_TOKEN = re.compile(r"\"([^\"]{1,60})\"|'([^']{1,60})'|\b([A-Za-z_#-]*\d[\w#./-]*)\b")


def walk_actions(env: Any, observation: str = "") -> dict[str, float]:
    """Calls of every tool of ``env`` (a :class:`~cir.tools.env.ToolEnv`) and their weights: a
    call whose arguments came from shown values weighs more, a mutating one more again, and
    ``finish`` (which ends the walk) little."""
    tokens = _instruction_tokens(str(getattr(env.task, "instruction", "")))
    out: dict[str, float] = {}
    for name, tool in env.tools.items():
        if name == FINISH:
            out[render_call(ToolCall(FINISH, {}), env.tools)] = 0.2
            continue
        options = []
        for p in tool.params:
            prop = tool.parameters["properties"].get(p.name, {})
            shown = _shown_values(env.seen, p.name, prop)
            drawn = _schema_values(prop, tool.parameters, tokens, p.default if p.default is not p.empty else None)
            options.append([(v, True) for v in shown] + [(v, False) for v in drawn])
        for combo in itertools.islice(_combinations(options), PER_TOOL):
            try:
                text = render_call(ToolCall(name, {p.name: v for p, (v, _) in zip(tool.params, combo, strict=True)}),
                                   env.tools)
            except Exception:  # a drawn value the tool's types refuse: not a call the walk can send
                continue
            weight = (2.0 if any(from_shown for _, from_shown in combo) else 1.0) * (1.0 if tool.read_only else 2.0)
            out[text] = max(out.get(text, 0.0), weight)
    return out


def _combinations(options: list[list[tuple[Any, bool]]]) -> Any:
    """The first option of every parameter, then one parameter varied at a time."""
    if any(not o for o in options):
        return
    first = [o[0] for o in options]
    yield tuple(first)
    for i, values in enumerate(options):
        for value in values[1:]:
            combo = list(first)
            combo[i] = value
            yield tuple(combo)


def _shown_values(seen: dict[str, list[Any]], name: str, prop: dict[str, Any]) -> list[Any]:
    keys = [name] + (["id"] if name.endswith("_id") else []) + [k for k in seen if k.endswith("_" + name)]
    values = [v for k in keys for v in seen.get(k, ())]
    kind = prop.get("type")
    if kind == "string":
        values = [v for v in values if isinstance(v, str)]
    elif kind == "integer":
        values = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return list(dict.fromkeys(values))[:4]


def _schema_values(prop: dict[str, Any], root: dict[str, Any], tokens: list[str], default: Any) -> list[Any]:
    if "$ref" in prop:
        prop = root.get("$defs", {}).get(prop["$ref"].rsplit("/", 1)[-1], {})
    if "enum" in prop:
        return list(prop["enum"])[:4]
    if "anyOf" in prop:
        return [v for p in prop["anyOf"] for v in _schema_values(p, root, tokens, None)][:4]
    kind = prop.get("type")
    values: list[Any] = [] if default is None else [default]
    values += {"string": tokens[:3] or ["x"], "integer": [1, 0, 2], "number": [1.0], "boolean": [True, False],
               "array": [[]], "object": [{}], "null": [None]}.get(kind, [])
    unique: dict[str, Any] = {}
    for v in values:
        unique.setdefault(repr(v), v)
    return list(unique.values())[:4]


def _instruction_tokens(text: str) -> list[str]:
    found = [next(g for g in m.groups() if g) for m in _TOKEN.finditer(text)]
    return list(dict.fromkeys(found))
