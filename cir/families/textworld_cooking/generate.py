"""Generating cooking games with splits and seeds: TextWorld's ``tw-make tw-cooking``, in process.

:func:`generate_tasks` makes ``n`` games per split into ``OUT/SPLIT/TASK_ID.z8`` (with the
``.json`` and ``.ni`` TextWorld writes beside each) and one ``manifest.json`` that
:func:`cir.families.textworld_cooking.tasks.load_tasks` reads. The game settings are those of
``tw-make tw-cooking`` (:class:`CookingSettings`: recipe size, ingredients to find, rooms,
cutting, cooking, doors, a carrying limit); TextWorld's ``--split`` keeps the food items
and their preparations of train, valid and test apart.

Deterministic: a game's TextWorld seed is a digest of the generator seed, the split and
the game's index, so the same settings give byte-identical games (and manifest) on any
machine with the same textworld; the time a game took is returned, never written into
the manifest.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cir.util.errors import CirError, SettingError
from cir.util.files import write_atomic

SPLITS: tuple[str, ...] = ("train", "valid", "test")
#: the room counts tw-cooking knows
ROOM_COUNTS: tuple[int, ...] = (1, 6, 9, 12)
MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class CookingSettings:
    """The settings of ``tw-make tw-cooking`` (its flags, without the dashes)."""

    recipe: int = 2  # ingredients in the recipe
    take: int = 2  # of them, to be found in the house (the rest lie in the kitchen)
    go: int = 6  # rooms: 1, 6, 9 or 12
    cut: bool = True
    cook: bool = True
    open: bool = False  # closed containers and doors
    drop: bool = False  # a carrying limit

    def __post_init__(self) -> None:
        for name in ("recipe", "take", "go"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise SettingError(name, value, "an integer")
        if not 1 <= self.recipe <= 5:
            raise SettingError("recipe", self.recipe, "an integer from 1 to 5")
        if not 0 <= self.take <= self.recipe:
            raise SettingError("take", self.take, f"an integer from 0 to recipe ({self.recipe})")
        if self.go not in ROOM_COUNTS:
            raise SettingError("go", self.go, f"one of {', '.join(map(str, ROOM_COUNTS))}")
        for name in ("cut", "cook", "open", "drop"):
            if not isinstance(getattr(self, name), bool):
                raise SettingError(name, getattr(self, name), "true or false")

    def tw_settings(self, split: str) -> dict[str, Any]:
        """The settings mapping ``textworld.challenges.tw_cooking`` reads."""
        return {**asdict(self), "recipe_seed": 0, "split": split}


@dataclass(frozen=True)
class GeneratedGame:
    """One game written by :func:`generate_tasks` (a manifest row, and how long it took)."""

    task_id: str
    split: str
    task_type: str
    game_file: str  # relative to the output folder
    seed: int
    walkthrough: tuple[str, ...]
    seconds: float = field(default=0.0, compare=False)

    def row(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "split": self.split, "task_type": self.task_type,
                "game_file": self.game_file, "seed": self.seed, "walkthrough": list(self.walkthrough)}


def game_seed(seed: int, split: str, index: int) -> int:
    """TextWorld's seed for game ``index`` of ``split`` (a digest: splits and seeds never meet)."""
    digest = hashlib.blake2b(f"tw-cooking/{seed}/{split}/{index}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % 2**31


def task_type_of(walkthrough: list[str] | tuple[str, ...], recipe: int) -> str:
    """The kind of a game from what its walkthrough does: recipe size, then cut and cook."""
    cuts = any(a.split()[0] in ("slice", "dice", "chop") for a in walkthrough if a)
    cooks = any(a.startswith("cook ") for a in walkthrough)
    return f"recipe{recipe}" + ("-cut" if cuts else "") + ("-cook" if cooks else "")


def _make_game(path: Path, seed: int, split: str, settings: CookingSettings) -> dict[str, Any]:
    """One game compiled to ``path`` (.z8); its metadata."""
    import textworld  # loaded when games are made: reading tasks needs none of it
    from textworld.challenges.tw_cooking.cooking import make

    options = textworld.GameOptions()
    options.seeds = seed
    options.path = str(path)
    options.file_ext = ".z8"
    options.force_recompile = True
    try:
        game = make(settings.tw_settings(split), options)
        textworld.generator.compile_game(game, options)
    except Exception as exc:  # textworld raises anything from its generator or Inform 7
        raise CirError(f"{path}: tw-cooking failed with seed {seed} ({type(exc).__name__}: "
                       f"{str(exc).strip().splitlines()[0][:200] if str(exc).strip() else 'no message'})") from None
    return dict(game.metadata)


def _check_counts(counts: dict[str, int]) -> dict[str, int]:
    if not counts:
        raise CirError("counts: expected at least one split, e.g. {'train': 8, 'test': 4}")
    for split, n in counts.items():
        if split not in SPLITS:
            raise SettingError("split", split, f"one of {', '.join(SPLITS)}")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 10_000:
            raise SettingError(f"counts[{split!r}]", n, "an integer from 0 to 10000")
    return dict(counts)


def generate_tasks(out: str | Path, counts: dict[str, int], *, seed: int = 0,
                   settings: CookingSettings | None = None) -> list[GeneratedGame]:
    """``counts[split]`` games per split into ``out`` and its manifest; the games, in order.

    A game already in ``out`` from the same settings and seed is kept (not made again), so
    an interrupted generation resumes; a manifest of other settings is refused.
    """
    settings = settings or CookingSettings()
    counts = _check_counts(counts)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SettingError("seed", seed, "a non-negative integer")
    root = Path(out)
    header = {"version": MANIFEST_VERSION, "family": "textworld-cooking", "seed": seed,
              "settings": asdict(settings)}
    old = _old_rows(root, header)
    games: list[GeneratedGame] = []
    for split, n in counts.items():
        for i in range(n):
            task_id = f"{split}-{i:03d}"
            rel = f"{split}/{task_id}.z8"
            s = game_seed(seed, split, i)
            row = old.get(task_id)
            if row is not None and row["seed"] == s and (root / rel).is_file():
                games.append(GeneratedGame(task_id, split, row["task_type"], rel, s, tuple(row["walkthrough"])))
                continue
            started = time.perf_counter()
            meta = _make_game(root / rel, s, split, settings)
            walkthrough = tuple(meta.get("walkthrough") or ())
            games.append(GeneratedGame(task_id, split, task_type_of(walkthrough, settings.recipe), rel, s,
                                       walkthrough, round(time.perf_counter() - started, 3)))
            _write_manifest(root, header, games)  # after every game: an interruption keeps the rest
    _write_manifest(root, header, games)
    return games


def _old_rows(root: Path, header: dict[str, Any]) -> dict[str, dict[str, Any]]:
    path = root / MANIFEST_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CirError(f"{path}: not a readable manifest ({exc})") from None
    if {k: data.get(k) for k in header} != header:
        raise CirError(f"{path}: games of other settings or another seed are there "
                       f"({json.dumps({k: data.get(k) for k in header}, sort_keys=True)}); "
                       "choose another output folder")
    return {row["task_id"]: row for row in data.get("tasks", [])}


def _write_manifest(root: Path, header: dict[str, Any], games: list[GeneratedGame]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    data = {**header, "tasks": [g.row() for g in games]}
    write_atomic(root / MANIFEST_FILE, json.dumps(data, indent=1, sort_keys=True) + "\n")
