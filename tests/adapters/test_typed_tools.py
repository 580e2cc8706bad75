"""Typed tools in the three frameworks (issue 40, items 1 and 2): an agent with several typed tools
(``list_orders``, ``get_order``, ``cancel_order`` and ``finish`` over the tests' shop database,
``tests/support/shop.py``), each tool wrapped once (``typed_tools``), forks as it is written: each call
one env action, written as the study's canonical call; its paired table is the shop's model-free
agent's in cir's own harness, row for row, features included, against a fake chat server that is
that agent calling the tools. Outside a ``cir`` run the same file runs the tools on a real SQLite
file, the router live in the framework's loop."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
import subprocess
import sys

import pandas as pd
import pytest
from support.framework_checks import ROOT
from support.shop import FAMILY, WORLD, ShopAgent, get_order
from support.toy_framework import shop_answer

from cir.adapters.frameworks import FRAMEWORKS, missing_framework
from cir.pairs.replay import ReplaySettings, run_task_pairs
from cir.tools import parse_call, render_call

#: each framework's typed-tool example
TYPED = {"langgraph": "langgraph:examples.langgraph_tools:agent",
         "openai-agents": "openai-agents:examples.openai_agents_tools:agent",
         "inspect": "inspect:examples.inspect_tools:agent"}
ENV = "tests.support.shop:FAMILY"
GRID = ReplaySettings(conditions=("clean", "stale1", "lag1", "missing"), delays=(0, 1),
                      operations=("refresh", "replan"), max_turns=30, max_actions=30)
CLI_GRID = ["--conditions", "clean,stale1,lag1,missing", "--delays", "0,1", "--operations", "refresh",
            "--max-turns", "30", "--max-actions", "30"]
REQUEST = "Cancel orders {0}, {1} and {2}: all three must be cancelled before they ship. Then finish."


def _need(kind: str) -> None:
    if missing_framework(kind):
        pytest.skip(f"needs {', '.join(missing_framework(kind))}: pip install -e '.[{FRAMEWORKS[kind][1]}]'")


@pytest.fixture(scope="module")
def server():
    from support.fake_openai import FakeOpenAI

    with FakeOpenAI(answer=shop_answer, keep_requests=False) as fake:
        yield fake


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shop")
    FAMILY.generate(folder, "test", 8, 0, progress=False)
    FAMILY.generate(folder, "train", 16, 0, progress=False)
    return folder


def _agent(kind: str, base_url: str, monkeypatch):
    from cir.adapters.frameworks import framework_agent

    _need(kind)
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    return framework_agent(TYPED[kind], base_url=base_url)


@pytest.mark.parametrize("kind", list(TYPED))
def test_a_typed_tool_agent_forks_as_it_is_written(kind, server, tasks, monkeypatch):
    """Its rows are the shop agent's (outcomes and features), and its episodes are the same calls and
    results, each call one env action written as the canonical call of a typed tool."""
    agent = _agent(kind, server.base_url, monkeypatch)
    try:
        for task in FAMILY.load_tasks(tasks / "test")[:3]:
            ours = run_task_pairs(task, ShopAgent(), FAMILY.make_env(task), GRID, extractor=FAMILY.extractor)
            theirs = run_task_pairs(task, agent, FAMILY.make_env(task), GRID, extractor=FAMILY.extractor)
            pd.testing.assert_frame_equal(pd.DataFrame(theirs.rows).drop(columns="agent"),
                                          pd.DataFrame(ours.rows).drop(columns="agent"))
            assert any(c.startswith("f_") for c in theirs.rows[0])
            for mine, built in zip(theirs.episodes, ours.episodes, strict=True):
                steps = [(s.actor, s.action, s.shown) for s in mine.transcript.steps] if mine.transcript else None
                assert steps == ([(s.actor, s.action, s.shown) for s in built.transcript.steps]
                                 if built.transcript else None)
                for step in (mine.transcript.steps if mine.transcript else ()):
                    if step.action is not None:  # one env action: the canonical text of one typed call
                        assert render_call(parse_call(step.action, WORLD.tools), WORLD.tools) == step.action
    finally:
        agent.close()


def test_its_tools_are_the_worlds_schemas_wrapped_once(monkeypatch):
    """One wrapper call gives the framework's tools: each kit tool once, its schema the kit's (the
    handle never shown), finish among them."""
    _need("langgraph")
    from cir.adapters.langgraph import typed_tools

    tools = typed_tools(WORLD)
    assert [t.name for t in tools] == list(WORLD.tools)
    assert tools[1].args == WORLD.tools["get_order"].parameters["properties"]
    assert "db" not in json.dumps([t.args for t in tools]) and tools.typed.tools == WORLD.tools


def _shop_db(tasks, tmp_path, task_id="shop-test-000"):
    db = tmp_path / "shop.db"
    shutil.copy(tasks / "test" / task_id / "state.sqlite", db)
    return db


def _orders(db) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT id, status FROM orders ORDER BY id").fetchall())
    finally:
        conn.close()


def test_outside_cir_the_tools_run_on_a_sqlite_file_as_the_world_runs_them(server, tasks, tmp_path):
    """Production: the graph's tools run the user's functions on a real SQLite file (committed), and
    what the agent is shown, call for call, is what the study's world shows the same agent on the same
    database (a world without events: nothing else writes to the file)."""
    _need("langgraph")
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, convert_to_openai_messages
    from langchain_openai import ChatOpenAI

    from cir import Transcript
    from cir.adapters.langgraph import typed_tools
    from cir.episode.harness import Harness

    task = FAMILY.load_tasks(tasks / "test")[0]
    db = _shop_db(tasks, tmp_path)
    tools = typed_tools(WORLD, state=str(db))
    graph = create_agent(ChatOpenAI(model="m", base_url=server.base_url, api_key="none", temperature=0),
                         tools=tools, system_prompt="You are a shop's support agent.")
    state = graph.invoke({"messages": [HumanMessage(task.instruction)]}, {"recursion_limit": 100})
    tools.typed.close()
    live = Transcript.from_messages(task.task_id, convert_to_openai_messages(state["messages"]),
                                    action_of=tools.typed.action_of)
    quiet = dataclasses.replace(task, events=())  # production: no other writer
    played = Harness(ShopAgent(), max_turns=30, max_actions=30).episode(WORLD.make_env(quiet), task.task_id)
    assert [(s.action, s.shown) for s in live.steps] == [(s.action, s.shown) for s in played.steps]
    assert played.won and live.steps[-1].action == 'finish(answer="")'
    wanted = task.data["orders"]
    after = _orders(db)
    assert all(after[o] == "cancelled" for o in wanted) and sum(s == "cancelled" for s in after.values()) == 3


def test_outside_cir_without_a_state_a_call_says_what_to_give():
    _need("langgraph")
    from cir.adapters.langgraph import typed_tools
    from cir.util.errors import CirError

    with pytest.raises(CirError, match=r"called outside a cir episode, and no state was given.*typed_tools\(\.\.\., state="):
        typed_tools(WORLD)[1].invoke({"order_id": "W3000"})


def test_a_bad_call_is_answered_in_production_as_the_world_answers_it(tasks, tmp_path):
    from cir.adapters.typed import TypedTools

    typed = TypedTools(WORLD, state=str(_shop_db(tasks, tmp_path)))
    env = FAMILY.make_env(FAMILY.load_tasks(tasks / "test")[0])
    env.reset()
    for name, arguments in (("get_order", {}), ("get_order", {"order_id": 3}), ("get_order", {"order_id": "W9"}),
                            ("nope", {"x": 1}), ("get_order", {"order_id": "W3000", "extra": True})):
        assert typed.production(name, arguments) == env.step(typed.action_of(name, arguments))[0], (name, arguments)
    typed.close()


class AlwaysAt0:
    """An advisor that recovers with a refresh at delay 0 after the suspect result."""

    delays = (0,)

    def decide(self, transcript, delay):
        return type("Decision", (), {"recover": True, "operation": "refresh"})()


def test_the_router_in_production_re_runs_the_suspect_read_on_the_real_database(server, tasks, tmp_path):
    """Outside cir the router's hook decides after the result the harness suspects (here: the first
    ``get_order``); a refresh calls that read again on the user's database and shows its answer as the
    study did, and the transcript reads it as the refresh step the router was fitted on."""
    _need("langgraph")
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, convert_to_openai_messages
    from langchain_openai import ChatOpenAI

    from cir import REFRESH_PREFIX, Transcript
    from cir.adapters.langgraph import RouterMiddleware, typed_tools

    task = FAMILY.load_tasks(tasks / "test")[0]
    db = _shop_db(tasks, tmp_path)
    first = task.data["orders"][0]
    read = get_order(sqlite3.connect(db, factory=_RowConnection), first)  # what the database says before the run
    tools = typed_tools(WORLD, state=str(db))
    routed = RouterMiddleware(AlwaysAt0(), tools, suspect_at=lambda action, shown: action.startswith("get_order("))
    graph = create_agent(ChatOpenAI(model="m", base_url=server.base_url, api_key="none", temperature=0),
                         tools=tools, system_prompt="You are a shop's support agent.", middleware=[routed])
    state = graph.invoke({"messages": [HumanMessage(task.instruction)]}, {"recursion_limit": 100})
    messages = convert_to_openai_messages(state["messages"])
    live = Transcript.from_messages(task.task_id, messages, action_of=tools.typed.action_of)
    refresh = next(s for s in live.steps if s.actor == "harness")
    assert refresh.reply == "refresh" and refresh.action == f'get_order(order_id="{first}")'
    assert refresh.shown == f"{REFRESH_PREFIX} {json.dumps(read)}" and read["status"] == "pending"
    assert live.steps.index(refresh) == 1  # right after the suspect read, at delay 0
    assert routed.routing.decisions == [(0, "refresh")]
    tools.typed.close()
    assert _orders(db)[first] == "cancelled"


class _RowConnection(sqlite3.Connection):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.row_factory = sqlite3.Row


@pytest.mark.parametrize("kind", list(TYPED))
def test_the_same_file_runs_in_production_with_the_router_live(kind, server, tasks, tmp_path):
    """``python -m examples.langgraph_tools`` (and the SDK's, and Inspect's as an eval of one sample)
    on a SQLite file, a fitted router in the framework's loop: the file studied by cir run is the one run here, unchanged; the orders are
    cancelled in the file and the router decided after the suspect read (a clean read: it does not
    refresh, as on the clean arms)."""
    _need(kind)
    router = tmp_path / "router.json"
    _fit_router(tasks, tmp_path, router)
    db = _shop_db(tasks, tmp_path)
    task = FAMILY.load_tasks(tasks / "test")[0]
    env = {"SHOP_DB": str(db), "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "none",
           "PATH": "/usr/bin:/bin"}
    module = TYPED[kind].split(":")[1]
    done = subprocess.run([sys.executable, "-m", module, "--router", str(router), "--suspect",
                           "get_order", REQUEST.format(*task.data["orders"])], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "router decisions (delay, operation): [(0, None), (1, None)]" in done.stdout, done.stdout[-2000:]
    assert all(_orders(db)[o] == "cancelled" for o in task.data["orders"])


def _cir(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "cir", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _fit_router(tasks, tmp_path, out) -> None:
    """A paired router over refresh at delays 0 and 1 (d_min 0), fitted on the shop agent's 16 training
    tasks (each example's table equals that agent's row for row): it refreshes a stale or missing
    read and not a clean one."""
    train = tmp_path / "train-run"
    if not train.exists():
        _cir("run", "--family", ENV, "--tasks", str(tasks / "train"), "--out", str(train), "--quiet", *CLI_GRID)
    _cir("fit", str(train), "--out", str(out), "--estimator", "paired", "--operations", "refresh", "--candidate-delays",
         "0,1", "--d-min", "0", "--folds", "4")


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(TYPED))
def test_the_router_live_in_each_framework_decides_as_cir_evaluate_decisions(kind, server, tasks, tmp_path,
                                                                            monkeypatch):
    """The closing note's check: a router fitted on the paired table, live in the framework's own
    loop (its native hook) on every held-out arm of the typed-tool example, decides and ends as
    ``cir evaluate --decisions`` wrote from the example's own held-out run."""
    from cir import Router

    _need(kind)
    router_file = tmp_path / "router.json"
    _fit_router(tasks, tmp_path, router_file)
    held_out = tmp_path / "held-out"
    _cir("run", "--family", ENV, "--tasks", str(tasks / "test"), "--out", str(held_out), "--agent", TYPED[kind],
         "--base-url", server.base_url, "--quiet", "--jobs", "2", *CLI_GRID)
    decisions_file = tmp_path / "decisions.csv"
    _cir("evaluate", str(router_file), str(held_out), "--decisions", str(decisions_file))
    decisions = pd.read_csv(decisions_file, keep_default_na=False).set_index(["task_id", "condition"])
    assert len(decisions) == 32 and 0 < decisions["recover"].sum() < 32

    agent = _agent(kind, server.base_url, monkeypatch)  # the model's client through the proxy of the server
    router = Router.load(router_file, extractor=FAMILY.extractor)
    live = _live(kind, router)
    equal = 0
    for task in FAMILY.load_tasks(tasks / "test"):
        for condition in ("clean", "stale1", "lag1", "missing"):
            _, episode, info = live(task, condition)
            row = decisions.loc[(task.task_id, condition)]
            chose = [(d["delay"], d["operation"]) for d in info["router_decisions"] if d["recover"]]
            assert chose == ([(int(row["delay"]), row["operation"])] if row["recover"] else []), (task.task_id, condition)
            assert int(episode.won) == int(row["y"]), (task.task_id, condition)
            equal += 1
    agent.close()
    assert equal == 32


def _live(kind, router):
    """One live episode of the framework's typed-tool example, the router as its native hook."""
    options = {"max_turns": 30, "max_actions": 30}
    if kind == "langgraph":
        from cir.adapters.langgraph import RouterMiddleware, episode
        from examples.langgraph_tools import build, tools

        graph = build([RouterMiddleware(router, tools)])
        return lambda task, condition: episode(graph, FAMILY.make_env(task), task.task_id, condition, **options)
    if kind == "openai-agents":
        from cir.adapters.openai_agents import episode
        from examples.openai_agents_tools import agent

        return lambda task, condition: episode(agent, FAMILY.make_env(task), task.task_id, condition, router=router,
                                               **options)
    from cir.adapters.inspect_ai import episode, routed_model
    from examples.inspect_tools import build, make_model

    return lambda task, condition: episode(build(routed_model(router, make_model())), FAMILY.make_env(task),
                                           task.task_id, condition, **options)


@pytest.mark.parametrize("kind", list(TYPED))
def test_cir_episode_of_each_typed_example_with_a_router_writes_its_json(kind, server, tasks, tmp_path):
    """``cir episode --router ... --json`` of each framework's typed-tool example: exit 0, the router's
    decisions in the JSON, the requests the fake server answered."""
    _need(kind)
    router = tmp_path / "router.json"
    _fit_router(tasks, tmp_path, router)
    before = server.count
    out = tmp_path / "episode.json"
    done = _cir("episode", "shop-test-001", "--family", ENV, "--tasks", str(tasks / "test"), "--agent", TYPED[kind],
                "--base-url", server.base_url, "--condition", "stale1", "--router", str(router), "--max-turns", "30",
                "--max-actions", "30", "--json", str(out))
    episode = json.loads(out.read_text())
    assert episode["info"]["router_decisions"] == [{"delay": 0, "recover": True, "operation": "refresh"}]
    refresh = [s for s in episode["transcript"]["steps"] if s["actor"] == "harness"]
    assert len(refresh) == 1 and refresh[0]["action"].startswith("get_order(")
    assert episode["llm"]["http_requests"] == server.count - before > 0
    assert "LLM: " in done.stderr


def test_outside_cir_the_tools_of_a_folder_world_edit_a_real_folder(tmp_path, monkeypatch):
    """Production on a folder (the kit's folder world, ``examples/folder_world.py``): ``state`` is the
    project folder's path; reads show its files as the world shows them, and an edit changes the
    file on disk; a read-only call changes nothing."""
    _need("langgraph")
    from cir.adapters.langgraph import typed_tools

    monkeypatch.syspath_prepend(str(ROOT))
    from examples.folder_world import WORLD as FOLDER
    from examples.folder_world import build_project

    build_project(tmp_path, "div")
    tools = {t.name: t for t in typed_tools(FOLDER, state=str(tmp_path))}
    ops = tmp_path / "calc" / "ops.py"
    before = ops.read_text()
    assert json.loads(tools["read_file"].invoke({"path": "calc/ops.py"})) == {"path": "calc/ops.py", "text": before}
    assert ops.read_text() == before and "return a // b" in before
    answer = json.loads(tools["edit_file"].invoke({"path": "calc/ops.py", "old": "return a // b", "new": "return a / b"}))
    assert "error" not in answer, answer
    assert ops.read_text() == before.replace("return a // b", "return a / b")
    assert set(json.loads(tools["read_file"].invoke({"path": "nope.py"}))) == {"error"}
