"""The harness loop: budgets, thoughts, caching, resumability, unknown replies, router hook."""

from __future__ import annotations

from support.replay import FakeAgent, FakeEnv

from cir.episode.harness import Harness, SnapshotHook
from cir.episode.protocol import THINK_ACK
from cir.router.runtime import RouterHook


def world():
    return FakeEnv(["drawer 1", "drawer 2", "shelf 1", "shelf 2", "desk 1"], "shelf 2")


def test_episode_records_steps_and_wins():
    env = world()
    t = Harness(FakeAgent()).episode(env, "t1")
    assert t.won and t.done
    assert t.task_text.startswith("You are in the middle of a room")
    first = t.steps[0]
    assert first.action is None and first.shown == THINK_ACK and first.reply.startswith("think:")
    for s in t.steps[1:]:
        assert s.actor == "agent" and s.action is not None and s.shown == s.observation
    assert t.steps[-1].action == "move mug 1 to desk 1"
    assert t.model_turns == len(t.steps)


class Scripted:
    name = "scripted"

    def __init__(self, replies):
        self.replies = replies
        self.calls = 0

    def params(self):
        return {"replies": self.replies}

    def act(self, context):
        self.calls += 1
        n = sum(1 for m in context if m["role"] == "assistant")
        return self.replies[n % len(self.replies)]


def test_budgets():
    t = Harness(Scripted(["think: hmm"]), max_turns=5).episode(world(), "t")
    assert t.model_turns == 5 and t.env_actions == 0 and not t.done
    t = Harness(Scripted(["go to drawer 1"]), max_turns=49, max_actions=7).episode(world(), "t")
    assert t.env_actions == 7 and t.model_turns == 7 and not t.won


def test_unknown_and_empty_replies_never_crash():
    t = Harness(Scripted(["", "jump around\nsecond line", "  ", None]), max_turns=4).episode(world(), "t")
    assert [s.shown for s in t.steps] == ["Nothing happens."] * 4
    assert t.steps[1].action == "jump around"


def test_cache_and_resume_are_exact():
    agent = FakeAgent()
    cache: dict = {}
    h = Harness(agent, reply_cache=cache)
    env = world()
    full = h.episode(env, "t")
    calls = agent.calls
    # resume in pieces from snapshots: identical transcript, no new agent calls
    h2 = Harness(agent, reply_cache=cache)
    env2 = world()
    t = h2.reset(env2, "t")
    h2.play(env2, t, until_env_actions=2)
    assert t.env_actions == 2
    snap = env2.snapshot()
    h2.play(env2, t, until_env_actions=4)
    env2.restore(snap)
    t = t.prefix(t.steps_until_env_action(2))
    h2.play(env2, t)
    assert t.fingerprint() == full.fingerprint()
    assert agent.calls == calls and h2.costs.agent_calls == 0
    assert h2.costs.cache_hits == t.model_turns + 2


def test_snapshot_hook_keys_are_step_counts():
    env = world()
    h = Harness(FakeAgent())
    hook = SnapshotHook(at={1, 3})
    t = h.episode(env, "t", hooks=[hook])
    assert sorted(hook.snapshots) == [t.steps_until_env_action(1), t.steps_until_env_action(3)]


class AlwaysRouter:
    delays = (1, 2, 4)

    def __init__(self, answer):
        self.answer = answer
        self.asked = []

    def decide(self, transcript, delay):
        self.asked.append((transcript.env_actions, delay))

        class D:
            recover = self.answer
            operation = "refresh" if self.answer else None

        return D()


def test_router_hook_refreshes_at_most_once():
    env = world()
    router = AlwaysRouter(True)
    t = Harness(FakeAgent()).episode(env, "t", hooks=[RouterHook(router, at=2)])
    assert router.asked == [(3, 1)]
    harness_steps = [s for s in t.steps if s.actor == "harness"]
    assert len(harness_steps) == 1 and harness_steps[0].action == "look"
    router = AlwaysRouter(False)
    t = Harness(FakeAgent()).episode(world(), "t", hooks=[RouterHook(router, at=0)])
    assert [d for _, d in router.asked] == [1, 2, 4]
    assert not any(s.actor == "harness" for s in t.steps)
    assert any("router:d=2:skip" in s.events for s in t.steps)


def test_at_most_once_is_one_rule_for_the_router_and_its_hook():
    import inspect

    from cir.router.runtime import may_recover

    # the hook keeps no count of its own (a max_interventions > 1 did nothing with a Router)
    assert "max_interventions" not in inspect.signature(RouterHook).parameters
    env, router = world(), AlwaysRouter(True)
    hook = RouterHook(router, at=1)
    harness = Harness(FakeAgent())
    transcript = harness.reset(env, "t")
    harness.recover(env, transcript, "placebo")  # a recovery some other part of the harness made
    assert not may_recover(transcript)
    harness.play(env, transcript, hooks=[hook])
    assert router.asked == [] and hook.decisions == []  # the protocol's rule: nothing more to ask
