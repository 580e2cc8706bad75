"""Perturbation semantics: condition names, the perturbation point, feasibility, shown text."""

from __future__ import annotations

import pytest
from support.replay import FakeAgent, FakeEnv

from cir.envs.base import env_reads
from cir.envs.counting import CountingEnv
from cir.episode.harness import Harness
from cir.episode.perturb import (
    MISSING_TEXT,
    NO_READ,
    Perturbation,
    feasibility,
    find_point,
    lagged_answer,
    parse_condition,
    parse_conditions,
    perturbation_point,
    perturbed_step,
)
from cir.episode.transcript import AGENT, Step, Transcript
from cir.util.errors import CirError


def test_parse_conditions():
    assert parse_condition("clean").kind == "clean"
    assert parse_condition("missing").kind == "missing"
    c = parse_condition("stale13")
    assert (c.kind, c.k, c.lookback) == ("stale", 13, 13)
    assert [c.name for c in parse_conditions("clean, stale2,stale1,missing")] == [
        "clean", "stale2", "stale1", "missing"]
    lag = parse_condition("lag3")
    assert (lag.name, lag.kind, lag.k, lag.lookback) == ("lag3", "lag", 3, 3)
    assert [c.kind for c in parse_conditions("stale2,lag2,missing")] == ["stale", "lag", "missing"]


@pytest.mark.parametrize("bad", ["stale0", "stalex", "foo", "stale", "stale-1", "stale01", "Clean",
                                 "lag0", "lag", "lag01", "lagged2", "Lag2"])
def test_bad_condition_names(bad):
    with pytest.raises(CirError, match="condition"):
        parse_condition(bad)


def test_duplicate_and_empty_conditions():
    with pytest.raises(CirError, match="twice"):
        parse_conditions("stale2,stale2")
    with pytest.raises(CirError, match="at least one"):
        parse_conditions(" , ")


@pytest.mark.parametrize("n,point", [(1, 2), (2, 2), (4, 2), (5, 3), (8, 3), (12, 4), (13, 5), (40, 11)])
def test_perturbation_point(n, point):
    assert perturbation_point(n) == point


def test_perturbation_point_fraction():
    assert perturbation_point(10, 0.5) == 6
    assert perturbation_point(10, 0.0) == 1
    with pytest.raises(CirError, match="fraction"):
        perturbation_point(10, 1.5)


def test_feasibility_reasons():
    conds = parse_conditions("clean,stale2")
    ok, reason = feasibility(1, conds)
    assert not ok and "not reached" in reason
    ok, reason = feasibility(4, conds)  # point 2, only 1 earlier action
    assert not ok and "stale2" in reason
    assert feasibility(5, conds) == (True, "ok")  # point 3, two earlier
    assert feasibility(2, parse_conditions("clean,missing,stale1"))[0]


def _factual(*actions: str) -> Transcript:
    """A factual run of these env actions (a thought between two, which is no env action)."""
    steps = [Step(AGENT, a, a, f"answer {i}", f"answer {i}") for i, a in enumerate(actions, start=1)]
    steps.insert(1, Step(AGENT, "think", None, None, "OK."))
    return Transcript("t", "the task", steps)


class _ReadsEnv:
    """An env that says its ``get`` actions are reads (nothing else of an env is needed here)."""

    def __init__(self, answer=None) -> None:
        self.answer = answer

    def reads(self, action: str):
        return action.startswith("get") if self.answer is None else self.answer


RUN = ("get a", "set a", "set b", "get b", "set c", "get c", "set d", "finish")


@pytest.mark.parametrize("fraction, at", [(0.25, None), (0.0, None), (0.5, None), (0.25, 1), (0.25, 6)])
def test_an_env_without_reads_is_perturbed_at_the_protocols_point(fraction, at):
    factual = _factual(*RUN)
    conds = parse_conditions("clean,stale1,lag1")
    for env in (None, object(), CountingEnv(object())):
        point = find_point(factual, conds, fraction, at, env)
        ok, reason = feasibility(len(RUN), conds, fraction, at)
        assert (point.feasible, point.reason) == (ok, reason)
        assert point.protocol == perturbation_point(len(RUN), fraction, at)
        assert point.at == (point.protocol if ok else None)


def test_an_env_with_reads_is_perturbed_at_its_first_read_at_or_after_the_protocols_point():
    factual, env, conds = _factual(*RUN), _ReadsEnv(), parse_conditions("clean,stale2,lag2,missing")
    point = find_point(factual, conds, env=env)  # the protocol's point: env action 3, a change
    assert (point.protocol, point.at, point.reason) == (3, 4, "ok")
    assert RUN[point.at - 1] == "get b"
    assert find_point(factual, conds, at=4, env=env).at == 4  # a read stays where it is
    assert find_point(factual, conds, at=5, env=env).at == 6
    # read through the wrappers, as the replayer's counting and branching envs hold it
    assert find_point(factual, conds, env=CountingEnv(CountingEnv(env))).at == 4
    # no read from the protocol's point on: not prefix-feasible, and the reason says why
    late = find_point(factual, conds, at=7, env=env)
    assert not late.feasible and late.at is None and late.reason.startswith(NO_READ)
    assert "env action 7" in late.reason and "reads" in late.reason
    # not reached is said before any read is looked for
    assert "not reached" in find_point(factual, conds, at=9, env=env).reason


def test_the_lookback_of_stale_and_lag_counts_back_from_the_read():
    factual, env = _factual(*RUN), _ReadsEnv()
    # env action 1 is a read with no earlier env action: stale2 cannot be built there
    assert not find_point(factual, parse_conditions("stale2"), at=1, env=env).feasible
    # env action 2 is a change with one earlier action; the read it moves to (4) has three
    moved = find_point(factual, parse_conditions("stale2"), at=2, env=env)
    assert (moved.at, moved.reason) == (4, "ok")
    assert "stale3" not in find_point(factual, parse_conditions("stale3"), at=2, env=env).reason


def test_an_envs_reads_must_answer_true_or_false():
    assert env_reads(object()) is None
    assert env_reads(CountingEnv(_ReadsEnv()))("get x") is True
    with pytest.raises(CirError, match=r"_ReadsEnv.reads\('set b'\): expected True or False"):
        find_point(_factual(*RUN), [], env=_ReadsEnv(answer="yes"))


def _run(cond: str, at: int):
    env = FakeEnv(["drawer 1", "drawer 2", "shelf 1", "shelf 2", "desk 1"], "shelf 2")
    h = Harness(FakeAgent())
    p = Perturbation(parse_condition(cond), at)
    return h.episode(env, "t", perturbation=p)


def test_stale_shows_true_observation_k_actions_earlier():
    clean = _run("clean", 3)
    stale = _run("stale2", 3)
    acts = [s for s in stale.steps if s.action is not None]
    assert acts[2].shown == acts[0].observation
    assert acts[2].observation != acts[2].shown
    assert "perturb:stale2" in acts[2].events
    # env unchanged: the true observation of the perturbed action equals the clean run's
    clean_acts = [s for s in clean.steps if s.action is not None]
    assert acts[2].observation == clean_acts[2].observation
    # only that one step differs in shown text before the agent reacts
    assert [s.shown for s in acts[:2]] == [s.shown for s in clean_acts[:2]]


def test_missing_and_clean():
    missing = _run("missing", 2)
    acts = [s for s in missing.steps if s.action is not None]
    assert acts[1].shown == MISSING_TEXT and "perturb:missing" in acts[1].events
    clean = _run("clean", 2)
    assert all(s.shown == (s.observation if s.action else s.shown) for s in clean.steps)
    assert all(not s.events for s in clean.steps)


def test_stale_without_enough_history_is_an_error():
    with pytest.raises(CirError, match="stale2"):
        _run("stale2", 2)


def test_lag_needs_as_many_earlier_env_actions_as_stale():
    for k in (1, 2, 3):
        for n in range(1, 20):
            assert feasibility(n, parse_conditions(f"lag{k}")) == tuple(
                r.replace(f"stale{k}", f"lag{k}") if isinstance(r, str) else r
                for r in feasibility(n, parse_conditions(f"stale{k}")))


def _factual_with_snapshots():
    env = FakeEnv(["drawer 1", "drawer 2", "shelf 1", "shelf 2", "desk 1"], "shelf 2")
    factual, snapshots = Harness(FakeAgent()).episode_with_snapshots(env, "t")
    return env, factual, snapshots


def _from_scratch(actions: list[str]) -> str:
    """A new env sent ``actions``: the answer to the last one."""
    env = FakeEnv(["drawer 1", "drawer 2", "shelf 1", "shelf 2", "desk 1"], "shelf 2")
    env.reset()
    obs = ""
    for a in actions:
        obs, _, _ = env.step(a)
    return obs


def test_lagged_answer_is_the_same_command_k_env_actions_earlier():
    """The env restored K actions back answers the command as a fresh env that was sent the
    earlier actions does, and is left in the state after the perturbed action."""
    env, factual, snapshots = _factual_with_snapshots()
    actions = [s.action for s in factual.steps if s.action is not None]
    at = len(actions) - 1
    after = env.snapshot()
    env.restore(snapshots[factual.steps_until_env_action(at)])
    want_state = env.snapshot()
    for k in range(1, at):
        answer = lagged_answer(env, snapshots, factual, at, k)
        assert answer == _from_scratch(actions[: at - 1 - k] + [actions[at - 1]])
        assert env.snapshot() == want_state
    with pytest.raises(CirError, match="lag9 at env action 3 needs 9 earlier"):
        lagged_answer(env, snapshots, factual, 3, 9)
    env.restore(after)


def test_lag_shows_the_answer_and_keeps_the_action_and_true_observation():
    env, factual, snapshots = _factual_with_snapshots()
    actions = [s.action for s in factual.steps if s.action is not None]
    # the take of the mug: two actions earlier the agent was not where the mug is
    at = next(i for i, a in enumerate(actions, 1) if a.startswith("take"))
    step = perturbed_step(parse_condition("lag2"), at, factual, snapshots, env)
    true = factual.steps[factual.steps_until_env_action(at) - 1]
    assert (step.action, step.observation, step.reply) == (true.action, true.observation, true.reply)
    assert true.observation.startswith("You pick up the mug 1")
    assert step.shown == "Nothing happens." == _from_scratch(actions[: at - 3] + [actions[at - 1]])
    assert step.events == [*true.events, "perturb:lag2"]
    # the other conditions do not touch the env
    env.restore(snapshots[0])
    before = env.snapshot()
    observations = [s.observation for s in factual.steps if s.action is not None]
    assert perturbed_step(parse_condition("stale2"), at, factual, snapshots, env).shown == observations[at - 3]
    assert env.snapshot() == before


def test_a_lag_perturbation_without_its_answer_is_refused():
    with pytest.raises(CirError, match="lag2 needs the answer the command got 2 env actions earlier"):
        _run("lag2", 3)
    h = Harness(FakeAgent())
    env = FakeEnv(["drawer 1", "shelf 1", "desk 1"], "shelf 1")
    t = h.episode(env, "t", perturbation=Perturbation(parse_condition("lag1"), 2, lagged="Nothing happens."))
    acts = [s for s in t.steps if s.action is not None]
    assert acts[1].shown == "Nothing happens." and "perturb:lag1" in acts[1].events
