"""An env that never repeats a transition: the replayer's view of one task's env.

The replayer runs many arms and branches of one task from shared states. Each distinct
transition (an action from a state) is real env work once; every repeat is answered
from a memo, and returning to an earlier state only moves a pointer.

Branches that run at the same time (in threads) each take a :meth:`BranchingEnv.cursor`:
its own pointer over the same memo and the same real env. The real env is used by one
cursor at a time (a lock per tree), and a transition that two cursors ask for at once is
still computed once, so the env work does not depend on how the branches interleave
(only ``env_restores``, the real env's moves between states, does).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from cir.envs.base import Env
from cir.util.errors import CirError
from cir.util.usercode import note_where


class _Tree:
    """What the cursors of one env share: the real env, the memo, the snapshots, the counts."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.real: tuple[str, ...] | None = None  # path the real env is at
        self.intro: str | None = None
        self.memo: dict[tuple[str, ...], tuple[str, bool, bool]] = {}
        self.snaps: dict[tuple[str, ...], Any] = {}
        self.stats = {"env_steps": 0, "env_memo_hits": 0, "env_restores": 0, "env_resets": 0}
        self.lock = threading.RLock()


@contextmanager
def _at_step(step: int) -> Iterator[None]:
    """An error of the real env (the user's code) says which env action it was at."""
    try:
        yield
    except BaseException as err:
        note_where(err, step=step)
        raise


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
        self._tree = _Tree(env)
        self.path: tuple[str, ...] = ()

    @property
    def env(self) -> Env:
        return self._tree.env

    @property
    def stats(self) -> dict[str, int]:
        """The env work of all cursors: real steps, memo hits, real restores and resets."""
        return self._tree.stats

    def cursor(self) -> BranchingEnv:
        """Another pointer over the same memo and real env, at this one's state (for a
        branch run in another thread)."""
        other = BranchingEnv.__new__(BranchingEnv)
        other._tree = self._tree
        other.path = self.path
        return other

    def reset(self) -> str:
        tree = self._tree
        with tree.lock, _at_step(0):
            if tree.intro is None:
                tree.intro = tree.env.reset()
                tree.stats["env_resets"] += 1
                tree.real = ()
                tree.snaps[()] = tree.env.snapshot()
        self.path = ()
        return tree.intro

    def step(self, action: str) -> tuple[str, bool, bool]:
        key = (*self.path, action)
        tree = self._tree
        with tree.lock, _at_step(len(key)):
            hit = tree.memo.get(key)
            if hit is not None:
                tree.stats["env_memo_hits"] += 1
                self.path = key
                return hit
            if tree.real != self.path:
                tree.env.restore(tree.snaps[self.path])
                tree.stats["env_restores"] += 1
            obs, done, won = tree.env.step(action)
            tree.stats["env_steps"] += 1
            result = (str(obs), bool(done), bool(won))
            tree.memo[key] = result
            tree.real = key
            tree.snaps[key] = tree.env.snapshot()
        self.path = key
        return result

    def snapshot(self) -> tuple[str, ...]:
        return self.path

    def verify_restore(self, path: tuple[str, ...]) -> tuple[tuple[str, bool, bool], tuple[str, bool, bool]] | None:
        """Check the real env's restore on one remembered transition: restore the real env to
        the state before ``path``'s last action, send that action, and compare the answer with
        the one remembered. None when they match, else ``(remembered, answered)``.

        The check's restore and step are not counted in :attr:`stats` (they are not the
        grid's work), and the real env is restored back where it was, so the grid's answers
        and counts are those of a run without the check.
        """
        path = tuple(path)
        with self._tree.lock:
            want = self._tree.memo.get(path)
        if want is None:
            raise CirError(f"verify_restore: no remembered transition at a path of {len(path)} actions")
        differs = self.verify_restores([(path[:-1], [(path[-1], want)])])
        return None if differs is None else differs[2:]

    def verify_restores(self, checks: Iterable[tuple[tuple[str, ...], Sequence[tuple[str, tuple[str, bool, bool]]]]]
                        ) -> tuple[int, tuple[str, ...], tuple[str, bool, bool], tuple[str, bool, bool]] | None:
        """:meth:`verify_restore` for many states, each with the actions an episode sent from
        it: per ``(state, [(action, answer), ...])``, in order, the real env is restored to
        ``state`` (a path the grid reached) and sent the actions one after another, each of
        whose answers must be the ``answer`` recorded. The first that differs as ``(index,
        path, recorded, answered)`` (``index``: of its check; ``path``: the state and the
        actions up to the one that differs), else None. The real env is restored back where it was once, at the end;
        nothing is counted in :attr:`stats`.
        """
        tree = self._tree
        with tree.lock:
            if tree.real is None:
                raise CirError("verify_restores: the env was never reset")
            back, found, failed = tree.real, None, True
            try:
                for index, (state, sent) in enumerate(checks):
                    state = tuple(state)
                    if state not in tree.snaps:
                        raise CirError(f"verify_restores: no remembered state at a path of {len(state)} actions")
                    with _at_step(len(state) + 1):
                        tree.env.restore(tree.snaps[state])
                    for i, (action, want) in enumerate(sent):
                        with _at_step(len(state) + i + 1):
                            obs, done, won = tree.env.step(action)
                        got = (str(obs), bool(done), bool(won))
                        if got != tuple(want):
                            found = (index, (*state, *(a for a, _ in sent[: i + 1])), tuple(want), got)
                            break
                    if found is not None:
                        break
                failed = False
            finally:
                try:
                    with _at_step(len(back)):
                        tree.env.restore(tree.snaps[back])
                except Exception:
                    if not failed:  # else the first error is the one to say
                        raise
        return found  # type: ignore[return-value]

    def restore(self, snapshot: tuple[str, ...]) -> None:
        tree = self._tree
        with tree.lock:
            known = snapshot in tree.snaps or snapshot in tree.memo
        if not known:
            raise CirError(f"restore: unknown state (path of {len(snapshot)} actions)")
        self.path = tuple(snapshot)
