"""A tiny scripted OpenAI-compatible server on loopback, for testing the LLM agent's HTTP
handling (retries, backoff, rate limits, timeouts, bad answers) without a model.

Answers come from a script (in order) or from an ``answer(path, body, attempt)`` function
(``attempt`` counts the requests with the same body so far), which lets a test make the
server a pure function of the request and inject faults on chosen attempts: HTTP errors,
``null`` or empty content, garbage, a missing ``choices``, slow, trickling or huge answers.
A reply can also carry a ``finish_reason``, a reasoning model's separate ``reasoning``
(chat answers, as vLLM and llama.cpp send it) and ``logprobs`` (sent when asked for).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: status, JSON (or raw text) body, headers, delay before answering,
    and ``trickle`` seconds between the body's bytes (a server that never quite finishes)."""

    status: int = 200
    text: str | None = "go to desk 1"
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    trickle: float = 0.0
    finish_reason: str = "stop"
    reasoning: str | None = None
    logprobs: Any = None


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


class FakeOpenAI:
    """Serves ``/v1/chat/completions`` and ``/v1/completions`` from a script of replies.

    When the script runs out, the last reply repeats. Every request is recorded in
    ``requests`` as ``(path, headers, body)``.
    """

    def __init__(self, script: list[Reply] | None = None,
                 answer: Callable[[str, dict[str, Any], int], Reply] | None = None) -> None:
        self.script = list(script or [Reply()])
        self.answer = answer
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append((self.path, dict(self.headers), body))
                    key = json.dumps(body, sort_keys=True)
                    attempt = fake.attempts.get(key, 0)
                    fake.attempts[key] = attempt + 1
                    if fake.answer is not None:
                        reply = fake.answer(self.path, body, attempt)
                    else:
                        reply = fake.script.pop(0) if len(fake.script) > 1 else fake.script[0]
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw is not None:
                    payload = reply.raw.encode()
                elif reply.status != 200:
                    payload = json.dumps({"error": {"message": f"scripted error {reply.status}"}}).encode()
                else:
                    if self.path.endswith("/chat/completions"):
                        message = {"role": "assistant", "content": reply.text}
                        if reply.reasoning is not None:
                            message["reasoning_content"] = reply.reasoning
                        choice = {"message": message, "finish_reason": reply.finish_reason}
                    else:
                        choice = {"text": reply.text, "finish_reason": reply.finish_reason}
                    if body.get("logprobs") not in (None, False):
                        choice["logprobs"] = reply.logprobs
                    payload = json.dumps({"choices": [choice]}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    if reply.trickle:
                        for i in range(len(payload)):
                            self.wfile.write(payload[i:i + 1])
                            self.wfile.flush()
                            time.sleep(reply.trickle)
                    else:
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
