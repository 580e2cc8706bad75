"""The checks every framework adapter's tests make, against a fake chat server that is the
key-and-door agent (``keydoor_answer``): a framework agent's paired table is that agent's table in
cir's own harness, ``cir run`` gives the same ``paired.csv`` at any ``--jobs`` and ``--concurrency``,
and the router in the framework's own loop decides as the offline walk and recovers as the replayer."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from cir.pairs.replay import ReplaySettings, run_task_pairs
from support.keydoor import FAMILY, KeyDoorAgent, KeyDoorEnv, load_tasks

ROOT = Path(__file__).resolve().parents[2]
ENV = "tests.support.keydoor:FAMILY"
GRID = ReplaySettings(conditions=("clean", "stale2", "missing"), delays=(0, 2), operations=("refresh", "replan"),
                      max_turns=30, max_actions=30)
CLI_GRID = ["--conditions", "clean,stale2,missing", "--delays", "0,2", "--operations", "refresh,replan",
            "--max-turns", "30", "--max-actions", "30"]


def require_framework(kind: str) -> None:
    """Skip the calling test module unless the ``kind`` adapter's framework is installed (by
    distribution: ``pytest.importorskip("agents")`` passes on any folder named agents/)."""
    import pytest

    from cir.adapters.frameworks import FRAMEWORKS, missing_framework

    missing = missing_framework(kind)
    if missing:
        pytest.skip(f"needs {', '.join(missing)}: pip install -e '.[{FRAMEWORKS[kind][1]}]'",
                    allow_module_level=True)


def pairs_as_keydoor(agent: Any, tasks: Path, n: int = 2) -> None:
    """The agent's rows on the first ``n`` tasks are the key-and-door agent's, row for row."""
    for task in load_tasks(tasks)[:n]:
        ours = run_task_pairs(task, KeyDoorAgent(), KeyDoorEnv(task), GRID, extractor=FAMILY.extractor)
        theirs = run_task_pairs(task, agent, KeyDoorEnv(task), GRID, extractor=FAMILY.extractor)
        pd.testing.assert_frame_equal(pd.DataFrame(theirs.rows).drop(columns="agent"),
                                      pd.DataFrame(ours.rows).drop(columns="agent"))


def cir_run(spec: str, out: Path, tasks: Path, base_url: str, *extra: str) -> bytes:
    """``cir run`` of the agent ``spec`` (from the repository's root); its paired.csv."""
    cmd = [sys.executable, "-m", "cir", "run", "--family", ENV, "--tasks", str(tasks), "--out", str(out),
           "--agent", spec, "--base-url", base_url, "--quiet", *CLI_GRID, *extra]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return (out / "paired.csv").read_bytes()


def same_table_at_any_parallelism(spec: str, tasks: Path, base_url: str, tmp_path: Path) -> pd.DataFrame:
    """The same paired.csv at --jobs 1, --jobs 2 and --concurrency 16; cir table reads it; a resume
    changes nothing. The table."""
    one = cir_run(spec, tmp_path / "j1", tasks, base_url, "--jobs", "1")
    assert cir_run(spec, tmp_path / "j2", tasks, base_url, "--jobs", "2") == one
    assert cir_run(spec, tmp_path / "c16", tasks, base_url, "--jobs", "1", "--concurrency", "16") == one
    table = pd.read_csv(tmp_path / "j1" / "paired.csv")
    assert table["prefix_match"].all() and set(table["condition"]) == set(GRID.conditions)
    shown = subprocess.run([sys.executable, "-m", "cir", "table", str(tmp_path / "j1"), "--by", "condition,operation"],
                           cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0 and "stale2" in shown.stdout, shown.stderr
    assert cir_run(spec, tmp_path / "j1", tasks, base_url, "--jobs", "1") == one
    # the replies are kept (RUN_DIR/agent_cache) and counted: a new run on the same cache asks nothing
    first = json.loads((tmp_path / "j1" / "run.json").read_text())["timings"]["sessions"][0]["llm"]
    assert first["http_requests"] > 0 and first["prompt_tokens"] > 0
    assert cir_run(spec, tmp_path / "again", tasks, base_url, "--jobs", "2", "--cache-dir",
                   str(tmp_path / "j1" / "agent_cache")) == one
    again = json.loads((tmp_path / "again" / "run.json").read_text())["timings"]["sessions"][0]["llm"]
    assert again["http_requests"] == 0 and again["cache_hits"] >= first["http_requests"]
    # the dry run (the built-in key-and-door agent, which the fake server is) counts the requests
    estimate = subprocess.run([sys.executable, "-m", "cir", "estimate", "--family", ENV, "--tasks", str(tasks),
                               "--agent", spec, "--quiet", "--json", str(tmp_path / "estimate.json"),
                               *CLI_GRID], cwd=ROOT, capture_output=True, text=True)
    if "not listed by the framework" not in estimate.stderr:  # (Inspect's agents do not list their tools)
        assert estimate.returncode == 0, estimate.stderr[-1000:]
        assert json.loads((tmp_path / "estimate.json").read_text())["requests"] == first["http_requests"]
    return table


class Always:
    """An advisor that recovers with ``operation`` at delay 2, always."""

    delays = (2,)

    def __init__(self, operation: str) -> None:
        self.operation = operation

    def decide(self, transcript: Any, delay: int) -> Any:
        return type("Decision", (), {"recover": True, "operation": self.operation})()


#: ``live(router, task, condition) -> (episode, info)``: one live episode in the framework's loop
Live = Callable[..., tuple[Any, dict[str, Any]]]  # (router, task, condition, max_turns=30)


def table_of(agent: Any, tasks: Path) -> pd.DataFrame:
    """The agent's paired table on the tasks (in this process)."""
    return pd.DataFrame([r for t in load_tasks(tasks) for r in run_task_pairs(t, agent, KeyDoorEnv(t), GRID,
                                                                          extractor=FAMILY.extractor).rows])


def live_router_matches_the_walk(table: pd.DataFrame, tasks: Path, live: Live, require_recovery: bool = True,
                                 operations: tuple[str, ...] = GRID.operations, *,
                                 strict: bool = True, stored: dict[tuple, list] | None = None) -> dict[str, Any]:
    """A paired router fitted on the agent's table, run live in the framework's own loop, decides as
    the offline walk on every arm; an advisor that always recovers at delay 2 gives the replayer's
    y1 on every arm, for each operation. The arms checked and the live recoveries of each kind.
    ``strict=False`` (a benchmark against a real model) counts the arms that differ instead of
    asserting: ``decisions_equal``, ``outcomes_equal`` (router arms), ``forced_equal`` (the
    advisor's arms) and ``mismatches`` (what differed where). ``stored`` (the run's episodes as
    :func:`steps_of` gives them, keyed by task, condition, delay and operation; an arm's by None,
    None) compares each live transcript with the replayer's: a router arm that did not recover with
    its no-recovery arm, an advisor's recovery with its branch (``transcripts_equal`` of
    ``transcripts_compared``)."""
    from cir.router.evaluation import walk_policies
    from cir.router.policy import CIRPolicy

    kd = load_tasks(tasks)
    router = CIRPolicy(estimator="paired", operations=("refresh", "replan"), delays=(2,), folds=4,
                       extractor=FAMILY.extractor).fit(table).to_router(max_turns=30, max_actions=30)
    walked = walk_policies(router, table).set_index(["task_id", "condition"])
    recovered = forced = arms = forced_arms = 0
    counts = {"decisions_equal": 0, "outcomes_equal": 0, "forced_decisions_equal": 0, "forced_outcomes_equal": 0,
              "transcripts_compared": 0, "transcripts_equal": 0}
    mismatches: list[dict[str, Any]] = []

    def check(ok: Any, count: str, what: dict[str, Any]) -> None:
        ok = bool(ok)
        assert ok or not strict, what
        counts[count] += int(ok)
        if not ok:
            mismatches.append(what)

    def same_steps(episode: Any, replayed: list | None, where: dict[str, Any]) -> None:
        counts["transcripts_compared"] += 1
        ok = replayed is not None and steps_of(episode) == replayed
        counts["transcripts_equal"] += int(ok)
        if not ok:
            mismatches.append({**where, "transcript": "differs from the replayer's"})

    for task in kd:
        for condition in sorted(set(table["condition"])):
            episode, info = live(router, task, condition)
            arm = walked.loc[(task.task_id, condition)]
            chose = [(d["delay"], d["operation"]) for d in info["router_decisions"] if d["recover"]]
            walk = [] if arm["delay_cir"] < 0 else [(int(arm["delay_cir"]), arm["op_cir"])]
            where = {"task": task.task_id, "condition": condition}
            check(chose == walk, "decisions_equal", {**where, "live": chose, "walk": walk})
            check(int(episode.won) == arm["y_cir"], "outcomes_equal",
                  {**where, "live_won": int(episode.won), "walk_y": int(arm["y_cir"])})
            if stored is not None and not chose:
                same_steps(episode, stored.get((task.task_id, condition, None, None)), where)
            recovered += bool(chose)
            arms += 1
    rows = table.set_index(["task_id", "condition", "delay", "operation"])
    for op in operations:
        for task in kd:
            for condition in sorted(set(table["condition"])):
                episode, info = live(Always(op), task, condition)
                row = rows.loc[(task.task_id, condition, 2, op)]
                where = {"task": task.task_id, "condition": condition, "always": op}
                decided = [d["operation"] for d in info["router_decisions"]]
                check(decided == ([op] if row["executed"] else []), "forced_decisions_equal",
                      {**where, "live": decided, "executed": bool(row["executed"])})
                check(int(episode.won) == row["y1"], "forced_outcomes_equal",
                      {**where, "live_won": int(episode.won), "y1": int(row["y1"])})
                if stored is not None and row["executed"]:
                    same_steps(episode, stored.get((task.task_id, condition, 2, op)), where)
                forced += bool(row["executed"])
                forced_arms += 1
    assert forced > 0 or not require_recovery
    return {"arms": arms, "router_recoveries": recovered, "forced_arms": forced_arms, "forced_recoveries": forced,
            **counts, "mismatches": mismatches}


def steps_of(transcript: Any) -> list[tuple]:
    """What a transcript did: each step's actor, action and shown text."""
    return [(s.actor, s.action, s.shown) for s in transcript.steps]


def stored_steps(run: Path) -> dict[tuple, list]:
    """A run's episodes as :func:`steps_of` gives them: each no-recovery arm by (task, condition,
    None, None) (the factual run's for an arm that is the same), each branch by (task, condition,
    delay, operation)."""
    from cir.pairs.store import read_episodes

    episodes = list(read_episodes(run))
    factual = {r.task_id: r for r in episodes if r.role == "factual"}
    out: dict[tuple, list] = {}
    for r in episodes:
        if r.role == "no_recovery":
            t = r.transcript if r.transcript is not None else factual[r.task_id].transcript
            out[(r.task_id, r.condition, None, None)] = steps_of(t)
        elif r.role == "recovery" and r.transcript is not None:
            out[(r.task_id, r.condition, r.delay, r.operation)] = steps_of(r.transcript)
    return out


class Never:
    """An advisor that never recovers (the live run is the no-recovery arm)."""

    delays = (2,)

    def decide(self, transcript: Any, delay: int) -> Any:
        return type("Decision", (), {"recover": False, "operation": None})()


def malformed_calls_fork_as_the_framework_runs_them(agent: Any, live: Live, tasks: Path, max_turns: int = 30) -> int:
    """With tool calls whose arguments are not JSON (``sloppy_keydoor_answer``), which the framework
    answers itself: the replayer records them as steps without an env action, every row matches its
    prefix, and the framework's own loop (``live``: the same agent in its native hook) runs each arm
    and a refresh branch step for step as the replayer did, under a budget of ``max_turns`` model
    turns (a malformed turn is a turn). The malformed steps seen."""
    from cir.adapters.driver import INVALID_CALL

    settings = ReplaySettings(conditions=("stale2",), delays=(2,), operations=("refresh",), max_turns=max_turns,
                              max_actions=30)
    malformed = 0
    for task in load_tasks(tasks)[:2]:
        result = run_task_pairs(task, agent, KeyDoorEnv(task), settings, extractor=FAMILY.extractor)
        assert result.rows and all(r["prefix_match"] for r in result.rows)
        arm = next(e for e in result.episodes if e.role == "no_recovery")
        branch = next(e for e in result.episodes if e.role == "recovery")
        malformed += sum(INVALID_CALL in s.events for s in arm.transcript.steps)
        episode, _ = live(Never(), task, "stale2", max_turns=max_turns)
        assert steps_of(episode) == steps_of(arm.transcript), task.task_id
        episode, _ = live(Always("refresh"), task, "stale2", max_turns=max_turns)
        assert steps_of(episode) == steps_of(branch.transcript if branch.transcript else arm.transcript), task.task_id
    return malformed


#: Each framework's example agent.
SPECS = {"langgraph": "langgraph:examples.langgraph_agent:agent",
         "openai-agents": "openai-agents:examples.openai_agents_agent:agent",
         "inspect": "inspect:examples.inspect_agent:agent"}


def live_for(kind: str) -> Live:
    """One live episode of the framework's example agent in its own loop, ``router`` as its native
    hook (its model through the reply proxy the agent of ``SPECS[kind]`` set up: call agent_from_spec
    first, from the repository's root)."""
    if kind == "langgraph":
        from cir.adapters.langgraph import RouterMiddleware, episode
        from examples.langgraph_agent import act, build

        def live(router: Any, task: Any, condition: str, max_turns: int = 30) -> tuple[Any, dict[str, Any]]:
            graph = build((RouterMiddleware(router, [act]),))
            _, run, info = episode(graph, KeyDoorEnv(task), task.task_id, condition, max_turns=max_turns, max_actions=30)
            return run, info
    elif kind == "openai-agents":
        from cir.adapters.openai_agents import episode
        from examples.openai_agents_agent import agent

        def live(router: Any, task: Any, condition: str, max_turns: int = 30) -> tuple[Any, dict[str, Any]]:
            _, run, info = episode(agent, KeyDoorEnv(task), task.task_id, condition, router=router,
                                   max_turns=max_turns, max_actions=30)
            return run, info
    else:
        from cir.adapters.inspect_ai import episode, routed_model
        from examples.inspect_agent import build

        def live(router: Any, task: Any, condition: str, max_turns: int = 30) -> tuple[Any, dict[str, Any]]:
            from examples.inspect_agent import make_model

            # the example's own model (its generation settings: the tool asked for by name, greedy, at
            # most 64 tokens), built now: its address is the reply proxy's (OPENAI_BASE_URL)
            _, run, info = episode(build(routed_model(router, make_model())), KeyDoorEnv(task), task.task_id,
                                   condition, max_turns=max_turns, max_actions=30)
            return run, info
    return live
