"""A LangGraph agent (examples/langgraph_agent.py, create_agent with one tool) in a paired study and
with the router as its middleware (tests/support/framework_checks.py says what is checked)."""

from __future__ import annotations

from typing import Annotated, TypedDict

import pytest
from support.framework_checks import require_framework  # noqa: E402

require_framework("langgraph")

from langgraph.graph.message import add_messages  # noqa: E402
from support.fake_openai import FakeOpenAI  # noqa: E402
from support.framework_checks import (  # noqa: E402
    ROOT,
    live_for,
    live_router_matches_the_walk,
    pairs_as_keydoor,
    same_table_at_any_parallelism,
    table_of,
)
from support.keydoor import KeyDoorEnv, generate_tasks  # noqa: E402
from support.toy_framework import keydoor_answer  # noqa: E402

from cir.adapters.frameworks import framework_agent as agent_from_spec  # noqa: E402
from cir.adapters.protocol import ForkRefused  # noqa: E402

AGENT = "langgraph:examples.langgraph_agent:agent"


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI(answer=keydoor_answer) as fake:
        yield fake


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kd")
    generate_tasks(folder, "test", 8, 0)
    return folder / "test"


def test_the_langgraph_agent_pairs_as_the_key_and_door_agent(server, tasks, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    agent = agent_from_spec(AGENT, base_url=server.base_url)
    assert agent.name == AGENT and agent.params()["framework"] == "langgraph"
    pairs_as_keydoor(agent, tasks)


@pytest.mark.slow
def test_cir_run_of_the_example_is_the_same_table_at_any_jobs_and_concurrency(server, tasks, tmp_path):
    table = same_table_at_any_parallelism(AGENT, tasks, server.base_url, tmp_path)
    assert table["task_id"].nunique() == 8


@pytest.mark.slow
def test_the_router_in_the_graphs_own_loop_decides_as_the_offline_walk(server, tasks, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    agent = agent_from_spec(AGENT, base_url=server.base_url)
    try:
        checked = live_router_matches_the_walk(table_of(agent, tasks), tasks, live_for("langgraph"))
    finally:
        agent.close()
    assert checked["arms"] == 24 and checked["forced_recoveries"] > 0


class NotesState(TypedDict):
    messages: Annotated[list, add_messages]
    notes: list


def test_graph_state_beyond_messages_is_refused():
    from langgraph.graph import StateGraph

    from cir.adapters.langgraph import LangGraphFramework

    graph = StateGraph(NotesState)
    graph.add_node("model", lambda s: {})
    graph.add_node("tools", lambda s: {})
    graph.set_entry_point("model")
    graph.add_edge("model", "tools")
    with pytest.raises(ForkRefused, match="cannot fork this graph's state exactly: it holds notes"):
        LangGraphFramework(graph.compile())


@pytest.mark.slow
def test_a_live_rewind_in_the_graph_ends_as_the_replayers_rewind_branch(server, tasks, monkeypatch):
    """RouterMiddleware's rewind: the graph's messages cut back to the checkpoint before the
    modified tool result, the env restored; the live episode's transcript keeps the abandoned steps."""
    from support.framework_checks import Always, live_for
    from support.keydoor import FAMILY, KeyDoorEnv, load_tasks

    from cir.pairs.replay import ReplaySettings, run_task_pairs

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    agent = agent_from_spec(AGENT, base_url=server.base_url)
    live = live_for("langgraph")
    settings = ReplaySettings(conditions=("stale2", "missing"), delays=(2,), operations=("rewind",),
                              max_turns=30, max_actions=30)
    checked = 0
    for task in load_tasks(tasks)[:4]:
        for row in run_task_pairs(task, agent, KeyDoorEnv(task), settings, extractor=FAMILY.extractor).rows:
            episode, info = live(Always("rewind"), task, row["condition"])
            assert int(episode.won) == row["y1"], (task.task_id, row["condition"])
            if row["executed"]:
                rewound = next(s for s in episode.steps if s.reply == "rewind")
                assert rewound.rewind_to is not None and episode.env_actions > len(episode.visible_steps()) - 2
                checked += 1
    assert checked > 0


def test_parallel_tool_calls_of_the_graph_are_refused(monkeypatch, tmp_path):
    """Two tool calls in one model reply (LangGraph fans them out to its tools node at once): refused."""
    from support.fake_openai import Reply, tool_call
    from support.keydoor import load_tasks

    from cir.pairs.replay import run_task_pairs
    from cir.util.errors import CirError

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # restored after the test
    generate_tasks(tmp_path, "test", 1, 0)
    task = load_tasks(tmp_path / "test")[0]
    two = [tool_call("act", {"command": "right"}, 1), tool_call("act", {"command": "look"}, 2)]
    with FakeOpenAI(script=[Reply(text=None, tool_calls=two)]) as fake:
        from cir.adapters.driver import FrameworkAgent, serve_from
        from cir.adapters.langgraph import LangGraphFramework

        serve_from(fake.base_url)  # a model built now asks this server (the module's own model another)
        from examples.langgraph_agent import build

        agent = FrameworkAgent("langgraph:parallel", LangGraphFramework(build()), {})
        with pytest.raises(CirError, match="2 tool calls in one message: parallel tool calls cannot be forked"):
            run_task_pairs(task, agent, KeyDoorEnv(task))



def test_a_tool_call_cut_off_mid_json_ends_the_run_in_the_replayer_as_in_the_graph(monkeypatch, tasks):
    """A model's tool call whose arguments are not JSON (SmolLM2's, cut at max_tokens): LangChain
    keeps it among the message's invalid tool calls, so the graph has no tool call to run and ends
    (create_agent's loop); the replayer records the same end (a final answer after the same steps)."""
    from support.framework_checks import steps_of
    from support.keydoor import FAMILY, load_tasks
    from support.toy_framework import sloppy_keydoor_answer

    from cir.adapters.driver import FrameworkAgent, serve_from
    from cir.adapters.langgraph import LangGraphFramework, episode
    from cir.pairs.replay import ReplaySettings, run_task_pairs

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ importable whatever ran before
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # restored after the test
    task = load_tasks(tasks)[0]
    with FakeOpenAI(answer=sloppy_keydoor_answer((3,))) as fake:
        serve_from(fake.base_url)  # a model built now asks this server
        from examples.langgraph_agent import build

        agent = FrameworkAgent("langgraph:sloppy", LangGraphFramework(build()), {})
        result = run_task_pairs(task, agent, KeyDoorEnv(task), ReplaySettings(
            conditions=("clean",), delays=(0,), operations=("refresh",), max_turns=30, max_actions=30),
            extractor=FAMILY.extractor)
        factual = next(e for e in result.episodes if e.role == "factual").transcript
        assert factual.env_actions == 3 and factual.steps[-1].events == ["final_answer"]
        live, _, _ = episode(build(), KeyDoorEnv(task), task.task_id, "clean", max_turns=30, max_actions=30)
        assert steps_of(live) == steps_of(factual)
