"""A model server that is gone (died, never started) stops a framework agent's run with one line
naming it, at once: the reply proxy answers what no framework retries (Inspect retries a 5xx
without limit, so a CI run whose llama.cpp server had died waited until it was stopped)."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from support.framework_checks import ENV, ROOT, SPECS
from support.keydoor import generate_tasks
from support.llm_server import free_port

from cir.adapters import replies
from cir.adapters.frameworks import FRAMEWORKS, missing_framework


def test_the_proxy_answers_400_naming_the_server_once_it_cannot_reach_it(monkeypatch):
    monkeypatch.setattr(replies, "UPSTREAM_WAITS", (0.0, 0.0))
    gone = f"http://127.0.0.1:{free_port()}/v1"
    proxy = replies.ReplyProxy(gone)
    try:
        answer = httpx.post(proxy.base_url + "/chat/completions", json={"messages": [], "model": "m"}, timeout=30)
    finally:
        proxy.server.shutdown()
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert f"the model server {gone} cannot be reached" in message and "ConnectError" in message
    assert "tried 3" in message and proxy.take()["http_requests"] == 0  # no answer was counted


@pytest.mark.parametrize("kind", list(SPECS))
def test_cir_run_of_a_framework_agent_whose_server_is_gone_ends_in_one_line(kind, tmp_path):
    if missing_framework(kind):
        pytest.skip(f"needs {', '.join(missing_framework(kind))}: pip install -e '.[{FRAMEWORKS[kind][1]}]'")
    generate_tasks(tmp_path / "tasks", "test", 2, 0)
    gone = f"http://127.0.0.1:{free_port()}/v1"
    cmd = [sys.executable, "-m", "cir", "run", "--family", ENV, "--tasks", str(tmp_path / "tasks" / "test"),
           "--out", str(tmp_path / "run"), "--agent", SPECS[kind], "--base-url", gone, "--quiet",
           "--conditions", "clean", "--delays", "0", "--operations", "refresh", "--jobs", "2"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cir: error: task "), done.stderr[-3000:]
    assert f"the model server {gone} cannot be reached" in lines[0]
    assert json.loads((tmp_path / "run" / "run.json").read_text())  # the run folder is left readable
