"""The ``game.tw-pddl`` file: ALFWorld's game format, read and checked in one place.

Both the engine adapter (``cir.families.alfworld.env``) and task loading (``cir.families.alfworld.tasks``) read
game files; this module is what they share, so neither imports the other for it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cir.util.errors import CirError
from cir.util.files import json_error_text

GAME_FILE = "game.tw-pddl"
REQUIRED_GAME_KEYS: tuple[str, ...] = ("pddl_domain", "grammar", "pddl_problem")


def read_game_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse and check a ``game.tw-pddl`` file; a ``CirError`` naming the file when it is bad."""
    path = Path(path)
    if not path.exists():
        raise CirError(f"{path}: game file not found (expected a game.tw-pddl JSON file)")
    if not path.is_file():
        raise CirError(f"{path}: is not a file (expected a game.tw-pddl JSON file)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CirError(f"{path}: cannot read game file ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CirError(
            f"{path}: invalid JSON ({json_error_text(exc)}); "
            f"expected a game.tw-pddl object with keys {', '.join(REQUIRED_GAME_KEYS)}"
        ) from None
    if not isinstance(data, dict):
        raise CirError(
            f"{path}: expected a JSON object with keys {', '.join(REQUIRED_GAME_KEYS)}, "
            f"got {type(data).__name__}"
        )
    missing = [k for k in REQUIRED_GAME_KEYS if k not in data]
    if missing:
        raise CirError(
            f"{path}: missing key(s) {', '.join(missing)}; a game.tw-pddl needs "
            f"{', '.join(REQUIRED_GAME_KEYS)}"
        )
    for key in REQUIRED_GAME_KEYS:
        if not isinstance(data[key], str) or not data[key].strip():
            raise CirError(f"{path}: key {key!r} must be a non-empty string")
    walkthrough = data.get("walkthrough")
    if walkthrough is not None and not (
        isinstance(walkthrough, list) and all(isinstance(a, str) for a in walkthrough)
    ):
        raise CirError(f"{path}: key 'walkthrough' must be a list of command strings")
    return data
