"""A framework agent's model replies kept on disk: a caching proxy in front of its server.

A framework's model client is its own (``ChatOpenAI``, the SDK's ``AsyncOpenAI``, Inspect's
provider), so ``cir`` keeps the replies where every one of them meets the server: the HTTP
request. :class:`ReplyProxy` serves the OpenAI-compatible API on loopback in this process and
forwards each request it has not answered before to the real server, keeping the answer in
``cir``'s reply cache (:class:`~cir.agents.cache.ResponseCache`: ``RUN_DIR/agent_cache``, a log
per process, keyed by the endpoint and the whole request body). The adapters point the
framework's client at it (``OPENAI_BASE_URL``, read when the user's module builds its model), so
a framework agent's run has what an LLM agent's has: a context asked twice (two branches, a
resume, an extended run) costs one request, and ``run.json`` counts the requests, the cache hits
and the tokens of each answer's ``usage``.

One proxy per server and process (a module builds its model once); each run's agent sets the
cache it writes to. The proxy counts what it did (requests sent, replies from the cache, tokens)
once, and each count is claimed by one agent (:meth:`ReplyProxy.claim`): an agent's ``stats()``
claims what no agent has claimed yet and adds it to its own tally, which it only ever reads again.
So the progress bar (which reads a running task's stats) and the task's final stats read one
source, and the sums over a session are the requests the server answered, whoever read them when
(the tasks a worker runs at once share a proxy, so a request may be tallied by another of them).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from cir.agents.cache import ResponseCache, request_key
from cir.agents.usage import UsageCounter, usage_of
from cir.util.errors import CirError

_PROXIES: dict[str, ReplyProxy] = {}
#: seconds between the proxy's tries of an upstream it cannot reach (a server restarting): the
#: first waits of a doubling backoff, as many as the run's ``--retries`` (``RequestLimits.retries``)
UPSTREAM_WAITS = (1.0, 2.0, 4.0, 8.0)
_LOCK = threading.Lock()
#: What a proxy counts (the LLM agent's names for the same things, so a session's sums read alike).
COUNTS = ("http_requests", "cache_hits", "cache_hits_memory", "cache_hits_disk", "retries")


class ReplyProxy:
    """The caching proxy of one upstream server (see the module's text)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.cache = ResponseCache(None)
        self._lock = threading.Lock()
        self.counts = dict.fromkeys(COUNTS, 0)  # not yet claimed by an agent
        self.usage = UsageCounter()
        self.seen = 0  # requests answered since the proxy started (never reset): the model uses the proxy
        self.waits = UPSTREAM_WAITS  # the waits between tries of an upstream it cannot reach
        self.unreachable = ""  # why the upstream could not be reached, once it could not
        self.client = httpx.Client(timeout=600.0)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, name="cir-reply-proxy", daemon=True).start()

    @classmethod
    def of(cls, upstream: str) -> ReplyProxy:
        """This process's proxy of ``upstream``."""
        with _LOCK:
            mine = next((p for p in _PROXIES.values() if p.base_url == upstream.rstrip("/")), None)
            if mine is not None:  # already this process's proxy (OPENAI_BASE_URL points at it)
                return mine
            if upstream not in _PROXIES:
                _PROXIES[upstream] = cls(upstream)
            return _PROXIES[upstream]

    def answer(self, path: str, raw: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """The answer to one POST: from the cache, else from the upstream server (kept when valid)."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return 400, b'{"error": {"message": "the request is not JSON"}}'
        key = request_key(path, body)
        cache = self.cache
        with cache.asking(key):
            record, where = cache.lookup(key)
            if record is not None:
                with self._lock:
                    self.counts["cache_hits"] += 1
                    self.counts[f"cache_hits_{where}"] += 1
                    self.seen += 1
                return 200, record["text"].encode("utf-8")
            sent = self._post(path, _compatible(body, raw), {
                k: v for k, v in headers.items() if k.lower() in ("content-type", "authorization")})
            if sent is None:
                return 400, json.dumps({"error": {"message": self.unreachable}}).encode()
            with self._lock:
                self.counts["http_requests"] += 1
                self.seen += 1
            if sent.status_code == 200:
                try:
                    answer = sent.json()
                except ValueError:
                    answer = None
                if isinstance(answer, dict) and answer.get("choices"):
                    usage = usage_of(answer)
                    with self._lock:
                        self.usage.add(usage)
                    cache.put(key, {"text": sent.text, **({"usage": usage} if usage else {})})
            return sent.status_code, sent.content

    def _post(self, path: str, content: bytes, headers: dict[str, str]) -> httpx.Response | None:
        """The upstream's answer, or None (``unreachable`` says why) when it cannot be reached
        after :attr:`waits` (a server that died or never started; one try and as many more as the
        run's ``--retries``) or at its first timeout. The framework is then answered 400, which no
        framework retries: a 5xx is retried by each (by Inspect without limit unless
        ``max_retries`` is set), and the run would wait on a server that is gone (a CI run waited
        until it was stopped)."""
        for tries, wait in enumerate((*self.waits, None), start=1):
            try:
                sent = self.client.post(self.upstream + path, content=content, headers=headers)
                self.unreachable = ""
                return sent
            except httpx.TransportError as err:
                if wait is None or isinstance(err, httpx.TimeoutException):  # a timeout is not retried
                    self.unreachable = (f"cir's reply proxy: the model server {self.upstream} cannot be reached "
                                        f"({type(err).__name__}: {err}; tried {tries} "
                                        f"time{'s' if tries > 1 else ''})")
                    return None
                with self._lock:
                    self.counts["retries"] += 1
                time.sleep(wait)
        return None  # pragma: no cover - the loop returns

    def retry(self, retries: int) -> None:
        """Try an upstream it cannot reach ``retries`` more times (``--retries``), 1, 2, 4 ... s apart."""
        self.waits = tuple(float(min(2 ** i, 30)) for i in range(retries))

    def claim(self) -> dict[str, int]:
        """The counts no agent has claimed yet (requests, cache hits, tokens); they are the
        caller's from now on (see the module's text)."""
        with self._lock:
            out = {**self.counts, **self.usage.as_dict()}
            self.counts = dict.fromkeys(self.counts, 0)
            self.usage = UsageCounter()
        return out

    take = claim  # its former name


def _compatible(body: dict[str, Any], raw: bytes) -> bytes:
    """The request as sent upstream: an assistant message that only calls a tool has ``content``
    null in the OpenAI API (LangChain sends it so), which llama-cpp-python's server (0.3) refuses;
    it gets the empty text, which means the same. That server also ignores ``max_completion_tokens``
    (LangChain's name for ``max_tokens``): without ``max_tokens`` a grammar-forced tool call ran to
    the context's end (3,882 tokens, 20 minutes), so ``max_tokens`` is set to it. Anything else is
    sent byte for byte (the cache key is always the request as the framework sent it)."""
    messages = body.get("messages")
    nulls = isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None for m in messages)
    # the same server reads only max_tokens: LangChain sends the newer max_completion_tokens
    cap = "max_completion_tokens" in body and "max_tokens" not in body
    if not nulls and not cap:
        return raw
    fixed = dict(body)
    if nulls:
        fixed["messages"] = [{**m, "content": ""} if isinstance(m, dict) and m.get("role") == "assistant"
                             and m.get("content") is None else m for m in messages]  # type: ignore[union-attr]
    if cap:
        fixed["max_tokens"] = body["max_completion_tokens"]
    return json.dumps(fixed).encode("utf-8")


def _handler(proxy: ReplyProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _path(self) -> str:
            return self.path[len("/v1"):] if self.path.startswith("/v1") else self.path

        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                status, payload = proxy.answer(self._path(), raw, dict(self.headers))
            except httpx.HTTPError as err:
                status, payload = 502, json.dumps({"error": {"message": f"cir's reply proxy: {err}"}}).encode()
            self._send(status, payload)

        def do_GET(self) -> None:  # noqa: N802
            try:
                sent = proxy.client.get(proxy.upstream + self._path())
                self._send(sent.status_code, sent.content)
            except httpx.HTTPError as err:
                self._send(502, json.dumps({"error": {"message": f"cir's reply proxy: {err}"}}).encode())

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def proxied(base_url: str | None, cache_dir: Any = None, fallback: Any = (),
            retries: int | None = None) -> ReplyProxy | None:
    """The proxy of ``base_url`` keeping replies in ``cache_dir`` (None: the server is asked directly),
    trying a server it cannot reach ``retries`` more times (None: :data:`UPSTREAM_WAITS`)."""
    if not base_url:
        return None
    if not base_url.startswith(("http://", "https://")):
        raise CirError(f"--base-url {base_url!r}: expected an http(s):// address")
    proxy = ReplyProxy.of(base_url)
    proxy.cache = ResponseCache(cache_dir, fallback=fallback)
    if retries is not None:
        proxy.retry(retries)
    return proxy
