"""The fork protocol and the pairing driver, on a framework of a few lines (no framework installed).

The toy framework's policy is the key-and-door agent, so a framework agent's paired table must
be the table of the same agent in cir's own harness, row for row: the driver forks the
framework's message list exactly where the replayer forks a transcript.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
from support.keydoor import FAMILY, KeyDoorAgent, KeyDoorEnv, generate_tasks, load_tasks
from support.toy_framework import ToyFramework, act, keydoor_policy, toy_agent

from cir.adapters.protocol import ForkRefused, env_step
from cir.episode.perturb import MISSING_TEXT
from cir.episode.protocol import PLACEBO_TEXT, RECOVERY_CALL_PREFIX, REFRESH_PREFIX
from cir.episode.transcript import Transcript
from cir.pairs.replay import ReplaySettings, run_task_pairs
from cir.pairs.settings import RunSettings
from cir.util.errors import CirError, SettingError

GRID = ReplaySettings(conditions=("clean", "stale2", "missing"), delays=(0, 2),
                      operations=("refresh", "replan", "rewind", "placebo"), max_turns=30, max_actions=30)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keydoor")
    generate_tasks(folder, "test", 10, 0)
    return load_tasks(folder / "test")


def _table(rows):
    return pd.DataFrame(rows).drop(columns=["agent"])


def test_a_framework_agent_pairs_as_the_same_agent_in_cirs_harness(tasks):
    for task in tasks:
        ours = run_task_pairs(task, KeyDoorAgent(), KeyDoorEnv(task), GRID, extractor=FAMILY.extractor)
        theirs = run_task_pairs(task, toy_agent(), KeyDoorEnv(task), GRID, extractor=FAMILY.extractor)
        assert theirs.feasible and theirs.point == ours.point
        pd.testing.assert_frame_equal(_table(theirs.rows), _table(ours.rows))
        assert all(r["prefix_match"] for r in theirs.rows)
        # the same env actions and shown texts in every episode, in the same order
        for a, b in zip(ours.episodes, theirs.episodes, strict=True):
            if a.transcript is not None:
                assert [(s.actor, s.action, s.shown) for s in a.transcript.steps] == \
                    [(s.actor, s.action, s.shown) for s in b.transcript.steps]
    outcomes = {r["outcome"] for t in tasks for r in run_task_pairs(
        t, toy_agent(), KeyDoorEnv(t), GRID, extractor=FAMILY.extractor).rows}
    assert {"rescue", "stable_success"} <= outcomes  # the grid is not trivial


def test_a_persistent_cache_serves_the_framework_s_tool_as_it_serves_cirs_harness(tasks):
    """persistence: the same command sent again through the framework's tool is shown the perturbed
    text again, as in cir's own harness: the same table, episode for episode."""
    grid = replace(GRID, persistence="refresh")
    again = 0
    for task in tasks:
        ours = run_task_pairs(task, KeyDoorAgent(), KeyDoorEnv(task), grid, extractor=FAMILY.extractor)
        theirs = run_task_pairs(task, toy_agent(), KeyDoorEnv(task), grid, extractor=FAMILY.extractor)
        pd.testing.assert_frame_equal(_table(theirs.rows), _table(ours.rows))
        for a, b in zip(ours.episodes, theirs.episodes, strict=True):
            if a.transcript is not None:
                assert [(s.actor, s.action, s.shown, s.events) for s in a.transcript.steps] == \
                    [(s.actor, s.action, s.shown, s.events) for s in b.transcript.steps]
                again += sum(1 for s in b.transcript.steps if any(e.endswith(":again") for e in s.events))
    assert again > 0  # the cache served a command again


def test_the_framework_sees_the_perturbed_tool_result_and_the_refresh_as_the_harness_tool_call(tasks):
    seen: list[list[dict]] = []

    def policy(messages):
        seen.append(messages)
        return keydoor_policy(messages)

    task = tasks[0]
    result = run_task_pairs(task, toy_agent(ToyFramework(policy)), KeyDoorEnv(task),
                            ReplaySettings(conditions=("missing",), delays=(0,), operations=("refresh",),
                                           max_turns=30, max_actions=30), extractor=FAMILY.extractor)
    assert result.feasible
    missing = [m for m in seen if any(x.get("content") == MISSING_TEXT for x in m)]
    assert missing and all(x["role"] == "tool" for m in missing for x in m if x.get("content") == MISSING_TEXT)
    refreshed = [m for m in seen if any(str(x.get("content", "")).startswith(REFRESH_PREFIX) for x in m)]
    assert refreshed
    m = refreshed[0]
    i = next(j for j, x in enumerate(m) if str(x.get("content", "")).startswith(REFRESH_PREFIX))
    call = m[i - 1]["tool_calls"][0]
    assert m[i]["role"] == "tool" and call["id"].startswith(RECOVERY_CALL_PREFIX)
    assert call["function"]["name"] == "act" and json.loads(call["function"]["arguments"]) == {"command": "look"}
    # read back, the harness's call is the recovery, not an agent step
    back = Transcript.from_messages(task.task_id, m)
    assert back.steps[-1].actor == "harness" and back.steps[-1].reply == "refresh"
    assert back.steps[-1].action == "look"


def test_from_messages_reads_tool_calls_as_actions_and_refuses_parallel_calls():
    task = "You are in cell 0 of 5.\nYour task is to: open the door."
    call = {"id": "c1", "type": "function", "function": {"name": "act", "arguments": '{"command": "right"}'}}
    messages = [{"role": "user", "content": task},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "You are in cell 1 of 5."},
                {"role": "user", "content": PLACEBO_TEXT}]
    t = Transcript.from_messages("t", messages)
    assert [(s.actor, s.reply, s.action, s.shown) for s in t.steps] == [
        ("agent", "right", "right", "You are in cell 1 of 5."), ("harness", "placebo", None, PLACEBO_TEXT)]
    take = {"id": "c2", "type": "function", "function": {"name": "take", "arguments": '{"item": "key"}'}}
    t = Transcript.from_messages("t", [messages[0], {"role": "assistant", "content": "I see it", "tool_calls": [take]},
                                       {"role": "tool", "tool_call_id": "c2", "content": "You take the key."}])
    assert (t.steps[0].action, t.steps[0].reply) == ("take key", "take key\nI see it")
    with pytest.raises(CirError, match="2 tool calls in one message: parallel tool calls"):
        Transcript.from_messages("t", [messages[0], {"role": "assistant", "tool_calls": [call, take]},
                                       messages[2]])
    with pytest.raises(CirError, match="not answered by the tool message"):
        Transcript.from_messages("t", messages[:2] + [{"role": "tool", "tool_call_id": "zz", "content": "x"}])


def _run_one(task, framework):
    return run_task_pairs(task, toy_agent(framework), KeyDoorEnv(task), GRID, extractor=FAMILY.extractor)


def test_refusals_name_what_cannot_be_forked(tasks):
    task = tasks[0]
    parallel = ToyFramework(lambda m: [("act", {"command": "right"}), ("act", {"command": "look"})])
    with pytest.raises(CirError, match="parallel tool calls"):
        _run_one(task, parallel)
    outside = ToyFramework(lambda m: ("note", {"command": "x"}), tools={"act": act, "note": lambda command: "noted"})
    with pytest.raises(ForkRefused, match="answered without the env"):
        _run_one(task, outside)
    twice = ToyFramework(tools={"act": lambda command: env_step(command) + env_step("look")})
    with pytest.raises(ForkRefused, match="one call sent 2 env actions"):
        _run_one(task, twice)
    changed = ToyFramework(tools={"act": lambda command: env_step(command).upper()})
    with pytest.raises(ForkRefused, match="must return env_step's text unchanged"):
        _run_one(task, changed)


def test_env_step_outside_a_run_is_an_error():
    with pytest.raises(CirError, match="no cir episode is running"):
        env_step("right")


class _Always:
    delays = (2,)

    def __init__(self, operation: str) -> None:
        self.operation = operation

    def decide(self, transcript, delay):
        return type("Decision", (), {"recover": True, "operation": self.operation})()


def test_a_routed_live_episode_of_a_framework_agent_recovers_as_its_branch(tasks):
    """cir episode --router (cir.router.live.run_episode) with a framework agent: the router's hook
    recovers in the framework's message list, and the episode ends as the replayer's branch."""
    from cir.router.live import run_episode

    settings = ReplaySettings(conditions=("stale2",), delays=(2,), operations=("refresh", "replan", "rewind"),
                              max_turns=30, max_actions=30)
    for task in tasks[:4]:
        rows = {r["operation"]: r for r in run_task_pairs(task, toy_agent(), KeyDoorEnv(task), settings,
                                                         extractor=FAMILY.extractor).rows}
        for op, row in rows.items():
            _, episode, info = run_episode(task.task_id, toy_agent(), KeyDoorEnv(task), "stale2", router=_Always(op),
                                           max_turns=30, max_actions=30)
            assert [d["operation"] for d in info["router_decisions"]] == ([op] if row["executed"] else [])
            assert int(episode.won) == row["y1"], (task.task_id, op)


def test_a_harness_can_register_its_own_recovery_as_an_operation(tasks):
    """A harness's own recovery (here: re-call the observing tool, its answer after a text of its own)
    registered as an operation: the replayer runs it, the framework sees it as the harness's tool
    call, the messages read back name it, and it pairs as refresh does for this agent."""
    from cir.episode.operations import OPERATIONS, OperationInfo
    from cir.episode.recovery import IMPLEMENTATIONS, Refresh, register_operation

    @register_operation
    class Recheck(Refresh):
        info = OperationInfo("recheck", True, "[Re-checked]", "the harness re-calls the observing tool",
                             shows_answer=True)

    try:
        assert register_operation(Recheck) is Recheck  # the same module imported again
        with pytest.raises(CirError, match="already an operation"):
            register_operation(type("Other", (Refresh,), {"info": Recheck.info}))
        with pytest.raises(CirError, match="cannot be told from refresh's"):
            register_operation(type("Twin", (Refresh,), {"info": OperationInfo("twin", True, REFRESH_PREFIX, "x",
                                                                             shows_answer=True)}))
        grid = ReplaySettings(conditions=("stale2", "missing"), delays=(0, 2), operations=("refresh", "recheck"),
                              max_turns=30, max_actions=30)
        seen = []
        framework = ToyFramework(lambda m: (seen.append(m), keydoor_policy(m))[1])
        for task in tasks[:4]:
            rows = pd.DataFrame(run_task_pairs(task, toy_agent(framework), KeyDoorEnv(task), grid,
                                               extractor=FAMILY.extractor).rows)
            by = rows.set_index(["condition", "delay", "operation"])["y1"]
            for cond in ("stale2", "missing"):
                for d in (0, 2):
                    assert by[(cond, d, "recheck")] == by[(cond, d, "refresh")]
        rechecked = [m for m in seen if any(str(x.get("content", "")).startswith("[Re-checked]") for x in m)]
        assert rechecked
        back = Transcript.from_messages("t", rechecked[0])
        assert any(s.reply == "recheck" and s.actor == "harness" for s in back.steps)
    finally:
        OPERATIONS.pop("recheck", None)
        IMPLEMENTATIONS.pop("recheck", None)


def test_a_malformed_tool_call_the_framework_answers_itself_is_a_reply_without_an_env_action(tasks):
    """A model's call whose arguments are not JSON, answered by the framework with its own error (the
    Agents SDK does so for SmolLM2's cut-off calls): recorded as a reply that sent nothing to the env."""
    bad = {"n": 0}

    class Sloppy(ToyFramework):
        def turn(self, messages):
            bad["n"] += 1
            if bad["n"] % 3:  # two of three replies are cut off mid-JSON
                call = {"id": f"call_bad_{len(messages)}", "type": "function",
                        "function": {"name": "act", "arguments": '{"command": "rig'}}
                return [{"role": "assistant", "content": "", "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": call["id"], "content": "Invalid JSON input for tool act"}]
            return super().turn(messages)

    task = tasks[0]
    result = run_task_pairs(task, toy_agent(Sloppy()), KeyDoorEnv(task),
                            ReplaySettings(conditions=("clean", "stale2"), delays=(0,), operations=("refresh",),
                                           max_turns=30, max_actions=30), extractor=FAMILY.extractor)
    factual = result.episodes[0].transcript
    invalid = [s for s in factual.steps if "invalid_tool_call" in s.events]
    assert invalid and all(s.action is None and s.shown == "Invalid JSON input for tool act" for s in invalid)
    assert all(r["prefix_match"] for r in result.rows)


def test_a_framework_agent_draws_one_sample_and_more_are_refused_before_any_work(tasks):
    # its framework makes its own model calls (no per-draw seed cir can set) and its replies are
    # kept by request: K draws of one state would be one draw K times
    agent = toy_agent()
    assert agent.sample(0) is agent
    with pytest.raises(CirError, match="sample 1: a framework agent draws one sample"):
        agent.sample(1)
    calls = []
    with pytest.raises(CirError, match="a framework agent draws one sample"):
        run_task_pairs(tasks[0], agent, KeyDoorEnv(tasks[0]), replace(GRID, samples=2), extractor=FAMILY.extractor,
                       progress=lambda *a: calls.append(a))
    assert calls == []  # refused before the factual run
    with pytest.raises(SettingError, match="samples 2: expected 1 for agent 'langgraph:mod:attr': a framework "
                                           "agent draws one sample") as err:
        RunSettings(agent="langgraph:mod:attr", replay=replace(GRID, samples=2))
    assert err.value.as_option().startswith("--samples 2: expected 1 for agent")
    assert RunSettings(agent="langgraph:mod:attr", replay=GRID).replay.samples == 1
