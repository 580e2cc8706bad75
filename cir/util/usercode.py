"""A user's own code's errors reported as theirs: one line naming the object, the method, the task
and the step, then the user's own frames (``cir``'s behind ``--traceback``).

``cir`` calls code it did not write: a family's functions and its env's ``reset``, ``step``,
``snapshot`` and ``restore``, an agent's ``act``, a feature extractor, a framework agent's tools,
the modules that hold them (imported by name or by file). When one of them raises, the frames that
matter to the user are their own, and the words that matter are which of their methods raised, on
which task, at which step; the frames of ``cir`` around the call (the replayer, the farm, loky's
``_RemoteTraceback`` of a worker process) are noise to them and stay behind ``--traceback``.

:func:`note_where` lets each layer add what it knows as the error passes (the env at its env
action, the harness at its step, the replayer its task), innermost first; :func:`user_code_error`
turns an exception whose traceback holds a user frame into a :class:`UserCodeError`, a
:class:`~cir.util.errors.CirError` of plain text that survives a process boundary. A
``SystemExit`` raised by user code (``sys.exit(0)`` at import) is an error too, never an exit.
"""

from __future__ import annotations

import sys
import sysconfig
import traceback
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from cir.util.errors import CirError

#: cir's own package folder: frames in it are cir's
_CIR = str(Path(__file__).resolve().parents[1]) + "/"


def _library_folders() -> tuple[str, ...]:
    """The folders of Python and of installed libraries (a frame there is no user's own)."""
    folders = {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    return tuple(str(Path(f).resolve()) + "/" for f in folders if f)


_LIBRARIES = _library_folders()
_WHERE = "_cir_where"


def is_user_file(filename: str) -> bool:
    """Whether a frame of ``filename`` is a user's own code (not cir's, Python's or a library's)."""
    if not filename or filename.startswith("<"):
        return False
    path = str(Path(filename).resolve())
    return not path.startswith(_CIR) and not path.startswith(_LIBRARIES)


class UserCodeError(CirError):
    """An exception raised by a user's code, as text: ``what`` (``KeyDoorEnv.restore``),
    ``error`` (``ValueError: ...``), ``where`` (``task T, step N``), ``frames`` (the user's own,
    formatted) and ``trace`` (the whole traceback, for ``--traceback``)."""

    def __init__(self, what: str, error: str, frames: str = "", trace: str = "", where: str = "") -> None:
        self.what, self.error, self.frames, self.trace, self.where = what, error, frames, trace, where
        super().__init__(what, error, frames, trace, where)

    def __str__(self) -> str:
        return f"{self.what} raised {self.error}" + (f" ({self.where})" if self.where else "")

    def __reduce__(self) -> tuple[Any, ...]:
        return (UserCodeError, (self.what, self.error, self.frames, self.trace, self.where))

    def lines(self, full: bool = False) -> list[str]:
        """What the command prints after its error line: the user's frames (``full``: the whole
        traceback) and how to see the rest."""
        if full:
            return [self.trace.rstrip("\n")] if self.trace else []
        if not self.frames:
            return []
        return [self.frames.rstrip("\n"), "  (your code's frames; cir's with --traceback)"]


def note_where(err: BaseException, **where: Any) -> None:
    """Say where ``err`` happened (``task=``, ``step=``) unless an inner layer said it already."""
    try:
        known = err.__dict__.setdefault(_WHERE, {})
    except AttributeError:  # an exception without a __dict__
        return
    for key, value in where.items():
        if value is not None:
            known.setdefault(key, value)


def _where_text(err: BaseException) -> str:
    known = getattr(err, _WHERE, None) or {}
    parts = [f"{key} {known[key]}" for key in ("task", "step") if key in known]
    return ", ".join(parts)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:300]}" if text else type(err).__name__


def _owner(frame: FrameType) -> str:
    """``Class.method`` of a frame (its ``self`` or ``cls``), else the function's qualified name."""
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    if code.co_name == "<module>":
        return f"the module {Path(code.co_filename).name}"
    for arg in ("self", "cls"):
        owner = frame.f_locals.get(arg)
        if owner is not None and "." not in name:
            return f"{owner.__name__ if isinstance(owner, type) else type(owner).__name__}.{name}"
    return name


def user_frames(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    """The frames of a traceback that are a user's own code, outermost first."""
    return [(frame, line) for frame, line in traceback.walk_tb(tb) if is_user_file(frame.f_code.co_filename)]


def user_code_error(err: BaseException, what: str | None = None) -> UserCodeError | None:
    """``err`` as a :class:`UserCodeError` when a user's code raised it (its traceback holds a
    frame of theirs), else None. ``what`` names the call when the traceback cannot (an import)."""
    if isinstance(err, UserCodeError):
        return err
    if isinstance(err, CirError | KeyboardInterrupt | GeneratorExit):
        return None
    frames = user_frames(err.__traceback__)
    if not frames and what is None:
        return None
    summary = traceback.StackSummary.extract((f, n) for f, n in frames)
    text = "".join(summary.format())
    trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    name = what or _owner(frames[0][0])
    error = (f"SystemExit: sys.exit({err.code!r}) was called, which a module or method cir runs must not do"
             if isinstance(err, SystemExit) else _one_line(err))
    return UserCodeError(name, error, text, trace, _where_text(err))


def import_error(err: BaseException, what: str) -> UserCodeError:
    """An error raised while a user's module was imported (a syntax error, an exception, a
    ``sys.exit``), as a :class:`UserCodeError` of ``what`` (``importing MODULE``)."""
    if isinstance(err, SyntaxError):
        line = (err.text or "").rstrip("\n")
        frames = f'  File "{err.filename}", line {err.lineno}\n' + (f"    {line.strip()}\n" if line else "")
        trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        return UserCodeError(what, f"{type(err).__name__}: {err.msg} (line {err.lineno})", frames, trace)
    found = user_code_error(err, what=what)
    assert found is not None
    return UserCodeError(what, found.error, found.frames, found.trace, found.where)
