"""What a finished engine gives back, so that a worker's memory stays flat over many games.

Library copies. The Fast Downward library keeps one planning task in global C state, so
textworld gives every ``PddlEnv`` a private copy of ``libdownward.so``: it copies the 34 MB
file to a temporary folder, loads it and removes the folder (``fast_downward.load_lib``),
and nothing ever unloads it: a worker grows by about 3.6 MB a game. Unloading a copy
(``dlclose``) is not safe: measured here, a later load of a fresh copy crashed the process
inside ``dlopen`` after a copy was unloaded (with or without a task in it, after
``cleanup()`` or not), not every time. So a finished engine gives its copy back here and
the next engine loads its own task into it: ``load_sas`` replaces the task, as textworld's
own ``reset`` does on the same copy. A process then holds as many copies as it ever had
engines alive at once (one per worker in ``cir run``).

Interned facts. textworld's ``Proposition`` memoises every instance it ever makes (through
``mementos``), so every fact of every game stays in memory (about 0.7 MB a game).
``forget_facts`` empties that memo of propositions; they compare and hash by value, so a
new instance of a fact behaves exactly as the old one did.
"""

from __future__ import annotations

import threading
from typing import Any

import fast_downward
import mementos.core
from textworld.logic import Proposition

_FREE: list[Any] = []
# Reentrant: the threading backend runs engines in several threads, and garbage collection
# can close an engine (and give its copy back) while this thread is inside borrow().
_LOCK = threading.RLock()
_LOADED = 0


def borrow() -> Any:
    """A library copy no live engine uses: a returned one, else a newly loaded one."""
    global _LOADED
    with _LOCK:
        if _FREE:
            return _FREE.pop()
        _LOADED += 1
    return fast_downward.load_lib()


def give_back(lib: Any) -> None:
    """Return a copy for the next engine; its owner must never call it again."""
    with _LOCK:
        if any(lib is free for free in _FREE):
            raise RuntimeError("a Fast Downward library copy was given back twice")
        _FREE.append(lib)


def copies() -> tuple[int, int]:
    """``(loaded, free)``: copies this process has loaded, and those waiting for an engine."""
    with _LOCK:
        return _LOADED, len(_FREE)


def forget_facts() -> None:
    """Drop textworld's memo of propositions (every game's facts; see the module docstring)."""
    memo = getattr(mementos.core, "_memento_cache", None)
    if memo is None:  # pragma: no cover - mementos changed: nothing to forget
        return
    for key in list(memo):  # a copy: other threads may add facts meanwhile
        if key[0] is Proposition:
            memo.pop(key, None)
