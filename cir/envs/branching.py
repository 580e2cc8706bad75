"""An env that never repeats a transition: the replayer's view of one task's env.

The replayer runs many arms and branches of one task from shared states. Each distinct
transition (an action from a state) is real env work once; every repeat is answered
from a memo, and returning to an earlier state only moves a pointer.
"""

from __future__ import annotations

from typing import Any

from cir.envs.base import Env
from cir.util.errors import CirError


class BranchingEnv:
    """An Env over a deterministic env that never repeats a transition.

    A state is identified by the env actions applied since reset (its *path*); a
    snapshot is that path (plain data) and ``restore`` only moves a pointer. ``step``
    answers from a transition memo when the same action was already taken from the same
    state (in any arm or branch), and otherwise syncs the real env (restoring its own
    snapshot of the state when it is elsewhere) and steps it once. So the real env does
    each distinct transition once: the unique env work of the whole grid.
    """

    def __init__(self, env: Env) -> None:
        self.env = env
        self.path: tuple[str, ...] = ()
        self._real: tuple[str, ...] | None = None  # path the real env is at
        self._intro: str | None = None
        self._memo: dict[tuple[str, ...], tuple[str, bool, bool]] = {}
        self._snaps: dict[tuple[str, ...], Any] = {}
        self.stats = {"env_steps": 0, "env_memo_hits": 0, "env_restores": 0, "env_resets": 0}

    def reset(self) -> str:
        if self._intro is None:
            self._intro = self.env.reset()
            self.stats["env_resets"] += 1
            self._real = ()
            self._snaps[()] = self.env.snapshot()
        self.path = ()
        return self._intro

    def step(self, action: str) -> tuple[str, bool, bool]:
        key = (*self.path, action)
        hit = self._memo.get(key)
        if hit is not None:
            self.stats["env_memo_hits"] += 1
            self.path = key
            return hit
        if self._real != self.path:
            self.env.restore(self._snaps[self.path])
            self.stats["env_restores"] += 1
        obs, done, won = self.env.step(action)
        self.stats["env_steps"] += 1
        result = (str(obs), bool(done), bool(won))
        self._memo[key] = result
        self.path = self._real = key
        self._snaps[key] = self.env.snapshot()
        return result

    def snapshot(self) -> tuple[str, ...]:
        return self.path

    def restore(self, snapshot: tuple[str, ...]) -> None:
        if snapshot not in self._snaps and snapshot not in self._memo:
            raise CirError(f"restore: unknown state (path of {len(snapshot)} actions)")
        self.path = tuple(snapshot)
