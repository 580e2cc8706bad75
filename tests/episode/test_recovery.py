"""Recovery operations: env queries, shown texts, rewind restores context and env."""

from __future__ import annotations

import pytest
from support.replay import FakeAgent, FakeEnv

from cir.envs.counting import CountingEnv
from cir.episode.harness import Harness, SnapshotHook
from cir.episode.perturb import Perturbation, parse_condition
from cir.episode.protocol import ABLATED_TEXT, REFRESH_PREFIX, REPLAN_TEXT, REWIND_HEADER
from cir.episode.recovery import Checkpoints, get_operation, parse_operations
from cir.util.errors import CirError


def world():
    return FakeEnv(["drawer 1", "drawer 2", "shelf 1", "shelf 2", "desk 1"], "shelf 2")


def start(until=3):
    env = CountingEnv(world())
    h = Harness(FakeAgent())
    t = h.reset(env, "t")
    h.play(env, t, until_env_actions=until)
    return h, env, t


def test_refresh_and_ablated_query_env():
    for name, check in [("refresh", lambda s: s.shown == f"{REFRESH_PREFIX} {s.observation}"),
                        ("refresh_ablated", lambda s: s.shown == ABLATED_TEXT)]:
        h, env, t = start()
        before = (t.env_actions, t.model_turns, env.counts.steps)
        step = h.recover(env, t, name)
        assert step.actor == "harness" and step.action == "look"
        assert step.observation.startswith("You are facing the")
        assert check(step) and step.events == [f"recovery:{name}"]
        assert (t.env_actions, t.model_turns, env.counts.steps) == (before[0] + 1, before[1], before[2] + 1)
        assert t.context()[-1]["content"] == step.shown


def test_replan_no_env_query():
    h, env, t = start()
    steps = env.counts.steps
    step = h.recover(env, t, "replan")
    assert step.action is None and step.shown == REPLAN_TEXT and env.counts.steps == steps
    h.play(env, t)
    assert t.done


def test_rewind_restores_context_and_env():
    env = world()
    h = Harness(FakeAgent())
    hook = SnapshotHook()
    t = h.reset(env, "t")
    pert = Perturbation(parse_condition("stale1"), 3)
    h.play(env, t, until_env_actions=5, perturbation=pert, hooks=[hook])
    anchor = t.steps_until_env_action(3) - 1
    cps = Checkpoints(snapshots=hook.snapshots, anchor=anchor)
    spent = (t.env_actions, t.model_turns)
    step = h.recover(env, t, "rewind", cps)
    target = t.steps_until_env_action(2)
    assert step.rewind_to == target and step.shown.startswith(REWIND_HEADER)
    assert "go to" in step.shown
    # budgets keep what was spent; context is cut back to before the perturbed step
    assert (t.env_actions, t.model_turns) == spent
    ctx = t.context()
    assert len(ctx) == 1 + 2 * target + 1 and ctx[-1]["content"] == step.shown
    assert all("perturb" not in e for s in t.visible_steps() for e in s.events)
    # env is back in the state after env action 2
    check = world()
    h2 = Harness(FakeAgent())
    t2 = h2.reset(check, "t")
    h2.play(check, t2, until_env_actions=2)
    assert env.state == check.state
    # the transcript's env path is the same history: two actions, then what follows the rewind
    assert t.env_path() == t2.env_path() == [s.action for s in t2.steps if s.action]
    assert t.env_path(anchor) == [s.action for s in t.steps[:anchor] if s.action]
    resumed = len(t.steps)
    h.play(env, t)
    assert t.env_path() == t2.env_path() + [s.action for s in t.steps[resumed:] if s.action]
    assert t.done or t.env_actions >= 64 or t.model_turns >= 49


def test_rewind_without_checkpoint_is_an_error():
    h, env, t = start()
    with pytest.raises(CirError, match="rewind"):
        h.recover(env, t, "rewind", Checkpoints())


def test_operation_names():
    assert [o.name for o in parse_operations("refresh,refresh_ablated,replan,rewind")] == [
        "refresh", "refresh_ablated", "replan", "rewind"]
    with pytest.raises(CirError, match="unknown operation 'nap'"):
        get_operation("nap")
    with pytest.raises(CirError, match="twice"):
        parse_operations("refresh,refresh")


def test_every_registry_entry_has_its_implementation_and_nothing_else():
    """The operations are named once (cir.episode.operations); recovery implements each."""
    from cir.episode.operations import OPERATIONS
    from cir.episode.recovery import IMPLEMENTATIONS

    assert list(IMPLEMENTATIONS) == list(OPERATIONS)
    for name, info in OPERATIONS.items():
        op = get_operation(name)
        assert (op.name, op.queries_env, op.info) == (name, info.queries_env, info)


def test_refresh_sends_the_env_s_declared_query_through_wrappers():
    """An env declares what a refresh sends; ALFWorld's (and the default) is `look`."""
    from cir.envs.base import DEFAULT_REFRESH_QUERY, refresh_query

    inner = world()
    sent = []
    step = inner.step
    inner.step = lambda action: (sent.append(action), step(action))[1]
    env = CountingEnv(inner)
    assert refresh_query(env) == DEFAULT_REFRESH_QUERY == "look"
    inner.refresh_query = "inventory"
    assert refresh_query(env) == "inventory"  # read through the counting wrapper
    h = Harness(FakeAgent())
    t = h.reset(env, "t")
    h.play(env, t, until_env_actions=2)
    for name in ("refresh", "refresh_ablated"):
        sent.clear()
        s = h.recover(env, t, name)
        assert sent == ["inventory"] and s.action == "inventory"
    inner.refresh_query = ""
    with pytest.raises(CirError, match="refresh_query"):
        refresh_query(env)
