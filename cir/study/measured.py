"""Times of the study measured by ``benchmarks/study_bench.py``, the one place that the README
and ``cir reproduce --help`` quote them from (``measured.json`` beside this module, which
``study_bench.py --write-measured`` writes: each time with the date, the machine's cores and
the load average it was measured at).

Read with the standard library only: the command line's help texts use it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

MEASURED_JSON = Path(__file__).with_name("measured.json")


@cache
def measured() -> dict[str, Any]:
    """Every measured time, by name (``quick_study``, ``second_call_quick``, ``planted_worlds``,
    ``replicate_analysis``, ``pooled_analysis``, ...); empty if the file is missing."""
    try:
        return json.loads(MEASURED_JSON.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def duration(seconds: float) -> str:
    """``48 s``, ``3 min 05 s``."""
    s = int(round(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def claim(name: str, what: str = "seconds") -> str:
    """A measured time as a claim that cites its measurement: ``48 s (measured with
    benchmarks/study_bench.py, 2 cores, load 0.4, 2026-12-06)``; ``""`` if not measured."""
    m = measured().get(name)
    if not isinstance(m, dict) or what not in m:
        return ""
    load = m.get("load") or []
    at = f"load {max(load):.1f}" if load else "load not recorded"
    return (f"{duration(float(m[what]))} (measured with benchmarks/study_bench.py, {m.get('cores', '?')} cores, "
            f"{at}, {m.get('date', '?')})")
