"""A stale cache that stays stale (cir.episode.perturb.Persistence): the same command sent again after
the perturbation point is shown the perturbed text again, for N env actions or until a recovery
queries the env afresh; a rewind or a replan does not renew it."""

from __future__ import annotations

import pytest
from support.tally import Scripted, Tally

from cir.episode.perturb import Persistence, parse_persistence
from cir.episode.transcript import AGENT, HARNESS, Step
from cir.pairs.replay import run_task_pairs
from cir.pairs.settings import ReplaySettings
from cir.util.errors import CirError, SettingError


class Task:
    task_id = "tally"


def _run(persistence: str, conditions: tuple[str, ...] = ("clean", "stale2", "lag2"),
         operations: tuple[str, ...] = ("refresh", "refresh_ablated", "replan", "rewind")):
    settings = ReplaySettings(conditions=conditions, delays=(1,), operations=operations, persistence=persistence)
    return run_task_pairs(Task(), Scripted(), Tally(), settings, extractor=_NoFeatures())


class _NoFeatures:
    name = "delay-only"
    features = {"f_delay": "the delay"}

    def extract(self, transcript, delay, *, max_turns, max_actions):
        return {"f_delay": float(delay)}


def _episode(result, role: str, condition: str, operation: str | None = None):
    return next(e for e in result.episodes if e.role == role and e.condition == condition
                and e.operation == operation and e.transcript is not None)


def _rows(result) -> dict[tuple[str, str], tuple[int, int]]:
    return {(r["condition"], r["operation"]): (r["y0"], r["y1"]) for r in result.rows}


def test_persistence_is_parsed_from_its_text():
    assert parse_persistence(None).once and parse_persistence("once").once
    assert parse_persistence("refresh") == Persistence(until_refresh=True)
    assert parse_persistence(3) == parse_persistence("3") == Persistence(actions=3)
    assert [parse_persistence(v).text for v in ("once", "refresh", 4)] == ["once", "refresh", "4"]
    for bad in ("0", -1, "two", "03", True, ""):
        with pytest.raises(SettingError, match="persistence"):
            parse_persistence(bad)
    with pytest.raises(CirError, match="persistence"):
        ReplaySettings(persistence="forever")
    # one-shot runs record nothing new: their run.json reads as before
    assert "persistence" not in ReplaySettings().as_dict()
    assert ReplaySettings(persistence=2).as_dict()["persistence"] == "2"


def test_the_point_s_text_is_shown_again_to_the_same_command_only():
    point = Step(AGENT, "read", "read", "The counter shows 1.", "The counter shows 0.", events=["perturb:stale2"])
    before = [Step(AGENT, "inc", "inc", "Click.", "Click."), point, Step(AGENT, "inc", "inc", "Click.", "Click.")]
    again = Persistence(until_refresh=True).again(before, Step(AGENT, "read", "read", "The counter shows 2.",
                                                              "The counter shows 2."))
    assert again.shown == "The counter shows 0." and again.observation == "The counter shows 2."
    assert again.events == ["perturb:stale2:again"]
    other = Step(AGENT, "inc", "inc", "Click.", "Click.")
    assert Persistence(until_refresh=True).again(before, other) is other
    fresh = Step(AGENT, "read", "read", "The counter shows 2.", "The counter shows 2.")
    assert Persistence().again(before, fresh) is fresh  # once
    assert Persistence(actions=1).again(before, fresh) is fresh  # the second env action after the point
    assert Persistence(actions=2).again(before, fresh).shown == "The counter shows 0."
    refreshed = [*before, Step(HARNESS, "refresh", "read", "The counter shows 2.", "[Refreshed] ...")]
    assert Persistence(until_refresh=True).again(refreshed, fresh) is fresh
    replanned = [*before, Step(HARNESS, "replan", None, None, "[Replan] ...")]
    assert Persistence(until_refresh=True).again(replanned, fresh).shown == "The counter shows 0."


def test_a_one_shot_perturbation_is_read_right_the_next_time():
    result = _run("once")
    arm = _episode(result, "no_recovery", "stale2")
    reads = [s for s in arm.transcript.steps if s.action == "read"]
    # env action 3 is the point: its read shows env action 1's text; the reads after it are true
    assert [s.shown for s in reads] == ["The counter shows 0.", "The counter shows 0.", "The counter shows 2.",
                                        "The counter shows 3."]
    assert not any(e.endswith(":again") for s in arm.transcript.steps for e in s.events)
    rows = _rows(result)
    assert rows[("stale2", "replan")] == (1, 1) and rows[("clean", "refresh")] == (1, 1)


def test_a_stale_cache_serves_the_same_read_until_a_refresh():
    result = _run("refresh")
    arm = _episode(result, "no_recovery", "stale2")
    reads = [s for s in arm.transcript.steps if s.action == "read"]
    # env action 3 is the point (stale2: the text of env action 1); every later read is served it again
    assert [s.shown for s in reads] == ["The counter shows 0."] * 4
    assert [s.observation for s in reads] == [f"The counter shows {n}." for n in range(4)]
    assert [e for s in reads[2:] for e in s.events] == ["perturb:stale2:again"] * 2
    rows = _rows(result)
    # the arm now fails (it submits the stale count); a refresh renews the cache and rescues it,
    # the content-ablated refresh too (the harness queried afresh); a replan or a rewind meets the
    # stale answer again when it reads again
    assert rows[("stale2", "refresh")] == (0, 1)
    assert rows[("stale2", "refresh_ablated")] == (0, 1)
    assert rows[("stale2", "replan")] == (0, 0)
    assert rows[("stale2", "rewind")] == (0, 0)
    rewind = _episode(result, "recovery", "stale2", "rewind")
    redone = [s for s in rewind.transcript.steps[rewind.transcript.steps.index(next(
        s for s in rewind.transcript.steps if s.rewind_to is not None)):] if s.action == "read"]
    assert redone[0].shown == "The counter shows 0." and redone[0].observation == "The counter shows 1."
    # the same holds for a lagging replica (lag2: the same read's answer two env actions earlier)
    assert rows[("lag2", "refresh")] == (0, 1) and rows[("lag2", "rewind")] == (0, 0)
    # the clean arm is the factual run, untouched
    assert rows[("clean", "refresh")][0] == 1


def test_a_one_shot_rewind_rescues_what_a_persistent_cache_does_not():
    once, lasting = _rows(_run("once")), _rows(_run("refresh"))
    # one-shot: the arm's later reads are true, so it succeeds and nothing needs rescuing
    assert once[("stale2", "rewind")] == (1, 1)
    assert lasting[("stale2", "rewind")] == (0, 0)


def test_a_cache_of_n_env_actions_expires():
    # N = 2: the read two env actions after the point is served stale, the one four after is not
    result = _run("2", conditions=("clean", "stale2"), operations=("refresh",))
    arm = _episode(result, "no_recovery", "stale2")
    reads = [s for s in arm.transcript.steps if s.action == "read"]
    assert [s.shown for s in reads] == ["The counter shows 0.", "The counter shows 0.", "The counter shows 0.",
                                        "The counter shows 3."]
    assert _rows(result)[("stale2", "refresh")] == (1, 1)
    assert result.summary()["persistence"] == "2"
    assert "persistence" not in _run("once", conditions=("clean", "stale2"), operations=("refresh",)).summary()


def test_missing_persists_too():
    result = _run("refresh", conditions=("clean", "missing"), operations=("refresh", "rewind"))
    arm = _episode(result, "no_recovery", "missing")
    assert [s.shown for s in arm.transcript.steps if s.action == "read"][1:] == ["[Observation unavailable.]"] * 3
    assert {r["shown"] for r in result.rows if r["condition"] == "missing"} == {"anomalous"}
