"""Print a pip constraints file that pins every dependency of pyproject.toml to its floor.

`.ci/run` installs cir with these constraints in a separate venv and runs a smoke subset
of the tests, so the floors pyproject.toml declares stay true. Usage:

    python .ci/min_constraints.py [EXTRA ...] > min-constraints.txt

Every requirement must have a `>=` floor (a requirement without one is an error: its
floor would go untested). Environment markers are kept, so a floor for an older Python
(`tomli`) is skipped by pip where it does not apply.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement


def floors(requirements: list[str]) -> list[str]:
    lines = []
    for text in requirements:
        req = Requirement(text)
        low = [s.version for s in req.specifier if s.operator == ">="]
        if len(low) != 1:
            raise SystemExit(f"pyproject.toml: {text!r}: expected one '>=' floor")
        marker = f"; {req.marker}" if req.marker else ""
        lines.append(f"{req.name}=={low[0]}{marker}")
    return lines


def main(extras: list[str]) -> None:
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    print("\n".join(sorted(set(floors(wanted)), key=str.lower)))


if __name__ == "__main__":
    main(sys.argv[1:])
