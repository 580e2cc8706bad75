"""The model-free cooking agent: wins clean games, deterministically; misled by what it is shown,
rescued and harmed by harness messages, each through its named mechanism."""

from __future__ import annotations

import pytest

from cir.episode.harness import Harness
from cir.episode.perturb import MISSING_TEXT
from cir.episode.protocol import PLACEBO_TEXT, REFRESH_PREFIX
from cir.families.textworld_cooking.agent.builtin import DEFAULTS, PARAMETERS, CookingAgent
from cir.families.textworld_cooking.agent.mechanisms import DIVERGENCE_MECHANISMS, MECHANISMS
from cir.families.textworld_cooking.env import CookingEnv
from cir.families.textworld_cooking.family import builtin_agent
from cir.util.errors import CirError

INTRO = ("You are hungry! Let's cook a delicious meal. Check the cookbook in the kitchen for the recipe. "
         "Once done, enjoy your meal!\n\n-= Kitchen =-\nYou are in a kitchen. You see a stove. On the counter "
         "you see a cookbook and a red potato.\n\nThere is an exit to the north.")
RECIPE = ('You open the copy of "Cooking: A Modern Approach (3rd Ed.)" and start reading:\n\nIngredients:\n'
          "red potato\n\nDirections:\nfry the red potato\n  prepare meal")
CORRIDOR = "-= Corridor =-\nYou are in a corridor.\n\nThere is an exit to the south."


def _context(*pairs: str) -> list[dict[str, str]]:
    """The intro, then (command, shown text) pairs; a pair whose command is None is a harness message."""
    messages = [{"role": "user", "content": INTRO}]
    for cmd, shown in zip(pairs[::2], pairs[1::2], strict=True):
        if cmd is not None:
            messages.append({"role": "assistant", "content": cmd})
        messages.append({"role": "user", "content": shown})
    return messages


HANDS = ("inventory", "You are carrying nothing.")
COOKED = (*HANDS, "examine cookbook", RECIPE, "take red potato", "You take the red potato from the counter.")


def _reply(context, **overrides):
    reply, read, decided = CookingAgent(overrides=overrides).act_traced(context)
    return reply, [f.mechanism for f in read + decided]


def test_it_wins_most_clean_games_and_runs_are_deterministic(cooking_tasks):
    wins = 0
    for task in cooking_tasks:
        runs = []
        for memo in (True, False):
            transcript = Harness(CookingAgent(seed=0, memo=memo)).episode(CookingEnv(task.game_file), task.task_id)
            runs.append(([s.reply for s in transcript.steps], transcript.won, transcript.trace))
        assert runs[0] == runs[1]
        wins += runs[0][1]
    assert wins >= 2


def test_a_hidden_cook_misleads_it_into_cooking_again():
    context = _context(*COOKED, "cook red potato with stove", "You take the red potato from the counter.")
    assert _reply(context, hidden_cook=1.0) == ("cook red potato with stove", ["hidden_cook"])
    assert _reply(context, hidden_cook=0.0) == ("inventory", ["reground"])  # it checks instead


def test_a_harness_message_rescues_the_doubted_step():
    context = _context(*COOKED, "cook red potato with stove", MISSING_TEXT,
                       None, f"{REFRESH_PREFIX} {INTRO.split(chr(10) * 2, 1)[1]}")
    assert _reply(context, hidden_cook=1.0, harness_recheck=1.0, refresh_reread=0.0) == ("inventory", ["harness_recheck"])
    # the refreshed kitchen still names the potato it took: believed, it is in the room again
    assert _reply(context, hidden_cook=1.0, harness_recheck=1.0, refresh_reread=1.0)[1] == \
        ["refresh_reread", "harness_recheck"]
    assert _reply(context, hidden_cook=1.0, harness_recheck=0.0, over_correct=0.0, interruption=0.0,
                  refresh_reread=0.0)[0] == \
        "cook red potato with stove"


def test_a_harness_message_can_harm_a_right_step():
    context = _context(*COOKED, "cook red potato with stove", "You fried the red potato.", None, PLACEBO_TEXT)
    assert _reply(context, over_correct=1.0, invite_message=1.0) == ("cook red potato with stove", ["over_correct"])  # it burns
    assert _reply(context, over_correct=0.0, interruption=0.0) == ("prepare meal", [])


def test_a_refresh_corrects_where_it_believes_it_is():
    # a go answered by no room: it stays in belief (stale_location) although it moved
    context = _context(*HANDS, "go north", "You take the red potato from the counter.", None,
                       f"{REFRESH_PREFIX} {CORRIDOR}")
    reply, fired = _reply(context, stale_location=1.0, refresh_correction=1.0, harness_recheck=0.0)
    assert (reply, fired) == ("go south", ["refresh_correction"])  # back to the kitchen
    # without the refresh it believes it is still in the kitchen
    assert _reply(context[:-1], stale_location=1.0) == ("examine cookbook", ["stale_location"])


def test_every_mechanism_is_a_parameter_and_named_once():
    assert {m.parameter for m in MECHANISMS.values() if m.parameter} <= set(DEFAULTS)
    assert set(PARAMETERS) == set(DEFAULTS)
    assert {"harness_recheck", "refresh_correction", "over_correct", "interruption", "rewind"} <= DIVERGENCE_MECHANISMS
    assert "hidden_cook" not in DIVERGENCE_MECHANISMS


def test_bad_settings_are_one_clear_error():
    with pytest.raises(CirError, match="agent parameter 'hiden_cook'"):
        CookingAgent(overrides={"hiden_cook": 1.0})
    with pytest.raises(CirError, match="expected a chance from 0 to 1"):
        CookingAgent(overrides={"hidden_cook": 2})
    with pytest.raises(CirError, match="one profile, 'default'"):
        builtin_agent("strong")
    assert builtin_agent(seed=3).params() == CookingAgent(seed=3).params()


def test_at_a_temperature_it_samples_by_content_and_index():
    context = _context(*COOKED)
    cold = CookingAgent()
    assert cold.sample(2) is cold and "temperature" not in cold.params()
    hot = CookingAgent(temperature=1.0)
    assert hot.sample(2).params()["sample"] == 2 and hot.params()["temperature"] == 1.0
    decided = cold.act(context)
    draws = {i: hot.sample(i).act_traced(context) for i in range(60)}
    assert all(CookingAgent(temperature=1.0).sample(i).act(context) == draws[i][0] for i in range(60))
    assert 0 < sum(reply != decided for reply, _, _ in draws.values()) < 60
    for reply, _, fired in draws.values():  # a reply other than the decided one is a named draw
        assert (reply != decided) == any(f.mechanism == "sampled_choice" for f in fired)
    assert "sampled_choice" in DIVERGENCE_MECHANISMS
    assert builtin_agent(seed=0, temperature=0.5).params()["temperature"] == 0.5
