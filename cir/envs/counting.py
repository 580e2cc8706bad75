"""An env wrapper that counts the calls made through it.

The harness steps the env for the agent and the recovery operations step or restore
it for the harness; both reach it through one :class:`CountingEnv`, so its
:class:`EnvCounts` are the episode's env work, counted in one place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cir.envs.base import Env


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

    def reset(self) -> str:
        self.counts.resets += 1
        return self.env.reset()

    def step(self, action: str) -> tuple[str, bool, bool]:
        self.counts.steps += 1
        obs, done, won = self.env.step(action)
        return str(obs), bool(done), bool(won)

    def snapshot(self) -> Any:
        self.counts.snapshots += 1
        return self.env.snapshot()

    def restore(self, snapshot: Any) -> None:
        self.counts.restores += 1
        self.env.restore(snapshot)
