"""Generating cooking games with splits and seeds: TextWorld's ``tw-make tw-cooking``, in process.

:func:`generate_split` makes ``n`` games of one split into ``FOLDER/SPLIT/TASK_ID.z8`` (with the
``.json`` and ``.ni`` TextWorld writes beside each) and that split's ``manifest.json``, which
:func:`cir.families.textworld_cooking.tasks.load_tasks` reads; :func:`generate_tasks` does it
for several splits. The game settings are those of
``tw-make tw-cooking`` (:class:`CookingSettings`: recipe size, ingredients to find, rooms,
cutting, cooking, doors, a carrying limit); TextWorld's ``--split`` keeps the food items
and their preparations of train, valid and test apart.

Deterministic: a game's TextWorld seed is a digest of the generator seed, the split and
the game's index, so the same settings give byte-identical games (and manifest) on any
machine with the same textworld, with any number of workers, on any day (the story file's
serial number, which Inform sets to the compile date, is fixed); the time a game took is
returned, never written into the manifest. The manifest is rewritten after every game, and
a game already there from the same settings and seed is kept, so an interrupted generation
resumes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cir.util.errors import CirError, SettingError
from cir.util.files import read_json, write_atomic, write_bytes_atomic

SPLITS: tuple[str, ...] = ("train", "valid", "test")
#: the room counts tw-cooking knows
ROOM_COUNTS: tuple[int, ...] = (1, 6, 9, 12)
MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1
#: the serial number written into every story file in place of Inform's compile date
SERIAL = b"000000"


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
    _set_serial(path)
    return dict(game.metadata)


def _set_serial(path: Path) -> None:
    """The story file's serial number set to :data:`SERIAL`, in place.

    Inform stamps the compile date (YYMMDD) into the Z-machine header's serial number (bytes
    0x12-0x17), so the same seed made on another day gave other bytes. The header checksum
    covers bytes from 0x40 on only, and play never reads the serial.
    """
    data = bytearray(path.read_bytes())
    if len(data) < 0x40 or data[0] not in (5, 8):
        raise CirError(f"{path}: not a Z-machine story file (version byte {data[0] if data else None})")
    data[0x12:0x18] = SERIAL
    write_bytes_atomic(path, bytes(data))


def _check(split: str, n: int, seed: int) -> None:
    if split not in SPLITS:
        raise SettingError("split", split, f"one of {', '.join(SPLITS)}")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 10_000:
        raise SettingError("n", n, "an integer from 0 to 10000")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SettingError("seed", seed, "a non-negative integer")


def _make_one(job: tuple[Path, str, int, int], settings: CookingSettings) -> GeneratedGame:
    """One game: ``job`` is (split folder, split, index, seed)."""
    folder, split, index, s = job
    task_id = f"{split}-{index:03d}"
    started = time.perf_counter()
    meta = _make_game(folder / f"{task_id}.z8", s, split, settings)
    walkthrough = tuple(meta.get("walkthrough") or ())
    return GeneratedGame(task_id, split, task_type_of(walkthrough, settings.recipe), f"{task_id}.z8", s,
                         walkthrough, round(time.perf_counter() - started, 3))


def _workers(todo: list[tuple[Path, str, int, int]], settings: CookingSettings, jobs: int) -> Iterator[GeneratedGame]:
    """The games of ``todo``, made by ``jobs`` worker processes at once (read worker by worker).

    TextWorld's generator iterates over sets of strings, whose order follows Python's string
    hashing: each worker runs with ``PYTHONHASHSEED=0``, so a game's bytes depend only on its
    settings and seed, never on the process or the order it was made in.
    """
    chunks = [todo[i::jobs] for i in range(jobs) if todo[i::jobs]]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    procs = []
    try:
        for chunk in chunks:
            payload = json.dumps({"settings": asdict(settings), "jobs": [[str(f), sp, i, s] for f, sp, i, s in chunk]})
            errors = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a chatty worker never blocks
            proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=errors, env=env, text=True)
            procs.append((proc, errors))
            assert proc.stdin is not None
            proc.stdin.write(payload)
            proc.stdin.close()
        for proc, errors in procs:
            assert proc.stdout is not None
            for line in proc.stdout:
                data = json.loads(line)
                if "error" in data:
                    raise CirError(data["error"])
                yield GeneratedGame(data["task_id"], data["split"], data["task_type"], data["game_file"],
                                    data["seed"], tuple(data["walkthrough"]), data["seconds"])
            if proc.wait() != 0:
                errors.seek(0)
                err = errors.read().strip().splitlines()
                raise CirError(f"tw-cooking generator process failed ({err[-1] if err else 'no message'})")
    finally:
        for proc, errors in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            errors.close()


def _worker_main() -> None:
    """A worker process: the jobs on stdin, one JSON line per game (or error) on stdout."""
    data = json.loads(sys.stdin.read())
    settings = CookingSettings(**data["settings"])
    for folder, split, index, s in data["jobs"]:
        try:
            game = _make_one((Path(folder), split, index, s), settings)
        except CirError as err:
            print(json.dumps({"error": str(err)}), flush=True)
            return
        print(json.dumps({**game.row(), "seconds": game.seconds}), flush=True)


def generate_split(folder: str | Path, split: str, n: int, seed: int, *, progress: bool = False,
                   jobs: int = 1, settings: CookingSettings | None = None) -> list[GeneratedGame]:
    """``n`` games of ``split`` into ``folder/split`` and its manifest; the games, in order.

    The Family contract's ``generate_tasks``. A game already there from the same settings and
    seed is kept; a manifest of other settings or another seed is refused. ``jobs`` games are
    made at once (worker processes); ``progress`` prints one line per game.
    """
    settings = settings or CookingSettings()
    _check(split, n, seed)
    root = Path(folder) / split
    header = {"version": MANIFEST_VERSION, "family": "textworld-cooking", "split": split, "seed": seed,
              "settings": asdict(settings)}
    old = _old_rows(root, header)
    done: dict[str, GeneratedGame] = {}
    todo = []
    for i in range(n):
        task_id, s = f"{split}-{i:03d}", game_seed(seed, split, i)
        row = old.get(task_id)
        if row is not None and row.get("seed") == s and (root / row["game_file"]).is_file():
            done[task_id] = GeneratedGame(task_id, split, row["task_type"], row["game_file"], s,
                                          tuple(row["walkthrough"]))
        else:
            todo.append((root, split, i, s))
    root.mkdir(parents=True, exist_ok=True)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise SettingError("jobs", jobs, "an integer >= 1")
    for game in _workers(todo, settings, jobs):
        done[game.task_id] = game
        _write_manifest(root, header, sorted(done.values(), key=lambda g: g.task_id))
        if progress:
            print(f"{root / game.game_file}: {game.task_type}, {len(game.walkthrough)} steps, {game.seconds:.1f} s")
    games = sorted(done.values(), key=lambda g: g.task_id)
    _write_manifest(root, header, games)
    return games


def generate_tasks(out: str | Path, counts: dict[str, int], *, seed: int = 0,
                   settings: CookingSettings | None = None, jobs: int = 1) -> list[GeneratedGame]:
    """``counts[split]`` games per split (``{"train": 8, "test": 4}``) into ``out``; all games, in order."""
    if not isinstance(counts, dict) or not counts:
        raise CirError("counts: expected at least one split and its number of games, e.g. {'train': 8, 'test': 4}")
    games: list[GeneratedGame] = []
    for split, n in counts.items():
        games += generate_split(out, split, n, seed, jobs=jobs, settings=settings)
    return games


def _old_rows(root: Path, header: dict[str, Any]) -> dict[str, dict[str, Any]]:
    path = root / MANIFEST_FILE
    if not path.is_file():
        return {}
    data = read_json(path, "cooking manifest")
    if not isinstance(data, dict) or {k: data.get(k) for k in header} != header:
        got = {k: data.get(k) for k in header} if isinstance(data, dict) else data
        raise CirError(f"{path}: games of other settings or another seed are there "
                       f"({json.dumps(got, sort_keys=True)}); choose another folder")
    return {row["task_id"]: row for row in data.get("tasks", []) if isinstance(row, dict) and "task_id" in row}


def _write_manifest(root: Path, header: dict[str, Any], games: list[GeneratedGame]) -> None:
    data = {**header, "tasks": [g.row() for g in games]}
    write_atomic(root / MANIFEST_FILE, json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    _worker_main()
