"""The built-in agent: goal parsing, belief updates, determinism, profiles, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cir.agents.modelfree import Draws
from cir.families.alfworld.agent.beliefs import harness_kind, read_context
from cir.families.alfworld.agent.builtin import PARAMETERS, PROFILES, BuiltinAgent
from cir.families.alfworld.agent.goals import CLEAN, COOL, HEAT, LOOK, SIMPLE, TWO, parse_goal
from cir.families.alfworld.agent.mechanisms import MECHANISMS
from cir.families.alfworld.text import parse_action
from cir.util.errors import CirError

ROOM = (
    "You are in the middle of a room. Looking quickly around you, you see a cabinet 3, "
    "a cabinet 2, a cabinet 1, a countertop 2, a countertop 1, a diningtable 1, a drawer 1, "
    "a fridge 1, a garbagecan 1, a microwave 1, a shelf 1, a sinkbasin 1, and a stoveburner 1."
)


def task(goal: str) -> str:
    return f"{ROOM}\n\nYour task is to: {goal}."


def ctx(goal: str, *pairs: tuple[str | None, str]) -> list[dict[str, str]]:
    """A context from (reply, shown) pairs; reply None is a harness message."""
    msgs = [{"role": "user", "content": task(goal)}]
    for reply, shown in pairs:
        if reply is not None:
            msgs.append({"role": "assistant", "content": reply})
        msgs.append({"role": "user", "content": shown})
    return msgs


# -- goals ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sentence", "task_type", "obj", "recep", "extra"),
    [
        ("put some apple on countertop", SIMPLE, "apple", "countertop", None),
        ("put a mug in coffeemachine", SIMPLE, "mug", "coffeemachine", None),
        ("put a clean lettuce in diningtable", CLEAN, "lettuce", "diningtable", None),
        ("clean some soapbar and put it in toilet", CLEAN, "soapbar", "toilet", None),
        ("put a hot potato in countertop", HEAT, "potato", "countertop", None),
        ("heat some egg and put it in garbagecan", HEAT, "egg", "garbagecan", None),
        ("put a cool mug in shelf", COOL, "mug", "shelf", None),
        ("cool some pan and put it in stoveburner", COOL, "pan", "stoveburner", None),
        ("look at bowl under the desklamp", LOOK, "bowl", None, "desklamp"),
        ("examine the pen with the desklamp", LOOK, "pen", None, "desklamp"),
        ("put two saltshaker in drawer", TWO, "saltshaker", "drawer", 2),
        ("find two cellphone and put them in bed", TWO, "cellphone", "bed", 2),
    ],
)
def test_goal_templates_of_all_six_types(sentence, task_type, obj, recep, extra):
    goal = parse_goal(f"{ROOM}\n\nYour task is to: {sentence}.")
    assert goal is not None
    assert (goal.task_type, goal.obj, goal.recep) == (task_type, obj, recep)
    if task_type == LOOK:
        assert goal.toggle == extra
    if task_type == TWO:
        assert goal.count == 2
    if task_type in (CLEAN, HEAT, COOL):
        assert goal.appliance == {CLEAN: "sinkbasin", HEAT: "microwave", COOL: "fridge"}[task_type]


def test_goal_unknown_sentence_is_none():
    assert parse_goal("Your task is to: dance a little.") is None


def test_parse_action_variants():
    assert parse_action("go to fridge 1") == ("go", "fridge 1")
    assert parse_action("take apple 1 from countertop 2") == ("take", "apple 1", "countertop 2")
    assert parse_action("put apple 1 in/on fridge 1") == ("move", "apple 1", "fridge 1")
    assert parse_action("heat egg 1 with microwave 1") == ("heat", "egg 1", "microwave 1")
    assert parse_action("think: hmm") == ("think",)
    assert parse_action("dance") is None


# -- beliefs ----------------------------------------------------------------------------
GOAL = "heat some apple and put it in diningtable"


def beliefs(context: list[dict[str, str]], **overrides: float):
    """The beliefs after ``context`` with the default profile, some chances forced."""
    params = {**PROFILES["default"], **overrides}
    return read_context(context, Draws(b"test"), params)


def test_beliefs_from_arrival_open_take_move():
    b = beliefs(
        ctx(
            GOAL,
            ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
            ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a apple 1, a egg 2, and a lettuce 1."),
            ("take apple 1 from fridge 1", "You pick up the apple 1 from the fridge 1."),
            ("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."),
            ("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1."),
            ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a knife 1."),
            ("move apple 1 to countertop 1", "You move the apple 1 to the countertop 1."),
        ),
        overlook=0.0, forget_open=0.0,
    )
    assert b.location == "countertop 1"
    assert b.holding is None
    assert b.contents["fridge 1"] == ["egg 2", "lettuce 1"]
    assert b.contents["countertop 1"] == ["knife 1", "apple 1"]
    assert b.opened == {"fridge 1": True, "microwave 1": False}
    assert b.states["apple 1"] == {"heat"}
    assert ("apple 1", "countertop 1") in b.placed
    assert {"fridge 1", "countertop 1"} <= b.searched and "microwave 1" not in b.searched
    assert b.clock == 7 and b.doubts == []


def test_nothing_happens_after_take_drops_the_belief():
    b = beliefs(
        ctx(
            GOAL,
            ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."),
            ("take apple 1 from countertop 1", "Nothing happens."),
        )
    )
    assert b.holding is None
    assert b.contents["countertop 1"] == []
    assert b.fail_streak == 1 and b.last.kind == "nothing"
    assert b.failed == {"take apple 1 from countertop 1": 1}


STALE_GO = (
    ("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed."),
    ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."),
    ("go to drawer 1", "You arrive at cabinet 1. The cabinet 1 is closed."),  # stale2
)


def test_stale_arrival_is_believed_and_the_intended_place_counted_searched():
    """stale_location: believes the old place, counts the intended one searched unseen."""
    b = beliefs(ctx(GOAL, *STALE_GO), stale_location=1.0, forget_open=0.0)
    assert b.location == "cabinet 1"
    assert "drawer 1" in b.searched and "drawer 1" in b.assumed
    assert b.last.kind == "unanswered" and [d.action for d in b.doubts] == [("go", "drawer 1")]


def test_stale_arrival_noticed_when_the_mechanism_is_off():
    b = beliefs(ctx(GOAL, *STALE_GO), stale_location=0.0)
    assert b.location == "countertop 1" and "drawer 1" not in b.searched
    assert b.check == "look"  # still where the odd text left it: look where it is


def test_missing_text_is_taken_as_success():
    c = ctx(GOAL, ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a knife 1."),
            ("go to drawer 1", "[Observation unavailable.]"))
    b = beliefs(c, missing_text=1.0)
    assert b.last.kind == "unreadable" and b.location == "drawer 1"
    assert "drawer 1" in b.assumed and "drawer 1" not in b.contents
    off = beliefs(c, missing_text=0.0)
    assert off.location == "countertop 1" and off.check == "go to drawer 1"


def test_hidden_pickup_leaves_the_hands_empty_in_belief():
    c = ctx(GOAL, ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."),
            ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
            ("take apple 9 from fridge 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."))
    b = beliefs(c, hidden_pickup=1.0)
    assert b.holding is None and b.contents["countertop 1"] == ["apple 1"]
    assert b.check is None and [d.action[0] for d in b.doubts] == ["take"]
    assert beliefs(c, hidden_pickup=0.0).check == "inventory"


def test_a_later_text_settles_a_doubt():
    b = beliefs(ctx(GOAL, *STALE_GO, ("go to drawer 1", "You arrive at drawer 1. The drawer 1 is closed.")),
                stale_location=1.0, forget_open=0.0)
    assert b.doubts == [] and b.location == "drawer 1"
    assert "drawer 1" not in b.assumed  # seen closed now: not searched after all


def test_refresh_corrects_the_location_or_is_misread():
    pairs = (*STALE_GO, (None, "[Refreshed observation] You are facing the drawer 1. Next to it, you see nothing."))
    b = beliefs(ctx(GOAL, *pairs), stale_location=1.0, refresh_correction=1.0, forget_open=0.0)
    assert b.location == "drawer 1" and "drawer 1" not in b.searched and b.doubts == []
    assert b.harness_pending == ("refresh", 1)
    ignored = beliefs(ctx(GOAL, *pairs), stale_location=1.0, refresh_correction=0.0, forget_open=0.0)
    assert ignored.location == "cabinet 1" and "drawer 1" in ignored.assumed
    seen = ctx(GOAL, ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."),
               (None, "[Refreshed observation] You are facing the countertop 1. Next to it, you see nothing."))
    assert beliefs(seen, misread_refresh=1.0).contents["countertop 1"] == []
    assert beliefs(seen, misread_refresh=0.0).contents["countertop 1"] == ["apple 1"]


def test_harness_kinds_are_read_from_the_words():
    from cir.episode.protocol import ABLATED_TEXT, PLACEBO_TEXT, REPLAN_TEXT
    from cir.episode.recovery import rewind_memory

    assert harness_kind("[Refreshed observation] You are facing the sofa 1. Next to it, you see nothing.") == "refresh"
    assert harness_kind(ABLATED_TEXT) == "query"
    assert harness_kind(REPLAN_TEXT) == "replan"
    assert harness_kind(rewind_memory([])) == "rewind"
    assert harness_kind(PLACEBO_TEXT) == "message"


def test_inventory_and_examine_texts():
    b = beliefs(ctx(GOAL, ("inventory", "You are carrying: a apple 1."), ("examine apple 1", "This is a hot apple 1.")))
    assert b.holding == "apple 1" and b.states["apple 1"] == {"heat"}
    assert beliefs(ctx(GOAL, ("inventory", "You are not carrying anything."))).holding is None


def test_memo_gives_the_same_beliefs_and_replies_as_a_full_read():
    contexts = _sample_contexts() + [ctx(GOAL, *STALE_GO, (None, "[Replan] Reconsider your plan."))]
    memo, plain = BuiltinAgent("weak", seed=2), BuiltinAgent("weak", seed=2, memo=False)
    for c in contexts + contexts[::-1]:
        for n in range(1, len(c) + 1):
            assert memo.act_traced(c[:n]) == plain.act_traced(c[:n])


# -- the agent --------------------------------------------------------------------------
def test_profiles_and_settings():
    assert {"weak", "default", "strong"} <= set(PROFILES)
    for name, params in PROFILES.items():
        assert set(params) == set(PARAMETERS), name
        assert {m.parameter for m in MECHANISMS.values() if m.parameter} <= set(params), name
        agent = BuiltinAgent(name, seed=3)
        assert agent.name == f"builtin:{name}"
        s = agent.params()
        assert s["profile"] == name and s["seed"] == 3
        json.dumps(s)  # plain data


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(CirError, match="unknown.*default"):
        BuiltinAgent("genius")
    with pytest.raises(CirError, match="seed"):
        BuiltinAgent("default", seed="x")  # type: ignore[arg-type]


def test_replies_are_actions_or_thoughts():
    agent = BuiltinAgent("default")
    reply = agent.act(ctx(GOAL))
    assert reply.startswith("think:") or parse_action(reply) not in (None, ("think",))


def test_goes_to_a_known_object_and_takes_it():
    agent = BuiltinAgent("strong", seed=1)
    c = ctx(
        "put some apple on diningtable",
        ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."),
    )
    reply = agent.act(c)
    if reply.startswith("think:"):
        c += [{"role": "assistant", "content": reply}, {"role": "user", "content": "OK."}]
        reply = agent.act(c)
    assert reply in ("take apple 1 from countertop 1", "go to countertop 1")


def _replies_script(seed: int) -> str:
    return (
        "import json, sys\n"
        "from cir.families.alfworld.agent.builtin import BuiltinAgent\n"
        "contexts = json.loads(sys.stdin.read())\n"
        f"a = BuiltinAgent('default', seed={seed})\n"
        "print(json.dumps([a.act(c) for c in contexts]))\n"
    )


def _sample_contexts() -> list[list[dict[str, str]]]:
    out = []
    for i in range(12):
        pairs = [
            (f"go to cabinet {1 + i % 3}", f"You arrive at cabinet {1 + i % 3}. The cabinet {1 + i % 3} is closed."),
            (f"open cabinet {1 + i % 3}", f"You open the cabinet {1 + i % 3}. The cabinet {1 + i % 3} is open. In it, you see a mug {i}."),
            ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a knife 1, a bread 1, and a egg 1."),
        ]
        out.append(ctx(GOAL if i % 2 else "put two egg in fridge", *pairs[: 1 + i % 3]))
    return out


def test_same_context_same_reply_across_processes_and_hash_seeds():
    contexts = _sample_contexts()
    local = [BuiltinAgent("default", seed=0).act(c) for c in contexts]
    for hashseed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = subprocess.run(
            [sys.executable, "-c", _replies_script(0)],
            input=json.dumps(contexts), capture_output=True, text=True, env=env, check=True,
        )
        assert json.loads(out.stdout) == local


def test_early_observation_changes_what_follows_sometimes():
    """Contexts differing only in an early observation give different replies at least sometimes."""
    agent = BuiltinAgent("default")
    tail = [
        ("go to countertop 2", "You arrive at countertop 2. On the countertop 2, you see a spoon 1."),
        ("go to shelf 1", "You arrive at shelf 1. On the shelf 1, you see nothing."),
        ("go to garbagecan 1", "You arrive at garbagecan 1. On the garbagecan 1, you see a papertowel 1."),
    ]
    firsts = [
        "You arrive at countertop 1. On the countertop 1, you see a knife 1.",
        "You arrive at countertop 1. On the countertop 1, you see a apple 1.",
        "You arrive at countertop 1. On the countertop 1, you see a bread 1, a egg 1, and a apple 2.",
        "You arrive at cabinet 1. The cabinet 1 is closed.",
        "[Observation unavailable.]",
        "Nothing happens.",
    ]
    replies = {agent.act(ctx(GOAL, ("go to countertop 1", first), *tail)) for first in firsts}
    assert len(replies) >= 2


def test_profiles_share_their_draws_so_a_higher_chance_fires_where_a_lower_one_did():
    """Common random numbers: the draws depend on the seed, not on the parameters, so raising
    one chance keeps every firing of the lower chance and adds some."""
    contexts = _sample_contexts()

    def fired(chance: float) -> list[bool]:
        agent = BuiltinAgent("default", overrides={"repeat": chance})
        return [any(f.mechanism == "repeat" for f in agent.act_traced(c)[2]) for c in contexts]

    low, high = fired(0.3), fired(0.8)
    assert all(h for lo, h in zip(low, high, strict=True) if lo)   # every low firing also fires at 0.8
    assert sum(high) > sum(low) > 0
    assert fired(0.0) == [False] * len(contexts)
    # and a parameter nobody reads on these contexts changes nothing
    plain = [BuiltinAgent("default").act(c) for c in contexts]
    assert [BuiltinAgent("default", overrides={"misread_refresh": 0.9}).act(c) for c in contexts] == plain


def test_seed_changes_behaviour_somewhere():
    contexts = _sample_contexts()
    a = [BuiltinAgent("weak", seed=0).act(c) for c in contexts]
    b = [BuiltinAgent("weak", seed=1).act(c) for c in contexts]
    assert a != b


def test_failed_go_to_is_followed_by_regrounding_or_a_retry():
    """'go to X' fails when already at X: the agent retries, looks, or examines X."""
    replies = set()
    for seed in range(12):
        agent = BuiltinAgent("default", seed=seed)
        c = ctx(
            GOAL,
            ("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed."),
            ("go to drawer 1", "You arrive at cabinet 1. The cabinet 1 is closed."),  # stale
            ("go to drawer 1", "Nothing happens."),
        )
        replies.add(agent.act(c))
    assert replies & {"look", "examine drawer 1", "go to drawer 1"}
    assert all(r.startswith("think:") or parse_action(r) is not None for r in replies)


def test_refresh_text_changes_the_next_reply_sometimes():
    """A harness message (refresh) is read like any text: the reply may change."""
    base = [
        ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a knife 1."),
        ("go to drawer 1", "You arrive at countertop 1. On the countertop 1, you see a knife 1."),
    ]
    changed = 0
    for seed in range(20):
        agent = BuiltinAgent("default", seed=seed)
        a = agent.act(ctx(GOAL, *base))
        b = agent.act(ctx(GOAL, *base, (None, "[Refreshed observation] You are facing the drawer 1. Next to it, you see nothing.")))
        changed += a != b
    assert changed >= 1


def test_replan_and_ablated_messages_get_a_reply():
    agent = BuiltinAgent("strong")
    for text in ("[Replan] Before you act, reconsider your plan.", "[The environment was queried again; the result is not shown.]"):
        reply = agent.act(ctx(GOAL, ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."), (None, text)))
        assert reply.startswith("think:") or parse_action(reply) is not None


def test_factory_builds_profiles():
    from cir.families import make_agent

    assert make_agent("builtin:weak").name == "builtin:weak"
    assert make_agent("builtin").name == "builtin:default"
    with pytest.raises(CirError):
        make_agent("builtin:nope")


def test_every_profile_finishes_a_scripted_world():
    """A tiny scripted world (no engine): every profile's replies stay well-formed for 40 turns."""
    for name in PROFILES:
        agent = BuiltinAgent(name)
        c = ctx("put a clean mug in shelf")
        for _ in range(40):
            reply = agent.act(c)
            assert reply.startswith("think:") or parse_action(reply) is not None, reply
            shown = "OK." if reply.startswith("think:") else "Nothing happens."
            c += [{"role": "assistant", "content": reply}, {"role": "user", "content": shown}]
