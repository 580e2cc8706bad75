"""ReAct prompts for the LLM agent: instructions and two worked examples per ALFWorld task type.

The examples are written for this project in ALFWorld 0.4's action syntax (``move X to
Y``, not the older ``put X in/on Y``) and in the engine's own wording, so that a model
copies commands the engine accepts. Each shows ``think:`` (answered ``OK.``) and a search,
one shows recovering from ``Nothing happens.``; the two of a task type use its two goal
sentences (``put a X in Y`` / ``put some X on Y``...) in different rooms. The examples are
chosen by the task type read from the goal sentence, two per type, as in the ReAct
ALFWorld setup.
"""

from __future__ import annotations

import re

from cir.agents.prompt import LLMPrompt
from cir.episode.protocol import NOTHING_HAPPENS, THINK_ACK, THINK_PREFIX
from cir.families.alfworld.actions import parse_action
from cir.families.alfworld.text import GOAL_PREFIX

PROMPT_VERSION = "cir-react-3"

INSTRUCTIONS = (
    "You are a household robot in a text game. Solve the task by typing one command per turn.\n"
    "Commands: go to X, open X, close X, take X from Y, move X to Y, heat X with Y, "
    "cool X with Y, clean X with Y, use X, examine X, look, inventory.\n"
    f"Write {THINK_PREFIX} ... to plan; the game answers {THINK_ACK} "
    f"If the game says {NOTHING_HAPPENS}, the command did not work: try something else."
)

_FIRST: dict[str, str] = {
    "pick_and_place_simple": """\
You are in the middle of a room. Looking quickly around you, you see a bed 1, a desk 1, a drawer 2, a drawer 1, a garbagecan 1, a shelf 1, and a sidetable 1.

Your task is to: put a pen in drawer.
> think: I need a pen. It may be on the desk, the sidetable or the shelf. Then I put it in a drawer.
OK.
> go to desk 1
You arrive at desk 1. On the desk 1, you see a book 1, and a laptop 1.
> go to sidetable 1
You arrive at sidetable 1. On the sidetable 1, you see a keychain 1, and a pen 1.
> take pen 1 from sidetable 1
You pick up the pen 1 from the sidetable 1.
> go to drawer 1
You arrive at drawer 1. The drawer 1 is closed.
> open drawer 1
You open the drawer 1. The drawer 1 is open. In it, you see nothing.
> move pen 1 to drawer 1
You move the pen 1 to the drawer 1.""",
    "look_at_obj_in_light": """\
You are in the middle of a room. Looking quickly around you, you see a bed 1, a desk 1, a drawer 1, a dresser 1, a garbagecan 1, and a sidetable 1.

Your task is to: look at book under the desklamp.
> think: I need a book and a desklamp. A book may be on the bed or the desk. A desklamp is often on a desk or sidetable.
OK.
> go to bed 1
You arrive at bed 1. On the bed 1, you see a book 1, and a pillow 1.
> take book 1 from bed 1
You pick up the book 1 from the bed 1.
> go to desk 1
You arrive at desk 1. On the desk 1, you see a pencil 1.
> go to sidetable 1
You arrive at sidetable 1. On the sidetable 1, you see a desklamp 1.
> use desklamp 1
You turn on the desklamp 1.""",
    "pick_clean_then_place_in_recep": """\
You are in the middle of a room. Looking quickly around you, you see a cabinet 2, a cabinet 1, a countertop 1, a drawer 1, a fridge 1, a garbagecan 1, a sinkbasin 1, and a stoveburner 1.

Your task is to: put a clean spatula in drawer.
> think: I need a spatula. It may be on the countertop or the stoveburner. I clean it with the sinkbasin, then put it in the drawer.
OK.
> go to countertop 1
You arrive at countertop 1. On the countertop 1, you see a bread 1, and a spatula 1.
> take spatula 1 from countertop 1
You pick up the spatula 1 from the countertop 1.
> go to sinkbasin 1
You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.
> clean spatula 1 with sinkbasin 1
You clean the spatula 1 using the sinkbasin 1.
> go to drawer 1
You arrive at drawer 1. The drawer 1 is closed.
> move spatula 1 to drawer 1
Nothing happens.
> think: The drawer 1 is closed. I must open it first.
OK.
> open drawer 1
You open the drawer 1. The drawer 1 is open. In it, you see a fork 1.
> move spatula 1 to drawer 1
You move the spatula 1 to the drawer 1.""",
    "pick_heat_then_place_in_recep": """\
You are in the middle of a room. Looking quickly around you, you see a cabinet 2, a cabinet 1, a coffeemachine 1, a countertop 1, a fridge 1, a microwave 1, a sinkbasin 1, and a toaster 1.

Your task is to: heat some egg and put it in countertop.
> think: I need an egg. Eggs are often in the fridge. I heat it with the microwave, then put it on the countertop.
OK.
> go to fridge 1
You arrive at fridge 1. The fridge 1 is closed.
> open fridge 1
You open the fridge 1. The fridge 1 is open. In it, you see a egg 1, and a lettuce 1.
> take egg 1 from fridge 1
You pick up the egg 1 from the fridge 1.
> go to microwave 1
You arrive at microwave 1. The microwave 1 is closed.
> heat egg 1 with microwave 1
You heat the egg 1 using the microwave 1.
> go to countertop 1
You arrive at countertop 1. On the countertop 1, you see a bread 1.
> move egg 1 to countertop 1
You move the egg 1 to the countertop 1.""",
    "pick_cool_then_place_in_recep": """\
You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 2, a countertop 1, a diningtable 1, a fridge 1, a garbagecan 1, a microwave 1, and a sinkbasin 1.

Your task is to: put a cool tomato in diningtable.
> think: I need a tomato. It may be on a countertop or the diningtable. I cool it with the fridge, then put it on the diningtable.
OK.
> go to countertop 1
You arrive at countertop 1. On the countertop 1, you see a knife 1.
> go to countertop 2
You arrive at countertop 2. On the countertop 2, you see a potato 1, and a tomato 1.
> take tomato 1 from countertop 2
You pick up the tomato 1 from the countertop 2.
> go to fridge 1
You arrive at fridge 1. The fridge 1 is closed.
> cool tomato 1 with fridge 1
You cool the tomato 1 using the fridge 1.
> go to diningtable 1
You arrive at diningtable 1. On the diningtable 1, you see a plate 1.
> move tomato 1 to diningtable 1
You move the tomato 1 to the diningtable 1.""",
    "pick_two_obj_and_place": """\
You are in the middle of a room. Looking quickly around you, you see a bed 1, a desk 1, a drawer 2, a drawer 1, a garbagecan 1, and a sidetable 1.

Your task is to: put two cellphone in bed.
> think: I need two cellphones. They may be on the desk, the sidetable or in a drawer. I carry them to the bed one at a time.
OK.
> go to desk 1
You arrive at desk 1. On the desk 1, you see a cellphone 1, and a pen 1.
> take cellphone 1 from desk 1
You pick up the cellphone 1 from the desk 1.
> go to bed 1
You arrive at bed 1. On the bed 1, you see a pillow 1.
> move cellphone 1 to bed 1
You move the cellphone 1 to the bed 1.
> go to sidetable 1
You arrive at sidetable 1. On the sidetable 1, you see a cellphone 2.
> take cellphone 2 from sidetable 1
You pick up the cellphone 2 from the sidetable 1.
> go to bed 1
You arrive at bed 1. On the bed 1, you see a cellphone 1, and a pillow 1.
> move cellphone 2 to bed 1
You move the cellphone 2 to the bed 1.""",
}

_SECOND: dict[str, str] = {
    "pick_and_place_simple": """\
You are in the middle of a room. Looking quickly around you, you see a bathtubbasin 1, a cabinet 2, a cabinet 1, a countertop 1, a garbagecan 1, a sinkbasin 1, a toilet 1, and a towelholder 1.

Your task is to: put some soapbottle on toilet.
> think: I need a soapbottle. It may be on the countertop or in a cabinet. Then I put it on the toilet.
OK.
> go to countertop 1
You arrive at countertop 1. On the countertop 1, you see a candle 1, and a spraybottle 1.
> go to cabinet 1
You arrive at cabinet 1. The cabinet 1 is closed.
> open cabinet 1
You open the cabinet 1. The cabinet 1 is open. In it, you see a cloth 1, and a soapbottle 1.
> take soapbottle 1 from cabinet 1
You pick up the soapbottle 1 from the cabinet 1.
> go to toilet 1
You arrive at toilet 1. On the toilet 1, you see a toiletpaper 1.
> move soapbottle 1 to toilet 1
You move the soapbottle 1 to the toilet 1.""",
    "look_at_obj_in_light": """\
You are in the middle of a room. Looking quickly around you, you see a bed 1, a desk 1, a drawer 2, a drawer 1, a dresser 1, a garbagecan 1, and a shelf 1.

Your task is to: examine the alarmclock with the desklamp.
> think: I need an alarmclock and a desklamp. An alarmclock may be on the shelf, the dresser or the desk.
OK.
> go to shelf 1
You arrive at shelf 1. On the shelf 1, you see a creditcard 1.
> go to dresser 1
You arrive at dresser 1. On the dresser 1, you see a alarmclock 1, a desklamp 1, and a mug 1.
> take alarmclock 1 from dresser 1
You pick up the alarmclock 1 from the dresser 1.
> use desklamp 1
You turn on the desklamp 1.""",
    "pick_clean_then_place_in_recep": """\
You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 2, a countertop 1, a diningtable 1, a fridge 1, a garbagecan 1, a microwave 1, and a sinkbasin 1.

Your task is to: clean some lettuce and put it in fridge.
> think: I need a lettuce. It may be on the diningtable or a countertop. I clean it with the sinkbasin, then put it in the fridge.
OK.
> go to diningtable 1
You arrive at diningtable 1. On the diningtable 1, you see a bread 1, a lettuce 1, and a plate 1.
> take lettuce 1 from diningtable 1
You pick up the lettuce 1 from the diningtable 1.
> go to sinkbasin 1
You arrive at sinkbasin 1. On the sinkbasin 1, you see a spoon 1.
> clean lettuce 1 with sinkbasin 1
You clean the lettuce 1 using the sinkbasin 1.
> go to fridge 1
You arrive at fridge 1. The fridge 1 is closed.
> open fridge 1
You open the fridge 1. The fridge 1 is open. In it, you see a egg 1.
> move lettuce 1 to fridge 1
You move the lettuce 1 to the fridge 1.""",
    "pick_heat_then_place_in_recep": """\
You are in the middle of a room. Looking quickly around you, you see a cabinet 3, a cabinet 2, a cabinet 1, a countertop 1, a diningtable 1, a fridge 1, a garbagecan 1, a microwave 1, and a stoveburner 1.

Your task is to: put a hot potato in diningtable.
> think: I need a potato. It may be on the countertop or in the fridge. I heat it with the microwave, then put it on the diningtable.
OK.
> go to countertop 1
You arrive at countertop 1. On the countertop 1, you see a knife 1, and a saltshaker 1.
> go to fridge 1
You arrive at fridge 1. The fridge 1 is closed.
> open fridge 1
You open the fridge 1. The fridge 1 is open. In it, you see a apple 1, and a potato 1.
> take potato 1 from fridge 1
You pick up the potato 1 from the fridge 1.
> go to microwave 1
You arrive at microwave 1. The microwave 1 is closed.
> heat potato 1 with microwave 1
You heat the potato 1 using the microwave 1.
> go to diningtable 1
You arrive at diningtable 1. On the diningtable 1, you see a bowl 1.
> move potato 1 to diningtable 1
You move the potato 1 to the diningtable 1.""",
    "pick_cool_then_place_in_recep": """\
You are in the middle of a room. Looking quickly around you, you see a cabinet 2, a cabinet 1, a coffeemachine 1, a countertop 1, a fridge 1, a garbagecan 1, a sinkbasin 1, and a toaster 1.

Your task is to: cool some mug and put it in cabinet.
> think: I need a mug. It may be at the coffeemachine or on the countertop. I cool it with the fridge, then put it in a cabinet.
OK.
> go to coffeemachine 1
You arrive at coffeemachine 1. On the coffeemachine 1, you see a mug 1.
> take mug 1 from coffeemachine 1
You pick up the mug 1 from the coffeemachine 1.
> go to fridge 1
You arrive at fridge 1. The fridge 1 is closed.
> cool mug 1 with fridge 1
You cool the mug 1 using the fridge 1.
> go to cabinet 1
You arrive at cabinet 1. The cabinet 1 is closed.
> open cabinet 1
You open the cabinet 1. The cabinet 1 is open. In it, you see a plate 1.
> move mug 1 to cabinet 1
You move the mug 1 to the cabinet 1.""",
    "pick_two_obj_and_place": """\
You are in the middle of a room. Looking quickly around you, you see a armchair 1, a coffeetable 1, a drawer 1, a garbagecan 1, a sidetable 1, and a sofa 1.

Your task is to: find two pillow and put them in sofa.
> think: I need two pillows. They may be on the armchair, the coffeetable or the sidetable. I carry them to the sofa one at a time.
OK.
> go to armchair 1
You arrive at armchair 1. On the armchair 1, you see a pillow 1, and a remotecontrol 1.
> take pillow 1 from armchair 1
You pick up the pillow 1 from the armchair 1.
> go to sofa 1
You arrive at sofa 1. On the sofa 1, you see a newspaper 1.
> move pillow 1 to sofa 1
You move the pillow 1 to the sofa 1.
> go to sidetable 1
You arrive at sidetable 1. On the sidetable 1, you see a keychain 1.
> go to coffeetable 1
You arrive at coffeetable 1. On the coffeetable 1, you see a pillow 2, and a vase 1.
> take pillow 2 from coffeetable 1
You pick up the pillow 2 from the coffeetable 1.
> go to sofa 1
You arrive at sofa 1. On the sofa 1, you see a newspaper 1, and a pillow 1.
> move pillow 2 to sofa 1
You move the pillow 2 to the sofa 1.""",
}

#: Two examples per task type, in the order they are shown.
EXAMPLES: dict[str, tuple[str, str]] = {kind: (_FIRST[kind], _SECOND[kind]) for kind in _FIRST}

_GOAL = re.compile(rf"{re.escape(GOAL_PREFIX)}\s*(.+)", re.IGNORECASE)


def goal_sentence(task_text: str) -> str:
    """The goal after ``Your task is to:`` (the whole text if that line is missing)."""
    match = _GOAL.search(task_text)
    text = (match.group(1) if match else task_text).strip()
    return text.splitlines()[0].strip() if text else ""


def task_type(task_text: str) -> str:
    """The ALFWorld task type of the goal sentence in ``task_text`` (default: simple placement).

    Matches the sentence templates of ``alfworld/gen/goal_library.py``: ``put two X``/``find
    two X``, ``look at X under``/``examine the X with``, ``clean``, ``hot``/``heat``,
    ``cool``; anything else is treated as a plain pick-and-place.
    """
    goal = goal_sentence(task_text).lower()
    if re.search(r"\b(?:put|find) two\b", goal):
        return "pick_two_obj_and_place"
    if re.search(r"\blook at\b.*\bunder\b|\bexamine\b.*\bwith\b", goal):
        return "look_at_obj_in_light"
    if re.search(r"\bclean\b", goal):
        return "pick_clean_then_place_in_recep"
    if re.search(r"\b(?:hot|heat|heated|warm)\b", goal):
        return "pick_heat_then_place_in_recep"
    if re.search(r"\b(?:cool|cold|cooled|chilled)\b", goal):
        return "pick_cool_then_place_in_recep"
    return "pick_and_place_simple"


def examples_for(task_text: str) -> tuple[str, str]:
    """The two worked examples of the task's type."""
    return EXAMPLES[task_type(task_text)]


#: ALFWorld's prompt for the LLM agent (:class:`cir.agents.prompt.LLMPrompt`): the ReAct
#: instructions, two examples of the task's type, and the reply parser of :mod:`.actions`.
PROMPT = LLMPrompt(version=PROMPT_VERSION, instructions=INSTRUCTIONS, examples=examples_for, parse=parse_action)


def completion_prompt(context: list[dict[str, str]]) -> str:
    """ALFWorld's plain-completion ReAct prompt (:meth:`LLMPrompt.completion_prompt`)."""
    return PROMPT.completion_prompt(context)


def chat_messages(context: list[dict[str, str]]) -> list[dict[str, str]]:
    """ALFWorld's chat messages (:meth:`LLMPrompt.chat_messages`)."""
    return PROMPT.chat_messages(context)
