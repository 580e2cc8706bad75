"""The LLM prompt of the cooking games: instructions, two worked examples, and reply -> command.

The family's prompt :data:`PROMPT` (an :class:`~cir.agents.prompt.LLMPrompt`): :data:`INSTRUCTIONS`,
:data:`EXAMPLES` and :func:`parse_action` (a model's free-form reply -> one TextWorld command,
or a ``think:`` thought); :func:`chat_messages` and :func:`completion_prompt` render a request
with it. The examples
are written for this project in the games' own wording and command syntax (``take red
potato``, ``cook red potato with stove``, ``slice red potato with knife``, ``prepare
meal``, ``eat meal``); one shows recovering from a refused command.
"""

from __future__ import annotations

import re

from cir.agents.prompt import LLMPrompt, ParsedAction, parse_reply
from cir.episode.protocol import THINK_ACK, THINK_PREFIX

PROMPT_VERSION = "cir-cooking-1"

INSTRUCTIONS = (
    "You are playing a text cooking game. Find the kitchen, read the cookbook, gather the ingredients "
    "it lists, prepare them as its directions say, then prepare the meal and eat it. Type one command "
    "per turn.\n"
    "Commands: go north/south/east/west, open X, take X, take X from Y, drop X, examine X, look, "
    "inventory, slice X with knife, dice X with knife, chop X with knife, cook X with stove (fry), "
    "cook X with oven (roast), cook X with bbq (grill), prepare meal, eat meal.\n"
    f"Write {THINK_PREFIX} ... to plan; the game answers {THINK_ACK} Cooking something twice burns it "
    "and loses the game."
)

_FIRST = """\
You are hungry! Let's cook a delicious meal. Check the cookbook in the kitchen for the recipe. Once done, enjoy your meal!

-= Corridor =-
You are in a corridor. There is an exit to the north. There is an exit to the west.
> go north
-= Kitchen =-
You are in a kitchen. You see a fridge. The fridge contains a yellow potato. You see a counter. On the counter you see a cookbook and a knife. You see a stove.

There is an exit to the south.
> examine cookbook
You open the copy of "Cooking: A Modern Approach (3rd Ed.)" and start reading:

Ingredients:
yellow potato

Directions:
slice the yellow potato
  fry the yellow potato
  prepare meal
> take yellow potato
You take the yellow potato from the fridge.
> take knife
You take the knife from the counter.
> slice yellow potato with knife
You slice the yellow potato.
> cook yellow potato with stove
You fried the yellow potato.
> prepare meal
Adding the meal to your inventory.
> eat meal
You eat the meal. Not bad."""

_SECOND = """\
You are hungry! Let's cook a delicious meal. Check the cookbook in the kitchen for the recipe. Once done, enjoy your meal!

-= Kitchen =-
You are in a kitchen. You see an oven. You see a table. On the table you see a cookbook.

There is a closed wooden door leading east.
> examine cookbook
You open the copy of "Cooking: A Modern Approach (3rd Ed.)" and start reading:

Ingredients:
red apple

Directions:
dice the red apple
  roast the red apple
  prepare meal
> think: The recipe needs a red apple and a knife; neither is here. I look behind the door.
OK.
> go east
You can't go that way.
> open wooden door
You open wooden door.
> go east
-= Garden =-
You are in a garden. You see a patio table. On the patio table you see a red apple and a knife.

There is an open wooden door leading west.
> take red apple
You take the red apple from the patio table.
> take knife
You take the knife from the patio table.
> dice red apple with knife
You dice the red apple.
> go west
-= Kitchen =-
You are in a kitchen. You see an oven. You see a table. On the table you see a cookbook.

There is an open wooden door leading east.
> cook red apple with oven
You roasted the red apple.
> prepare meal
Adding the meal to your inventory.
> eat meal
You eat the meal. Not bad."""

#: the two examples, in the order they are shown
EXAMPLES: tuple[str, str] = (_FIRST, _SECOND)


# -- a reply -> one command ------------------------------------------------------------------------------
#: what an empty reply becomes: a command that changes nothing (the game answers "Time passes.")
EMPTY_REPLY_ACTION = "wait"


_ARTICLE = re.compile(r"\b(?:the|a|an|some)\s+")
_DIRECTIONS = {"n": "north", "s": "south", "e": "east", "w": "west",
               "north": "north", "south": "south", "east": "east", "west": "west"}
_X = r"(?P<x>[a-z][a-z \-']*?)"
_Y = r"(?P<y>[a-z][a-z \-']*?)"

# (a model's words for a command, how to write it); run in order on the lower-cased, article-free line
_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(?:go|walk|move|head)(?: to(?: the)?)? (?P<d>north|south|east|west|n|s|e|w)$"), "go {d}"),
    (re.compile(r"^(?P<d>north|south|east|west|n|s|e|w)$"), "go {d}"),
    (re.compile(rf"^(?:take|pick up|get|grab) {_X} (?:from|off|out of) {_Y}$"), "take {x} from {y}"),
    (re.compile(rf"^(?:take|pick up|get|grab) {_X}$"), "take {x}"),
    (re.compile(rf"^(?:drop|put down) {_X}$"), "drop {x}"),
    (re.compile(rf"^(?:open) {_X}$"), "open {x}"),
    (re.compile(rf"^(?P<v>slice|dice|chop|cut) {_X} (?:with|using) {_Y}$"), "{v} {x} with {y}"),
    (re.compile(rf"^(?P<v>slice|dice|chop) {_X}$"), "{v} {x} with knife"),
    (re.compile(rf"^(?:cook|fry|roast|grill|bake) {_X} (?:with|using|in|on) {_Y}$"), "cook {x} with {y}"),
    (re.compile(r"^(?:prepare|make|cook) (?:the )?meal$"), "prepare meal"),
    (re.compile(r"^(?:eat) (?:the )?meal$"), "eat meal"),
    (re.compile(r"^(?:inventory|inv|i|check inventory)$"), "inventory"),
    (re.compile(r"^(?:look|look around|l)$"), "look"),
    (re.compile(rf"^(?:examine|read|inspect|look at|check|x) {_X}$"), "examine {x}"),
]


def parse_action(reply: str) -> ParsedAction:
    """The TextWorld command (or ``think: ...`` thought) in a model's ``reply``; never raises.

    A reply with no recognisable command is passed on cleaned, ``ok=False`` (the game refuses it).
    """
    return parse_reply(reply, _command, empty=EMPTY_REPLY_ACTION, think=THINK_PREFIX)


def _command(line: str) -> tuple[str, bool]:
    """The cooking games' grammar on a reply's cleaned line (articles dropped too)."""
    cmd = _ARTICLE.sub("", line).strip()
    for pattern, template in _RULES:
        match = pattern.match(cmd)
        if match:
            parts = {k: v.strip() for k, v in match.groupdict().items()}
            if "d" in parts:
                parts["d"] = _DIRECTIONS[parts["d"]]
            if parts.get("v") == "cut":
                parts["v"] = "slice"
            return template.format(**parts), True
    return cmd, False


#: the family's prompt (what the LLM agent renders every request with and parses every reply by)
PROMPT = LLMPrompt(version=PROMPT_VERSION, instructions=INSTRUCTIONS, examples=EXAMPLES, parse=parse_action)


def chat_messages(context: list[dict[str, str]]) -> list[dict[str, str]]:
    """The chat messages of a request (:meth:`LLMPrompt.chat_messages`): a system message with the
    instructions and the examples, then the context."""
    return PROMPT.chat_messages(context)


def completion_prompt(context: list[dict[str, str]]) -> str:
    """A plain-completion prompt ending in ``>`` (:meth:`LLMPrompt.completion_prompt`)."""
    return PROMPT.completion_prompt(context)
