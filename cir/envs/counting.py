"""An env wrapper that counts the calls made through it.

The harness steps the env for the agent and the recovery operations step or restore
it for the harness; both reach it through one :class:`CountingEnv`, so its
:class:`EnvCounts` are the episode's env work, counted in one place.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

from cir.envs.base import Env
from cir.util.errors import CirTypeError


@dataclass
class EnvCounts:
    """Calls made through a :class:`CountingEnv`."""

    steps: int = 0
    resets: int = 0
    snapshots: int = 0
    restores: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class CountingEnv:
    """An :class:`~cir.envs.base.Env` that passes every call on to ``env`` and counts it."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.counts = EnvCounts()
        self._lock = threading.Lock()  # the counts' (shared with the cursors)

    def cursor(self) -> CountingEnv:
        """A counting env over ``env.cursor()`` that adds to these counts (for another thread)."""
        make = getattr(self.env, "cursor", None)
        if make is None:
            raise CirTypeError(f"{type(self.env).__name__} has no cursor(): wrap it in a BranchingEnv")
        other = CountingEnv(make())
        other.counts, other._lock = self.counts, self._lock
        return other

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self.counts, name, getattr(self.counts, name) + 1)

    def reset(self) -> str:
        self._count("resets")
        return self.env.reset()

    def step(self, action: str) -> tuple[str, bool, bool]:
        self._count("steps")
        obs, done, won = self.env.step(action)
        return str(obs), bool(done), bool(won)

    def snapshot(self) -> Any:
        self._count("snapshots")
        return self.env.snapshot()

    def restore(self, snapshot: Any) -> None:
        self._count("restores")
        self.env.restore(snapshot)
