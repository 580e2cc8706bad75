"""Perturbation semantics: condition names, the perturbation point, feasibility, shown text."""

from __future__ import annotations

import pytest
from support.replay import FakeAgent, FakeEnv

from cir.episode.harness import Harness
from cir.episode.perturb import (
    MISSING_TEXT,
    Perturbation,
    feasibility,
    parse_condition,
    parse_conditions,
    perturbation_point,
)
from cir.util.errors import CirError


def test_parse_conditions():
    assert parse_condition("clean").kind == "clean"
    assert parse_condition("missing").kind == "missing"
    c = parse_condition("stale13")
    assert (c.kind, c.k, c.lookback) == ("stale", 13, 13)
    assert [c.name for c in parse_conditions("clean, stale2,stale1,missing")] == [
        "clean", "stale2", "stale1", "missing"]


@pytest.mark.parametrize("bad", ["stale0", "stalex", "foo", "stale", "stale-1", "stale01", "Clean"])
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
