"""The one style of every ``cir`` command: its help, examples and shared options.

Every command is made by :func:`command`: its help shows each option's default (written by
the formatter, never by hand) and ends with examples. Options that several commands share
are added here once, with one name and one default: :func:`add_quiet` (progress bars),
:func:`add_parallel` (``--jobs``/``--backend``/``--scheduler``) and :func:`add_columns`
(a compact default set of result columns, ``--columns all`` for every one).
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence

#: joblib backends (``cir.util.parallel.BACKENDS``, which imports joblib: not loaded for --help).
BACKENDS = ("loky", "threading", "dask")
#: Worker processes by default, for every command that takes ``--jobs``.
DEFAULT_JOBS = 2


def typed(value: object, action: argparse.Action | None = None) -> str | None:
    """A default as a user types it on the command line: a list as a comma list (nothing for an
    empty one), a number without a needless ``.0``, an on/off flag as the flag itself; None when
    there is nothing to show."""
    if value is None or value is False or value is argparse.SUPPRESS:
        return None
    if isinstance(value, bool):  # True: the --flag of a --flag/--no-flag pair
        return action.option_strings[0] if action is not None and action.option_strings else "on"
    if isinstance(value, (list, tuple)):
        return ",".join(typed(v) or "" for v in value) or None
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


class StoreRenamed(argparse._StoreAction):
    """An option that also answers to its former name (``--env`` of ``--family``): the value is
    stored as the option's, and the former name says once that it is deprecated
    (:data:`cir.util.deprecation.FORMER`, one ``cir: deprecated:`` line)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from cir.util.deprecation import FORMER, warn_former

        if option_string in FORMER:
            warn_former(option_string)
        super().__call__(parser, namespace, values, option_string)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written; ``(default: X)`` after every option with a default,
    the default as a user would type it (:func:`typed`)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = typed(action.default, action)
        if "%(default)s" in text:
            return text.replace("%(default)s", (shown or "none").replace("%", "%%"))
        if not action.option_strings or shown is None:
            return text
        return text + " (default: " + shown.replace("%", "%%") + ")"


def command(subparsers: argparse._SubParsersAction, name: str, *, help: str, description: str,
            examples: Sequence[str]) -> argparse.ArgumentParser:
    """A subcommand whose help shows defaults and ends with ``examples``."""
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    text = "\n\n".join(textwrap.fill(part, width=78) for part in description.split("\n\n"))
    return subparsers.add_parser(name, help=help, description=text, epilog=epilog,
                                 formatter_class=HelpFormatter)


def add_traceback_everywhere(subparsers: argparse._SubParsersAction) -> None:
    """``--traceback`` on every command and subcommand: an error raised by the user's own code is
    one line and their frames; with it, the whole traceback (cir's frames too)."""
    for parser in subparsers.choices.values():
        for action in [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]:
            add_traceback_everywhere(action)
        if not any("--traceback" in a.option_strings for a in parser._actions):
            parser.add_argument("--traceback", action="store_true",
                                help="when your own code (a family, env, agent or framework agent) raises: the "
                                     "whole traceback, cir's frames too (without it: one line and your frames)")


def add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress bars or progress lines")


def add_parallel(parser: argparse.ArgumentParser) -> None:
    """``--jobs``, ``--backend`` and ``--scheduler``: tasks in parallel (results never depend on them)."""
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="tasks run in parallel")
    # checked by the command (one error line), not by argparse's choices
    parser.add_argument("--backend", default="loky",
                        help=f"joblib backend, one of {', '.join(BACKENDS)}: local processes, threads, "
                             "or a Dask cluster")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="address of a running Dask scheduler, with --backend dask "
                             "(without it: a local Dask cluster of --jobs processes)")


def add_family_options(parser: argparse.ArgumentParser) -> None:
    """``--family-option NAME=VALUE``: an option of the --family family's own (``Family.options``)."""
    parser.add_argument("--family-option", action="append", default=[], metavar="NAME=VALUE", dest="family_options",
                        help="an option of the family's own (--family), given to its envs and task generator "
                             "(repeatable; e.g. ALFWorld's engine_savings=false runs textworld's engine "
                             "unmodified, types=..., max_plan_length=9); an unknown name lists the family's options")


def family_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``--family-option NAME=VALUE`` pairs as a mapping (values as text: the family reads them)."""
    from cir.util.errors import CirError

    out = {}
    for item in getattr(args, "family_options", None) or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CirError(f"--family-option {item!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def add_restore_check(parser: argparse.ArgumentParser) -> None:
    """``--restore-check``: how the replayer checks the env's restore as a run goes."""
    parser.add_argument("--restore-check", default=None, choices=["task", "branches", "full"],
                        help="how the env's restore is checked as tasks run (a failure stops the run and "
                             "quarantines its folder): once per task where the arms start (task), at "
                             "every branch point with the next env action (branches), or there with "
                             "every later env action (full); default: branches for a built-in family, "
                             "full for your own. Whichever is chosen, the table is the same")


def add_columns(parser: argparse.ArgumentParser, compact: Sequence[str]) -> None:
    """``--columns``: a comma list of result columns after the grouping keys, or ``all``."""
    parser.add_argument(
        "--columns", default=None, metavar="LIST",
        help=f"result columns to show after the grouping keys, or 'all'; without it, markdown shows "
             f"{', '.join(compact)} and csv and json every column")
