"""The path a LangGraph or Agents SDK user walks from README.md and docs/frameworks.md, each break of it
found by trying it (issue 40, item 4): ``cir episode`` of a framework agent (and its ``--json``),
request and cache counts equal to the server's with and without progress output, a model built with
its own ``base_url``, ``langgraph.prebuilt.create_react_agent``, and a hand-built ``StateGraph`` with
the router as a node of its own, whose live decisions are those ``cir evaluate --decisions`` wrote."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from support.framework_checks import CLI_GRID, ENV, ROOT, SPECS, require_framework

require_framework("langgraph")

from support.fake_openai import FakeOpenAI, Reply  # noqa: E402
from support.keydoor import FAMILY, KeyDoorAgent, KeyDoorEnv, generate_tasks, load_tasks  # noqa: E402
from support.toy_framework import keydoor_answer  # noqa: E402

from cir.adapters.frameworks import FRAMEWORKS, missing_framework  # noqa: E402
from cir.pairs.replay import ReplaySettings, run_task_pairs  # noqa: E402

#: every framework agent the docs show: the three examples, a hand-built StateGraph, create_react_agent
AGENTS = {**SPECS, "stategraph": "langgraph:examples.langgraph_stategraph:agent",
          "react": "langgraph:tests.support.langgraph_react:agent"}


def _skip_missing(spec: str) -> None:
    kind = spec.split(":")[0]
    if missing_framework(kind):
        pytest.skip(f"needs {', '.join(missing_framework(kind))}: pip install -e '.[{FRAMEWORKS[kind][1]}]'")


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI(answer=keydoor_answer) as fake:
        yield fake


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kd")
    generate_tasks(folder, "test", 8, 0)
    generate_tasks(folder, "train", 16, 0)
    return folder


@pytest.fixture(scope="module")
def router_file(tasks, tmp_path_factory):
    """A paired router over refresh and replan at delays 1 and 2, fitted on 16 training tasks of the
    key-and-door agent (whose table each example's equals row for row on the fake server: the
    adapters' tests): on the held-out tasks it recovers on some arms and not on others."""
    from cir.router.policy import CIRPolicy

    grid = ReplaySettings(conditions=("clean", "stale2", "missing"), delays=(0, 1, 2),
                          operations=("refresh", "replan"), max_turns=30, max_actions=30)
    table = pd.DataFrame([r for t in load_tasks(tasks / "train") for r in run_task_pairs(
        t, KeyDoorAgent(), KeyDoorEnv(t), grid, extractor=FAMILY.extractor).rows])
    router = CIRPolicy(estimator="paired", operations=("refresh", "replan"), delays=(1, 2), folds=4,
                       extractor=FAMILY.extractor).fit(table).to_router(max_turns=30, max_actions=30)
    path = tmp_path_factory.mktemp("router") / "router.json"
    router.save(path)
    return path


def _cir(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cir", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("name", list(AGENTS))
def test_cir_episode_of_a_framework_agent_with_a_router_writes_its_json_and_counts_the_servers_requests(
        name, server, tasks, router_file, tmp_path):
    """It printed the transcript, then ``KeyError: 'retries'`` (exit 1, no --json), for every framework
    agent: 36 of 36 routed episodes ended so."""
    spec = AGENTS[name]
    _skip_missing(spec)
    before = server.count
    out = tmp_path / "episode.json"
    done = _cir("episode", "keydoor-test-001", "--family", ENV, "--tasks", str(tasks / "test"), "--agent", spec,
                "--base-url", server.base_url, "--condition", "stale2", "--router", str(router_file),
                "--max-turns", "30", "--max-actions", "30", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    episode = json.loads(out.read_text())
    assert episode["transcript"]["steps"] and episode["info"]["router_decisions"]
    asked = server.count - before
    assert asked > 0 and episode["llm"]["http_requests"] == asked
    assert f"LLM: {asked} HTTP requests" in done.stderr


def _summary_requests(stdout: str) -> int:
    found = re.search(r"LLM HTTP requests (\d+)", stdout)
    assert found, stdout
    return int(found.group(1))


@pytest.mark.parametrize("quiet", [False, True], ids=["progress", "quiet"])
@pytest.mark.parametrize("spec", [*SPECS.values(), "openai:keydoor-model"])
def test_requests_and_cache_hits_are_the_servers_with_and_without_progress_output(spec, quiet, tasks, tmp_path):
    """With progress shown, the bar read a framework agent's counts by taking them: the summary and
    run.json said 22, 17, 9 and 16 requests of 468 the server answered. Now the bar, the summary and
    run.json read one tally, for each framework's example and for cir's own LLM agent."""
    if not spec.startswith("openai:"):
        _skip_missing(spec)
    answer = keydoor_answer if spec.startswith("langgraph") else (lambda path, body, attempt: Reply(text="right"))
    flags = ["--quiet"] if quiet else []
    with FakeOpenAI(answer=answer, keep_requests=False) as fake:
        for again in (False, True) if quiet else (False,):  # a first run, then one on its kept replies
            before = fake.count
            cache = tmp_path / "replies"
            done = _cir("run", "--family", ENV, "--tasks", str(tasks / "test"), "--limit", "3", "--out",
                        str(tmp_path / f"run{int(again)}"), "--agent", spec, "--base-url", fake.base_url,
                        "--cache-dir", str(cache), "--jobs", "2", *CLI_GRID, *flags)
            assert done.returncode == 0, done.stderr[-3000:]
            asked = fake.count - before
            llm = json.loads((tmp_path / f"run{int(again)}" / "run.json").read_text())["timings"]["sessions"][0]["llm"]
            assert llm["http_requests"] == asked == _summary_requests(done.stdout)
            assert f"replies from the reply cache {llm['cache_hits']} " in done.stdout
            if not again:
                first = asked
                assert first > 0
            else:
                assert asked == 0 and llm["cache_hits"] >= first


def test_a_model_built_with_its_own_base_url_is_refused_in_one_line_saying_how(server, tasks, tmp_path):
    """``ChatOpenAI(base_url=...)`` went around the reply proxy: the same table, but nothing kept,
    nothing counted ("LLM HTTP requests 0" against 468), and no run reproducible from its replies."""
    source = (ROOT / "examples" / "langgraph_agent.py").read_text()
    own = source.replace("model = ChatOpenAI(", f"model = ChatOpenAI(base_url={server.base_url!r}, ")
    assert own != source
    (tmp_path / "own_url.py").write_text(own)
    done = _cir("run", "--family", ENV, "--tasks", str(tasks / "test"), "--limit", "1", "--out",
                str(tmp_path / "run"), "--agent", f"langgraph:{tmp_path / 'own_url.py'}:agent",
                "--base-url", server.base_url, "--quiet", "--conditions", "clean", "--delays", "0",
                "--operations", "refresh")
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "was not asked through cir's reply proxy" in lines[0] and "build it without base_url" in lines[0]


def test_create_react_agent_forks_as_the_key_and_door_agent(server, tasks, monkeypatch):
    """``create_react_agent`` was refused for ``remaining_steps``, LangGraph's own bookkeeping."""
    from support.framework_checks import pairs_as_keydoor

    from cir.adapters.frameworks import framework_agent as agent_from_spec

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    agent = agent_from_spec(AGENTS["react"], base_url=server.base_url)
    assert "remaining_steps" in agent.framework.graph.channels
    pairs_as_keydoor(agent, tasks / "test")


def test_a_hand_built_stategraph_forks_as_the_key_and_door_agent(server, tasks, monkeypatch):
    from support.framework_checks import pairs_as_keydoor

    from cir.adapters.frameworks import framework_agent as agent_from_spec

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    pairs_as_keydoor(agent_from_spec(AGENTS["stategraph"], base_url=server.base_url), tasks / "test")


def test_a_router_node_in_a_graph_studied_by_cir_run_is_inert(server, tasks, router_file, monkeypatch):
    """The paired replayer applies the recoveries of its grid itself: a router the graph holds (a
    node, a middleware) decides only in the graph's own loop, so the same graph pairs as without it."""
    from support.framework_checks import pairs_as_keydoor

    from cir import Router
    from cir.adapters.driver import FrameworkAgent, serve_from
    from cir.adapters.langgraph import LangGraphFramework

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    serve_from(server.base_url)
    from examples.langgraph_stategraph import build

    router = Router.load(router_file, extractor=FAMILY.extractor)
    pairs_as_keydoor(FrameworkAgent("langgraph:routed", LangGraphFramework(build(router)), {}), tasks / "test")


@pytest.mark.slow
def test_the_router_live_in_a_hand_built_stategraph_decides_as_cir_evaluate_decisions(
        server, tasks, router_file, tmp_path, monkeypatch):
    """The router as a node of a hand-built graph, live in its own loop on every held-out arm: its
    decisions and outcomes are those ``cir evaluate --decisions FILE`` wrote from the graph's own
    held-out run."""
    from cir import Router
    from cir.adapters.driver import serve_from
    from cir.adapters.langgraph import episode

    run = tmp_path / "heldout"
    done = _cir("run", "--family", ENV, "--tasks", str(tasks / "test"), "--out", str(run), "--agent",
                AGENTS["stategraph"], "--base-url", server.base_url, "--quiet", "--conditions",
                "clean,stale2,missing", "--delays", "0,1,2", "--operations", "refresh,replan",
                "--max-turns", "30", "--max-actions", "30", "--jobs", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    decisions_file = tmp_path / "decisions.csv"
    done = _cir("evaluate", str(router_file), str(run), "--decisions", str(decisions_file))
    assert done.returncode == 0, done.stderr[-3000:]
    decisions = pd.read_csv(decisions_file, keep_default_na=False).set_index(["task_id", "condition"])
    assert len(decisions) == 24 and 0 < decisions["recover"].sum() < 24  # recovers on some arms, not all

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    serve_from(server.base_url)
    from examples.langgraph_stategraph import build

    graph = build(Router.load(router_file, extractor=FAMILY.extractor))
    equal = 0
    for task in load_tasks(tasks / "test"):
        for condition in ("clean", "stale2", "missing"):
            _, live, info = episode(graph, KeyDoorEnv(task), task.task_id, condition, max_turns=30, max_actions=30)
            row = decisions.loc[(task.task_id, condition)]
            chose = [(d["delay"], d["operation"]) for d in info["router_decisions"] if d["recover"]]
            assert chose == ([(int(row["delay"]), row["operation"])] if row["recover"] else []), (task.task_id, condition)
            assert int(live.won) == int(row["y"]), (task.task_id, condition)
            equal += 1
    assert equal == 24


def test_a_forgotten_family_says_to_name_it(tasks, tmp_path):
    """A key-and-door task folder read as ALFWorld's (no --family): the error said what ALFWorld's loader
    found ("task #0 is not an object" for another family's manifest), not that --family was missing."""
    done = _cir("run", "--tasks", str(tasks / "test"), "--out", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 2
    assert "give --family NAME" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    given = _cir("run", "--family", "textworld-cooking", "--tasks", str(tasks / "test"), "--out",
                 str(tmp_path / "run2"), "--quiet")
    assert given.returncode == 2 and "give --family" not in given.stderr  # a family named is not forgotten


def test_the_reply_proxy_tries_a_server_it_cannot_reach_as_retries_says(tasks, tmp_path):
    """``--retries 1`` reported "tried 4": the proxy tried a fixed number of times."""
    from support.llm_server import free_port

    gone = f"http://127.0.0.1:{free_port()}/v1"
    done = _cir("run", "--family", ENV, "--tasks", str(tasks / "test"), "--limit", "1", "--out",
                str(tmp_path / "run"), "--agent", SPECS["langgraph"], "--base-url", gone, "--retries", "0",
                "--quiet", "--conditions", "clean", "--delays", "0", "--operations", "refresh")
    assert done.returncode == 2 and "tried 1 time)" in done.stderr, done.stderr[-2000:]


def test_the_refusal_of_parallel_tool_calls_says_where_each_framework_turns_them_off():
    from cir.episode.transcript import tool_call_of
    from cir.util.errors import CirError

    two = [{"id": f"c{i}", "type": "function", "function": {"name": "act", "arguments": "{}"}} for i in (1, 2)]
    with pytest.raises(CirError) as refused:
        tool_call_of([{"role": "assistant", "content": "", "tool_calls": two}], 0)
    text = str(refused.value)
    for where in ("model_kwargs={'parallel_tool_calls': False}", "bind_tools(tools, parallel_tool_calls=False)",
                  "ModelSettings(parallel_tool_calls=False)", "GenerateConfig(parallel_tool_calls=False)"):
        assert where in text


@pytest.mark.parametrize("name", ["langgraph", "stategraph", "react"])
def test_the_langgraph_agents_send_parallel_tool_calls_false(name, server, tasks, monkeypatch):
    """Each LangGraph agent of the docs turns parallel tool calls off where its way of building the
    graph takes it (docs/frameworks.md's table of refusals): every request its model sends says so."""
    from cir.adapters.frameworks import framework_agent as agent_from_spec

    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    task = load_tasks(tasks / "test")[-1]
    before = len(server.requests)
    agent = agent_from_spec(AGENTS[name], base_url=server.base_url)  # its own reply cache, in memory
    run_task_pairs(task, agent, KeyDoorEnv(task), ReplaySettings(conditions=("clean",), delays=(0,),
                                                                 operations=("refresh",)))
    bodies = [body for _, _, body in server.requests[before:]]
    assert bodies and all(body.get("parallel_tool_calls") is False for body in bodies)
