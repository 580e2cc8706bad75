"""The cooking family's LLM prompt: the reply -> command parser, the chat and completion prompts."""

from __future__ import annotations

import pytest

from cir.episode.protocol import REFRESH_PREFIX
from cir.families.textworld_cooking.prompts import (
    EXAMPLES,
    INSTRUCTIONS,
    chat_messages,
    completion_prompt,
    parse_action,
)


@pytest.mark.parametrize("reply, action", [
    ("take red potato", "take red potato"),
    ("> Take the red potato.", "take red potato"),
    ("Action: take red potato from counter", "take red potato from counter"),
    ("cook red potato with stove", "cook red potato with stove"),
    ("fry the red potato on the stove", "cook red potato with stove"),
    ("roast pork chop in the oven", "cook pork chop with oven"),
    ("slice the yellow potato with the knife", "slice yellow potato with knife"),
    ("cut carrot with knife", "slice carrot with knife"),
    ("dice carrot", "dice carrot with knife"),
    ("prepare meal", "prepare meal"),
    ("make the meal", "prepare meal"),
    ("eat meal", "eat meal"),
    ("Eat the meal!", "eat meal"),
    ("go north", "go north"),
    ("n", "go north"),
    ("walk to the west", "go west"),
    ("open wooden door", "open wooden door"),
    ("read the cookbook", "examine cookbook"),
    ("`inventory`", "inventory"),
    ("look\nI will look around first.", "look"),
    ("think: the kitchen is north", "think: the kitchen is north"),
])
def test_a_reply_becomes_one_textworld_command(reply, action):
    parsed = parse_action(reply)
    assert (parsed.action, parsed.ok, parsed.raw) == (action, True, reply)


@pytest.mark.parametrize("reply, action", [("", "wait"), ("   \n ", "wait"), ("dance with the cat", "dance with cat")])
def test_a_reply_without_a_command_is_passed_on_flagged(reply, action):
    parsed = parse_action(reply)
    assert (parsed.action, parsed.ok) == (action, False)


def test_the_prompts_hold_the_instructions_examples_and_episode():
    context = [{"role": "user", "content": "You are hungry! ...\n\n-= Kitchen =-"},
               {"role": "assistant", "content": "examine cookbook"},
               {"role": "user", "content": "You open the copy"},
               {"role": "user", "content": f"{REFRESH_PREFIX} -= Kitchen =-"}]
    chat = chat_messages(context)
    assert chat[0]["role"] == "system" and INSTRUCTIONS in chat[0]["content"]
    assert all(example in chat[0]["content"] for example in EXAMPLES)
    assert [m["role"] for m in chat[1:]] == ["user", "assistant", "user"]  # harness note joined to its observation
    assert chat[-1]["content"] == f"You open the copy\n{REFRESH_PREFIX} -= Kitchen =-"
    text = completion_prompt(context)
    assert text.endswith("\n>") and "> examine cookbook\nYou open the copy" in text
    for example in EXAMPLES:  # the examples use commands the parser keeps as they are
        for line in example.splitlines():
            if line.startswith("> ") and not line.startswith("> think:"):
                assert parse_action(line).action == line[2:], line
