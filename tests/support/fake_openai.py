"""A tiny scripted OpenAI-compatible server on loopback, for testing the LLM agent's HTTP
handling (retries, backoff, rate limits, timeouts, bad answers) without a model.

Answers come from a script (in order) or from an ``answer(path, body, attempt)`` function
(``attempt`` counts the requests with the same body so far), which lets a test make the
server a pure function of the request and inject faults on chosen attempts: HTTP errors,
``null`` or empty content, garbage, a missing ``choices``, slow, trickling or huge answers.
A reply can also carry a ``finish_reason``, a reasoning model's separate ``reasoning``
(chat answers, as vLLM and llama.cpp send it), ``logprobs`` (sent when asked for) and
``usage`` (by default the words of the prompt and of the reply, as token counts).

Modes of a hosted API or a busy server, each optional:

* ``latency``: every request is answered after that many seconds (a latency-bound server);
* ``refuse=(share, retry_after)``: that share of requests (chosen by a hash of the request
  and its attempt, so a retry may pass) gets HTTP 429 with ``Retry-After``;
* ``rpm=(limit, window)``: more than ``limit`` accepted requests within ``window`` seconds
  (60: requests per minute) get HTTP 429 with ``Retry-After`` until a place frees.

``log`` records each request's arrival, end and status (monotonic seconds), from which
:func:`in_flight` reads the requests in flight over the busy window. Connections are kept
alive (HTTP/1.1) with Nagle's algorithm off (``TCP_NODELAY``: otherwise every answer waits
about 40 ms for the client's delayed ACK), and closed when the server stops.

Run as a script it serves in its own process (the throughput benchmark does), answering
with :func:`alfworld_answer` and serving its log summary at ``GET /stats``::

    python tests/support/fake_openai.py --latency 0.3     # prints "port N", serves until killed
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: status, JSON (or raw text) body, headers, delay before answering,
    and ``trickle`` seconds between the body's bytes (a server that never quite finishes).
    ``usage``: the answer's usage field (None: counted from the words; False: none)."""

    status: int = 200
    text: str | None = "go to desk 1"
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    trickle: float = 0.0
    finish_reason: str = "stop"
    reasoning: str | None = None
    logprobs: Any = None
    usage: dict[str, Any] | bool | None = None
    #: a chat answer's tool calls (OpenAI's format); the content is then null unless ``text`` is given
    tool_calls: list[dict[str, Any]] | None = None


#: Faulty answers by name, for fault-injection tests.
FAULTS: dict[str, Reply] = {
    "500": Reply(status=500),
    "503": Reply(status=503, headers={"Retry-After": "0"}),
    "429": Reply(status=429, headers={"Retry-After": "0"}),
    "null": Reply(text=None),
    "empty": Reply(text=""),
    "garbage": Reply(raw="\x00\x01 <html>502 Bad Gateway</html>"),
    "no_choices": Reply(raw=json.dumps({"object": "error", "message": "overloaded"})),
    "slow": Reply(delay=1.0),
    "trickle": Reply(trickle=0.05),
    "huge": Reply(text="go to desk 1 " + "x" * (2 << 20)),
}


def digest(*parts: Any) -> int:
    """A stable hash of JSON-able parts (the same in every process)."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False)
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], 16)


def prompt_text(body: dict[str, Any]) -> str:
    """The request's prompt, or its messages' contents one after another."""
    if "prompt" in body:
        return str(body["prompt"])
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", ()))


_ENTITY = re.compile(r"\b([a-z]+) (\d+)\b")


def alfworld_answer(path: str, body: dict[str, Any], attempt: int) -> Reply:
    """A deterministic ALFWorld-like command for the request: a verb and an object named in
    the last observation, chosen by a hash of the whole prompt (the same in any process)."""
    text = prompt_text(body)
    last = text[text.rfind("\n", 0, max(0, len(text) - 2)) + 1:]
    names = [f"{a} {b}" for a, b in _ENTITY.findall(last)] or [f"{a} {b}" for a, b in _ENTITY.findall(text)]
    h = digest(text)
    if not names or h % 11 == 0:
        return Reply(text=["look", "inventory", "think: where could it be?"][h % 3])
    name = names[(h >> 8) % len(names)]
    verb = ["go to", "go to", "open", "examine", "close"][(h >> 16) % 5]
    return Reply(text=f"{verb} {name}")


def tool_call(name: str, arguments: dict[str, Any], *parts: Any) -> dict[str, Any]:
    """One tool call in OpenAI's format, its id a digest of ``parts`` (the same in every process)."""
    return {"id": f"call_{digest(name, arguments, *parts):x}"[:21], "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def sampling_answer(path: str, body: dict[str, Any], attempt: int) -> Reply:
    """A server that samples: at the request's ``temperature`` T, the answer of
    :func:`alfworld_answer` for the prompt with chance ``1 - T / 2``, else the one for the prompt
    and the request's ``seed`` (a draw of that seed); at T = 0 greedy. A pure function of the
    request, so one sample index asked twice is answered the same."""
    text = prompt_text(body)
    temperature = float(body.get("temperature") or 0.0)
    if temperature <= 0 or digest(text, body.get("seed"), "draw") % 1000 >= 500 * temperature:
        return alfworld_answer(path, body, attempt)
    return alfworld_answer(path, {**body, "prompt": f"{text}\x1f{body.get('seed')}"}, attempt)


def recorded_answers(prompts: Iterable[tuple[str, str]],
                     chars_per_token: float = 4.0) -> Callable[[str, dict[str, Any], int], Reply]:
    """A server that answers each prompt with the reply recorded for it (``(prompt, reply)``
    pairs, e.g. ``cir estimate --prompts``: the built-in agent's), its usage counted as the
    estimate counts tokens (characters / ``chars_per_token``); a prompt not recorded gets
    ``look`` (and counts in ``unrecorded``). Prompts are kept as digests: a full study's
    (about 180,000 of about 4 kB each) fit in memory."""
    replies = {digest(prompt): reply for prompt, reply in prompts}

    def tokens(text: str) -> int:
        return math.ceil(len(text) / chars_per_token) if text else 0

    def answer(path: str, body: dict[str, Any], attempt: int) -> Reply:
        text = prompt_text(body)
        reply = replies.get(digest(text))
        if reply is None:
            answer.unrecorded += 1  # type: ignore[attr-defined]
            reply = "look"
        return Reply(text=reply, usage={"prompt_tokens": tokens(text), "completion_tokens": tokens(reply)})

    answer.unrecorded = 0  # type: ignore[attr-defined]
    return answer


def in_flight(log: list[tuple[float, float, int]]) -> dict[str, float | int]:
    """Requests in flight over the busy window (first arrival to last answer): the mean
    (time-weighted), the peak, the window's length and ends (``time.monotonic``, which is
    one clock for all processes of a machine); with the requests and refusals."""
    if not log:
        return {"requests": 0, "refused": 0, "busy_s": 0.0, "mean_in_flight": 0.0, "peak_in_flight": 0,
                "first_s": None, "last_s": None}
    first = min(a for a, _, _ in log)
    last = max(e for _, e, _ in log)
    busy = max(last - first, 1e-9)
    events = sorted([(a, 1) for a, _, _ in log] + [(e, -1) for _, e, _ in log],
                    key=lambda ev: (ev[0], ev[1]))
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return {"requests": len(log), "refused": sum(1 for *_, s in log if s == 429),
            "busy_s": round(busy, 3), "mean_in_flight": round(sum(e - a for a, e, _ in log) / busy, 2),
            "peak_in_flight": peak, "first_s": first, "last_s": last}


class FakeOpenAI:
    """Serves ``/v1/chat/completions`` and ``/v1/completions`` from a script of replies.

    When the script runs out, the last reply repeats. Every request is recorded in
    ``requests`` as ``(path, headers, body)`` (``keep_requests=False``: only counted) and
    in ``log`` (arrival, end, status).
    """

    def __init__(self, script: list[Reply] | None = None,
                 answer: Callable[[str, dict[str, Any], int], Reply] | None = None, *,
                 latency: float = 0.0, refuse: tuple[float, float] | None = None,
                 rpm: tuple[int, float] | None = None, port: int = 0,
                 keep_requests: bool = True) -> None:
        self.script = list(script or [Reply()])
        self.answer = answer
        self.latency, self.refuse, self.rpm = latency, refuse, rpm
        self.keep_requests = keep_requests
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.count = 0
        self.attempts: dict[str, int] = {}
        self.log: list[tuple[float, float, int]] = []
        self._accepted: deque[float] = deque()  # arrivals within the rpm window
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self.connections_opened = 0
        self.nodelay: list[bool] = []  # TCP_NODELAY of each connection, as set
        self.server = _Server(("127.0.0.1", port), _handler(self))
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def choose(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
        """The reply to one request (under the lock: the script and counters are shared)."""
        with self._lock:
            self.count += 1
            if self.keep_requests:
                self.requests.append((path, headers, body))
            key = json.dumps(body, sort_keys=True)
            attempt = self.attempts.get(key, 0)
            self.attempts[key] = attempt + 1
            refused = self._refusal(key, attempt)
            if refused is not None:
                return refused
            if self.answer is not None:
                return self.answer(path, body, attempt)
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def _refusal(self, key: str, attempt: int) -> Reply | None:
        if self.refuse is not None:
            share, retry_after = self.refuse
            if digest(key, attempt) % 10_000 < share * 10_000:
                return Reply(status=429, headers={"Retry-After": f"{retry_after:g}"})
        if self.rpm is not None:
            limit, window = self.rpm
            now = time.monotonic()
            while self._accepted and self._accepted[0] <= now - window:
                self._accepted.popleft()
            if len(self._accepted) >= limit:
                wait = self._accepted[0] + window - now
                return Reply(status=429, headers={"Retry-After": str(max(1, math.ceil(wait)))})
            self._accepted.append(now)
        return None

    def payload(self, path: str, body: dict[str, Any], reply: Reply) -> bytes:
        if reply.raw is not None:
            return reply.raw.encode()
        if reply.status != 200:
            return json.dumps({"error": {"message": f"scripted error {reply.status}"}}).encode()
        if path.endswith("/chat/completions"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if reply.tool_calls is not None:
                message["tool_calls"] = reply.tool_calls
            if reply.reasoning is not None:
                message["reasoning_content"] = reply.reasoning
            choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": reply.finish_reason}
        else:
            choice = {"text": reply.text, "finish_reason": reply.finish_reason}
        if body.get("logprobs") not in (None, False):
            choice["logprobs"] = reply.logprobs
        # the fields a strict client (the openai SDK's models, Inspect AI) validates
        answer: dict[str, Any] = {"id": f"fake-{self.count}", "object": "chat.completion" if "messages" in body
                                  else "text_completion", "created": 0, "model": str(body.get("model", "fake")),
                                  "choices": [choice]}
        if reply.usage is None:
            prompt, completion = len(prompt_text(body).split()), len(str(reply.text or "").split())
            answer["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                               "total_tokens": prompt + completion}
        elif reply.usage:
            answer["usage"] = reply.usage
        return json.dumps(answer).encode()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            log = list(self.log)
        return {**in_flight(log), "count": self.count,
                "unrecorded": getattr(self.answer, "unrecorded", 0)}

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:  # kept-alive connections end too (a client's pool sees EOF)
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # many clients connect at once (the default backlog is 5)


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: one connection serves many requests
        disable_nagle_algorithm = True  # TCP_NODELAY

        def setup(self) -> None:
            super().setup()
            nodelay = self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            with fake._lock:
                fake._connections.add(self.connection)
                fake.connections_opened += 1
                fake.nodelay.append(bool(nodelay))

        def finish(self) -> None:
            with fake._lock:
                fake._connections.discard(self.connection)
            super().finish()

        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            if self.path.rstrip("/").endswith("/stats"):
                self._send(200, json.dumps(fake.stats()).encode(), {})
            elif self.path.rstrip("/").endswith("/log"):  # (arrived, answered, status) of each request
                with fake._lock:
                    log = list(fake.log)
                self._send(200, json.dumps(log).encode(), {})
            else:  # /v1/models: a readiness probe
                self._send(200, json.dumps({"data": [{"id": "fake"}]}).encode(), {})

        def do_POST(self) -> None:  # noqa: N802
            arrived = time.monotonic()
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            reply = fake.choose(self.path, dict(self.headers), body)
            wait = reply.delay + (fake.latency if reply.status == 200 else 0.0)
            if wait:
                time.sleep(wait)
            payload = fake.payload(self.path, body, reply)
            answered = time.monotonic()  # the answer is ready: the client may read it now
            with fake._lock:
                fake.log.append((arrived, answered, reply.status))
            self._send(reply.status, payload, reply.headers, reply.trickle)

        def _send(self, status: int, payload: bytes, headers: dict[str, str], trickle: float = 0.0) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if trickle:
                    for i in range(len(payload)):
                        self.wfile.write(payload[i:i + 1])
                        self.wfile.flush()
                        time.sleep(trickle)
                else:
                    self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (timeout test)

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--refuse-share", type=float, default=0.0, help="share of requests answered 429")
    parser.add_argument("--retry-after", type=float, default=1.0, help="the Retry-After of those 429s")
    parser.add_argument("--rpm", type=int, default=0, help="accepted requests per --rpm-window at most")
    parser.add_argument("--rpm-window", type=float, default=60.0)
    parser.add_argument("--answers", default=None, metavar="FILE",
                        help="answer each prompt with its reply in FILE (`cir estimate --prompts`)")
    args = parser.parse_args()
    answer = alfworld_answer
    if args.answers:
        with open(args.answers, encoding="utf-8") as f:
            answer = recorded_answers((d["prompt"], d["reply"]) for d in map(json.loads, f))
    refuse = (args.refuse_share, args.retry_after) if args.refuse_share else None
    rpm = (args.rpm, args.rpm_window) if args.rpm else None
    server = FakeOpenAI(answer=answer, latency=args.latency, refuse=refuse, rpm=rpm,
                        port=args.port, keep_requests=False)
    with server:
        print(f"port {server.port}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
