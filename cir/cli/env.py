"""``--env``: the environment family of a command (one option, one meaning, on every command).

``--env NAME`` names a built-in or installed family (``alfworld``, ``textworld-cooking``) and
``--env MODULE:ATTR`` or ``--env path/to/file.py:ATTR`` a family object of one's own
(``examples.counter:FAMILY``, ``examples/counter.py:FAMILY``). A command
that reads a run folder takes the family its ``run.json`` names when ``--env`` is not given,
and refuses an ``--env`` that is another.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cir.util.errors import CirError

ENV_HELP = ("environment family: alfworld, textworld-cooking, or MODULE:ATTR or path/to/file.py:ATTR "
            "naming your own Family (docs/own-environment.md)")


def add_env(parser: argparse.ArgumentParser, reads_runs: bool = False) -> None:
    """``--env`` on one command; default ALFWorld, or (``reads_runs``) the run folder's family."""
    if any("--env" in a.option_strings for a in parser._actions):
        return
    help_text = ENV_HELP + ("; default: the family the run folder's run.json names, else alfworld"
                            if reads_runs else "; default: alfworld")
    # None: the default family (cir.families.registry.DEFAULT_FAMILY), resolved where it is used
    parser.add_argument("--env", default=None, metavar="NAME", help=help_text)


def add_env_everywhere(subparsers: argparse._SubParsersAction) -> None:
    """``--env`` on every command and subcommand that does not declare its own."""
    for parser in subparsers.choices.values():
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in nested:
            add_env_everywhere(action)
        add_env(parser, reads_runs=True)


def recorded_family(path: str | Path | None) -> str | None:
    """The family a run folder's ``run.json`` names (``alfworld`` when it names none), or None
    when ``path`` is not a run folder (a table file)."""
    if path is None or not Path(path).is_dir():
        return None
    from cir.pairs.record import RunRecord
    from cir.pairs.store import RunStore

    record = RunRecord.read(RunStore(path))
    return None if record is None else record.settings.family


def env_spec(args: argparse.Namespace, *runs: str | Path | None) -> str:
    """The command's family as text: ``--env``, else the one the run folders name, else
    ``alfworld``; a CirError when ``--env`` and a run folder name different families."""
    from cir.families.registry import DEFAULT_FAMILY, get_family

    given = getattr(args, "env", None)
    found = {str(r): f for r in runs if (f := recorded_family(r)) is not None}
    spec = given or next(iter(found.values()), DEFAULT_FAMILY)
    name = get_family(spec).name
    for run, other in found.items():
        if get_family(other).name != name:
            raise CirError(f"{run}: is a run of env {other!r}, not {spec!r}; pass --env {other} "
                           "(or another run folder)")
    return spec


def family_of(args: argparse.Namespace, *runs: str | Path | None) -> Any:
    """The command's family (:func:`env_spec`, resolved)."""
    from cir.families.registry import get_family

    return get_family(env_spec(args, *runs))
