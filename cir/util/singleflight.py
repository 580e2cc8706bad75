"""Work that several threads ask for at once is done once; the others wait for its result.

Beside a cache: two branches that reach the same context at the same time both miss the
cache, and without this both would ask the model. With it the first asks, the second
waits and takes the same answer (or the same exception), so the work done does not depend
on how threads interleave. The owner's function should look in the cache first: a thread
that missed just before the owner stored its answer becomes the next owner.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """``do(key, fn)``: ``fn()`` once per key at a time; callers meanwhile share its result."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[Hashable, Future[T]] = {}

    def do(self, key: Hashable, fn: Callable[[], T]) -> tuple[T, bool]:
        """``(value, shared)``: ``shared`` is True when another thread's call gave the value.
        An exception of ``fn`` reaches its owner and every thread that waited for it."""
        with self._lock:
            call = self._calls.get(key)
            owner = call is None
            if owner:
                call = self._calls[key] = Future()
        if not owner:
            return call.result(), True
        try:
            value = fn()
        except BaseException as exc:
            call.set_exception(exc)
            raise
        else:
            call.set_result(value)
            return value, False
        finally:
            with self._lock:
                del self._calls[key]

    def __len__(self) -> int:
        """Calls in flight now."""
        with self._lock:
            return len(self._calls)
