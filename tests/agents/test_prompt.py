"""LLMPrompt: an environment's prompt and parser; ALFWorld's renders exactly what it did before."""

from __future__ import annotations

import pytest

from cir.agents.prompt import LLMPrompt, first_line_action
from cir.families.alfworld.prompts import EXAMPLES, INSTRUCTIONS, PROMPT, PROMPT_VERSION, task_type
from cir.util.errors import CirError

CONTEXT = [{"role": "user", "content": "You are in a room.\n\nYour task is to: put a clean spatula in drawer."},
           {"role": "assistant", "content": "go to drawer 1"},
           {"role": "user", "content": "You arrive at drawer 1."},
           {"role": "user", "content": "[Harness note]"}]


def test_alfworlds_prompt_is_the_one_it_was():
    # the texts of cir-react-3 before prompts became a family's part, written out
    first, second = EXAMPLES[task_type(CONTEXT[0]["content"])]
    system = (f"{INSTRUCTIONS}\nReply with the next command only, one line, no explanation.\n\n"
              f"Here are two examples (lines starting with > are your commands).\n\n{first}\n\n{second}")
    assert PROMPT.version == PROMPT_VERSION == "cir-react-3"
    assert PROMPT.chat_messages(CONTEXT) == [
        {"role": "system", "content": system}, CONTEXT[0], CONTEXT[1],
        {"role": "user", "content": "You arrive at drawer 1.\n[Harness note]"}]
    lines = [INSTRUCTIONS, "", "Here are two examples.", "", first, "", second, "", "Here is your task.", "",
             CONTEXT[0]["content"], "> go to drawer 1", "You arrive at drawer 1.", "[Harness note]"]
    assert PROMPT.completion_prompt(CONTEXT) == "\n".join(lines) + "\n>"
    assert PROMPT.parse("put pen 1 in drawer 1").action == "move pen 1 to drawer 1"


def test_a_prompt_of_ones_own():
    prompt = LLMPrompt(version="kd-1", instructions="Walk.", examples=("> right\nok",))
    system = prompt.chat_messages(CONTEXT[:1])[0]["content"]
    assert system.startswith("Walk.\n") and "Here is one example (lines starting with > are your commands)." in system
    assert "Here are" not in LLMPrompt(version="x", instructions="Walk.").completion_prompt(CONTEXT[:1])
    assert first_line_action("\n> take key \nthen").action == "take key"
    assert not first_line_action("  \n").ok


def test_prompt_files(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('instructions = "Cook."\nexamples = ["> look\\nKitchen."]\n')
    mine = PROMPT.from_file(path)
    assert mine.instructions == "Cook." and mine.examples_for("anything") == ["> look\nKitchen."]
    assert mine.parse is PROMPT.parse and mine.version.startswith("file-") and mine.version != PROMPT.version
    for text, needle in [("instructions = 3", "'instructions' must be a non-empty string"),
                         ('instructions = "a"\nexamples = [1]', "'examples' must be a list"),
                         ('instructions = "a"\nsystem = "b"', "unknown field"), ("not toml ][", "not a TOML file")]:
        path.write_text(text)
        with pytest.raises(CirError, match=needle):
            PROMPT.from_file(path)
    with pytest.raises(CirError, match="no such file"):
        PROMPT.from_file(tmp_path / "absent.toml")
    with pytest.raises(CirError, match="instructions must be a non-empty str"):
        LLMPrompt(version="v", instructions="")
