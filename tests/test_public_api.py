"""What users hold on to: no public name disappears or changes its call without a deprecation.

Each released surface (``tests/api/VERSION.json``: ``cir.__all__`` and each public subpackage's,
their classes' public members, every ``cir`` command and option) is compared with the code's:
what a caller of that release could do and can no longer is a break, allowed only when
:data:`cir.util.deprecation.FORMER` keeps the former name (until the release it names) and
``CHANGELOG.md`` lists it under *Deprecated*.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
import types
from pathlib import Path

import pytest
from support.api_surface import PUBLIC_PACKAGES, breaks, surface

import cir
from cir.util.deprecation import FORMER

ROOT = Path(__file__).resolve().parents[1]
RELEASES = sorted((ROOT / "tests" / "api").glob("*.json"))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


@pytest.fixture(scope="module")
def now() -> dict:
    return surface()


def kept_by_deprecation() -> dict[str, str]:
    """Public names a deprecation keeps working, each with the former name that keeps it."""
    return {key: f.name for f in FORMER.values() for key in f.public
            if _version(f.removed_in) > _version(cir.__version__)}


@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.stem)
def test_no_public_name_of_a_release_breaks_without_a_deprecation(release: Path, now: dict) -> None:
    kept = kept_by_deprecation()
    broken = breaks(json.loads(release.read_text()), now)
    unkept = {name: what for name, what in broken.items() if name not in kept}
    assert not unkept, (
        f"public names of cir {release.stem} changed without a deprecation (keep the former name "
        "working through cir.util.deprecation and list it in cir.util.deprecation.FORMER and under "
        "CHANGELOG.md's Deprecated):\n" + "\n".join(f"  {n}: {w}" for n, w in sorted(unkept.items())))


def test_every_deprecation_names_public_entries_that_existed() -> None:
    known = set().union(*(json.loads(p.read_text()) for p in RELEASES))
    unknown = {key: f.name for f in FORMER.values() for key in f.public if key not in known}
    assert not unknown, f"FORMER names public entries no release had: {unknown}"


def test_no_deprecation_outlives_the_release_that_drops_it() -> None:
    due = [f.name for f in FORMER.values() if _version(f.removed_in) <= _version(cir.__version__)]
    assert not due, f"cir {cir.__version__} is the release that removes these former names: {due}"


def test_the_changelog_lists_every_deprecation_under_its_release() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for f in FORMER.values():
        section = re.search(rf"^## \[{re.escape(f.since)}\].*?(?=^## \[|\Z)", text, re.M | re.S)
        assert section, f"CHANGELOG.md has no section for {f.since}, the release that deprecated {f.name}"
        deprecated = re.search(r"^### Deprecated\n(.*?)(?=^### |\Z)", section.group(0), re.M | re.S)
        assert deprecated, f"CHANGELOG.md's {f.since} has no Deprecated section"
        words = " ".join(deprecated.group(1).split())
        assert f.name in words or f"`{f.name}`" in words, f"CHANGELOG.md's {f.since} Deprecated does not list {f.name}"
        assert f.removed_in in words, f"CHANGELOG.md's {f.since} Deprecated does not say when {f.name} goes"


def test_the_version_is_set_once_and_has_its_changelog_section() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "cir.__version__"}
    assert re.search(rf"^## \[{re.escape(cir.__version__)}\] - ", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert (ROOT / "tests" / "api" / f"{cir.__version__}.json").is_file()  # the release's surface is kept


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_each_exported_name_is_the_object_its_module_defines(package: str) -> None:
    """``from cir.stats import decompose`` is the function, not the module of the same name,
    whatever was imported before."""
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert not isinstance(value, types.ModuleType), f"{package}.{name} is a module, not the exported name"


def test_the_public_api_page_lists_every_exported_name() -> None:
    page = (ROOT / "docs/public-api.md").read_text(encoding="utf-8")
    for package in PUBLIC_PACKAGES:
        section = re.search(rf"^### `{re.escape(package)}`\n(.*?)(?=^#|\Z)", page, re.M | re.S)
        assert section, f"docs/public-api.md has no section for {package}"
        listed = set(re.findall(r"^\| `([^`]+)` \|", section.group(1), re.M))
        exported = set(importlib.import_module(package).__all__)
        assert listed == exported, (f"docs/public-api.md, {package}: missing {sorted(exported - listed)}, "
                                    f"not exported {sorted(listed - exported)}")


def test_the_surface_sees_a_removed_name_and_a_renamed_parameter() -> None:
    """The comparison itself: a name gone, a parameter renamed or made required, breaks; a new
    name or a new parameter with a default does not."""
    def before(df, by=("condition",), cohort="all"): ...
    def renamed(df, by=("condition",), subset="all"): ...
    def added(df, by=("condition",), cohort="all", *, seed=0): ...
    def required(df, by, cohort="all"): ...

    def entry(fn):
        return {"kind": "function", "params": [[p.name, p.kind.name, p.default is not inspect.Parameter.empty]
                                               for p in inspect.signature(fn).parameters.values()]}

    old = {"f": entry(before), "g": entry(before)}
    assert breaks(old, {"f": entry(before), "g": entry(before), "h": entry(before)}) == {}
    assert breaks(old, {"f": entry(added), "g": entry(before)}) == {}
    assert breaks(old, {"f": entry(renamed), "g": entry(before)}) == {"f": "parameter 'cohort' gone"}
    assert breaks(old, {"f": entry(required), "g": entry(before)}) == {"f": "parameter 'by' lost its default"}
    assert breaks(old, {"f": entry(before)}) == {"g": "gone"}
