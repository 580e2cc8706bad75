"""``cir tasks generate|list|play``: make, list and hand-play a family's tasks (ALFWorld's by default).

The task generator and the engine adapter are imported inside the handlers, so that
``cir --help`` does not load them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from cir.cli.limits import MAX_TASKS, check_int, writer_lock
from cir.cli.style import add_quiet, command
from cir.util.errors import CirError

HELP_TEXT = """\
Actions (ALFWorld 0.4 syntax; names as printed, e.g. "cabinet 1", "apple 2"):
  look                               describe where you are
  inventory                          what you are carrying
  go to RECEPTACLE                   walk to a receptacle
  open RECEPTACLE / close RECEPTACLE
  take OBJECT from RECEPTACLE        pick something up
  move OBJECT to RECEPTACLE          put what you hold in/on a receptacle
  examine OBJECT / examine RECEPTACLE
  use OBJECT                         switch a lamp on or off
  heat OBJECT with microwave N / cool OBJECT with fridge N / clean OBJECT with sinkbasin N
Player commands: help (this text), admissible (actions the engine accepts now), quit."""


def register(subparsers: Any) -> None:
    """Add ``cir tasks`` and its subcommands."""
    p = command(subparsers, "tasks", help="generate, list and play tasks (ALFWorld's, or --env's)",
                description="Generate, list and play the tasks of an environment family (--env; ALFWorld "
                            "by default).",
                examples=["cir tasks generate --split valid_unseen --n 60 --out tasks",
                          "cir tasks list tasks/valid_unseen", "cir tasks play tasks/valid_unseen/TASK/TRIAL"])
    sub = p.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND")
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])

    g = command(sub, "generate", help="generate verified ALFWorld tasks of one split",
                description="Generate N procedurally drawn ALFWorld tasks, each verified solvable by the "
                            "engine's planner, in ALFWorld's folder layout "
                            "(OUT/SPLIT/<task>/trial_<id>/{traj_data.json,game.tw-pddl}) with "
                            "OUT/SPLIT/manifest.json. The output does not depend on --jobs.",
                examples=["cir tasks generate --split valid_unseen --n 60 --seed 0 --out tasks",
                          "cir tasks generate --split train --n 100 --out tasks --jobs 2 --types "
                          "pick_and_place_simple,pick_heat_then_place_in_recep"])
    g.add_argument("--split", required=True,
                   help="one of the family's splits (ALFWorld: train, valid_seen, valid_unseen; "
                        "valid_unseen uses unseen layouts)")
    g.add_argument("--n", type=int, required=True, help="number of tasks")
    g.add_argument("--seed", type=int, default=0, help="random seed")
    g.add_argument("--out", required=True, help="output folder (the split goes in OUT/SPLIT)")
    g.add_argument("--types", default=None,
                   help="ALFWorld: comma-separated task types to restrict to (all six without it)")
    g.add_argument("--layout-seed", type=int, default=0,
                   help="seed of the room-layout pool (keep it equal across splits)")
    g.add_argument("--jobs", type=int, default=1, help="worker processes verifying tasks")
    g.add_argument("--max-plan-length", type=int, default=None,
                   help="redraw tasks whose optimal plan is longer (e.g. 9 keeps ALFWorld's "
                        "planner expert fast on two-object tasks); without it, no limit")
    add_quiet(g)
    g.set_defaults(handler=_generate)

    ls = command(sub, "list", help="list generated tasks (from manifest.json)",
                 description="Print a table of the tasks in DIR (a split folder or a folder of splits "
                             "written by `cir tasks generate`).",
                 examples=["cir tasks list tasks", "cir tasks list tasks/valid_unseen"])
    ls.add_argument("dir", help="folder written by `cir tasks generate`")
    ls.set_defaults(handler=_list)

    pl = command(sub, "play", help="play a task by hand in the terminal",
                 description="Play a task by typing actions; `help` lists the syntax, an empty line or EOF "
                             "(Ctrl-D) ends the game.",
                 examples=["cir tasks play tasks/valid_unseen/pick_and_place_simple-Mug-None-Shelf-329/"
                           "trial_T00000000_3_000011"])
    pl.add_argument("task", help="a game.tw-pddl file or the trial folder holding it")
    pl.add_argument("--max-steps", type=int, default=200, help="stop after this many actions")
    pl.set_defaults(handler=_play)


def _generate(args: argparse.Namespace) -> int:
    from cir.cli.env import family_of
    from cir.util.parallel import check_jobs

    family = family_of(args)
    if family.name != "alfworld":
        return _generate_other(family, args)
    from cir.families.alfworld.generate import check_split, check_types, generate_split

    check_split(args.split)
    types = check_types(args.types.split(",")) if args.types is not None else None
    check_int("--n", args.n, 1, MAX_TASKS)
    check_int("--seed", args.seed, 0)
    check_jobs(args.jobs)
    # one generator per output folder: two would share (and delete) one temporary split
    with writer_lock(Path(args.out), "task folder"):
        manifest = generate_split(args.out, args.split, args.n, args.seed, types=types,
                                  layout_seed=args.layout_seed, progress=not args.quiet,
                                  jobs=args.jobs, max_plan_length=args.max_plan_length)
    stats = manifest.get("_stats")
    where = Path(args.out) / args.split
    if stats is None:
        print(f"{where}: already holds these {manifest['n_tasks']} tasks; nothing to do")
    else:
        per = stats["seconds"] / max(1, manifest["n_tasks"])
        print(f"wrote {manifest['n_tasks']} tasks to {where} in {stats['seconds']:.1f} s "
              f"({per:.2f} s/task, {stats['draws']} draws)")
    return 0


def _generate_other(family: Any, args: argparse.Namespace) -> int:
    """``family.generate_tasks`` (ALFWorld's own options are refused, not ignored)."""
    from cir.util.parallel import check_jobs

    given = [flag for flag, value in (("--types", args.types), ("--max-plan-length", args.max_plan_length),
                                      ("--layout-seed", args.layout_seed or None)) if value is not None]
    if given:
        raise CirError(f"{given[0]}: an option of ALFWorld's generator; env {family.name!r} does not take it")
    check_int("--n", args.n, 1, MAX_TASKS)
    check_int("--seed", args.seed, 0)
    check_jobs(args.jobs)
    with writer_lock(Path(args.out), "task folder"):
        family.generate(Path(args.out), args.split, args.n, args.seed, progress=not args.quiet, jobs=args.jobs)
    tasks = family.load_tasks(Path(args.out) / args.split)
    print(f"{Path(args.out) / args.split}: {len(tasks)} {family.name} tasks")
    return 0


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


def _list(args: argparse.Namespace) -> int:
    from cir.cli.env import family_of

    family = family_of(args)
    if family.name != "alfworld":
        tasks = family.load_tasks(args.dir)
        print(f"# {args.dir}: env={family.name} n={len(tasks)}")
        for t in tasks:
            print(f"{t.task_id}  {getattr(t, 'task_type', '')}  {getattr(t, 'split', '')}".rstrip())
        return 0
    from cir.families.alfworld.generate import read_manifest

    for manifest in read_manifest(args.dir):
        s = manifest.get("settings", {})
        print(f"# {manifest['_path']}: split={s.get('split')} n={len(manifest['tasks'])} "
              f"seed={s.get('seed')}")
        print(format_table(manifest["tasks"]))
    return 0


def _play(args: argparse.Namespace) -> int:
    return play(args.task, sys.stdin, sys.stdout, max_steps=args.max_steps, env=getattr(args, "env", None))


def play(task: str, stdin: TextIO, stdout: TextIO, *, max_steps: int = 200, env: str | None = None) -> int:
    """Interactive loop: print observations, read actions until won, EOF or ``quit``; ``env``:
    the family (ALFWorld's game file or trial folder by default, else one task it loads)."""
    from cir.families.registry import get_family

    family = get_family(env)
    if family.name == "alfworld":
        path = Path(task)
        game = path / "game.tw-pddl" if path.is_dir() else path
        if not game.is_file():
            raise CirError(f"{task}: no game.tw-pddl here; give a game file or a trial folder")
        from cir.families.alfworld.env import AlfworldEnv

        env_ = AlfworldEnv(game)
    else:
        tasks = family.load_tasks(task)
        if len(tasks) != 1:
            raise CirError(f"{task}: holds {len(tasks)} tasks of env {family.name!r}; give one")
        env_ = family.env(tasks[0])
    return _play_loop(env_, stdin, stdout, max_steps)


def _play_loop(env: Any, stdin: TextIO, stdout: TextIO, max_steps: int) -> int:
    obs = env.reset()
    print(obs, file=stdout)
    print("(type `help` for the action syntax, `quit` or Ctrl-D to stop)", file=stdout)
    steps = 0
    won = False
    while steps < max_steps:
        stdout.write("> ")
        stdout.flush()
        line = stdin.readline()
        if not line:
            print("", file=stdout)
            break
        action = line.strip()
        if action in ("quit", "exit"):
            break
        if action == "":
            continue
        if action == "help":
            print(HELP_TEXT, file=stdout)
            continue
        if action == "admissible":
            cmds = _admissible(env)
            print("\n".join(cmds) if cmds else "(not available)", file=stdout)
            continue
        obs, done, won = env.step(action)
        steps += 1
        print(obs, file=stdout)
        if done:
            break
    print(f"-- {'won' if won else 'not won'} after {steps} actions", file=stdout)
    return 0


def _admissible(env: Any) -> list[str]:
    getter = getattr(env, "admissible_commands", None)
    if callable(getter):
        return list(getter())
    if isinstance(getter, list | tuple):
        return list(getter)
    return []
