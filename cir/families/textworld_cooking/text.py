"""The text of TextWorld's cooking games: cleaning the interpreter's output, and reading it.

The Z-machine interpreter answers with the game's text followed by the prompt line (``>``
and a status bar with the room name, score and moves); the intro starts with TextWorld's
ASCII-art banner. :func:`clean` keeps only the game's words, so an agent or a feature sees
what a player reads. The readers below are the one parser of that text, shared by the
built-in agent and the features: room headers, the items a description lists, the
cookbook's recipe and the answers to the commands a cook sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The end markers of the Inform 7 games TextWorld compiles.
WON_MARKER = "*** The End ***"
LOST_MARKER = "*** You lost! ***"
#: What the env answers once an episode is over (the interpreter only asks to restart).
GAME_OVER_TEXT = "The game is over."

_ROOM = re.compile(r"^-= (?P<room>.+?) =-\s*$", re.MULTILINE)
_PROMPT = re.compile(r"\n>[^\n]*$")
_RESTART = re.compile(r"\s*Would you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command\?\s*$")
_OBJECTIVE = re.compile(r"You are hungry!.*?enjoy your meal!", re.DOTALL)
_SPACES = re.compile(r"\n{3,}")
#: the end text counts the turns taken; a refresh is a turn, and the count is not what was achieved
_TURNS = re.compile(r"(You scored \d+ out of a possible \d+), in \d+ turns?\.")


def clean(raw: str) -> str:
    """The game's words in an interpreter answer: no banner, prompt line, status bar, restart
    question or turn count (the status bar and the end text count moves, which a refresh adds to)."""
    text = raw.replace("\r", "")
    text = _PROMPT.sub("", text)
    text = _RESTART.sub("", text)
    text = _TURNS.sub(r"\1.", text)
    objective = _OBJECTIVE.search(text)
    if objective:  # the intro: drop the ASCII-art banner before the objective
        text = text[objective.start():]
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _SPACES.sub("\n\n", text).strip()


def room_of(text: str) -> str | None:
    """The room a text describes (its ``-= Room =-`` header, lower-cased), or None."""
    match = _ROOM.search(text)
    return match.group("room").strip().lower() if match else None


# -- what a room description lists ------------------------------------------------------------------
_EXIT = re.compile(r"\b(north|south|east|west)\b")
_LIST_CUES = re.compile(
    r"(?:you see|you can see|contains|you make out|there is|there's|you notice|lies|is here|"
    r"\bon (?:the|it)\b[^.!?]*?\byou see)", re.IGNORECASE)
_ITEM = re.compile(r"\b(?:a|an|some|the)\s+([a-z][a-z \-']*?)(?=,|\.|!|\?| and |$)")
_DIRECTION_SENTENCE = re.compile(r"\b(?:exit|door|entranceway|doorway|passageway|going|leading|path)\b", re.IGNORECASE)


def exits(text: str) -> list[str]:
    """The directions a room description names as exits, in the order first named."""
    seen: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        if _DIRECTION_SENTENCE.search(sentence):
            for d in _EXIT.findall(sentence.lower()):
                if d not in seen:
                    seen.append(d)
    return seen


def closed_doors(text: str) -> dict[str, str]:
    """direction -> door name, for the closed doors a description names
    (``There is a closed plain door leading south.`` -> ``{"south": "plain door"}``)."""
    out: dict[str, str] = {}
    pattern = r"closed ([a-z\-]+(?: [a-z\-]+)?) (door|gate|hatch|portal)\b[^.!?]*?\b(north|south|east|west)\b"
    for match in re.finditer(pattern, text.lower()):
        out.setdefault(match.group(3), f"{match.group(1)} {match.group(2)}")
    return out


def listed_items(text: str) -> list[str]:
    """Noun phrases a description lists after 'you see', 'contains', ... (lower-case, no article).

    Adjectives of state (``raw``, ``sliced``, ``fried``) are kept: they are what the game says.
    """
    items: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text.replace("\n", " ")):
        if _DIRECTION_SENTENCE.search(sentence) or not _LIST_CUES.search(sentence):
            continue
        cue = _LIST_CUES.search(sentence)
        tail = sentence[cue.end():] if cue else sentence
        for phrase in _ITEM.findall(tail.lower()):
            phrase = phrase.strip(" -'")
            if phrase and phrase not in items and phrase not in ("thing", "stuff", "nothing"):
                items.append(phrase)
    return items


# -- the cookbook ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recipe:
    """What the cookbook says: the ingredients and the directions, in order."""

    ingredients: tuple[str, ...]
    directions: tuple[str, ...]


def read_recipe(text: str) -> Recipe | None:
    """The recipe in a cookbook text (``examine cookbook``), or None if the text has none."""
    if "Ingredients:" not in text or "Directions:" not in text:
        return None
    ingredients_part = text.split("Ingredients:", 1)[1].split("Directions:", 1)[0]
    directions_part = text.split("Directions:", 1)[1]
    ingredients = tuple(line.strip().lower() for line in ingredients_part.splitlines() if line.strip())
    directions = tuple(line.strip().lower() for line in directions_part.splitlines() if line.strip())
    return Recipe(ingredients, directions)


#: a direction's verb -> (the command's verb, the tool it needs: an appliance or the knife)
DIRECTION_VERBS: dict[str, tuple[str, str]] = {
    "slice": ("slice", "knife"), "dice": ("dice", "knife"), "chop": ("chop", "knife"),
    "fry": ("cook", "stove"), "roast": ("cook", "oven"), "grill": ("cook", "bbq"),
}
def parse_direction(direction: str) -> tuple[str, str] | None:
    """``('dice', 'block of cheese')`` for ``dice the block of cheese``; None for ``prepare meal``."""
    match = re.match(r"^(slice|dice|chop|fry|roast|grill) (?:the )?(.+)$", direction.strip().lower())
    return (match.group(1), match.group(2).strip()) if match else None


# -- the answers to a cook's commands --------------------------------------------------------------------
_FAILURE = re.compile(
    r"^(?:You can't|You can only|That's not|You need|You don't|You haven't|I only understood|"
    r"You're not|You'll have to|There is no|You see no|That doesn't|You are not|Nothing happens|"
    r"What do you want|That noun|I didn't understand|You must)", re.IGNORECASE)


def failed(text: str) -> bool:
    """Whether the game refused the command (its usual wording for a command that did nothing)."""
    return bool(_FAILURE.search(text.strip()))


def inventory_items(text: str) -> list[str] | None:
    """The items an ``inventory`` answer lists (``[]`` for nothing), or None if it is not one."""
    if "You are carrying nothing" in text:
        return []
    match = re.search(r"You are carrying:?\s*(.+)", text, re.DOTALL)
    if not match:
        return None
    parts = re.split(r",|\band\b|\n", match.group(1).lower())
    out = []
    for part in parts:
        part = re.sub(r"^\s*(?:a|an|some|the)\s+", "", part.strip()).strip(" .")
        if part:
            out.append(part)
    return out


# -- does a text answer a command? (the agent and the features ask the same question) ----------------------
STATE_WORDS = ("raw", "sliced", "diced", "chopped", "fried", "roasted", "grilled", "burned")
DONE_BY_WORD = {"sliced": "slice", "diced": "dice", "chopped": "chop", "fried": "fry", "roasted": "roast",
                 "grilled": "grill"}
COOKED = re.compile(r"^You (fried|roasted|grilled) the (.+?)\.", re.IGNORECASE)
_CUT = re.compile(r"^You (slice|dice|chop) the (.+?)\.", re.IGNORECASE)
_ALREADY_CUT = re.compile(r"^The (.+?) is already (sliced|diced|chopped)", re.IGNORECASE)
_TAKEN = re.compile(r"^You (?:take|pick up) the (.+?) from", re.IGNORECASE)


def base_name(phrase: str) -> str:
    """An item without the game's state words (``sliced raw pork chop`` -> ``pork chop``)."""
    words = phrase.lower().split()
    while words and words[0] in STATE_WORDS:
        words = words[1:]
    return " ".join(words)


def command_verb(cmd: str) -> str:
    word = cmd.split()[0] if cmd.split() else ""
    return {"slice": "cut", "dice": "cut", "chop": "cut", "examine": "examine", "i": "inventory"}.get(word, word)


def command_object(cmd: str) -> str:
    """The object of a command (``cook red potato with stove`` -> ``red potato``)."""
    words = cmd.split(maxsplit=1)
    rest = words[1] if len(words) > 1 else ""
    return re.split(r" (?:with|from) ", rest)[0].strip()


def answers(verb: str, cmd: str, text: str) -> bool:
    """Whether ``text`` answers ``cmd`` (a text of another command, or none, does not)."""
    obj = command_object(cmd)
    if verb in ("go", "look"):
        return room_of(text) is not None
    if verb == "take":
        taken = _TAKEN.match(text)
        return bool(taken and base_name(taken.group(1)) == obj) or text.startswith("You already have that")
    if verb == "cook":
        cooked = COOKED.match(text)
        return bool(cooked and cooked.group(2).lower() == obj)
    if verb == "cut":
        cut, already = _CUT.match(text), _ALREADY_CUT.match(text)
        return bool((cut and cut.group(2).lower() == obj) or (already and already.group(1).lower() == obj))
    if verb == "examine":
        return read_recipe(text) is not None
    if verb == "inventory":
        return inventory_items(text) is not None
    prefixes = {"prepare": "Adding the meal", "eat": "You eat the meal", "open": "You open", "drop": "You drop"}
    return verb in prefixes and text.startswith(prefixes[verb])




def anomalous(action: str | None, shown: str) -> bool:
    """Whether a harness can see that ``shown`` is wrong for ``action`` (the family's
    :attr:`~cir.families.family.Family.anomalous`): a text that does not answer its command
    (:func:`answers`: another command's text, a refusal, no room after a ``go``), as the feature
    ``f_suspect_unanswered`` sees it."""
    cmd = " ".join((action or "").lower().split())
    return not answers(command_verb(cmd), cmd, shown)
