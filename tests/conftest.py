"""Fixtures shared by several test modules."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # the engine's SAS cache (cir.families.alfworld.sascache) in pytest's cache folder, not
    # the user's: shared by the test processes, kept between runs (it is keyed by content)
    cache = getattr(config, "cache", None)
    if "CIR_CACHE_DIR" not in os.environ and cache is not None:
        os.environ["CIR_CACHE_DIR"] = str(cache.mkdir("cir-cache"))


@pytest.fixture(scope="session")
def pick_place_task(tmp_path_factory: pytest.TempPathFactory):
    """One generated pick-and-place task (valid_unseen, seed 0) on the real engine."""
    from cir.families.alfworld.generate import generate_split
    from cir.families.alfworld.tasks import load_tasks

    root = tmp_path_factory.mktemp("tasks")
    generate_split(root, "valid_unseen", 1, 0, types=["pick_and_place_simple"], progress=False)
    return load_tasks(root / "valid_unseen")[0]


@pytest.fixture(scope="module")
def pick_place_env(pick_place_task):
    """The task's engine, shared within a module (every episode starts with a reset)."""
    from cir.families.alfworld.env import AlfworldEnv

    return AlfworldEnv(pick_place_task.game_file)


@pytest.fixture(autouse=True)
def _former_names_said_afresh():
    """Each test meets every former name as a new process would (cir.util.deprecation says
    each once per process)."""
    from cir.util.deprecation import forget

    forget()
    yield
