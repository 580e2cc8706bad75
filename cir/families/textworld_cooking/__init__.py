"""TextWorld's cooking games as an environment family: tasks with splits and seeds, the Z-machine
engine with exact snapshots, its features, its LLM prompt and a model-free agent.

:data:`parts` lists what the family offers, in the shape of the Family contract
(``cir.families.family.Family``: name, load/generate tasks, make_env, extractor, prompt, the
built-in agent and its divergence mechanisms, the walk actions of ``check_env``, the
experiments folder), so that wiring it in is a few lines (``Family(**fields, prompt=LLMPrompt(**parts["prompt"]))``).
Every part is a module-level function, importable by name (worker processes find it again).
Importing this package loads no engine: each part imports its module when it is called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cir.families.textworld_cooking import prompts
from cir.families.textworld_cooking.agent.mechanisms import DIVERGENCE_MECHANISMS
from cir.families.textworld_cooking.features import COOKING_FEATURES
from cir.families.textworld_cooking.generate import SPLITS
from cir.families.textworld_cooking.tasks import load_tasks

NAME = "textworld-cooking"


def make_env(task: Any, *, snapshots: str = "fast") -> Any:
    """The game of one task (its ``game_file``) on the Z-machine."""
    from cir.families.textworld_cooking.env import CookingEnv

    return CookingEnv(task, snapshots=snapshots)  # type: ignore[arg-type]


def env_factory(task: Any, snapshots: str = "fast") -> Any:
    """``RunSettings(env_factory=...)``: the run's ``snapshots`` mode (fast or replay)."""
    return make_env(task, snapshots=snapshots)


def generate_tasks(folder: str | Path, split: str, n: int, seed: int, *, progress: bool = True,
                   jobs: int = 1) -> Any:
    """``n`` games of ``split`` into ``folder/split`` with the default settings
    (:func:`.generate.generate_split`; other settings: call it with ``settings=``)."""
    from cir.families.textworld_cooking.generate import generate_split

    return generate_split(folder, split, n, seed, progress=progress, jobs=jobs)


def builtin_agent(profile: str = "default", *, seed: int = 0, temperature: float = 0.0) -> Any:
    """The model-free agent (:class:`.agent.builtin.CookingAgent`); it has one profile, ``default``."""
    from cir.families.textworld_cooking.agent.builtin import CookingAgent
    from cir.util.errors import CirError

    if profile != "default":
        raise CirError(f"agent profile {profile!r}: the textworld-cooking agent has one profile, 'default'")
    return CookingAgent(seed=seed, temperature=temperature)


def agent_factory(spec: str, seed: int = 0) -> Any:
    """``RunSettings(agent_factory=...)``: the model-free agent for ``builtin`` (or ``builtin:default``)."""
    from cir.util.errors import CirError

    name, _, profile = spec.partition(":")
    if name != "builtin":
        raise CirError(f"agent {spec!r}: this factory makes the textworld-cooking family's 'builtin' agent; "
                       "an LLM agent takes the family's prompt (cir.families.textworld_cooking.prompts)")
    return builtin_agent(profile or "default", seed=seed)


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


EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments" / "textworld-cooking"

#: what the family offers. Every key but ``prompt`` and ``agent_factory`` is a field of the Family
#: contract; ``prompt`` holds the fields of ``cir.agents.prompt.LLMPrompt``; ``agent_factory`` is
#: for ``RunSettings(agent_factory=...)`` until ``--agent builtin`` finds ``builtin_agent``.
parts: dict[str, Any] = {
    "name": NAME,
    "load_tasks": load_tasks,
    "generate_tasks": generate_tasks,
    "make_env": make_env,
    "extractor": COOKING_FEATURES,
    "prompt": {"version": prompts.PROMPT_VERSION, "instructions": prompts.INSTRUCTIONS,
               "examples": prompts.EXAMPLES, "parse": prompts.parse_action},
    "splits": SPLITS,
    "builtin_agent": builtin_agent,
    "agent_factory": agent_factory,
    "mechanisms": DIVERGENCE_MECHANISMS,
    "walk_actions": walk_actions,
    "experiments": EXPERIMENTS,
    # tw-cooking's splits keep their foods and preparations apart; no layouts are shared
    "shared_layouts": frozenset(),
    "env_options": ("snapshots",),
}

def _family() -> Any:
    from cir.agents.prompt import LLMPrompt
    from cir.families.family import Family

    fields = {k: v for k, v in parts.items() if k not in ("prompt", "agent_factory")}
    return Family(**fields, prompt=LLMPrompt(**parts["prompt"]))


#: the second built-in family (``--env textworld-cooking``)
FAMILY = _family()

__all__ = ["FAMILY", "NAME", "agent_factory", "builtin_agent", "env_factory", "generate_tasks", "make_env", "parts",
           "walk_actions"]
