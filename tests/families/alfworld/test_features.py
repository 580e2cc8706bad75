"""Features read only what the agent was shown, up to the decision point."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cir.episode.transcript import Step, Transcript
from cir.families.alfworld.features import (
    FEATURES,
    action_kind,
    answers,
    extract_features,
)
from cir.families.alfworld.goals import parse_goal

TASK = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, "
        "a countertop 1, a fridge 1, and a microwave 1.\nYour task is to: heat some apple and put it in "
        "countertop.")

# (reply, true observation) of a clean run; the agent is shown the true observation.
CLEAN_RUN = [
    ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1, and a knife 1."),
    ("think: the apple is here, take it", None),
    ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
    ("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."),
    ("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1."),
    ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a knife 1."),
    ("move apple 1 to countertop 1", "You move the apple 1 to the countertop 1."),
    ("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed."),
    ("open cabinet 1", "You open the cabinet 1. The cabinet 1 is open. In it, you see nothing."),
]


def step(reply: str, obs: str | None, shown: str | None = None, events: list[str] | None = None) -> Step:
    if obs is None:
        return Step("agent", reply, None, None, "OK.")
    return Step("agent", reply, reply, obs, obs if shown is None else shown, events=list(events or []))


def clean_transcript() -> Transcript:
    return Transcript("t1", TASK, [step(r, o) for r, o in CLEAN_RUN])


def env_shown(t: Transcript) -> list[str]:
    return [s.shown for s in t.steps if s.action is not None]


def stale2_transcript(at: int) -> Transcript:
    """Env action ``at`` (1-based) shows the observation of env action ``at - 2``."""
    t = clean_transcript()
    shown = env_shown(t)
    k = 0
    for i, s in enumerate(t.steps):
        if s.action is not None:
            k += 1
            if k == at:
                t.steps[i] = replace(s, shown=shown[at - 3], events=["perturb:stale2"])
    return t


def test_keys_types_and_order() -> None:
    f = extract_features(clean_transcript(), 1)
    assert list(f) == list(FEATURES)
    assert all(isinstance(v, float) and math.isfinite(v) for v in f.values())
    assert all(name.startswith("f_") and FEATURES[name] for name in FEATURES)


def test_deterministic() -> None:
    assert extract_features(clean_transcript(), 2) == extract_features(clean_transcript(), 2)


def test_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError):
        extract_features(clean_transcript(), -1)


def test_true_observation_and_events_are_never_read() -> None:
    """Stale2 and clean arms with equal *shown* text give equal features; the true
    observation, the perturbation event and the env flags change nothing."""
    clean = clean_transcript()
    other = clean_transcript()
    for i, s in enumerate(other.steps):
        if s.action is not None:
            other.steps[i] = replace(s, observation="TRUE TEXT THE AGENT NEVER SAW " + str(i),
                                     events=["perturb:stale2", "condition:stale2"], done=i == 3, won=True)
    for d in range(0, 6):
        assert extract_features(clean, d) == extract_features(other, d)


def test_stale2_and_clean_arms_agree_up_to_the_perturbed_observation() -> None:
    at = 5  # env action "go to countertop 1" is shown the arrival at microwave 1
    clean, stale = clean_transcript(), stale2_transcript(at)
    # Prefixes that end before the perturbed observation: identical features at any delay.
    n_before = clean.steps_until_env_action(at - 1)
    for n in range(1, n_before + 1):
        for d in range(0, 4):
            assert extract_features(clean.prefix(n), d) == extract_features(stale.prefix(n), d)
    # At the perturbed observation and after, the shown text differs, and so do the features.
    n = clean.steps_until_env_action(at)
    f_clean = extract_features(clean.prefix(n), 0)
    f_stale = extract_features(stale.prefix(n), 0)
    assert f_clean != f_stale
    assert f_stale["f_suspect_seen_before"] == 1.0 and f_clean["f_suspect_seen_before"] == 0.0
    assert f_stale["f_suspect_repeat_lag2"] == 1.0
    assert f_stale["f_suspect_arrival_mismatch"] == 1.0 and f_clean["f_suspect_arrival_mismatch"] == 0.0
    assert f_stale["f_suspect_mismatch"] == 1.0 and f_clean["f_suspect_mismatch"] == 0.0
    # A stale arm whose stale text happens to equal the clean text is indistinguishable.
    same = clean_transcript()
    for i, s in enumerate(same.steps):
        if s.action is not None:
            same.steps[i] = replace(s, events=["perturb:stale2"], observation="different truth")
    assert extract_features(same.prefix(n), 1) == extract_features(clean.prefix(n), 1)


def test_only_the_prefix_matters() -> None:
    """Two runs that share a prefix and differ afterwards: features of the prefix agree."""
    a = clean_transcript()
    b = clean_transcript()
    b.steps[5:] = [step("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed."),
                   step("open cabinet 1", "Nothing happens."), step("think: hmm", None)]
    for n in range(0, 6):
        for d in range(0, 4):
            assert extract_features(a.prefix(n), d) == extract_features(b.prefix(n), d)
    # and the prefix's features differ from the longer transcript's (they are not cached globally)
    assert extract_features(a.prefix(5), 1) != extract_features(a, 1)


def test_suspect_is_env_action_number_env_actions_minus_delay() -> None:
    t = stale2_transcript(5)
    n = t.steps_until_env_action(7)  # two env actions after the perturbed one
    f2 = extract_features(t.prefix(n), 2)  # suspect = action 5 (perturbed "go to countertop 1")
    f1 = extract_features(t.prefix(n), 1)  # suspect = action 6 (clean move)
    assert f2["f_suspect_arrival_mismatch"] == 1.0 and f2["f_suspect_go"] == 1.0
    assert f1["f_suspect_arrival_mismatch"] == 0.0 and f1["f_suspect_go"] == 0.0
    assert f2["f_delay"] == 2.0 and f2["f_has_suspect"] == 1.0
    # a delay reaching before the first env action: no suspect
    f = extract_features(t.prefix(n), 7)
    assert f["f_has_suspect"] == 0.0 and f["f_suspect_mismatch"] == 0.0


def test_missing_observation_and_noops() -> None:
    t = clean_transcript()
    t.steps[3] = replace(t.steps[3], shown="[Observation unavailable.]")
    t.steps[4] = replace(t.steps[4], shown="Nothing happens.")
    n = t.steps_until_env_action(4)
    f = extract_features(t.prefix(n), 1)
    assert f["f_suspect_unparsed"] == 1.0 and f["f_suspect_mismatch"] == 1.0
    assert f["f_post_noops"] == 1.0 and f["f_noop_streak"] == 1.0
    assert f["f_suspect_words"] == 2.0


def test_budget_progress_and_repetition() -> None:
    t = clean_transcript().prefix(7)
    f = extract_features(t, 0, max_turns=10, max_actions=20)
    assert f["f_model_turns"] == 7 and f["f_env_actions"] == 6
    assert f["f_turns_left"] == 3 and f["f_actions_left"] == 14
    assert f["f_budget_used"] == pytest.approx(0.7)
    assert f["f_progress"] == 1.0  # take, heat, move: all three subgoals
    assert f["f_pickups"] == 1 and f["f_transforms"] == 1 and f["f_placements"] == 1
    assert f["f_holding"] == 0.0 and f["f_since_progress"] == 0.0 and f["f_goal_obj_seen"] == 1.0
    assert f["f_action_repeat_frac"] == pytest.approx(1 / 6, abs=1e-6)  # "go to countertop 1" twice
    assert f["f_think_frac"] == pytest.approx(1 / 7, abs=1e-6)
    assert f["f_places_visited"] == 2.0
    loop = Transcript("t", TASK, [step(a, "Nothing happens.") for a in ["go to a 1", "go to b 1"] * 3])
    g = extract_features(loop, 1)
    assert g["f_action_cycle"] == 1.0 and g["f_noop_frac"] == 1.0 and g["f_recent_action_repeats"] == 4


@pytest.mark.parametrize("goal, obj, two, transform, look", [
    ("put a mug in desk", "mug", False, False, False),
    ("put some spraybottle on toilet", "spraybottle", False, False, False),
    ("clean some apple and put it in fridge", "apple", False, True, False),
    ("put a hot egg in countertop", "egg", False, True, False),
    ("cool some lettuce and put it in countertop", "lettuce", False, True, False),
    ("look at bowl under the desklamp", "bowl", False, False, True),
    ("examine the alarmclock with the desklamp", "alarmclock", False, False, True),
    ("put two cellphone in sofa", "cellphone", True, False, False),
    ("find two pen and put them in drawer", "pen", True, False, False),
])
def test_goal_parsing(goal: str, obj: str, two: bool, transform: bool, look: bool) -> None:
    g = parse_goal(f"You are in the middle of a room.\nYour task is to: {goal}.")
    assert (g.obj, g.count == 2, g.transform is not None, g.look) == (obj, two, transform, look)


def test_the_features_and_the_agent_read_the_goal_with_one_parser() -> None:
    from cir.families.alfworld import features, goals
    from cir.families.alfworld.agent import beliefs

    assert features.parse_goal is goals.parse_goal is beliefs.parse_goal


def test_a_goal_that_fits_no_template_asks_for_one_object_placed() -> None:
    text = "You are in the middle of a room.\nYour task is to: dance a little."
    t = Transcript("t", text, [Step("agent", "look", "look", "You are in the middle of a room.",
                                    "You are in the middle of a room.")])
    f = extract_features(t, 0)
    assert parse_goal(text) is None
    assert (f["f_task_pick_two"], f["f_task_transform"], f["f_task_look"], f["f_goal_obj_seen"]) == (0, 0, 0, 0)
    assert f["f_subgoals_left"] == 2  # take one, place it


def test_answers_and_kinds() -> None:
    assert answers("go to desk 1", "You arrive at desk 1. On the desk 1, you see nothing.")
    assert not answers("go to desk 1", "You arrive at desk 2. On the desk 2, you see nothing.")
    assert answers("open fridge 1", "Nothing happens.")
    assert answers("take mug 1 from desk 1", "You pick up the mug 1 from the desk 1.")
    assert not answers("take mug 1 from desk 1", "You arrive at desk 1. On the desk 1, you see a mug 1.")
    assert answers("move mug 1 to shelf 2", "You move the mug 1 to the shelf 2.")
    assert answers("look", "You are facing the desk 1. Next to it, you see nothing.")
    assert answers("inventory", "You are not carrying anything.")
    assert answers("use desklamp 1", "You turn on the desklamp 1.")
    assert answers("examine mug 1", "This is a hot mug 1.")
    assert not answers("dance", "You arrive at desk 1.")
    assert action_kind("heat apple 1 with microwave 1") == "transform"
    assert action_kind("go to desk 1") == "go" and action_kind("xyzzy") == "other"


texts = st.sampled_from([
    "You arrive at desk 1. On the desk 1, you see a mug 1.", "Nothing happens.",
    "You pick up the mug 1 from the desk 1.", "[Observation unavailable.]",
    "You arrive at shelf 1. On the shelf 1, you see nothing.", "You move the mug 1 to the shelf 1.",
])
actions = st.sampled_from(["go to desk 1", "take mug 1 from desk 1", "go to shelf 1",
                           "move mug 1 to shelf 1", "think: where is it", "look"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(actions, texts, texts), min_size=1, max_size=12), st.integers(0, 5),
       st.integers(0, 12))
def test_property_truth_events_and_suffix_never_matter(
        run: list[tuple[str, str, str]], delay: int, cut: int) -> None:
    def build(truth_from_second: bool, with_events: bool) -> Transcript:
        steps = []
        for a, shown, other in run:
            if a.startswith("think:"):
                steps.append(Step("agent", a, None, None, "OK."))
            else:
                steps.append(Step("agent", a, a, other if truth_from_second else shown, shown,
                                  events=["perturb:stale2"] if with_events else []))
        return Transcript("t", TASK, steps)

    a, b = build(False, False), build(True, True)
    n = min(cut, len(run))
    assert extract_features(a.prefix(n), delay) == extract_features(b.prefix(n), delay)
    # a different continuation after the prefix changes nothing about the prefix
    c = build(False, False)
    c.steps[n:] = [Step("agent", "go to sofa 1", "go to sofa 1", "x", "Nothing happens.")]
    assert extract_features(a.prefix(n), delay) == extract_features(c.prefix(n), delay)


def test_what_a_harness_message_can_act_on() -> None:
    """The current place's listing, the last step's kind and the step before the suspect:
    the state over-correction, distraction and a two-step-old text act on."""
    t = clean_transcript()
    arrived = extract_features(t.prefix(1), 0)  # at countertop 1: an apple and a knife
    assert arrived["f_here_listed"] == 2 and arrived["f_here_goal_obj"] == 1
    assert arrived["f_here_lookalike"] == 0 and arrived["f_here_could_hold"] == 1
    assert arrived["f_last_progress"] == 0 and arrived["f_prev_take_or_move"] == 0
    taken = extract_features(t.prefix(3), 0)  # picked the apple up there
    assert taken["f_last_progress"] == 1 and taken["f_here_listed"] == 1 and taken["f_here_goal_obj"] == 0
    carried = extract_features(t.prefix(4), 0)  # the go-to after the pickup is the suspect
    assert carried["f_prev_take_or_move"] == 1 and carried["f_last_progress"] == 0
    assert carried["f_here_listed"] == 0 and carried["f_here_could_hold"] == 1  # a microwave holds apples
    opened = extract_features(t, 0)
    assert opened["f_last_open"] == 1 and opened["f_here_listed"] == 0
    # a look-alike of the goal's object listed here (an apple is taken for a tomato and back)
    lure = Transcript("t", TASK, [step("go to countertop 1", "You arrive at countertop 1. On the countertop 1, "
                                                            "you see a tomato 1.")])
    assert extract_features(lure, 0)["f_here_lookalike"] == 1
