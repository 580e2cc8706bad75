"""ALFWorld goal sentences (``Your task is to: ...``) as a structured goal: the one parser.

The six task types of ALFWorld and their sentence templates come from
``alfworld/gen/goal_library.py``; both templates of each type are accepted, with
``in``/``on``, optional articles and the ``sliced`` wording tolerated. The built-in agent
(what to look for) and the features (how far the shown text says the task is) read the
goal through :func:`parse_goal`, from the task text alone, never the game's PDDL, as an
LLM would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cir.families.alfworld.text import GOAL_PREFIX, TASK_TYPES

SIMPLE, LOOK, CLEAN, HEAT, COOL, TWO = TASK_TYPES

#: the appliance type and the verb each transforming task needs
TRANSFORMS = {CLEAN: ("clean", "sinkbasin"), HEAT: ("heat", "microwave"), COOL: ("cool", "fridge")}


@dataclass(frozen=True)
class Goal:
    """What the task asks for, in the engine's lower-case type names.

    ``obj``: the object type to find (``apple``); ``recep``: the receptacle type to put
    it in/on (None for look tasks); ``toggle``: the lamp type for look tasks;
    ``count``: how many objects must end in ``recep``.
    """

    task_type: str
    obj: str
    recep: str | None = None
    toggle: str | None = None
    count: int = 1
    sentence: str = ""

    @property
    def transform(self) -> str | None:
        """``heat``, ``cool``, ``clean`` or None."""
        return TRANSFORMS[self.task_type][0] if self.task_type in TRANSFORMS else None

    @property
    def appliance(self) -> str | None:
        """The receptacle type that does the transform (``microwave`` ...), or None."""
        return TRANSFORMS[self.task_type][1] if self.task_type in TRANSFORMS else None

    @property
    def look(self) -> bool:
        """A look task: find the object and switch on a lamp."""
        return self.task_type == LOOK

    @property
    def subgoals(self) -> dict[str, int]:
        """How many texts of each subgoal the goal needs: take, move, transform (a look
        task's switching on the lamp counts as its transform)."""
        if self.look:
            return {"take": 1, "move": 0, "transform": 1}
        return {"take": self.count, "move": self.count, "transform": 1 if self.transform else 0}


#: The subgoals of a task text whose goal fits no template: take one object and place it.
UNKNOWN_SUBGOALS = {"take": 1, "move": 1, "transform": 0}


_ART = r"(?:(?:a|an|some|the)\s+)?"
_W = r"([a-z]+)"
_SL = r"(?:(?:sliced|slice of)\s+)?"
_PREP = r"\s+(?:in|on|into|onto|in/on)\s+"

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (LOOK, re.compile(rf"^(?:look at|examine)\s+{_ART}{_SL}{_W}\s+(?:under|with|using)\s+{_ART}{_W}$")),
    (TWO, re.compile(rf"^(?:put|find|place)\s+two\s+{_SL}{_W}(?:\s+and\s+put\s+them)?{_PREP}{_ART}{_W}$")),
    (CLEAN, re.compile(rf"^(?:put|place)\s+(?:a|an|some)\s+clean\s+{_SL}{_W}{_PREP}{_ART}{_W}$")),
    (CLEAN, re.compile(rf"^clean\s+{_ART}{_SL}{_W}\s+and\s+put\s+it{_PREP}{_ART}{_W}$")),
    (HEAT, re.compile(rf"^(?:put|place)\s+(?:a|an|some)\s+hot\s+{_SL}{_W}{_PREP}{_ART}{_W}$")),
    (HEAT, re.compile(rf"^heat\s+{_ART}{_SL}{_W}\s+and\s+put\s+it{_PREP}{_ART}{_W}$")),
    (COOL, re.compile(rf"^(?:put|place)\s+(?:a|an|some)\s+(?:cool|cold)\s+{_SL}{_W}{_PREP}{_ART}{_W}$")),
    (COOL, re.compile(rf"^cool\s+{_ART}{_SL}{_W}\s+and\s+put\s+it{_PREP}{_ART}{_W}$")),
    (SIMPLE, re.compile(rf"^(?:put|place)\s+{_ART}{_SL}{_W}{_PREP}{_ART}{_W}$")),
]

_TASK_RE = re.compile(rf"{re.escape(GOAL_PREFIX)}\s*(.+?)\s*$", re.MULTILINE)


def goal_sentence(text: str) -> str | None:
    """The sentence after ``Your task is to:`` in ``text`` (without the final dot)."""
    m = _TASK_RE.search(text)
    if not m:
        return None
    return m.group(1).strip().rstrip(".").strip()


def parse_goal(text: str) -> Goal | None:
    """The goal in a task text or a bare goal sentence; None if it fits no template."""
    sentence = goal_sentence(text)
    if sentence is None:
        sentence = text.strip().rstrip(".")
    s = re.sub(r"\s+", " ", sentence.lower()).strip()
    for task_type, pattern in _PATTERNS:
        m = pattern.match(s)
        if not m:
            continue
        a, b = m.group(1), m.group(2)
        if task_type == LOOK:
            return Goal(task_type, obj=a, toggle=b, sentence=s)
        if task_type == TWO:
            return Goal(task_type, obj=_singular(a), recep=b, count=2, sentence=s)
        return Goal(task_type, obj=a, recep=b, sentence=s)
    return None


def _singular(word: str) -> str:
    """``apples`` -> ``apple`` for the rare plural wording of two-object goals."""
    if word.endswith("es") and word[:-2] in _KNOWN_ES:
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and word[:-1] in _KNOWN_OBJECTS:
        return word[:-1]
    return word


_KNOWN_ES = {"tomato", "potato", "dishsponge", "box"}
_KNOWN_OBJECTS = {
    "apple", "book", "bowl", "candle", "cellphone", "cloth", "creditcard", "cup", "egg", "fork",
    "glassbottle", "kettle", "keychain", "knife", "ladle", "laptop", "mug", "newspaper", "pan",
    "pen", "pencil", "peppershaker", "pillow", "plate", "pot", "remotecontrol", "saltshaker",
    "soapbar", "soapbottle", "spatula", "spoon", "spraybottle", "statue", "tissuebox",
    "toiletpaper", "vase", "watch", "wateringcan", "winebottle", "alarmclock", "baseballbat",
    "basketball", "bread", "butterknife", "cd", "handtowel", "lettuce", "plunger", "towel",
    "teddybear", "tennisracket", "papertowelroll", "scrubbrush",
}
