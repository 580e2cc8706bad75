"""Procedural ALFWorld tasks, verified solvable on the real engine, in ALFWorld's layout.

``generate_split(out, split, n, seed)`` writes ``out/<split>/<task folder>/trial_<id>/``
with ``traj_data.json`` and ``game.tw-pddl`` (what ALFWorld's own ``AlfredTWEnv`` reads) and
``out/<split>/manifest.json``. Why procedural: the ALFWorld data set cannot be downloaded
here, but its engine, domain, grammar, goal library and constants can (see scenes.py).

Each task is drawn (``cir.families.alfworld.draw``), proven solvable on the engine (``cir.families.alfworld.verify``)
and written here. Output bytes depend only on the settings (see ``cir.families.alfworld.draw``), and a
prefix property holds: the first ``k`` tasks of ``n > k`` are the tasks of ``n = k``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import alfworld.info
import textworld
from tqdm import tqdm

from cir import __version__
from cir.families.alfworld.draw import (
    SPLITS,
    DrawnTask,
    Redraw,
    check_split,
    check_types,
    draw_task,
)
from cir.families.alfworld.engine import Savings
from cir.families.alfworld.pddl import game_json, sha256_text
from cir.families.alfworld.verify import Verifier
from cir.util.errors import CirError
from cir.util.parallel import parallel_map
from cir.util.progress import bar_settings

GENERATOR_VERSION = 1
MAX_ATTEMPTS = 25  # redraws of one task before giving up with a clear error


@dataclass(frozen=True)
class GeneratedTask:
    """A verified task ready to be written (and its manifest row)."""

    drawn: DrawnTask
    walkthrough: tuple[str, ...]
    game_text: str
    attempts: int

    def traj_data(self) -> dict[str, Any]:
        d = self.drawn
        return {
            "task_id": d.trial,
            "task_type": d.goal.task_type,
            "pddl_params": d.goal.pddl_params(),
            "scene": {"floor_plan": f"FloorPlan{d.layout.scene}", "scene_num": d.layout.scene,
                      "room": d.layout.room},
            "turk_annotations": {"anns": [{"task_desc": d.sentence, "high_descs": [],
                                           "votes": []}]},
            "split": d.split,
            "generator": {"name": "cir", "version": __version__,
                          "generator_version": GENERATOR_VERSION, "index": d.index},
        }

    def manifest_row(self) -> dict[str, Any]:
        d = self.drawn
        return {
            "task_id": d.task_id,
            "task_type": d.goal.task_type,
            "room": d.layout.room,
            "scene": d.layout.scene,
            "goal": d.sentence,
            "object_target": d.goal.object_target,
            "parent_target": d.goal.parent_target,
            "toggle_target": d.goal.toggle_target,
            "n_receptacles": len(d.layout.receptacles),
            "n_objects": len(d.objects),
            "plan_length": len(self.walkthrough),
            "sha256": sha256_text(self.game_text),
        }


def generate_task(split: str, seed: int, index: int, task_type: str, *, layout_seed: int = 0,
                  max_attempts: int = MAX_ATTEMPTS,
                  planner: Callable[[str, str], list[str]] | None = None,
                  replay: bool = True, max_plan_length: int | None = None,
                  savings: Savings | bool = True) -> GeneratedTask:
    """Draw task ``index`` and verify it on the engine, redrawing unsolvable draws.

    The engine's planner (or ``planner(problem, sentence)``) plans on ``planning_problem()``;
    with ``replay`` (default) the plan is then played on the full game and must win there.
    Unsolvable draws are redrawn, and so are draws whose plan is longer than
    ``max_plan_length``: ALFWorld's planner expert (``policy_commands``) searches the *full*
    game by plan cost alone, and on two-object tasks with plans of 10+ steps in big rooms it
    can take many minutes per step. ``savings``: the engine's (``cir.families.alfworld.verify``); the
    task is the same without them.
    """
    reasons: list[str] = []
    for attempt in range(max_attempts):
        try:
            drawn = draw_task(split, seed, index, task_type, attempt=attempt, layout_seed=layout_seed)
        except Redraw as err:
            reasons.append(str(err))
            continue
        problem = drawn.problem()
        verifier = Verifier(drawn.sentence, savings)
        try:
            if planner is None:
                plan = verifier.plan(drawn.planning_problem())
            else:
                plan = planner(drawn.planning_problem(), drawn.sentence)
            if max_plan_length is not None and len(plan) > max_plan_length:
                raise CirError(f"plan of {len(plan)} steps is longer than {max_plan_length}")
            if replay:
                verifier.replay(problem, plan)
        except CirError as err:
            reasons.append(str(err))
            continue
        text = game_json(problem, drawn.sentence, plan)
        return GeneratedTask(drawn, tuple(plan), text, attempt + 1)
    last = reasons[-1] if reasons else "no draw"
    raise CirError(f"task {index} of split {split!r} (type {task_type}, seed {seed}) is "
                   f"unsolvable after {max_attempts} draws; last reason: {last}")


def _settings(split: str, n: int, seed: int, types: tuple[str, ...], layout_seed: int,
              max_plan_length: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"split": split, "n": n, "seed": seed, "types": list(types),
                           "layout_seed": layout_seed, "generator_version": GENERATOR_VERSION}
    if max_plan_length is not None:  # only when set, so older manifests stay comparable
        out["max_plan_length"] = max_plan_length
    return out


def _versions() -> dict[str, str]:
    return {"cir": __version__, "alfworld": alfworld.info.__version__,
            "textworld": textworld.__version__}


def _generate_indexed(item: tuple[int, str], split: str, seed: int, layout_seed: int,
                      max_plan_length: int | None, savings: Savings | bool) -> GeneratedTask:
    index, task_type = item
    return generate_task(split, seed, index, task_type, layout_seed=layout_seed,
                         max_plan_length=max_plan_length, savings=savings)


def generate_split(out: str | os.PathLike[str], split: str, n: int, seed: int, *,
                   types: Sequence[str] | None = None, layout_seed: int = 0,
                   progress: bool = True, jobs: int = 1,
                   max_plan_length: int | None = None,
                   savings: Savings | bool = True) -> dict[str, Any]:
    """Generate ``n`` verified tasks of ``split`` into ``out/<split>``; return the manifest.

    Task types cycle in the given order (``n = 6k`` gives ``k`` of each). An existing
    ``out/<split>`` with the same settings is left as it is; one with different tasks is an
    error. The split is written to a temporary folder and moved into place at the end, so an
    interrupted run leaves no half-written split. ``jobs > 1`` verifies tasks in that many
    worker processes (joblib); the output is the same bytes as with ``jobs=1``.
    ``max_plan_length`` redraws tasks with longer plans (see ``generate_task``).
    ``savings`` (the engine's, see ``cir.families.alfworld.verify``) change the time, not the bytes.
    """
    check_split(split)
    types_t = check_types(types)
    _check_counts(n, seed, jobs, max_plan_length)
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise CirError(f"{out_dir}: output path exists and is not a folder")
    split_dir = out_dir / split
    settings = _settings(split, n, seed, types_t, layout_seed, max_plan_length)
    existing = _existing_manifest(split_dir, settings)
    if existing is not None:
        return existing

    tmp_dir = out_dir / f".{split}.partial"
    if tmp_dir.exists():
        shutil.rmtree(tmp_dir)
    tmp_dir.mkdir(parents=True)
    t0 = time.perf_counter()
    # a generator, not a list: nothing is built for tasks that are not drawn yet
    kinds = ((i, types_t[i % len(types_t)]) for i in range(n))
    tasks = parallel_map(_generate_indexed, kinds, split, seed, layout_seed, max_plan_length,
                         Savings.of(savings), jobs=jobs)
    rows, attempts = _write_tasks(tasks, tmp_dir, f"generate {split}", n, progress)
    elapsed = time.perf_counter() - t0
    rows.sort(key=lambda r: r["task_id"])
    manifest = {"settings": settings, "versions": _versions(), "n_tasks": len(rows),
                "tasks": rows}
    (tmp_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n",
                                           encoding="utf-8")
    os.replace(tmp_dir, split_dir)
    # Timing is reported, not written: files must not depend on the machine.
    manifest = dict(manifest)
    manifest["_stats"] = {"seconds": elapsed, "draws": attempts}
    return manifest


def _check_counts(n: int, seed: int, jobs: int, max_plan_length: int | None) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise CirError(f"n must be a positive number of tasks, got {n!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise CirError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(jobs, int) or jobs < 1:
        raise CirError(f"jobs must be a positive integer, got {jobs!r}")
    if max_plan_length is not None and (not isinstance(max_plan_length, int) or max_plan_length < 1):
        raise CirError(f"max_plan_length must be a positive integer, got {max_plan_length!r}")


def _write_tasks(tasks: Iterable[Any], tmp_dir: Path, desc: str, n: int,
                 progress: bool) -> tuple[list[dict[str, Any]], int]:
    """Write each generated task's game and trajectory under ``tmp_dir``; its manifest rows
    and the number of draws. On any error ``tmp_dir`` is removed: never a half-written split."""
    rows: list[dict[str, Any]] = []
    attempts = 0
    try:
        bar = tqdm(tasks, total=n, desc=desc, unit="task", disable=not progress, **bar_settings())
        for task in bar:
            attempts += task.attempts
            trial_dir = tmp_dir / task.drawn.folder / task.drawn.trial
            trial_dir.mkdir(parents=True)
            (trial_dir / "game.tw-pddl").write_text(task.game_text, encoding="utf-8")
            (trial_dir / "traj_data.json").write_text(
                json.dumps(task.traj_data(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
            rows.append(task.manifest_row())
        bar.close()
    except BaseException as err:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        if isinstance(err, OSError):
            raise CirError(f"{err.filename or tmp_dir}: cannot write the tasks "
                           f"({err.strerror or err})") from None
        raise
    return rows, attempts


def _existing_manifest(split_dir: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest of an existing, identical split; ``None`` if there is nothing there."""
    if not split_dir.exists():
        return None
    if not split_dir.is_dir():
        raise CirError(f"{split_dir}: exists and is not a folder")
    manifest_path = split_dir / "manifest.json"
    if not manifest_path.is_file():
        if any(split_dir.iterdir()):
            raise CirError(f"{split_dir}: folder already holds files but no manifest.json; "
                           f"choose another --out or remove it")
        split_dir.rmdir()
        return None
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        old = manifest["settings"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CirError(f"{manifest_path}: unreadable manifest ({err}); choose another --out "
                       f"or remove the folder") from None
    if old != settings or manifest.get("versions", {}).get("cir") != __version__:
        diff = ", ".join(f"{k}={old.get(k)!r} (asked {v!r})" for k, v in settings.items()
                         if old.get(k) != v) or "cir version"
        raise CirError(f"{split_dir}: already holds different tasks ({diff}); choose another "
                       f"--out or remove the folder")
    for row in manifest.get("tasks", []):
        game = split_dir / row["task_id"] / "game.tw-pddl"
        if not game.is_file() or sha256_text(game.read_text(encoding="utf-8")) != row["sha256"]:
            raise CirError(f"{game}: missing or changed since generation; remove {split_dir} "
                           f"and generate again")
    return manifest


def read_manifest(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Manifests under ``path`` (a split folder or a folder of splits), split order."""
    p = Path(path)
    if not p.exists():
        raise CirError(f"{p}: no such folder")
    files = [p / "manifest.json"] if (p / "manifest.json").is_file() else \
        [p / s / "manifest.json" for s in SPLITS if (p / s / "manifest.json").is_file()]
    if p.is_file() and p.name == "manifest.json":
        files = [p]
    if not files:
        raise CirError(f"{p}: no manifest.json here or in {', '.join(SPLITS)} subfolders; "
                       f"expected the output of `cir tasks generate`")
    out = []
    for f in files:
        try:
            m = json.loads(f.read_text(encoding="utf-8"))
            m["tasks"]  # noqa: B018 - presence check
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CirError(f"{f}: not a cir task manifest ({err})") from None
        _check_manifest_rows(m["tasks"], f)
        m["_path"] = str(f)
        out.append(m)
    return out


#: What each manifest row holds (``cir tasks list`` prints these).
_ROW_TYPES = {"task_id": str, "task_type": str, "room": str, "n_receptacles": int,
              "n_objects": int, "plan_length": int}


def _check_manifest_rows(rows: Any, path: Path) -> None:
    """Every row of a manifest with its fields and types, or a CirError naming the first bad one."""
    if not isinstance(rows, list):
        raise CirError(f"{path}: 'tasks' must be a list of task rows, got {type(rows).__name__}")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise CirError(f"{path}: task #{i} must be an object, got {type(row).__name__}")
        for key, kind in _ROW_TYPES.items():
            value = row.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise CirError(f"{path}: task #{i} field {key!r} must be a {kind.__name__}, "
                               f"got {value!r}")
