"""``--family``: the environment family of a command (one option, one meaning, on every command).

``--family NAME`` names a built-in or installed family (``alfworld``, ``textworld-cooking``,
``service-desk``) and
``--family MODULE:ATTR`` or ``--family path/to/file.py:ATTR`` a family object of one's own
(``examples.counter:FAMILY``, ``examples/counter.py:FAMILY``); ``--env`` is its former name, still
read. A command that reads a run folder takes the family its ``run.json`` names when
``--family`` is not given, and refuses a ``--family`` that is another.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cir.cli.style import StoreRenamed
from cir.util.errors import CirError

FAMILY_HELP = ("environment family: alfworld, textworld-cooking, service-desk, or MODULE:ATTR or path/to/file.py:ATTR "
               "naming your own Family (docs/own-environment.md)")


#: What a command reads that names a family: a run folder (its run.json), positional or --run.
RUN_DESTS = ("paired", "run")


def add_family(parser: argparse.ArgumentParser, reads_runs: bool = False, default: str | None = None) -> None:
    """``--family`` on one command; its default said as it applies there: ALFWorld, the run
    folder's family (``reads_runs``) or ``default`` (what else names it, in words)."""
    if any("--family" in a.option_strings for a in parser._actions):
        return
    help_text = FAMILY_HELP + ("; default: " + (default or ("the family the run folder's run.json names, "
                                                          "else alfworld" if reads_runs else "alfworld")))
    # None: the default family (cir.families.registry.DEFAULT_FAMILY), resolved where it is used
    parser.add_argument("--family", "--env", dest="family", default=None, metavar="NAME", action=StoreRenamed,
                        help=help_text + " (--env: its former name, deprecated)")


def add_family_everywhere(subparsers: argparse._SubParsersAction) -> None:
    """``--family`` on every command and subcommand that does not declare its own."""
    for parser in subparsers.choices.values():
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in nested:
            add_family_everywhere(action)
        add_family(parser, reads_runs=any(a.dest in RUN_DESTS for a in parser._actions))


def recorded_family(path: str | Path | None) -> str | None:
    """The family a run folder's ``run.json`` names (``alfworld`` when it names none), or None
    when ``path`` is not a run folder (a table file)."""
    if path is None or not Path(path).is_dir():
        return None
    from cir.pairs.record import RunRecord
    from cir.pairs.store import RunStore

    record = RunRecord.read(RunStore(path))
    return None if record is None else record.settings.family


def family_spec(args: argparse.Namespace, *runs: str | Path | None) -> str:
    """The command's family as text: ``--family``, else the one the run folders name, else
    ``alfworld``; a CirError when ``--family`` and a run folder name different families."""
    from cir.families.registry import DEFAULT_FAMILY, get_family

    given = getattr(args, "family", None)
    found = {str(r): f for r in runs if (f := recorded_family(r)) is not None}
    spec = given or next(iter(found.values()), DEFAULT_FAMILY)
    name = get_family(spec).name
    for run, other in found.items():
        if get_family(other).name != name:
            raise CirError(f"{run}: is a run of family {other!r}, not {spec!r}; pass --family {other} "
                           "(or another run folder)")
    return spec


def family_of(args: argparse.Namespace, *runs: str | Path | None) -> Any:
    """The command's family (:func:`family_spec`, resolved)."""
    from cir.families.registry import get_family

    return get_family(family_spec(args, *runs))


def load_family_tasks(args: argparse.Namespace, family: Any, path: str | Path, split: str | None = None) -> list[Any]:
    """``family.load_tasks(path, split=split)``; when ``--family`` was not given (the tasks read as the
    default family's), a folder that does not read as them says so and how to name the family: a
    forgotten ``--family`` is the likeliest cause (another family's ``manifest.json`` read as
    ALFWorld's said only "task #0 is not an object")."""
    try:
        tasks = family.load_tasks(path, split=split) if split is not None else family.load_tasks(path)
    except CirError as err:
        if getattr(args, "family", None):
            raise
        raise CirError(f"{err} (read as {family.name} tasks, the default family: for another family's tasks "
                       "give --family NAME, the one `cir tasks generate` was given)") from None
    return tasks
