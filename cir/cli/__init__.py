"""The ``cir`` command.

Each command group lives in its own module of this package and exposes
``register(subparsers)``; handlers import their heavy dependencies lazily so that
``cir --help`` stays fast. A :class:`~cir.util.errors.CirError` is printed as one line, and so
is an OS error no module turned into one (a full or read-only disk); the notes the
modules log (a table derived from the store, a stale lock taken over, a partial run
analysed) are printed as ``cir: note: ...`` lines on standard error. Warnings of the
libraries are held back while the command runs and printed as notes after its output, so
that none comes before the real error.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import textwrap
import warnings
from pathlib import Path

from cir import __version__
from cir.cli.family import add_family_everywhere
from cir.cli.style import add_traceback_everywhere
from cir.util.deprecation import CirDeprecationWarning, forget
from cir.util.errors import CirError, SettingError
from cir.util.usercode import UserCodeError, user_code_error

# Command modules, in the order they appear in ``cir --help``.
COMMAND_MODULES = [
    "cir.cli.tasks",  # cir tasks generate|list|play
    "cir.cli.episode",  # cir episode
    "cir.cli.run",  # cir run
    "cir.cli.estimate",  # cir estimate
    "cir.cli.repair",  # cir repair
    "cir.cli.analysis",  # cir table|contrast|joint|figures
    "cir.cli.policy",  # cir fit|evaluate
    "cir.cli.explain",  # cir explain
    "cir.cli.reproduce",  # cir reproduce
    "cir.cli.check_env",  # cir check-env
    "cir.cli.check_agent",  # cir check-agent
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cir",
        description=textwrap.fill(
            "Causal evaluation of recovery in LLM agent harnesses: inject observation errors, fork the run "
            "with and without recovery from the same state, label each pair rescue, harm or stable, and "
            "learn when recovery is worth it (CIR). `cir COMMAND --help` shows a command's options, their "
            "defaults and examples.", width=78),
        epilog="examples:\n"
               "  cir reproduce --quick --out cir-out            # the whole study on small cohorts\n"
               "  cir run --tasks tasks/valid_unseen --out run1  # one paired experiment\n"
               "  cir table run1                                 # its effects with bootstrap CIs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"cir {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    add_family_everywhere(subparsers)  # --family on every command that does not declare its own
    add_traceback_everywhere(subparsers)  # --traceback: the whole traceback of a user code's error
    return parser


class _Notes(logging.Handler):
    """The package's log records as ``cir: note: ...`` lines on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"cir: note: {record.getMessage()}", file=sys.stderr)


def _show_notes() -> logging.Handler:
    handler = _Notes(logging.INFO)
    logger = logging.getLogger("cir")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler


def main(argv: list[str] | None = None) -> int:
    # Parse before anything touches the engine: fast_downward overwrites sys.argv.
    parser = build_parser()
    forget()  # each command says each former name it meets once (an option's name too)
    with warnings.catch_warnings(record=True) as held:
        warnings.simplefilter("always", CirDeprecationWarning)  # once each: warn_former counts
        try:
            args = parser.parse_args(argv)
            if not getattr(args, "handler", None):
                parser.print_help()
                return 2
            notes = _show_notes()
            try:
                return _run(args)
            finally:
                logging.getLogger("cir").removeHandler(notes)
        finally:
            _print_held(held)


def _print_held(held: list[warnings.WarningMessage]) -> None:
    """The warnings the command met, after its output and its error line, never before: a former
    name as one ``cir: deprecated:`` line each, a library's as a note."""
    said: set[str] = set()
    for w in sorted(held, key=lambda w: not issubclass(w.category, CirDeprecationWarning)):
        text = " ".join(str(w.message).split())
        if issubclass(w.category, CirDeprecationWarning):
            line = f"cir: deprecated: {text}"
        else:
            line = f"cir: note: {w.category.__name__} from {Path(w.filename).name}: {text}"
        if line not in said:
            said.add(line)
            print(line, file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    """The command's handler; an error a user can act on as one line and exit code 2 (an error of
    the user's own code: that line, then their frames; cir's with ``--traceback``)."""
    try:
        if getattr(args, "family", None):
            # --family names a family that exists and, for a run folder, the run's own family
            from cir.cli.family import family_spec

            family_spec(args, *(getattr(args, k, None) for k in ("paired", "run")))
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe fails here, not in the interpreter's flush at exit
        return code
    except UserCodeError as err:
        return _user_error(err, args)
    except CirError as err:
        print(f"cir: error: {err.as_option() if isinstance(err, SettingError) else err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader of the output is gone (`cir table run1 | head -3`): it read what it wanted
        _discard_stdout()
        return 0
    except KeyboardInterrupt as err:
        how = "terminated (SIGTERM)" if isinstance(err, Terminated) else "interrupted"
        print(f"cir: {how}; finished work is saved, run the same command again to resume", file=sys.stderr)
        return 143 if isinstance(err, Terminated) else 130
    except OSError as err:  # a disk error no module named a path for (the path is what matters)
        where = f"{err.filename}: " if err.filename else ""
        print(f"cir: error: {where}{err.strerror or err}", file=sys.stderr)
        return 2
    except (Exception, SystemExit) as err:
        user = user_code_error(err)
        if user is not None:  # the user's code raised it (or exited): theirs, not cir's
            return _user_error(user, args)
        raise


def _user_error(err: UserCodeError, args: argparse.Namespace) -> int:
    print(f"cir: error: {err}", file=sys.stderr)
    for line in err.lines(full=bool(getattr(args, "traceback", False))):
        print(line, file=sys.stderr)
    return 2


class Terminated(KeyboardInterrupt):
    """SIGTERM, ended as Ctrl-C is: the finished work saved, one line (:func:`console`)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


def console() -> int:
    """The ``cir`` command (and ``python -m cir``): :func:`main`, with SIGTERM ended as Ctrl-C is,
    and Ctrl-C ignored once the command is done, while Python waits for its helper threads to end
    (it printed ``Exception ignored in: <module 'threading'>`` there)."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return main()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _discard_stdout() -> None:
    """Standard output to /dev/null, so that nothing left in its buffer fails again at exit (the
    interpreter flushes it) with a second broken pipe."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a descriptor (captured): nothing to flush there
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console())
