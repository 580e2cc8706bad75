"""An Inspect AI agent (examples/inspect_agent.py, react with one tool) in a paired study
and with the router as its model step (tests/support/framework_checks.py says what is checked)."""

from __future__ import annotations

import pytest
from support.framework_checks import require_framework  # noqa: E402

require_framework("inspect")

from support.fake_openai import FakeOpenAI  # noqa: E402
from support.framework_checks import (  # noqa: E402
    ROOT,
    live_for,
    live_router_matches_the_walk,
    pairs_as_keydoor,
    same_table_at_any_parallelism,
    table_of,
)
from support.keydoor import KeyDoorEnv, generate_tasks, load_tasks  # noqa: E402
from support.toy_framework import keydoor_answer  # noqa: E402

from cir.adapters.frameworks import framework_agent as agent_from_spec  # noqa: E402

AGENT = "inspect:examples.inspect_agent:agent"


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI(answer=keydoor_answer) as fake:
        yield fake


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kd")
    generate_tasks(folder, "test", 8, 0)
    return folder / "test"


def test_the_inspect_agent_pairs_as_the_key_and_door_agent(server, tasks, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    agent = agent_from_spec(AGENT, base_url=server.base_url)
    assert agent.name == AGENT and agent.params()["framework"] == "inspect"
    try:
        pairs_as_keydoor(agent, tasks)
    finally:
        agent.close()


@pytest.mark.slow
def test_cir_run_of_the_example_is_the_same_table_at_any_jobs_and_concurrency(server, tasks, tmp_path):
    table = same_table_at_any_parallelism(AGENT, tasks, server.base_url, tmp_path)
    assert table["task_id"].nunique() == 8


@pytest.mark.slow
def test_the_router_as_the_agents_model_step_decides_as_the_offline_walk(server, tasks, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    agent = agent_from_spec(AGENT, base_url=server.base_url)
    try:
        checked = live_router_matches_the_walk(table_of(agent, tasks), tasks, live_for("inspect"))
    finally:
        agent.close()
    assert checked["arms"] == 24 and checked["forced_recoveries"] > 0


def test_messages_the_agents_own_logic_adds_in_a_turn_are_refused(monkeypatch, tmp_path):
    """react with its submit tool urges a model that stops calling tools to go on: a user message the
    agent's loop adds, which the paired design has no place for."""
    from inspect_ai.agent import react
    from inspect_ai.model import get_model
    from support.fake_openai import Reply

    from cir.adapters.driver import FrameworkAgent
    from cir.adapters.inspect_ai import InspectFramework
    from cir.adapters.protocol import ForkRefused
    from cir.pairs.replay import run_task_pairs

    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("OPENAI_API_KEY", "not-needed")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # the example builds its model on import
    from examples.inspect_agent import act

    generate_tasks(tmp_path, "test", 1, 0)
    task = load_tasks(tmp_path / "test")[0]
    with FakeOpenAI(script=[Reply(text="I think I am done.")]) as fake:
        model = get_model("openai-api/cir/fake", base_url=fake.base_url, api_key="x")
        framework = InspectFramework(react(prompt="walk", tools=[act()], model=model))
        agent = FrameworkAgent("inspect:test", framework, framework.params(), close=framework.close)
        try:
            with pytest.raises(ForkRefused, match="one turn added assistant, user"):
                run_task_pairs(task, agent, KeyDoorEnv(task))
        finally:
            agent.close()


@pytest.mark.slow
def test_tool_calls_cut_off_mid_json_fork_as_react_runs_them(monkeypatch, tasks):
    """A model's tool call whose arguments are not JSON: Inspect keeps it as a call with
    ``parse_error`` and ``arguments={}`` and answers with its error (the model is shown ``Error:
    ...``). It was read back as a well-formed call without an env action and refused as a tool that
    answered without the env (the real-model run of the example stopped there); now it is a step
    without an env action, in the replayer and in react's own loop alike."""
    from support.framework_checks import live_for, malformed_calls_fork_as_the_framework_runs_them
    from support.toy_framework import sloppy_keydoor_answer

    from cir.adapters.driver import FrameworkAgent, serve_from
    from cir.adapters.inspect_ai import InspectFramework

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # restored after the test
    with FakeOpenAI(answer=sloppy_keydoor_answer()) as fake:
        serve_from(fake.base_url)  # a model built now asks this server
        from examples.inspect_agent import build, make_model

        framework = InspectFramework(build(make_model()))
        agent = FrameworkAgent("inspect:sloppy", framework, framework.params(), close=framework.close)
        assert malformed_calls_fork_as_the_framework_runs_them(agent, live_for("inspect"), tasks) > 0
        # a budget the malformed turns use up: react answers them itself and goes on, so the live run
        # ended only by env actions ran past the replayer's (the real model's live check found it)
        assert malformed_calls_fork_as_the_framework_runs_them(agent, live_for("inspect"), tasks, max_turns=8) > 0
