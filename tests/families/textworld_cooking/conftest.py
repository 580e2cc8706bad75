"""Three generated cooking games, shared by the tests of the family.

Generating a game takes several seconds (TextWorld's generator and Inform 7), so the games
are kept in pytest's cache folder between runs: generation is deterministic, and the
manifest names the settings, seed and textworld version they were made with.
"""

from __future__ import annotations

import fcntl

import pytest

#: small games that still need exploring, cutting and cooking
SETTINGS = {"recipe": 2, "take": 1, "go": 6, "cut": True, "cook": True}
SEED = 7


@pytest.fixture(scope="session")
def cooking_spec():
    """(seed, settings) of the shared games."""
    return SEED, dict(SETTINGS)


@pytest.fixture(scope="session")
def cooking_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    import textworld

    from cir.families.textworld_cooking.generate import CookingSettings, generate_split

    # v2: story files with a fixed serial number (before, the compile date)
    name = f"textworld-cooking-games-v2-{textworld.__version__}-s{SEED}"
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    root = cache.mkdir(name) if cache is not None else tmp_path_factory.mktemp(name)
    # test workers (pytest-xdist) share the cache folder: one generates, the others wait and read
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        generate_split(root, "train", 3, SEED, settings=CookingSettings(**SETTINGS))
    return root


@pytest.fixture(scope="session")
def cooking_tasks(cooking_root):
    from cir.families.textworld_cooking.tasks import load_tasks

    return load_tasks(cooking_root)
