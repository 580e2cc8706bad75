"""Function calling in cir's own LLM agent (issue 40, item 3): on a tool world ``openai:MODEL`` sends
the world's tool schemas as ``tools=`` and reads the model's tool call as its action; its earlier calls
go back as the assistant's tool calls, each answered by its tool message. Replies are cached by
request as in every mode. On a text world nothing changes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support.fake_openai import FakeOpenAI, Reply, tool_call
from support.shop import FAMILY, ShopAgent
from support.toy_framework import shop_answer

from cir import make_agent
from cir.pairs.replay import ReplaySettings, run_task_pairs
from cir.util.errors import CirError

ROOT = Path(__file__).resolve().parents[2]
ENV = "tests.support.shop:FAMILY"
GRID = ["--conditions", "clean,stale1,lag1,missing", "--delays", "0,1", "--operations", "refresh,replan",
        "--max-turns", "30", "--max-actions", "30"]
CONTEXT = [
    {"role": "user", "content": "Cancel order W0001. Then finish."},
    {"role": "assistant", "content": 'get_order(order_id="W0001")'},
    {"role": "user", "content": '{"order_id": "W0001", "status": "pending"}'},
    {"role": "assistant", "content": "think: it is pending"},
    {"role": "user", "content": "OK."},
    {"role": "user", "content": "[refresh] {}"},
]


def _agent(base_url: str = "http://127.0.0.1:9/v1", family: str = ENV):
    return make_agent("openai:m", family=family, base_url=base_url)


def test_on_a_tool_world_the_request_sends_the_tools_and_the_calls_as_tool_calls():
    agent = _agent()
    endpoint, body = agent.request(CONTEXT)
    assert endpoint == "tools" and agent.mode == "tools" and agent.params()["mode"] == "tools"
    assert body["tools"] == [dict(t) for t in FAMILY.prompt.tools] and "stop" not in body
    names = [t["function"]["name"] for t in body["tools"]]
    assert names == ["list_orders", "get_order", "cancel_order", "finish"]
    messages = body["messages"]
    assert messages[0]["role"] == "system" and "Call one tool per reply." in messages[0]["content"]
    assert messages[1] == CONTEXT[0]
    assert messages[2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "W0001"}'}}]}
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": CONTEXT[2]["content"]}
    assert messages[4] == {"role": "assistant", "content": "think: it is pending"}
    assert messages[5] == {"role": "user", "content": "OK.\n[refresh] {}"}  # a thought's note and the harness's
    assert agent.request(CONTEXT) == (endpoint, body)  # the same context, the same request (its cache key)


def test_the_models_tool_call_is_the_action_and_a_text_call_is_read_too(tmp_path):
    answers = [Reply(text=None, tool_calls=[tool_call("cancel_order", {"order_id": "W0001"}, 1)]),
               Reply(text='get_order(order_id="W0002")'),
               Reply(text=None, tool_calls=[tool_call("get_order", {"order_id": "W0003"}, 2),
                                            tool_call("get_order", {"order_id": "W0004"}, 3)]),
               Reply(text=None, tool_calls=[{"id": "c", "type": "function",
                                             "function": {"name": "get_order", "arguments": '{"order_id": "W'}}])]
    with FakeOpenAI(script=answers) as fake:
        agent = make_agent("openai:m", family=ENV, base_url=fake.base_url, cache_dir=tmp_path / "cache")
        contexts = [CONTEXT[:1], CONTEXT[:3], CONTEXT[:5], CONTEXT]
        actions = [agent.act(c) for c in contexts]
        assert actions[0] == 'cancel_order(order_id="W0001", reason="customer request")'  # defaults filled in
        assert actions[1] == 'get_order(order_id="W0002")'
        assert actions[2] == 'get_order(order_id="W0003")'  # one call per reply: the first
        assert len(agent.unparsable) == 1  # a call cut mid-JSON: sent as it is, the world answers it an error
        assert fake.count == 4
        again = make_agent("openai:m", family=ENV, base_url=fake.base_url, cache_dir=tmp_path / "cache")
        assert [again.act(c) for c in contexts] == actions and fake.count == 4  # replies cached by request


def test_on_a_text_world_openai_model_is_the_chat_agent_as_before():
    agent = _agent(family="tests.support.keydoor:FAMILY")
    endpoint, body = agent.request([{"role": "user", "content": "You are in cell 0 of 5."}])
    assert endpoint == "chat" and "tools" not in body and body["stop"] == ["\n"]
    assert agent.params()["mode"] == "chat"


def test_tools_is_not_an_llm_option():
    with pytest.raises(CirError, match="'tools': set by the family's tools"):
        make_agent("openai:m", family=ENV, base_url="http://127.0.0.1:9/v1",
                   llm=__import__("cir.agents.factory", fromlist=["LLMConfig"]).LLMConfig(options={"tools": []}))


def test_function_calling_pairs_as_the_worlds_agent_and_counts_the_servers_requests(tmp_path):
    """cir's own LLM agent by function calling, against a fake server that is the shop's model-free
    agent calling its tools: its paired table is that agent's, row for row; the requests the run
    counts are the server's; a run on its kept replies sends none."""
    FAMILY.generate(tmp_path / "tasks", "test", 4, 0, progress=False)
    tasks = tmp_path / "tasks" / "test"
    with FakeOpenAI(answer=shop_answer, keep_requests=False) as fake:
        done = subprocess.run([sys.executable, "-m", "cir", "run", "--family", ENV, "--tasks", str(tasks), "--out",
                               str(tmp_path / "run"), "--agent", "openai:shop-model", "--base-url", fake.base_url,
                               "--jobs", "2", *GRID], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        asked = fake.count
        llm = json.loads((tmp_path / "run" / "run.json").read_text())["timings"]["sessions"][0]["llm"]
        assert llm["http_requests"] == asked > 0 and f"LLM HTTP requests {asked} " in done.stdout
        again = subprocess.run([sys.executable, "-m", "cir", "run", "--family", ENV, "--tasks", str(tasks), "--out",
                                str(tmp_path / "again"), "--agent", "openai:shop-model", "--base-url", fake.base_url,
                                "--cache-dir", str(tmp_path / "run" / "agent_cache"), "--quiet", *GRID],
                               cwd=ROOT, capture_output=True, text=True)
        assert again.returncode == 0 and fake.count == asked, again.stderr[-2000:]
    theirs = pd.read_csv(tmp_path / "run" / "paired.csv")
    settings = ReplaySettings(conditions=("clean", "stale1", "lag1", "missing"), delays=(0, 1),
                              operations=("refresh", "replan"), max_turns=30, max_actions=30)
    ours = pd.DataFrame([r for t in FAMILY.load_tasks(tasks) for r in run_task_pairs(
        t, ShopAgent(), FAMILY.make_env(t), settings, extractor=FAMILY.extractor, anomalous=FAMILY.anomalous).rows])
    pd.testing.assert_frame_equal(theirs.drop(columns="agent"), ours.drop(columns="agent")[list(theirs.columns.drop("agent"))],
                                  check_dtype=False)
    assert (tmp_path / "again" / "paired.csv").read_bytes() == (tmp_path / "run" / "paired.csv").read_bytes()
