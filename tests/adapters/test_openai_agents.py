"""An OpenAI Agents SDK agent (examples/openai_agents_agent.py, one function tool) in a paired study
and with the router as its model-input filter (tests/support/framework_checks.py says what is checked)."""

from __future__ import annotations

import pytest
from support.framework_checks import require_framework  # noqa: E402

require_framework("openai-agents")

from support.fake_openai import FakeOpenAI  # noqa: E402
from support.framework_checks import (  # noqa: E402
    ROOT,
    live_for,
    live_router_matches_the_walk,
    pairs_as_keydoor,
    same_table_at_any_parallelism,
    table_of,
)
from support.keydoor import generate_tasks  # noqa: E402
from support.toy_framework import keydoor_answer  # noqa: E402

from cir.adapters.frameworks import framework_agent as agent_from_spec  # noqa: E402
from cir.adapters.protocol import ForkRefused  # noqa: E402

AGENT = "openai-agents:examples.openai_agents_agent:agent"


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI(answer=keydoor_answer) as fake:
        yield fake


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kd")
    generate_tasks(folder, "test", 8, 0)
    return folder / "test"


def test_the_sdk_agent_pairs_as_the_key_and_door_agent(server, tasks, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    agent = agent_from_spec(AGENT, base_url=server.base_url)
    assert agent.name == AGENT and agent.params()["framework"] == "openai-agents"
    pairs_as_keydoor(agent, tasks)


@pytest.mark.slow
def test_cir_run_of_the_example_is_the_same_table_at_any_jobs_and_concurrency(server, tasks, tmp_path):
    table = same_table_at_any_parallelism(AGENT, tasks, server.base_url, tmp_path)
    assert table["task_id"].nunique() == 8


@pytest.mark.slow
def test_the_router_as_the_sdks_input_filter_decides_as_the_offline_walk(server, tasks, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    agent = agent_from_spec(AGENT, base_url=server.base_url)
    try:
        checked = live_router_matches_the_walk(table_of(agent, tasks), tasks, live_for("openai-agents"))
    finally:
        agent.close()
    assert checked["arms"] == 24 and checked["forced_recoveries"] > 0


def test_handoffs_are_refused():
    from agents import Agent

    from cir.adapters.openai_agents import AgentsSDKFramework

    with pytest.raises(ForkRefused, match="cannot fork handoffs exactly"):
        AgentsSDKFramework(Agent(name="a", handoffs=[Agent(name="b")]))


@pytest.mark.slow
def test_tool_calls_cut_off_mid_json_fork_as_the_sdk_runs_them(monkeypatch, tasks):
    """A model's tool call whose arguments are not JSON, which the SDK answers with its own error: a
    step without an env action in the replayer, and in the SDK's own loop the same (its live
    transcript refused the message list before: 'the arguments of tool call ... are not JSON')."""
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI
    from support.framework_checks import malformed_calls_fork_as_the_framework_runs_them
    from support.keydoor import KeyDoorEnv
    from support.toy_framework import sloppy_keydoor_answer

    from cir.adapters.driver import FrameworkAgent, serve_from
    from cir.adapters.openai_agents import AgentsSDKFramework, episode

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # restored after the test
    with FakeOpenAI(answer=sloppy_keydoor_answer()) as fake:
        serve_from(fake.base_url)  # a client built now asks this server
        from examples.openai_agents_agent import agent as example

        sdk = example.clone(model=OpenAIChatCompletionsModel(model="SmolLM2-135M-Instruct",
                                                             openai_client=AsyncOpenAI()))
        agent = FrameworkAgent("openai-agents:sloppy", AgentsSDKFramework(sdk), {})

        def live(router, task, condition, max_turns=30):
            _, run, info = episode(sdk, KeyDoorEnv(task), task.task_id, condition, router=router,
                                   max_turns=max_turns, max_actions=30)
            return run, info

        assert malformed_calls_fork_as_the_framework_runs_them(agent, live, tasks) > 0
        # a budget the malformed turns use up: they are turns, live as in the replayer
        assert malformed_calls_fork_as_the_framework_runs_them(agent, live, tasks, max_turns=8) > 0
