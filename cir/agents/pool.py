"""The keep-alive connections of a process, shared by every LLM agent in it.

httpx's ``Client`` may be shared between threads; sharing means the tasks and branches of a
process reuse each other's connections instead of each task opening its own, and a
connection serves request after request. One client for all threads would be the simplest,
but httpcore's pool looks at every one of its connections for every request it places (and
polls each idle one): with 128 threads on one client that cost 11.6 ms of CPU a request,
against 1.3 ms on clients of 8 threads each (measured here on loopback). So the process's
pool is :data:`SHARDS` clients, each thread keeping to the one it was given first (its
connections stay its own), with one TLS context between them. A client holds any number of
connections (the agents' limiter, :mod:`cir.agents.limits`, bounds the requests in flight)
and keeps them open between requests; each request carries its own headers and timeout, so
agents with other keys or timeouts share the pool too.

A process that forks gets a pool of its own on first use (connections are never shared
across processes).
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading
from typing import Any

import httpx

from cir.util.errors import CirValueError

#: Clients of a process at most (threads are dealt to them in turn).
SHARDS = 16
#: Idle connections a client keeps open: more than its threads ever have in flight.
KEEP_ALIVE = 256
#: Seconds an idle connection stays open.
KEEP_ALIVE_EXPIRY = 30.0

_lock = threading.Lock()
_clients: list[httpx.Client] = []
_pid: int | None = None
_tls: Any = None
_turn = itertools.count()
_mine = threading.local()


def shared_client() -> httpx.Client:
    """The calling thread's client of this process's pool (made on first use)."""
    client = getattr(_mine, "client", None)
    if client is not None and _mine.pid == os.getpid() and not client.is_closed:
        return client
    global _pid, _tls
    with _lock:
        if _pid != os.getpid():  # a new process (or the first call): a pool of its own
            _clients.clear()
            _pid, _tls = os.getpid(), None
        shard = next(_turn) % SHARDS
        if shard >= len(_clients) or _clients[shard].is_closed:
            if _tls is None:
                _tls = httpx.create_ssl_context()  # about 70 ms: once, not per client
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=KEEP_ALIVE,
                                  keepalive_expiry=KEEP_ALIVE_EXPIRY)
            made = httpx.Client(limits=limits, verify=_tls)
            if shard >= len(_clients):
                shard = len(_clients)
                _clients.append(made)
            else:
                _clients[shard] = made
        client = _clients[shard]
    _mine.client, _mine.pid = client, os.getpid()
    return client


def close_shared_client() -> None:
    """Close this process's pool (a later request opens a new one)."""
    with _lock:
        if _pid == os.getpid():
            for client in _clients:
                client.close()
        _clients.clear()


atexit.register(close_shared_client)


class Servers:
    """Several servers of one model (``--base-url A,B``): each request goes to the one with
    the fewest requests in flight from this process (ties in turn), so servers that answer
    one request at a time each get one. Which server answers never changes the reply of a
    deterministic server, so it is no part of the agent's params."""

    def __init__(self, urls: list[str]) -> None:
        if not urls:
            raise CirValueError("servers: no URL; expected at least one http(s):// address")
        self.urls = list(urls)
        self.in_flight = [0] * len(urls)
        self.sent = [0] * len(urls)
        self._turn = 0
        self._lock = threading.Lock()

    def take(self) -> int:
        """The index of the server for the next request (give it back with :meth:`give`)."""
        with self._lock:
            n = len(self.urls)
            order = [(self._turn + k) % n for k in range(n)]
            best = min(order, key=lambda i: self.in_flight[i])
            self._turn = (best + 1) % n
            self.in_flight[best] += 1
            self.sent[best] += 1
            return best

    def give(self, index: int) -> None:
        with self._lock:
            self.in_flight[index] -= 1


_servers: dict[tuple[int, tuple[str, ...]], Servers] = {}


def shared_servers(urls: list[str]) -> Servers:
    """This process's :class:`Servers` for ``urls`` (shared by every agent that names them)."""
    key = (os.getpid(), tuple(urls))
    with _lock:
        servers = _servers.get(key)
        if servers is None:
            servers = _servers[key] = Servers(urls)
        return servers
