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
cache it writes to. :meth:`ReplyProxy.take` hands the counts since the last take to the agent
that ends (a worker's tasks that ran at once share them out in the order they end; the session's
sums are exact).
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
#: seconds between the proxy's tries of an upstream it cannot reach (a server restarting)
UPSTREAM_WAITS = (1.0, 2.0, 4.0)
_LOCK = threading.Lock()


class ReplyProxy:
    """The caching proxy of one upstream server (see the module's text)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.cache = ResponseCache(None)
        self._lock = threading.Lock()
        self.counts = {"http_requests": 0, "cache_hits": 0}
        self.usage = UsageCounter()
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
            record = cache.get(key)
            if record is not None:
                with self._lock:
                    self.counts["cache_hits"] += 1
                return 200, record["text"].encode("utf-8")
            sent = self._post(path, _compatible(body, raw), {
                k: v for k, v in headers.items() if k.lower() in ("content-type", "authorization")})
            if sent is None:
                return 400, json.dumps({"error": {"message": self.unreachable}}).encode()
            with self._lock:
                self.counts["http_requests"] += 1
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
        after :data:`UPSTREAM_WAITS` (a server that died or never started) or at its first
        timeout. The framework is then answered 400, which no framework retries: a 5xx is retried
        by each (by Inspect without limit unless ``max_retries`` is set), and the run would wait
        on a server that is gone (a CI run waited until it was stopped)."""
        for tries, wait in enumerate((*UPSTREAM_WAITS, None), start=1):
            try:
                sent = self.client.post(self.upstream + path, content=content, headers=headers)
                self.unreachable = ""
                return sent
            except httpx.TransportError as err:
                if wait is None or isinstance(err, httpx.TimeoutException):  # a timeout is not retried
                    self.unreachable = (f"cir's reply proxy: the model server {self.upstream} cannot be reached "
                                        f"({type(err).__name__}: {err}; tried {tries})")
                    return None
                time.sleep(wait)
        return None  # pragma: no cover - the loop returns

    def take(self) -> dict[str, int]:
        """The counts since the last take (requests, cache hits, tokens), reset."""
        with self._lock:
            out = {**self.counts, **self.usage.as_dict()}
            self.counts = dict.fromkeys(self.counts, 0)
            self.usage = UsageCounter()
        return out


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


def proxied(base_url: str | None, cache_dir: Any = None, fallback: Any = ()) -> ReplyProxy | None:
    """The proxy of ``base_url`` keeping replies in ``cache_dir`` (None: the server is asked directly)."""
    if not base_url:
        return None
    if not base_url.startswith(("http://", "https://")):
        raise CirError(f"--base-url {base_url!r}: expected an http(s):// address")
    proxy = ReplyProxy.of(base_url)
    proxy.cache = ResponseCache(cache_dir, fallback=fallback)
    return proxy
