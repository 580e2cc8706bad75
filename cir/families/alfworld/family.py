"""ALFWorld as an environment family: the default ``--env alfworld`` (:class:`cir.families.family.Family`).

Its parts: generated tasks (or ALFWorld's data) by split, the real text engine with exact
snapshots (``look`` is its refresh query), its features, its ReAct prompt, and the built-in
agent, a calibrated instrument whose divergence mechanisms ``cir explain`` checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cir.families.alfworld.agent.mechanisms import DIVERGENCE_MECHANISMS
from cir.families.alfworld.features import ALFWORLD_FEATURES
from cir.families.alfworld.prompts import PROMPT
from cir.families.alfworld.tasks import load_tasks
from cir.families.alfworld.text import SPLITS
from cir.families.family import Family


def make_env(task: Any, *, snapshots: str = "fast", engine_savings: bool = True) -> Any:
    """The engine for one task (its ``game_file``)."""
    from cir.families.alfworld.env import AlfworldEnv

    return AlfworldEnv(task.game_file, snapshots=snapshots, savings=engine_savings)


def generate_tasks(folder: str | Path, split: str, n: int, seed: int, *, progress: bool = True,
                   jobs: int = 1, engine_savings: bool = True) -> Any:
    """``n`` verified tasks of ``split`` into ``folder/split`` (:func:`.generate.generate_split`)."""
    from cir.families.alfworld.generate import generate_split

    return generate_split(folder, split, n, seed, progress=progress, jobs=jobs, savings=engine_savings)


def builtin_agent(profile: str = "default", *, seed: int = 0, temperature: float = 0.0) -> Any:
    """The built-in agent (:class:`.agent.builtin.BuiltinAgent`) of a skill profile (sampling at
    ``temperature`` above 0)."""
    from cir.families.alfworld.agent.builtin import BuiltinAgent

    return BuiltinAgent(profile=profile, seed=seed, temperature=temperature)


def walk_actions(env: Any, observation: str) -> list[str]:
    """The engine's admissible commands (a random walk of ``check_env`` picks among them)."""
    return env.admissible_commands()


FAMILY = Family(
    name="alfworld",
    load_tasks=load_tasks,
    make_env=make_env,
    extractor=ALFWORLD_FEATURES,
    prompt=PROMPT,
    splits=SPLITS,
    generate_tasks=generate_tasks,
    builtin_agent=builtin_agent,
    mechanisms=DIVERGENCE_MECHANISMS,
    walk_actions=walk_actions,
    experiments=Path(__file__).resolve().parents[3] / "experiments",
    # train and valid_seen draw from the same scenes, valid_unseen from others (``.scenes``)
    shared_layouts=frozenset({frozenset({"train", "valid_seen"})}),
    env_options=("snapshots", "engine_savings"),
)
