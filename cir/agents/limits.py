"""How hard the LLM agents of a process press their server: requests in flight, requests and
tokens per minute, and what they do when the server says "slow down" (HTTP 429 or 503).

One :class:`Limiter` per server and process (:func:`shared_limiter`), used by every thread:

* **In flight.** At most ``window`` requests at once. The window starts at ``concurrency``
  (no bound when None), halves when the server refuses a request (429/503; once per
  round: refusals of requests sent before the last halving do not count again) and grows
  back by one request per window of answers (additive increase, multiplicative decrease,
  as TCP does), up to ``concurrency``.
* **Pace.** With ``rpm``, requests start at least ``60 / rpm`` s apart; with ``tpm``, each
  request's tokens (estimated before it is sent, corrected by the ``usage`` of its answer)
  push the next start by ``tokens * 60 / tpm`` s. So in any minute the process sends at
  most ``rpm`` requests and, but for the last request's error of estimate, ``tpm`` tokens,
  evenly spread (no burst for a server that counts per second to punish).
* **Pause.** A refusal's ``Retry-After`` (or, without one, the agent's backoff) pauses
  *every* thread of the process until then: nobody sends into a server that asked for quiet.

Refusals are not faults: the agent retries them without counting them against its retries,
so a 429 that persists slows the run down instead of stopping it, until the request has been
refused for longer than the agent's ``patience`` (:class:`cir.agents.llm.LLMAgent`).

Across worker processes. Each process has its own limiter, so a run-wide limit is given to
each of ``n`` processes as its share (:meth:`RequestLimits.share`: ``rpm / n``, ``tpm / n``,
``concurrency / n`` rounded up), and a ``Retry-After`` pauses only the process that got it
(each other process learns it from its own refusals).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from cir.util.errors import SettingError

#: Requests in flight at most (a GPU server batches 64-256; more only queue in the server).
MAX_CONCURRENCY = 4096
MAX_RETRIES = 100


@dataclass(frozen=True)
class RequestLimits:
    """Limits on the requests of a run (plain, picklable; never part of an agent's params:
    they change when replies come, never what they are).

    ``concurrency``: requests in flight at most (None: as many as the threads ask);
    ``rpm``/``tpm``: requests / tokens per minute at most (None: no limit); ``timeout``:
    seconds one attempt may take; ``retries``: attempts after the first for faults
    (timeouts, connection errors, HTTP 5xx but 503, answers without a reply); ``patience``:
    seconds a request may go on being refused (429/503) before the run stops.
    """

    concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    timeout: float = 120.0
    retries: int = 4
    patience: float = 600.0

    def __post_init__(self) -> None:
        # a SettingError names the setting as RunSettings and the command line do (--request-timeout)
        if self.concurrency is not None:
            _check_int("concurrency", self.concurrency, 1, MAX_CONCURRENCY)
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not _positive(value):
                raise SettingError(name, value, "a number > 0 (or none: no limit)")
        for name, value in (("request_timeout", self.timeout), ("patience", self.patience)):
            if not _positive(value):
                raise SettingError(name, value, "seconds > 0")
        _check_int("retries", self.retries, 0, MAX_RETRIES)

    def share(self, parts: int) -> RequestLimits:
        """Each of ``parts`` processes' share of these run-wide limits."""
        if parts <= 1:
            return self
        return replace(self, concurrency=None if self.concurrency is None else -(-self.concurrency // parts),
                       rpm=None if self.rpm is None else self.rpm / parts,
                       tpm=None if self.tpm is None else self.tpm / parts)

    def as_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "rpm": self.rpm, "tpm": self.tpm,
                "timeout": self.timeout, "retries": self.retries, "patience": self.patience}


def _check_int(setting: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SettingError(setting, value, f"an integer from {low} to {high}")


def _positive(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) \
        and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class Ticket:
    """One request let through: its order, its estimated tokens, the seconds it waited."""

    seq: int
    tokens: int
    waited: float


class Limiter:
    """The in-flight window, the pace and the pause of one server in one process (module
    docstring). ``clock`` and ``sleep`` are injectable for tests."""

    def __init__(self, *, concurrency: int | None = None, rpm: float | None = None,
                 tpm: float | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.concurrency, self.rpm, self.tpm = concurrency, rpm, tpm
        self._clock, self._sleep = clock, sleep
        self._cond = threading.Condition()
        self.window: float = float(concurrency) if concurrency else math.inf
        self.in_flight = 0
        self.paused_until = -math.inf
        self._next_request = -math.inf  # the pace: when the next request may start
        self._next_tokens = -math.inf
        self._seq = 0
        self._shrunk_at = 0
        self.counts = {"requests": 0, "refusals": 0, "shrinks": 0, "pauses": 0, "peak_in_flight": 0}
        self.window_min = self.window
        self.waited = 0.0  # seconds threads waited here, summed
        self.paused = 0.0  # seconds of pause set by refusals (overlaps merged)

    def now(self) -> float:
        """The limiter's clock (monotonic seconds)."""
        return self._clock()

    def acquire(self, tokens: int = 0) -> Ticket:
        """Wait for a place in the window, the request's turn in the pace, the end of a pause."""
        start = self._clock()
        with self._cond:
            while self.in_flight >= self.window:
                self._cond.wait(0.5)
            self.in_flight += 1
            self._seq += 1
            seq = self._seq
            self.counts["requests"] += 1
            self.counts["peak_in_flight"] = max(self.counts["peak_in_flight"], self.in_flight)
            turn = self._take_turn(tokens)
        try:
            self._wait_until(turn)
            while True:  # a pause set meanwhile (by another thread's refusal) holds us too
                with self._cond:
                    until = self.paused_until
                if until <= self._clock():
                    break
                self._wait_until(until)
        except BaseException:
            with self._cond:
                self.in_flight -= 1
                self._cond.notify()
            raise
        waited = self._clock() - start
        with self._cond:
            self.waited += waited
        return Ticket(seq, tokens, waited)

    def _take_turn(self, tokens: int) -> float:
        """When this request may start (under the lock): the pace of requests and tokens."""
        now = self._clock()
        turn = max(now, self._next_request, self._next_tokens, self.paused_until)
        if self.rpm:
            self._next_request = turn + 60.0 / self.rpm
        if self.tpm:
            self._next_tokens = turn + tokens * 60.0 / self.tpm
        return turn

    def _wait_until(self, when: float) -> None:
        delay = when - self._clock()
        if delay > 0:
            self._sleep(delay)

    def release(self, ticket: Ticket, *, refused: bool = False, wait: float | None = None,
                tokens: int | None = None) -> None:
        """The request's answer came: ``refused`` (429/503, asking to wait ``wait`` s), or
        done (``tokens``: what it really cost, when the server said)."""
        with self._cond:
            self.in_flight -= 1
            if refused:
                self._refused(ticket, wait)
            elif self.concurrency is None or self.window < self.concurrency:
                cap = math.inf if self.concurrency is None else float(self.concurrency)
                self.window = min(cap, self.window + 1.0 / self.window)
            if tokens is not None and self.tpm:
                self._next_tokens += (tokens - ticket.tokens) * 60.0 / self.tpm
            self._cond.notify_all()

    def _refused(self, ticket: Ticket, wait: float | None) -> None:
        self.counts["refusals"] += 1
        if ticket.seq > self._shrunk_at:  # a new signal, not an echo of the last one
            self.window = max(1.0, math.floor(min(self.window, self.in_flight + 1) / 2))
            self.window_min = min(self.window_min, self.window)
            self._shrunk_at = self._seq
            self.counts["shrinks"] += 1
        if wait is not None and wait > 0:
            now = self._clock()
            until = now + wait
            if until > self.paused_until:
                self.paused += until - max(now, self.paused_until)
                self.paused_until = until
                self.counts["pauses"] += 1

    def stats(self) -> dict[str, float | int]:
        """What the limiter did (for the run's report; process-wide, not per agent)."""
        with self._cond:
            window = None if math.isinf(self.window) else round(self.window, 2)
            low = None if math.isinf(self.window_min) else round(self.window_min, 2)
            return {**self.counts, "window": window, "window_min": low,
                    "waited_s": round(self.waited, 3), "paused_s": round(self.paused, 3)}


_shared_lock = threading.Lock()
_shared: dict[tuple[Any, ...], Limiter] = {}


def shared_limiter(server: str, limits: RequestLimits | None = None) -> Limiter:
    """The limiter of ``server`` (its base URL) in this process, for ``limits``."""
    limits = limits or RequestLimits()
    key = (os.getpid(), server, limits.concurrency, limits.rpm, limits.tpm)
    with _shared_lock:
        limiter = _shared.get(key)
        if limiter is None:
            limiter = _shared[key] = Limiter(concurrency=limits.concurrency, rpm=limits.rpm,
                                             tpm=limits.tpm)
        return limiter
