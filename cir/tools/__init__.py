"""The tool-world kit: typed tools over real state, with exact forks.

A *tool world* is a family whose env actions are calls of typed tools (plain Python functions
with type hints and docstrings, :mod:`cir.tools.typed`) over a state of one of three kinds
(:mod:`cir.tools.state`: a Python object, a SQLite database, a folder of files), whose exact
snapshot and restore ``cir`` supplies and checks by a content digest. One module per idea:
``calls`` (the canonical call text), ``typed`` (typed tools: the ``tool`` decorator, schemas, validation),
``state`` (the state kinds), ``results`` (what a shown result is), ``env`` (``ToolEnv``: the
Env over tools, a state, world events and a success check), ``tasks`` (``ToolTask`` and tasks
read from files), ``walk`` (``check_env``'s walk actions), ``features`` (a generic feature
extractor), ``prompt`` (the LLM prompt derived from the tools) and ``world`` (``ToolWorld``:
the parts of a family, ``Family(**world.parts())``). The layer sits above ``episode`` and below
``adapters`` and ``families`` (DESIGN.md).
"""

from cir.util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "tool": "cir.tools.typed",
    "Tool": "cir.tools.typed",
    "ToolError": "cir.tools.typed",
    "bind": "cir.tools.typed",
    "ToolCall": "cir.tools.calls",
    "CallError": "cir.tools.calls",
    "parse_call": "cir.tools.calls",
    "render_call": "cir.tools.calls",
    "ToolWorld": "cir.tools.world",
    "ToolTask": "cir.tools.tasks",
    "ToolEnv": "cir.tools.env",
    "Event": "cir.tools.env",
    "ToolFeatures": "cir.tools.features",
    "ObjectState": "cir.tools.state",
    "SqliteState": "cir.tools.state",
    "FolderState": "cir.tools.state",
    "State": "cir.tools.state",
    "anomalous": "cir.tools.results",
})
