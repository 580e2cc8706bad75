"""One keep-alive connection pool per process, shared by every LLM agent in it.

httpx's ``Client`` may be shared between threads; one per process means the tasks and
branches of a process reuse each other's connections instead of each task opening its own,
and a connection serves request after request. The pool holds any number of connections
(the agents' limiter, :mod:`cir.agents.limits`, bounds the requests in flight) and keeps up
to :data:`KEEP_ALIVE` of them open between requests. Each request carries its own headers
and timeout, so agents with other keys or timeouts share the pool too.

A process that forks gets a pool of its own on first use (connections are never shared
across processes).
"""

from __future__ import annotations

import atexit
import os
import threading

import httpx

#: Idle connections kept open: more than the requests a process ever has in flight.
KEEP_ALIVE = 512
#: Seconds an idle connection stays open.
KEEP_ALIVE_EXPIRY = 30.0

_lock = threading.Lock()
_client: httpx.Client | None = None
_pid: int | None = None


def shared_client() -> httpx.Client:
    """This process's pool (made on first use)."""
    global _client, _pid
    with _lock:
        if _client is None or _pid != os.getpid():
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=KEEP_ALIVE,
                                  keepalive_expiry=KEEP_ALIVE_EXPIRY)
            _client = httpx.Client(limits=limits)
            _pid = os.getpid()
        return _client


def close_shared_client() -> None:
    """Close this process's pool (a later request opens a new one)."""
    global _client
    with _lock:
        if _client is not None and _pid == os.getpid():
            _client.close()
        _client = None


atexit.register(close_shared_client)
