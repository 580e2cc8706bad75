"""TextWorld's cooking games as an environment family: ``--family textworld-cooking``
(:class:`cir.families.family.Family`).

Its parts: ``tw-make tw-cooking`` games by split and seed, the Z-machine engine with exact
snapshots, its features, its LLM prompt and a model-free agent. Every part is a module-level
function, importable by name (worker processes find it again); each imports its engine
module when it is called, so loading the family loads no engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cir.families.family import Family
from cir.families.textworld_cooking.agent.mechanisms import DIVERGENCE_MECHANISMS
from cir.families.textworld_cooking.features import COOKING_FEATURES
from cir.families.textworld_cooking.generate import SPLITS
from cir.families.textworld_cooking.prompts import PROMPT
from cir.families.textworld_cooking.tasks import load_tasks
from cir.families.textworld_cooking.text import anomalous
from cir.util.errors import CirError


def make_env(task: Any, *, snapshots: str = "fast") -> Any:
    """The game of one task (its ``game_file``) on the Z-machine."""
    from cir.families.textworld_cooking.env import CookingEnv

    return CookingEnv(task, snapshots=snapshots)  # type: ignore[arg-type]


def generate_tasks(folder: str | Path, split: str, n: int, seed: int, *, progress: bool = True,
                   jobs: int = 1) -> Any:
    """``n`` games of ``split`` into ``folder/split`` with the default settings
    (:func:`.generate.generate_split`; other settings: call it with ``settings=``)."""
    from cir.families.textworld_cooking.generate import generate_split

    return generate_split(folder, split, n, seed, progress=progress, jobs=jobs)


def builtin_agent(profile: str = "default", *, seed: int = 0, temperature: float = 0.0) -> Any:
    """The model-free agent (:class:`.agent.builtin.CookingAgent`); it has one profile, ``default``
    (sampling at ``temperature`` above 0)."""
    from cir.families.textworld_cooking.agent.builtin import CookingAgent

    if profile != "default":
        raise CirError(f"agent profile {profile!r}: the textworld-cooking agent has one profile, 'default'")
    return CookingAgent(seed=seed, temperature=temperature)


def walk_actions(env: Any, observation: str) -> list[str]:
    """Commands a random walk of ``check_env`` may send after ``observation`` (the game has no
    list of admissible commands): its exits, taking what it names, the cookbook, and cooking."""
    from cir.families.textworld_cooking.text import exits, listed_items

    items = listed_items(observation)
    out = [f"go {d}" for d in exits(observation)] + ["look", "inventory", "examine cookbook"]
    out += [f"take {i}" for i in items[:4]]
    out += [f"{verb} {i} with {tool}" for i in items[:2] for verb, tool in
            (("slice", "knife"), ("cook", "stove"), ("cook", "oven"))]
    return [*out, "prepare meal", "eat meal"]


#: its parts are this module's functions of those names (Family.of), its configs experiments/ here;
#: tw-cooking's splits keep their foods and preparations apart, so no layouts are shared
FAMILY = Family.of(globals(), name="textworld-cooking", load_tasks=load_tasks, extractor=COOKING_FEATURES, prompt=PROMPT,
                   splits=SPLITS, mechanisms=DIVERGENCE_MECHANISMS, env_options=("snapshots",), anomalous=anomalous)
