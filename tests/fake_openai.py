"""A tiny scripted OpenAI-compatible server on loopback, for testing the LLM agent's HTTP
handling (retries, backoff, rate limits, timeouts, bad answers) without a model."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: status, JSON (or raw text) body, headers, delay before answering."""

    status: int = 200
    text: str | None = "go to desk 1"
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class FakeOpenAI:
    """Serves ``/v1/chat/completions`` and ``/v1/completions`` from a script of replies.

    When the script runs out, the last reply repeats. Every request is recorded in
    ``requests`` as ``(path, headers, body)``.
    """

    def __init__(self, script: list[Reply] | None = None) -> None:
        self.script = list(script or [Reply()])
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
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
                    reply = fake.script.pop(0) if len(fake.script) > 1 else fake.script[0]
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw is not None:
                    payload = reply.raw.encode()
                elif reply.status != 200:
                    payload = json.dumps({"error": {"message": f"scripted error {reply.status}"}}).encode()
                elif self.path.endswith("/chat/completions"):
                    payload = json.dumps(
                        {"choices": [{"message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}]}
                    ).encode()
                else:
                    payload = json.dumps({"choices": [{"text": reply.text, "finish_reason": "stop"}]}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
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
