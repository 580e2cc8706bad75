"""The Env contract (DESIGN.md): what the harness needs from an environment."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Env(Protocol):
    """A text environment with exact snapshots.

    ``restore(snapshot())`` must make every later ``step`` return exactly the
    observations the original run would have given from that point.
    """

    def reset(self) -> str:
        """Start the episode; return the first observation (intro text with the goal)."""
        ...

    def step(self, action: str) -> tuple[str, bool, bool]:
        """Send one action; return ``(observation, done, won)``."""
        ...

    def snapshot(self) -> Any:
        """An opaque handle on the current state."""
        ...

    def restore(self, snapshot: Any) -> None:
        """Return to the state captured by ``snapshot``."""
        ...
