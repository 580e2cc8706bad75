"""What a reply cache folder holds, read the way a user would look: every line of every
process's log (cir.agents.cache), parsed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def logs(folder: Path) -> list[Path]:
    """The folder's logs, one per process that wrote to it."""
    return sorted(Path(folder).glob("replies-*.jsonl"))


def cached_lines(folder: Path) -> list[dict[str, Any]]:
    """Each ``{"key", "record"}`` line of the folder's logs (none for a missing folder)."""
    return [json.loads(line) for log in logs(folder)
            for line in log.read_text(encoding="utf-8").splitlines() if line]


def folder_bytes(folder: Path) -> list[tuple[str, bytes]]:
    """Every file under ``folder``, by name and content: to show a folder was left as it was."""
    return sorted((p.name, p.read_bytes()) for p in Path(folder).rglob("*") if p.is_file())
