"""Loading generated cooking games: a folder's ``manifest.json``, or one ``.z8`` story file.

A :class:`CookingTask` is what the replayer and a run need of a game: ``task_id`` (stable:
``SPLIT-NNN`` from the generator), ``split``, ``task_type`` (``recipe2-cut-cook``, read
from the game's walkthrough) and ``game_file``. Reading tasks loads no engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cir.families.textworld_cooking.generate import (
    MANIFEST_FILE,
    MANIFEST_VERSION,
    SPLITS,
    task_type_of,
)
from cir.util.errors import CirError
from cir.util.files import read_json


@dataclass(frozen=True, order=True)
class CookingTask:
    """A pointer to one cooking game, with what is known about it without playing it."""

    task_id: str
    split: str
    task_type: str
    game_file: Path
    seed: int | None = None
    walkthrough: tuple[str, ...] = ()

    def make_env(self, snapshots: str = "fast") -> Any:
        """A :class:`~cir.families.textworld_cooking.env.CookingEnv` over this task's game."""
        from cir.families.textworld_cooking.env import CookingEnv

        return CookingEnv(self.game_file, snapshots=snapshots)  # type: ignore[arg-type]


def load_tasks(source: str | Path, split: str | None = None) -> list[CookingTask]:
    """The tasks under ``source``, sorted by id: a folder of :func:`.generate.generate_split`
    (``FOLDER/SPLIT/manifest.json``; ``split`` keeps one), one split folder, or one ``.z8`` file."""
    path = Path(source)
    if split is not None and split not in SPLITS:
        raise CirError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
    if path.is_file() and path.suffix == ".z8":
        return [_single(path)]
    if (path / MANIFEST_FILE).is_file():
        manifests = [path / MANIFEST_FILE]
    else:
        manifests = [path / s / MANIFEST_FILE for s in SPLITS if (path / s / MANIFEST_FILE).is_file()]
    if not manifests:
        raise CirError(f"{path}: no {MANIFEST_FILE} in it or in its split folders "
                       f"({', '.join(SPLITS)}); expected a folder of generated cooking games, or a .z8 game")
    tasks = [t for m in manifests for t in _manifest(m)]
    return sorted(t for t in tasks if split is None or t.split == split)


def _manifest(manifest: Path) -> list[CookingTask]:
    data = read_json(manifest, "cooking manifest", strict=True)
    if not isinstance(data, dict) or data.get("family") != "textworld-cooking" or not isinstance(data.get("tasks"), list):
        raise CirError(f"{manifest}: not a textworld-cooking manifest (expected 'family' and a 'tasks' list)")
    if data.get("version") != MANIFEST_VERSION:
        raise CirError(f"{manifest}: manifest version {data.get('version')!r}; expected {MANIFEST_VERSION}")
    return [_row(manifest, manifest.parent, i, row) for i, row in enumerate(data["tasks"])]


def _row(manifest: Path, root: Path, i: int, row: Any) -> CookingTask:
    keys = ("task_id", "split", "task_type", "game_file")
    if not isinstance(row, dict) or not all(isinstance(row.get(k), str) and row.get(k) for k in keys):
        raise CirError(f"{manifest}: tasks[{i}]: expected the text fields {', '.join(keys)}")
    game = root / row["game_file"]
    if not game.is_file():
        raise CirError(f"{manifest}: tasks[{i}] ({row['task_id']}): game file {game} is missing")
    return CookingTask(row["task_id"], row["split"], row["task_type"], game, row.get("seed"),
                       tuple(row.get("walkthrough") or ()))


def _single(path: Path) -> CookingTask:
    """One story file; its type from the ``.json`` TextWorld wrote beside it, when there is one."""
    meta = path.with_suffix(".json")
    walkthrough: tuple[str, ...] = ()
    task_type = "cooking"
    if meta.is_file():
        data = read_json(meta, "TextWorld game metadata")
        info = data.get("metadata", {}) if isinstance(data, dict) else {}
        walkthrough = tuple(info.get("walkthrough") or ())
        recipe = info.get("settings", {}).get("recipe") if isinstance(info.get("settings"), dict) else None
        if walkthrough and isinstance(recipe, int):
            task_type = task_type_of(walkthrough, recipe)
    return CookingTask(path.stem, "", task_type, path, None, walkthrough)
