"""Map a model's free-form reply to one action in ALFWorld's syntax.

Models, small ones above all, wrap their action in prefixes (``> ``, ``Action:``), quotes,
articles and trailing periods, and many were trained on transcripts of older ALFWorld
releases that said ``put X in/on Y`` where ALFWorld 0.4 expects ``move X to Y``. The
parser undoes these variants so that the engine judges the action, not its spelling: it
rewrites a model's words for a command into the command's words, and the family's one
command parser (:func:`cir.families.alfworld.text.parse_action`) reads the result, which
is sent in ALFWorld 0.4's spelling. A reply with no recognisable action is passed on
cleaned (the engine answers ``Nothing happens.``), flagged ``ok=False`` so the caller can
record it.
"""

from __future__ import annotations

import re

from cir.agents.prompt import ParsedAction, parse_reply
from cir.episode.protocol import THINK_PREFIX
from cir.families.alfworld.text import format_action
from cir.families.alfworld.text import parse_action as parse_command

#: What an empty reply becomes: no ALFWorld command, so the engine says ``Nothing happens.``
EMPTY_REPLY_ACTION = "nothing"

_ARTICLE = re.compile(r"^(?:the|a|an|some)\s+")
_OBJ = r"(?P<obj>.+?)"
_REC = r"(?P<rec>.+?)"

# (a model's words for a command, the command's verb); run on the lower-cased, article-free
# line in order. ``verb`` None: the pattern's own ``verb`` group names it.
_RULES: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(rf"^(?:go to|goto|go|walk to|move to|navigate to|head to) {_REC}$"), "go"),
    (re.compile(rf"^(?:take|pick up|pickup|get|grab) {_OBJ} (?:from|off|out of|off of) {_REC}$"), "take"),
    (re.compile(rf"^(?:put|place|move|drop|set) {_OBJ} (?:in/on|in|on|into|onto|inside|to|in or on) {_REC}$"), "move"),
    (re.compile(rf"^(?P<verb>heat|cool|clean) {_OBJ} (?:with|using|in|on|at) {_REC}$"), None),
    (re.compile(rf"^(?:open) {_REC}$"), "open"),
    (re.compile(rf"^(?:close|shut) {_REC}$"), "close"),
    (re.compile(rf"^(?:use|turn on|switch on|toggle) {_OBJ}$"), "use"),
    (re.compile(r"^(?:inventory|inv|i|check inventory|show inventory)$"), "inventory"),
    (re.compile(rf"^(?:examine|inspect|look at|check) {_OBJ}$"), "examine"),
    (re.compile(r"^(?:look|look around)$"), "look"),
]


def _drop_articles(phrase: str) -> str:
    return _ARTICLE.sub("", phrase.strip()).strip()


def parse_action(reply: str) -> ParsedAction:
    """The ALFWorld action (or ``think: ...`` thought) in ``reply``; never raises."""
    return parse_reply(reply, _command, empty=EMPTY_REPLY_ACTION, think=THINK_PREFIX)


def _command(line: str) -> tuple[str, bool]:
    """ALFWorld's grammar on a reply's cleaned line (the engine's "a/the" dropped too)."""
    cmd = _drop_articles(line)
    for pattern, verb in _RULES:
        match = pattern.match(cmd)
        if match:
            parts = {k: _drop_articles(v) for k, v in match.groupdict().items()}
            if all(parts.values()):
                words = (verb or parts["verb"], *(parts[k] for k in ("obj", "rec") if k in parts))
                cmd = format_action(words)
                break
    command = parse_command(cmd, older=False)
    if command is None or command[0] == "think":
        return cmd, False
    return format_action(command), True
