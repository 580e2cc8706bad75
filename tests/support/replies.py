"""What a reply cache folder holds, read the way a user would look: every line of every
process's log (cir.agents.cache), parsed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def cached_lines(folder: Path) -> list[dict[str, Any]]:
    """Each ``{"key", "record"}`` line of the folder's logs (none for a missing folder)."""
    return [json.loads(line) for log in sorted(Path(folder).glob("replies-*.jsonl"))
            for line in log.read_text(encoding="utf-8").splitlines() if line]
