"""ALFWorld as an environment family: the default ``--family alfworld`` (:class:`cir.families.family.Family`).

Its parts: generated tasks (or ALFWorld's data) by split, the real text engine with exact
snapshots (``look`` is its refresh query), its features, its ReAct prompt, and the built-in
agent, a calibrated instrument whose divergence mechanisms ``cir explain`` checks. Its own
options (``--family-option NAME=VALUE``): the engine's savings, and what the generator draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cir.families.alfworld.agent.mechanisms import DIVERGENCE_MECHANISMS
from cir.families.alfworld.draw import check_types
from cir.families.alfworld.features import ALFWORLD_FEATURES
from cir.families.alfworld.prompts import PROMPT
from cir.families.alfworld.tasks import load_tasks
from cir.families.alfworld.text import SPLITS, anomalous
from cir.families.family import Family, FamilyOption


def make_env(task: Any, *, snapshots: str = "fast", engine_savings: bool = True) -> Any:
    """The engine for one task (its ``game_file``)."""
    from cir.families.alfworld.env import AlfworldEnv

    return AlfworldEnv(task.game_file, snapshots=snapshots, savings=engine_savings)


def generate_tasks(folder: str | Path, split: str, n: int, seed: int, *, progress: bool = True,
                   jobs: int = 1, engine_savings: bool = True, types: tuple[str, ...] | None = None,
                   layout_seed: int = 0, max_plan_length: int | None = None) -> str:
    """``n`` verified tasks of ``split`` into ``folder/split`` (:func:`.generate.generate_split`);
    one line saying what was done."""
    from cir.families.alfworld.generate import generate_split

    manifest = generate_split(folder, split, n, seed, types=types, layout_seed=layout_seed, progress=progress,
                              jobs=jobs, max_plan_length=max_plan_length, savings=engine_savings)
    stats, where = manifest.get("_stats"), Path(folder) / split
    if stats is None:
        return f"{where}: already holds these {manifest['n_tasks']} tasks; nothing to do"
    per = stats["seconds"] / max(1, manifest["n_tasks"])
    return (f"wrote {manifest['n_tasks']} tasks to {where} in {stats['seconds']:.1f} s "
            f"({per:.2f} s/task, {stats['draws']} draws)")


def builtin_agent(profile: str = "default", *, seed: int = 0, temperature: float = 0.0) -> Any:
    """The built-in agent (:class:`.agent.builtin.BuiltinAgent`) of a skill profile (sampling at
    ``temperature`` above 0)."""
    from cir.families.alfworld.agent.builtin import BuiltinAgent

    return BuiltinAgent(profile=profile, seed=seed, temperature=temperature)


def walk_actions(env: Any, observation: str) -> list[str]:
    """The engine's admissible commands (a random walk of ``check_env`` picks among them)."""
    return env.admissible_commands()


def list_tasks(path: str | Path) -> str:
    """The generated tasks' manifests as tables: id, type, room, sizes, plan length."""
    from cir.families.alfworld.generate import read_manifest

    out = []
    for manifest in read_manifest(path):
        s = manifest.get("settings", {})
        out += [f"# {manifest['_path']}: split={s.get('split')} n={len(manifest['tasks'])} seed={s.get('seed')}",
                format_table(manifest["tasks"])]
    return "\n".join(out)


def format_table(rows: list[dict[str, Any]]) -> str:
    """Fixed-width table: id, type, room, receptacles, objects, plan length."""
    header = ("id", "type", "room", "receptacles", "objects", "plan")
    body = [(r["task_id"], r["task_type"], r["room"], str(r["n_receptacles"]),
             str(r["n_objects"]), str(r["plan_length"])) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(header)]
    numeric = {3, 4, 5}

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([fmt(header), *(fmt(b) for b in body)])


def _types(text: str) -> tuple[str, ...]:
    return check_types(text.split(","))


OPTIONS = (
    FamilyOption("engine_savings", bool, "textworld's engine with cir's savings (the same text, faster); "
                 "false runs it unmodified, to check that", generate=True),
    FamilyOption("types", str, "comma-separated task types to generate (all six without it)", env=False,
                 generate=True, check=_types),
    FamilyOption("layout_seed", int, "seed of the room-layout pool (keep it equal across splits)", env=False,
                 generate=True),
    FamilyOption("max_plan_length", int, "redraw tasks whose optimal plan is longer (9 keeps ALFWorld's "
                 "planner expert fast on two-object tasks)", env=False, generate=True),
)

#: its parts are this module's functions of those names (Family.of), its configs experiments/ here
FAMILY = Family.of(
    globals(),
    name="alfworld",
    load_tasks=load_tasks,
    extractor=ALFWORLD_FEATURES,
    prompt=PROMPT,
    splits=SPLITS,
    mechanisms=DIVERGENCE_MECHANISMS,
    # train and valid_seen draw from the same scenes, valid_unseen from others (``.scenes``)
    shared_layouts=frozenset({frozenset({"train", "valid_seen"})}),
    env_options=("snapshots",),
    options=OPTIONS,
    tasks_text="generated ALFWorld tasks on the real engine",
    anomalous=anomalous,
)
