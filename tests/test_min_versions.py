"""pyproject.toml's dependency floors are true: `.ci/run` installs exactly them in a separate
venv (`.ci/min_constraints.py`) and runs a smoke subset of the tests there, this file first."""

from __future__ import annotations

import os
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _requirements() -> list[Requirement]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    return [r for r in map(Requirement, project["dependencies"]) if r.marker is None or r.marker.evaluate()]


def test_every_dependency_declares_a_floor_and_meets_it():
    for req in _requirements():
        floors = [s.version for s in req.specifier if s.operator == ">="]
        assert len(floors) == 1, f"{req}: one '>=' floor, so CI can install it"
        assert Version(version(req.name)) in req.specifier, f"{req.name} {version(req.name)} not in {req}"


@pytest.mark.skipif(not os.environ.get("CIR_MIN_VERSIONS"), reason="checks the declared dependency floors; runs in .ci/run's minimum-versions venv (CIR_MIN_VERSIONS=1)")
def test_the_floors_themselves_are_installed():
    for req in _requirements():
        floor = next(s.version for s in req.specifier if s.operator == ">=")
        assert Version(version(req.name)) == Version(floor), f"{req.name}: {version(req.name)} installed, floor {floor}"
