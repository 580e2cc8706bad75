"""The experiment configs travel with the package: each built-in family's experiments/ is the
top-level readable source, and the wheel's package data holds them (.ci/run installs a wheel
outside the checkout and runs ``cir reproduce --quick`` from there)."""

from __future__ import annotations

import sys
from pathlib import Path

from cir.families.registry import BUILTIN, get_family

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SOURCE = {"alfworld": ROOT / "experiments", "textworld-cooking": ROOT / "experiments" / "textworld-cooking",
          "service-desk": ROOT / "experiments" / "service-desk"}


def test_each_family_reads_its_configs_from_inside_the_package():
    package = ROOT / "cir"
    for name in BUILTIN:
        folder = get_family(name).experiments_dir()
        assert str(folder).startswith(str(package / "families")), folder  # a path inside the package
        assert folder.resolve() == SOURCE[name].resolve()  # the readable source, one copy
        assert sorted(p.name for p in folder.glob("*.toml")) == sorted(p.name for p in SOURCE[name].glob("*.toml"))


def test_the_package_data_holds_the_configs_and_no_module_of_them():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "families/*/experiments/*.toml" in project["package-data"]["cir"]
    assert "cir.families.*.experiments*" in project["packages"]["find"]["exclude"]  # publish.py stays out
