"""Finding ALFWorld tasks on disk: one game file, a generated split, or the real data set.

Everything downstream keys results by ``TaskRef.task_id``, so ids must be stable across
machines: the trial folder path relative to its split root, with ``/`` separators.
Loading only walks folders and reads small metadata; game files are parsed when an
environment loads them (``cir.families.alfworld.env``), except for a single file, which is
checked at once.

A task's type is the game's own: its manifest row (written from the game by the
generator), else its ``traj_data.json``, else the goal of its PDDL problem, and only
when none says, the folder name. A folder name that says another type is not believed
(the features read the game's goal), and a note says so; a symlinked folder is not
followed, and a note says so too.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cir.families.alfworld.gamefile import GAME_FILE, read_game_file
from cir.families.alfworld.text import SPLITS, TASK_TYPES
from cir.util.errors import CirError
from cir.util.files import json_error_text

if TYPE_CHECKING:
    from cir.families.alfworld.env import AlfworldEnv

log = logging.getLogger(__name__)

#: Split folder names of the ALFWorld data set (json_2.1.1): the generated ones and the rest.
KNOWN_SPLITS: tuple[str, ...] = (*SPLITS, "valid_train", "tests_seen", "tests_unseen")

TRAJ_FILE = "traj_data.json"
MANIFEST_FILE = "manifest.json"

_ROOM_BY_HUNDREDS = {0: "kitchen", 2: "livingroom", 3: "bedroom", 4: "bathroom"}


@dataclass(frozen=True, order=True)
class TaskRef:
    """A pointer to one ALFWorld game, with what is known about it without loading it."""

    task_id: str
    game_file: Path
    task_type: str
    split: str
    room: str | None = None
    plan_length: int | None = None
    traj_file: Path | None = None
    scene: str | None = None

    def make_env(self, **kwargs: Any) -> AlfworldEnv:
        """An ``AlfworldEnv`` over this task's game file."""
        # Imported here: the engine takes a second to import, and finding tasks needs none of it.
        from cir.families.alfworld.env import AlfworldEnv

        return AlfworldEnv(self.game_file, **kwargs)


def room_of_scene(scene: str | int | None) -> str | None:
    """ALFRED room kind from a floor plan (``FloorPlan301`` / ``301`` -> ``bedroom``)."""
    if scene is None:
        return None
    m = re.search(r"(\d+)$", str(scene))
    if not m:
        return None
    return _ROOM_BY_HUNDREDS.get(int(m.group(1)) // 100)


def task_type_of_problem(pddl_problem: str) -> str | None:
    """The task type an ALFRED goal asks for, read from the problem's ``(:goal ...)``.

    Used for a game without a manifest row or ``traj_data.json``.
    """
    i = pddl_problem.find("(:goal")
    if i < 0:
        return None
    goal = pddl_problem[i:].lower()
    if "istoggled" in goal:
        return "look_at_obj_in_light"
    if "ishot" in goal:
        return "pick_heat_then_place_in_recep"
    if "iscool" in goal:
        return "pick_cool_then_place_in_recep"
    if "isclean" in goal:
        return "pick_clean_then_place_in_recep"
    if re.search(r"\?o2\b", goal):
        return "pick_two_obj_and_place"
    if "inreceptacle" in goal:
        return "pick_and_place_simple"
    return None


def _type_from_folder(name: str) -> str | None:
    head = name.split("-", 1)[0]
    return head if head in TASK_TYPES else None


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CirError(
            f"{path}: invalid JSON ({json_error_text(exc)}); "
            f"expected {what}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CirError(f"{path}: cannot read {what} ({exc})") from None


def _traj_info(traj: Path) -> tuple[str | None, str | None]:
    """(task_type, scene) from a traj_data.json."""
    data = _read_json(traj, "a traj_data.json object with 'task_type'")
    if not isinstance(data, dict):
        raise CirError(f"{traj}: expected a JSON object with 'task_type'")
    task_type = data.get("task_type")
    scene = None
    if isinstance(data.get("scene"), dict):
        scene = data["scene"].get("floor_plan") or data["scene"].get("scene_num")
    scene = data.get("floor_plan", scene)
    return (task_type if isinstance(task_type, str) else None), (
        str(scene) if scene is not None else None
    )


def _skipped(path: Path) -> bool:
    """ALFWorld's own loader skips these (``'movable' in root or 'Sliced' in root``)."""
    s = str(path)
    return "movable" in s or "Sliced" in s


def _manifest_entries(split_root: Path) -> dict[str, dict[str, Any]]:
    """Manifest rows keyed by task id (trial path relative to the split root)."""
    mpath = split_root / MANIFEST_FILE
    if not mpath.is_file():
        return {}
    data = _read_json(mpath, "a manifest with a list of tasks")
    rows = data.get("tasks") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise CirError(f"{mpath}: expected a list of tasks (or an object with key 'tasks')")
    out: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise CirError(f"{mpath}: task #{i} is not an object")
        key = None
        for field in ("task_id", "path", "game_file", "folder", "id"):
            if isinstance(row.get(field), str):
                key = row[field]
                break
        if key is None:
            continue
        key = key.replace("\\", "/").strip("/")
        if key.endswith("/" + GAME_FILE):
            key = key[: -len(GAME_FILE) - 1]
        out[key] = row
    return out


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _ref_for(
    game: Path, split_root: Path, split: str, manifest: dict[str, dict[str, Any]]
) -> TaskRef:
    trial = game.parent
    task_id = trial.relative_to(split_root).as_posix()
    if task_id == ".":
        task_id = trial.name
    row = manifest.get(task_id) or manifest.get(trial.name) or {}
    traj = trial / TRAJ_FILE
    traj_file = traj if traj.is_file() else None

    task_type = row.get("task_type") if isinstance(row.get("task_type"), str) else None
    scene = row.get("scene")
    scene = str(scene) if isinstance(scene, (str, int)) and not isinstance(scene, bool) else None
    if task_type is None and traj_file is not None:
        task_type, scene = _traj_info(traj_file)
    if task_type is None:
        task_type = task_type_of_problem(read_game_file(game)["pddl_problem"])
    named = _type_from_folder(trial.parent.name) or _type_from_folder(trial.name)
    if task_type is None:
        task_type = named  # the game does not say: the folder name is all there is
    if task_type is None:
        raise CirError(
            f"{trial}: cannot tell the task type (expected {TRAJ_FILE} with 'task_type', "
            f"a game whose goal is one of the six ALFWorld task types, or a folder named "
            f"<task_type>-...)"
        )
    if named is not None and named != task_type:
        log.warning("%s: the folder name says %s, the game is %s; using %s", trial, named,
                    task_type, task_type)
    if task_type not in TASK_TYPES:
        raise CirError(
            f"{traj_file or trial}: unknown task type {task_type!r}; expected one of "
            f"{', '.join(TASK_TYPES)}"
        )
    room = row.get("room") if isinstance(row.get("room"), str) else None
    if room is None:
        room = room_of_scene(scene) or room_of_scene(trial.parent.name.rsplit("-", 1)[-1])
    plan_length = _int_or_none(row.get("plan_length"))
    if plan_length is None and isinstance(row.get("walkthrough"), list):
        plan_length = len(row["walkthrough"])
    return TaskRef(
        task_id=task_id,
        game_file=game,
        task_type=task_type,
        split=split,
        room=room,
        plan_length=plan_length,
        traj_file=traj_file,
        scene=scene,
    )


def _walk_games(root: Path) -> Iterable[Path]:
    """Every game file under ``root``, in sorted order, skipping what ALFWorld skips.

    The ``movable``/``Sliced`` test looks at the path below ``root`` (ALFWorld tests the
    whole path, so a data folder whose own name contains ``Sliced`` would lose everything).
    """
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        d = Path(dirpath)
        for name in dirnames:
            if (d / name).is_symlink():
                log.warning("%s: a symbolic link to a folder, not followed (its tasks are not "
                            "loaded); copy them in or point at the target", d / name)
        if GAME_FILE in filenames and not _skipped(d.relative_to(root)):
            yield d / GAME_FILE


def _load_split(split_root: Path, split: str) -> list[TaskRef]:
    manifest = _manifest_entries(split_root)
    return [_ref_for(g, split_root, split, manifest) for g in _walk_games(split_root)]


def _single_file(path: Path, split: str | None) -> list[TaskRef]:
    data = read_game_file(path)
    trial = path.parent
    # <split>/<task>/<trial>/game.tw-pddl: keep the same id as a folder load would give.
    parts = trial.parts
    file_split = parts[-3] if len(parts) >= 3 and parts[-3] in KNOWN_SPLITS else None
    if split is not None:
        _check_split_name(split, path)
        if file_split is not None and split != file_split:
            raise CirError(f"{path}: belongs to split {file_split!r}, not {split!r}")
    root = trial.parent.parent if file_split else trial.parent
    ref = _ref_for(path, root, file_split or split or "custom", {})
    if ref.plan_length is None and isinstance(data.get("walkthrough"), list):
        ref = TaskRef(**{**ref.__dict__, "plan_length": len(data["walkthrough"])})
    return [ref]


def _check_split_name(split: str, where: Path) -> None:
    if split not in KNOWN_SPLITS:
        raise CirError(
            f"{where}: unknown split {split!r}; expected one of {', '.join(KNOWN_SPLITS)}"
        )


def load_tasks(
    path: str | os.PathLike[str] | None = None, split: str | None = None
) -> list[TaskRef]:
    """All tasks at ``path`` (or ``$ALFWORLD_DATA``), optionally one split, sorted by task id.

    ``path`` may be a single ``game.tw-pddl`` or the trial folder holding one (read through its
    game file, so the task gets the id and split a folder load gives it); a folder of generated
    tasks (a split folder with ``manifest.json``, or a folder of split folders, or any folder
    holding game files at any depth); or a real ALFWorld data folder
    (``json_2.1.1/<split>/<task>/<trial>/``).
    """
    root = _task_root(path)
    if root.is_dir() and (root / GAME_FILE).is_file():
        root = root / GAME_FILE
    if split is not None:
        _check_split_name(split, root)
    if root.is_file():
        return _single_file(root.resolve(), split)

    if (root / "json_2.1.1").is_dir():
        root = root / "json_2.1.1"
    split_dirs = {
        p.name: p for p in sorted(root.iterdir()) if p.is_dir() and p.name in KNOWN_SPLITS
    }

    refs = _load_splits(root, split_dirs, split)
    if not refs:
        raise CirError(
            f"{root}: no tasks found (expected {GAME_FILE} files in "
            "<split>/<task>/<trial>/ folders)"
        )
    refs.sort(key=lambda r: (r.task_id, r.split))
    _check_unique(refs)
    return refs


def _task_root(path: str | os.PathLike[str] | None) -> Path:
    """The folder or file ``load_tasks`` reads: ``path``, else ``$ALFWORLD_DATA``; it must exist."""
    if path is None:
        env_path = os.environ.get("ALFWORLD_DATA")
        if not env_path:
            raise CirError(
                "no task path given and $ALFWORLD_DATA is not set; expected a game.tw-pddl, "
                "a folder of tasks, or an ALFWorld data folder"
            )
        path = os.path.expandvars(env_path)
    root = Path(path).expanduser()
    if not root.exists():
        raise CirError(
            f"{root}: not found; expected a game.tw-pddl, a folder of tasks, "
            "or an ALFWorld data folder"
        )
    return root


def _load_splits(root: Path, split_dirs: dict[str, Path], split: str | None) -> list[TaskRef]:
    """The tasks of ``root``'s split folders (``split`` only, if given), or of ``root`` as one split."""
    if split_dirs:
        if split is not None:
            if split not in split_dirs:
                raise CirError(
                    f"{root}: no split {split!r} here; found {', '.join(sorted(split_dirs))}"
                )
            split_dirs = {split: split_dirs[split]}
        return [r for name, d in split_dirs.items() for r in _load_split(d, name)]
    name = root.name if root.name in KNOWN_SPLITS else "custom"
    if split is not None and split != name:
        raise CirError(
            f"{root}: holds no split folders and is not split {split!r} "
            f"(expected {root}/{split}/ or a folder named {split})"
        )
    return _load_split(root, name)


def _check_unique(refs: list[TaskRef]) -> None:
    seen: dict[tuple[str, str], Path] = {}
    for r in refs:
        key = (r.split, r.task_id)
        if key in seen:
            raise CirError(f"{r.game_file}: duplicate task id {r.task_id!r} (also {seen[key]})")
        seen[key] = r.game_file
