"""What a framework adapter cannot fork, each tried once through ``cir run`` (docs/frameworks.md,
section 7, "What cannot be forked is refused"): the exit code, the one line shown, the rows and episodes written (must be 0).

Each case is a small agent of its framework defined below (an attribute of this module, built when
``cir run --agent KIND:benchmarks/framework_refusals.py:NAME`` asks for it, after ``cir`` has
pointed the framework's OpenAI client at the server) against the deterministic fake chat server of
the tests (``tests/support/fake_openai.py``), which answers as the key-and-door agent with one
``act`` tool call, or as the case needs (two calls at once, a reply without a tool call). Prints a
table (markdown) and the count; ``--out FILE`` writes the cases as JSON.

    python benchmarks/framework_refusals.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()
MODEL = "fake"
INSTRUCTIONS = "You walk a corridor; call act with one command: right, left, take key, open door or look."


# -- the agents (built on first access: the module is imported by cir run) ---------------------------
def _lg_tool(body):
    from langchain_core.tools import tool

    @tool
    def act(command: str) -> str:
        """Send one command to the environment; returns what you see."""
        return body(command)

    return act


def _lg(body=None, **options):
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    from cir.adapters import env_step

    return create_agent(ChatOpenAI(model=MODEL, temperature=0), tools=[_lg_tool(body or env_step)],
                        system_prompt=INSTRUCTIONS, **options)


def _lg_own_url():
    """The example's agent, its model built with its own address (the fake server's, not the proxy's)."""
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    from cir.adapters import env_step

    return create_agent(ChatOpenAI(model=MODEL, temperature=0, base_url=os.environ["CIR_REFUSALS_SERVER"]),
                        tools=[_lg_tool(env_step)], system_prompt=INSTRUCTIONS)


def _lg_extra_state():
    from langchain.agents import AgentState

    class NotesState(AgentState):
        notes: list[str]

    return _lg(state_schema=NotesState)


def _sdk_tool(body):
    from agents import function_tool

    @function_tool
    def act(command: str) -> str:
        """Send one command to the environment; returns what you see."""
        return body(command)

    return act


def _sdk(body=None, handoffs=(), parallel=False):
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    from cir.adapters import env_step

    return Agent(name="corridor", instructions=INSTRUCTIONS, tools=[_sdk_tool(body or env_step)],
                 handoffs=list(handoffs), model=OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI()),
                 model_settings=ModelSettings(temperature=0, parallel_tool_calls=parallel))


def _sdk_handoffs():
    from agents import Agent

    return _sdk(handoffs=[Agent(name="helper", instructions="Help.")])


def _inspect(body=None, submit=False):
    from inspect_ai.agent import react
    from inspect_ai.model import get_model
    from inspect_ai.tool import tool

    from cir.adapters import env_step

    call = body or env_step

    @tool
    def act():
        async def execute(command: str) -> str:
            """Send one command to the environment; returns what you see.

            Args:
                command: right, left, take key, open door or look.
            """
            return call(command)

        return execute

    model = get_model(f"openai-api/cir/{MODEL}", base_url=os.environ["OPENAI_BASE_URL"],
                      api_key=os.environ.get("OPENAI_API_KEY") or "not-needed")
    return react(prompt=INSTRUCTIONS, tools=[act()], model=model, **({} if submit else {"submit": False}))


def _no_env(command: str) -> str:
    return "noted"  # answers without the env: a side effect elsewhere


def _two_actions(command: str) -> str:
    from cir.adapters import env_step

    return env_step(command) + " " + env_step("look")


def _changed(command: str) -> str:
    from cir.adapters import env_step

    return env_step(command).upper()


AGENTS = {
    "lg_parallel": lambda: _lg(), "sdk_parallel": lambda: _sdk(parallel=True), "inspect_parallel": lambda: _inspect(),
    "lg_no_env": lambda: _lg(_no_env), "sdk_no_env": lambda: _sdk(_no_env), "inspect_no_env": lambda: _inspect(_no_env),
    "lg_two_actions": lambda: _lg(_two_actions), "sdk_two_actions": lambda: _sdk(_two_actions),
    "inspect_two_actions": lambda: _inspect(_two_actions),
    "lg_changed": lambda: _lg(_changed), "sdk_changed": lambda: _sdk(_changed),
    "inspect_changed": lambda: _inspect(_changed),
    "lg_extra_state": _lg_extra_state,
    "lg_own_url": _lg_own_url,
    "inspect_proceed": lambda: _inspect(submit=True),
    "sdk_handoffs": _sdk_handoffs,
}


def __getattr__(name: str) -> Any:
    if name in AGENTS:
        return AGENTS[name]()
    raise AttributeError(name)


# -- the cases --------------------------------------------------------------------------------------
KIND = {"lg": "langgraph", "sdk": "openai-agents", "inspect": "inspect"}
EXAMPLES = {"langgraph": "examples.langgraph_agent:agent", "openai-agents": "examples.openai_agents_agent:agent",
            "inspect": "examples.inspect_agent:agent"}
#: each framework's typed-tool example (the tests' shop world)
TYPED = {"typed_lg": "langgraph:examples.langgraph_tools:agent",
         "typed_sdk": "openai-agents:examples.openai_agents_tools:agent",
         "typed_inspect": "inspect:examples.inspect_tools:agent"}
FAMILIES = {"keydoor": "tests.support.keydoor:FAMILY", "shop": "tests.support.shop:FAMILY"}
#: (feature, agent (a name above, a framework's example, or a typed-tool example), fake server's answer,
#: extra cir run options[, family: keydoor by default])
CASES = [
    *[("parallel tool calls (two calls in one message)", f"{p}_parallel", "two_calls", []) for p in KIND],
    *[("a tool that answers without the env", f"{p}_no_env", "keydoor", []) for p in KIND],
    *[("a tool that sends several env actions", f"{p}_two_actions", "keydoor", []) for p in KIND],
    *[("a tool that changes env_step's answer", f"{p}_changed", "keydoor", []) for p in KIND],
    ("graph state beyond messages", "lg_extra_state", "keydoor", []),
    ("messages the framework's own logic adds (react's 'please proceed')", "inspect_proceed", "text", []),
    ("handoffs", "sdk_handoffs", "keydoor", []),
    *[("--samples 2", kind, "keydoor", ["--samples", "2"]) for kind in KIND.values()],
    ("a model built with its own base_url", "lg_own_url", "keydoor", []),
    *[("parallel typed tool calls (two calls in one message)", name, "two_typed_calls", [], "shop") for name in TYPED],
    *[("--samples 2 (typed tools)", name, "shop", ["--samples", "2"], "shop") for name in TYPED],
]
GRID = ["--conditions", "clean,stale2", "--delays", "0", "--operations", "refresh", "--max-turns", "30",
        "--max-actions", "30"]


def answer_of(name: str):
    from support.fake_openai import Reply, tool_call
    from support.toy_framework import keydoor_answer

    if name == "keydoor":
        return keydoor_answer
    if name == "shop":
        from support.toy_framework import shop_answer

        return shop_answer
    if name == "two_typed_calls":
        def two_typed(path: str, body: dict[str, Any], attempt: int) -> Reply:
            n = len(body.get("messages", ()))
            return Reply(text=None, tool_calls=[tool_call("get_order", {"order_id": "W3000"}, n, 1),
                                                tool_call("list_orders", {}, n, 2)])
        return two_typed
    if name == "text":
        return lambda path, body, attempt: Reply(text="I think I am done.")

    def two(path: str, body: dict[str, Any], attempt: int) -> Reply:
        n = len(body.get("messages", ()))
        return Reply(text=None, tool_calls=[tool_call("act", {"command": "right"}, n, 1),
                                            tool_call("act", {"command": "look"}, n, 2)])
    return two


def written(folder: Path) -> tuple[int, int]:
    """The rows of the run's paired.csv and the episodes of its store (0, 0 when there are none)."""
    rows = episodes = 0
    paired = folder / "paired.csv"
    if paired.is_file():
        rows = max(0, len(paired.read_text().splitlines()) - 1)
    store = folder / "episodes.jsonl.gz"
    if store.is_file():
        import gzip

        try:
            with gzip.open(store, "rt") as f:
                episodes = sum(1 for _ in f)
        except (OSError, EOFError):
            episodes = -1
    return rows, episodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--only", default=None, help="cases whose agent name contains this")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from support.fake_openai import FakeOpenAI
    from support.keydoor import generate_tasks
    from support.shop import FAMILY as SHOP

    work = Path(tempfile.mkdtemp(prefix="cir-refusals-"))
    generate_tasks(work / "tasks" / "keydoor", "test", 2, 0)
    SHOP.generate(work / "tasks" / "shop", "test", 2, 0, progress=False)
    results = []
    for feature, agent, answer, extra, *family in CASES:
        if args.only and args.only not in agent:
            continue
        family = family[0] if family else "keydoor"
        if agent in TYPED:
            spec = TYPED[agent]
            kind = spec.split(":")[0]
        else:
            kind = KIND.get(agent.split("_")[0]) or agent
            spec = f"{kind}:{EXAMPLES[kind]}" if agent in KIND.values() else f"{kind}:{HERE}:{agent}"
        out = work / "runs" / agent.replace(":", "_") / str(len(results))
        grid = GRID if family == "keydoor" else ["--conditions", "clean,stale1", *GRID[2:]]
        with FakeOpenAI(answer=answer_of(answer), keep_requests=False) as fake:
            cmd = [sys.executable, "-m", "cir", "run", "--family", FAMILIES[family],
                   "--tasks", str(work / "tasks" / family / "test"), "--out", str(out), "--agent", spec,
                   "--base-url", fake.base_url, "--quiet", *grid, *extra]
            t0 = time.perf_counter()
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                                  env={**os.environ, "CIR_REFUSALS_SERVER": fake.base_url})
            requests = fake.count
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        rows, episodes = written(out)
        results.append({"feature": feature, "framework": kind, "family": family, "agent": agent if agent not in
                        KIND.values() else EXAMPLES[kind], "exit_code": done.returncode, "stderr_lines": len(lines),
                        "line": lines[-1] if lines else "", "traceback": "Traceback" in done.stderr,
                        "rows": rows, "episodes": episodes, "model_requests": requests,
                        "seconds": round(time.perf_counter() - t0, 1)})
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    refused = [r for r in results if r["exit_code"] != 0 and r["rows"] == 0 and r["episodes"] <= 0
               and r["stderr_lines"] == 1 and not r["traceback"]]
    print("| feature | framework | exit code | the one line shown | rows written |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['feature']} | {r['framework']} | {r['exit_code']} | `{r['line']}` | {r['rows']} |")
    print(f"\n{len(refused)} of {len(results)} tried: refused with one line, exit code != 0, 0 rows, no episode, "
          "no traceback")
    if args.out:
        Path(args.out).write_text(json.dumps({"cases": results, "refused_cleanly": len(refused),
                                              "tried": len(results)}, indent=1) + "\n")
    return 0 if len(refused) == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
