"""The LLM prompt of an environment: instructions, worked examples, and how a reply becomes an action.

An environment family brings one :class:`LLMPrompt` (ALFWorld's is
:data:`cir.families.alfworld.prompts.PROMPT`); the LLM agent (:mod:`cir.agents.llm`) renders
every request with it and parses every reply with it, so the agent itself knows nothing of
any environment. ``examples`` is a sequence of worked episodes, or a function of the task
text that chooses them (ALFWorld shows two of the task's type). A prompt read from a file
(``cir run --prompt FILE``) keeps the family's parser: a file holds text, never code.

The ``version`` is part of the agent's params: a changed prompt is another agent (its own
reply cache keys and its own ``agent`` label).
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from cir.util.errors import CirError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_COUNT = {1: "one example", 2: "two examples", 3: "three examples", 4: "four examples", 5: "five examples"}


@dataclass(frozen=True)
class ParsedAction:
    """The action to send, whether it matched a known command, and the raw reply."""

    action: str
    ok: bool
    raw: str


Examples = Sequence[str] | Callable[[str], Sequence[str]]


def first_line_action(reply: str) -> ParsedAction:
    """A parser for an environment without its own: the reply's first non-empty line, stripped
    of a leading ``>``; ``ok`` when there is one."""
    line = next((s.strip() for s in reply.splitlines() if s.strip()), "")
    action = line.lstrip(">").strip()
    return ParsedAction(action=action, ok=bool(action), raw=reply)


# what models wrap a command in: ``> ``, ``1.``, ``- ``, ``Action:``; and how they write a thought
_DECORATION = re.compile(
    r"^(?:>+\s*|(?:\d+[.)]\s+)|(?:[-*]\s+)|(?:action|act|command|next action)\s*(?:\d+\s*)?:\s*)+",
    re.IGNORECASE,
)
_THOUGHT = re.compile(r"^(?:think|thought|thinking|reasoning)\s*(?:\d+\s*)?:\s*(.*)$", re.IGNORECASE | re.DOTALL)


def reply_line(reply: str) -> str:
    """The line of a model's reply that holds its command: the first non-empty line without
    backticks, a command prefix (``> ``, ``1.``, ``- ``, ``Action:``) or enclosing quotes."""
    line = next((s.strip() for s in reply.splitlines() if s.strip()), "").strip("`").strip()
    line = _DECORATION.sub("", line).strip()
    if len(line) >= 2 and line[0] == line[-1] and line[0] in "\"'":
        line = line[1:-1].strip()
    return line


def thought(line: str) -> str | None:
    """The text of a ``think: ...`` thought (also ``Thought:``, ``Reasoning:``) in a reply's line
    (:func:`reply_line`), maybe empty; None when the line is no thought."""
    found = _THOUGHT.match(line)
    return None if found is None else found.group(1).strip()


def parse_reply(reply: str, command: Callable[[str], tuple[str, bool]], *, empty: str,
                think: str) -> ParsedAction:
    """A model's reply as one action, the framing every family's parser shares: its command line
    (:func:`reply_line`); none gives ``empty`` (not ok); a thought gives ``think`` and its text; else
    ``command(line)`` on the line lower-cased, its spaces collapsed and a trailing full stop (or
    ``!;,``) dropped, the family's grammar, which says the action and whether it read one."""
    line = reply_line(reply)
    if not line:
        return ParsedAction(empty, False, reply)
    text = thought(line)
    if text is not None:
        return ParsedAction(f"{think} {text}" if text else think, True, reply)
    action, ok = command(re.sub(r"\s+", " ", line.lower()).rstrip(".!;,").strip())
    return ParsedAction(action, ok, reply)


def merge_same_role(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Join consecutive messages of one role (harness notes follow observations)."""
    merged: list[dict[str, str]] = []
    for msg in messages:
        if merged and merged[-1]["role"] == msg["role"]:
            merged[-1] = {"role": msg["role"], "content": merged[-1]["content"] + "\n" + msg["content"]}
        else:
            merged.append({"role": msg["role"], "content": msg["content"]})
    return merged


@dataclass(frozen=True)
class LLMPrompt:
    """A ReAct prompt: ``instructions`` (the system text), ``examples`` (worked episodes, the
    agent's commands on ``> `` lines, or a function of the task text that chooses them) and
    ``parse`` (a reply -> :class:`ParsedAction`). ``version`` names it in the agent's params.
    ``tools``: the JSON schemas (OpenAI's function-calling form) of a tool world's tools, as plain
    data (:mod:`cir.tools.prompt`), for an agent that sends them as ``tools=``; none for a text
    world."""

    version: str
    instructions: str
    examples: Examples = ()
    parse: Callable[[str], ParsedAction] = first_line_action
    tools: tuple[dict, ...] = field(default=(), hash=False)  # dicts: left out of the hash

    def __post_init__(self) -> None:
        if not isinstance(self.version, str) or not self.version.strip():
            raise CirError(f"LLMPrompt version {self.version!r}: expected a non-empty name")
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise CirError(f"LLMPrompt {self.version!r}: instructions must be a non-empty str")
        if not callable(self.parse):
            raise CirError(f"LLMPrompt {self.version!r}: parse must be a function reply -> ParsedAction")
        if not isinstance(self.tools, tuple) or not all(isinstance(t, dict) for t in self.tools):
            raise CirError(f"LLMPrompt {self.version!r}: tools must be a tuple of JSON schemas (dicts)")

    def examples_for(self, task_text: str) -> list[str]:
        """The worked examples shown for a task."""
        chosen = self.examples(task_text) if callable(self.examples) else self.examples
        return [str(e) for e in chosen]

    def _lead(self, n: int, suffix: str = "") -> str:
        return f"Here {'is' if n == 1 else 'are'} {_COUNT.get(n, f'{n} examples')}{suffix}."

    def chat_messages(self, context: list[dict[str, str]]) -> list[dict[str, str]]:
        """A system message (instructions and the examples), then the context."""
        examples = self.examples_for(context[0]["content"] if context else "")
        system = f"{self.instructions}\nReply with the next command only, one line, no explanation."
        if examples:
            lead = self._lead(len(examples), " (lines starting with > are your commands)")
            system += "\n\n" + lead + "\n\n" + "\n\n".join(examples)
        return [{"role": "system", "content": system}, *merge_same_role(context)]

    def completion_prompt(self, context: list[dict[str, str]]) -> str:
        """A plain-completion ReAct prompt ending in ``>`` (the model writes the next command):
        the episode rendered as the examples are, the agent's replies as ``> reply`` lines."""
        examples = self.examples_for(context[0]["content"] if context else "")
        lines = [self.instructions, ""]
        if examples:
            lines += [self._lead(len(examples)), ""]
            for example in examples:
                lines += [example, ""]
        lines += ["Here is your task.", ""]
        for msg in context:
            lines.append(f"> {msg['content'].strip()}" if msg["role"] == "assistant" else msg["content"].strip())
        # No space after ">": the model's tokenizer joins it with the first word (" go", " think"),
        # and a prompt ending in a bare space made SmolLM2 answer with a newline (an empty reply).
        return "\n".join(lines) + "\n>"

    def from_file(self, path: str | Path) -> LLMPrompt:
        """This prompt with the instructions and examples of a TOML file (``instructions =
        "..."``, ``examples = ["...", ...]``); this prompt's parser. Its version names the file's
        content (``file-SHA``), so another file is another agent."""
        path = Path(path)
        try:
            raw = path.read_bytes()
            data = tomllib.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            raise CirError(f"--prompt {path}: no such file") from None
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise CirError(f"--prompt {path}: not a TOML file ({err})") from None
        unknown = sorted(set(data) - {"instructions", "examples"})
        if unknown:
            raise CirError(f"--prompt {path}: unknown field(s) {', '.join(unknown)}; expected instructions "
                           "and examples")
        instructions, examples = data.get("instructions"), data.get("examples", [])
        if not isinstance(instructions, str) or not instructions.strip():
            raise CirError(f"--prompt {path}: field 'instructions' must be a non-empty string")
        if not isinstance(examples, list) or not all(isinstance(e, str) and e.strip() for e in examples):
            raise CirError(f"--prompt {path}: field 'examples' must be a list of non-empty strings")
        digest = hashlib.sha256(raw).hexdigest()[:12]
        return replace(self, version=f"file-{digest}", instructions=instructions.rstrip("\n"),
                       examples=tuple(e.strip("\n") for e in examples))
