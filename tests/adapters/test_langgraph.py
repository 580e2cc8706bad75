"""A LangGraph agent (examples/langgraph_agent.py, create_agent with one tool) in a paired study and
with the router as its middleware, against a deterministic fake chat server that is the key-and-door
agent: its table must be that agent's table in cir's own harness, row for row."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated, TypedDict

import pandas as pd
import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_openai")

from langgraph.graph.message import add_messages  # noqa: E402
from support.fake_openai import FakeOpenAI  # noqa: E402
from support.keydoor import FAMILY, KeyDoorAgent, KeyDoorEnv, generate_tasks, load_tasks  # noqa: E402
from support.toy_framework import keydoor_answer  # noqa: E402

from cir.adapters.protocol import ForkRefused  # noqa: E402
from cir.agents.factory import make_agent  # noqa: E402
from cir.pairs.replay import ReplaySettings, run_task_pairs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ENV = "tests.support.keydoor:FAMILY"
AGENT = "langgraph:examples.langgraph_agent:agent"
GRID = ReplaySettings(conditions=("clean", "stale2", "missing"), delays=(0, 2), operations=("refresh", "replan"),
                      max_turns=30, max_actions=30)
CLI_GRID = ["--conditions", "clean,stale2,missing", "--delays", "0,2", "--operations", "refresh,replan",
            "--max-turns", "30", "--max-actions", "30"]


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
    agent = make_agent(AGENT, base_url=server.base_url)
    assert agent.name == AGENT and agent.settings()["framework"] == "langgraph"
    for task in load_tasks(tasks)[:2]:
        ours = run_task_pairs(task, KeyDoorAgent(), KeyDoorEnv(task), GRID, extractor=FAMILY.extractor)
        theirs = run_task_pairs(task, agent, KeyDoorEnv(task), GRID, extractor=FAMILY.extractor)
        pd.testing.assert_frame_equal(pd.DataFrame(theirs.rows).drop(columns="agent"),
                                      pd.DataFrame(ours.rows).drop(columns="agent"))


def _run(out: Path, tasks: Path, server, *extra: str) -> bytes:
    cmd = [sys.executable, "-m", "cir", "run", "--env", ENV, "--tasks", str(tasks), "--out", str(out),
           "--agent", AGENT, "--base-url", server.base_url, "--quiet", *CLI_GRID, *extra]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return (out / "paired.csv").read_bytes()


@pytest.mark.slow
def test_cir_run_of_the_example_is_the_same_table_at_any_jobs_and_concurrency(server, tasks, tmp_path):
    one = _run(tmp_path / "j1", tasks, server, "--jobs", "1")
    assert _run(tmp_path / "j2", tasks, server, "--jobs", "2") == one
    assert _run(tmp_path / "c16", tasks, server, "--jobs", "1", "--concurrency", "16") == one
    table = pd.read_csv(tmp_path / "j1" / "paired.csv")
    assert table["task_id"].nunique() == 8 and table["prefix_match"].all()
    assert set(table["condition"]) == {"clean", "stale2", "missing"}
    shown = subprocess.run([sys.executable, "-m", "cir", "table", str(tmp_path / "j1"), "--by", "condition,operation"],
                           cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0 and "stale2" in shown.stdout, shown.stderr
    # a resume runs nothing and changes nothing
    assert _run(tmp_path / "j1", tasks, server, "--jobs", "1") == one


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
def test_the_router_in_the_graphs_own_loop_decides_as_the_offline_walk(server, tasks, monkeypatch):
    from cir.adapters.langgraph import RouterMiddleware, episode
    from cir.router.evaluation import walk_policies
    from cir.router.policy import CIRPolicy

    monkeypatch.chdir(ROOT)
    agent = make_agent(AGENT, base_url=server.base_url)
    from examples.langgraph_agent import act, build

    kd = load_tasks(tasks)
    table = pd.DataFrame([r for t in kd for r in run_task_pairs(t, agent, KeyDoorEnv(t), GRID,
                                                                 extractor=FAMILY.extractor).rows])
    router = CIRPolicy(estimator="paired", operations=("refresh", "replan"), delays=(2,), folds=4,
                       extractor=FAMILY.extractor).fit(table).to_router(max_turns=30, max_actions=30)
    walked = walk_policies(router, table).set_index(["task_id", "condition"])
    graph = build((RouterMiddleware(router, [act]),))
    recovered = 0
    for task in kd:
        for condition in GRID.conditions:
            _, live, info = episode(graph, KeyDoorEnv(task), task.task_id, condition, max_turns=30, max_actions=30)
            arm = walked.loc[(task.task_id, condition)]
            chose = [(d["delay"], d["operation"]) for d in info["router_decisions"] if d["recover"]]
            assert chose == ([] if arm["delay_cir"] < 0 else [(arm["delay_cir"], arm["op_cir"])]), (task, condition)
            assert int(live.won) == arm["y_cir"], (task, condition)
            recovered += bool(chose)
    # a router that always recovers at delay 2, with each operation: the live recovery, written into
    # the graph's state by the middleware, gives the outcome of the replayer's branch (y1)
    rows = table.set_index(["task_id", "condition", "delay", "operation"])
    for op in GRID.operations:
        graph = build((RouterMiddleware(Always(op), [act]),))
        for task in kd:
            for condition in GRID.conditions:
                _, live, info = episode(graph, KeyDoorEnv(task), task.task_id, condition, max_turns=30,
                                        max_actions=30)
                row = rows.loc[(task.task_id, condition, 2, op)]
                assert [d["operation"] for d in info["router_decisions"]] == ([op] if row["executed"] else [])
                assert int(live.won) == row["y1"], (task, condition, op)
                recovered += bool(row["executed"])
    assert recovered > 0


class Always:
    """An advisor that recovers with ``operation`` at delay 2, always."""

    delays = (2,)

    def __init__(self, operation: str) -> None:
        self.operation = operation

    def decide(self, transcript, delay):
        return type("D", (), {"recover": True, "operation": self.operation})()
