"""Each framework's example agent against a real model: SmolLM2-135M-Instruct behind
llama-cpp-python's OpenAI-compatible server (CI's ``llm`` stage), through ``cir run``.

The model calls the example's one tool every turn (asked for by name); it solves no corridor, but
the whole path is real: the framework's own client, loop and tool node, the reply proxy, the
llama.cpp server. Kept small (2 tasks, clean and stale2 at delay 0, refresh) so that the three
frameworks take a few minutes; benchmarks/frameworks.py measures the full grid on 8 tasks.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from support.framework_checks import ENV, ROOT, SPECS, require_framework
from support.keydoor import generate_tasks
from support.llm_server import missing_packages

pytestmark = pytest.mark.llm

_MISSING = missing_packages()
if _MISSING:
    pytest.skip(f"needs {' and '.join(_MISSING)}: pip install -e '.[llm-test]'", allow_module_level=True)

from support.llm_server import LlamaServer  # noqa: E402

GRID = ["--conditions", "clean,stale2", "--delays", "0", "--operations", "refresh", "--max-turns", "14",
        "--max-actions", "14"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with LlamaServer(log_path=tmp_path_factory.mktemp("server") / "llama.log") as srv:
        yield srv


@pytest.mark.parametrize("kind", list(SPECS))
def test_the_example_agent_through_cir_run_with_the_real_model(kind, server, tmp_path):
    import subprocess
    import sys

    require_framework(kind)
    generate_tasks(tmp_path / "tasks", "test", 2, 0)

    def run(out, *extra):
        cmd = [sys.executable, "-m", "cir", "run", "--family", ENV, "--tasks", str(tmp_path / "tasks" / "test"),
               "--out", str(out), "--agent", SPECS[kind], "--base-url", server.base_url, "--quiet", *GRID, *extra]
        # a bound: a framework that retries a server gone wrong must not hold CI until it is stopped
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{done.stderr[-2000:]}\n{server.ended()}"
        return (out / "paired.csv").read_bytes(), json.loads((out / "run.json").read_text())

    table, record = run(tmp_path / "run")
    rows = pd.read_csv(tmp_path / "run" / "paired.csv")
    assert len(rows) == 4 and rows["prefix_match"].all()  # 2 tasks x clean, stale2 (both feasible)
    llm = record["timings"]["sessions"][0]["llm"]
    print(f"\n{kind}: {llm}")
    assert llm["http_requests"] > 0 and llm["prompt_tokens"] > 0
    # the same run on the kept replies: not one request, the same table
    again, record = run(tmp_path / "again", "--cache-dir", str(tmp_path / "run" / "agent_cache"), "--jobs", "2")
    assert again == table and record["timings"]["sessions"][0]["llm"]["http_requests"] == 0
