"""What an env of one game file that holds an engine shares (ALFWorld's, the cooking games'):
its game file and snapshot mode, checked once; the checks of a call (closed, not reset yet, an
action that is no text, a snapshot of another kind or game), each a CirError naming the file;
closing it once (``close``, or a ``with`` block); and its repr."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from cir.util.errors import CirError

SnapshotMode = Literal["fast", "replay"]
SNAPSHOT_MODES = ("fast", "replay")


class GameFileEnv:
    """The shared part of an env of one game file; a subclass frees its engine in :meth:`_release`."""

    def __init__(self, game_file: str | Path | Any, snapshots: SnapshotMode = "fast") -> None:
        if snapshots not in SNAPSHOT_MODES:
            raise CirError(f"snapshots={snapshots!r}: expected 'fast' or 'replay'")
        self.game_file = Path(getattr(game_file, "game_file", game_file))  # a task, or its file
        self.snapshots: SnapshotMode = snapshots
        self._closed = False
        self._started = False  # reset() sets it

    def _ready(self, call: str) -> None:
        """Open and reset, or a CirError naming ``call``."""
        self._require_open()
        if not self._started:
            raise CirError(f"{self.game_file}: {call}() before reset(); call reset() first")

    def _check_action(self, action: Any) -> None:
        self._ready("step")
        if not isinstance(action, str):
            raise CirError(f"action {action!r}: expected a string")

    def _check_snapshot(self, snapshot: Any, kind: type, game_key: str) -> None:
        """A snapshot of this env's kind and game, or a CirError saying which it is not."""
        self._require_open()
        if not isinstance(snapshot, kind):
            article = "an" if kind.__name__[0] in "AEIOU" else "a"
            raise CirError(f"restore({type(snapshot).__name__}): expected {article} {kind.__name__}")
        if snapshot.game_file != game_key:
            raise CirError(f"{self.game_file}: cannot restore a snapshot of {snapshot.game_file}")

    def _release(self) -> None:
        """Free the engine (once, at :meth:`close`)."""

    def close(self) -> None:
        """Free the engine now (dropping the env does the same when it is collected); idempotent."""
        if not self._closed:
            self._closed = True
            self._release()

    def _require_open(self) -> None:
        if self._closed:
            raise CirError(f"{self.game_file}: this env is closed; create a new {type(self).__name__}")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.game_file)!r}, snapshots={self.snapshots!r})"
