"""``cir tasks generate|list|play``: make, list and hand-play a family's tasks (ALFWorld's by default).

Everything family-specific is the family's (:class:`~cir.families.family.Family`): its
generator and its own options (``--family-option``), its table of tasks (``list_tasks``) and
its command syntax (its LLM prompt's instructions, what ``help`` prints while playing). The
family is resolved inside the handlers, so that ``cir --help`` loads no engine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from cir.cli.limits import MAX_TASKS, check_int, writer_lock
from cir.cli.style import DEFAULT_JOBS, add_family_options, add_quiet, command, family_options
from cir.util.errors import CirError


def register(subparsers: Any) -> None:
    """Add ``cir tasks`` and its subcommands."""
    p = command(subparsers, "tasks", help="generate, list and play tasks (ALFWorld's, or --family's)",
                description="Generate, list and play the tasks of an environment family (--family; ALFWorld "
                            "by default).",
                examples=["cir tasks generate --split valid_unseen --n 60 --out tasks",
                          "cir tasks list tasks/valid_unseen", "cir tasks play tasks/valid_unseen/TASK/TRIAL"])
    sub = p.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND")
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])

    g = command(sub, "generate", help="generate the tasks of one split",
                description="Generate N tasks of the family's split into DIR/SPLIT with its generator. "
                            "ALFWorld's are procedurally drawn and verified solvable by the engine's planner, "
                            "in ALFWorld's folder layout (DIR/SPLIT/<task>/trial_<id>/{traj_data.json,"
                            "game.tw-pddl}) with DIR/SPLIT/manifest.json. The output does not depend on --jobs.",
                examples=["cir tasks generate --split valid_unseen --n 60 --seed 0 --out tasks",
                          "cir tasks generate --split train --n 100 --out tasks --family-option "
                          "types=pick_and_place_simple,pick_heat_then_place_in_recep",
                          "cir tasks generate --family textworld-cooking --split valid --n 10 --out cooking"])
    g.add_argument("--split", required=True,
                   help="one of the family's splits (ALFWorld: train, valid_seen, valid_unseen; "
                        "valid_unseen uses unseen layouts)")
    g.add_argument("--n", type=int, required=True, help="number of tasks")
    g.add_argument("--seed", type=int, default=0, help="random seed")
    g.add_argument("--out", required=True, metavar="DIR", help="output folder (the split goes in DIR/SPLIT)")
    g.add_argument("--jobs", type=int, default=DEFAULT_JOBS,
                   help="worker processes generating (ALFWorld: verifying) tasks; the tasks do not depend on it")
    add_family_options(g)
    add_quiet(g)
    g.set_defaults(handler=_generate)

    ls = command(sub, "list", help="list a folder's tasks",
                 description="Print a table of the tasks in DIR (a split folder or a folder of splits "
                             "written by `cir tasks generate`; ALFWorld's from its manifest.json).",
                 examples=["cir tasks list tasks", "cir tasks list tasks/valid_unseen"])
    ls.add_argument("dir", metavar="DIR", help="folder written by `cir tasks generate`")
    ls.set_defaults(handler=_list)

    pl = command(sub, "play", help="play a task by hand in the terminal",
                 description="Play a task by typing actions; `help` lists the syntax, an empty line or EOF "
                             "(Ctrl-D) ends the game.",
                 examples=["cir tasks play tasks/valid_unseen/pick_and_place_simple-Mug-None-Shelf-329/"
                           "trial_T00000000_3_000011"])
    pl.add_argument("task", metavar="TASK", help="one task as the family loads it (ALFWorld: a game.tw-pddl file or the trial "
                                 "folder holding it)")
    pl.add_argument("--max-steps", type=int, default=200, help="stop after this many actions")
    pl.set_defaults(handler=_play)


def _generate(args: argparse.Namespace) -> int:
    from cir.cli.family import family_of
    from cir.util.parallel import check_jobs

    family = family_of(args)
    check_int("--n", args.n, 1, MAX_TASKS)
    check_int("--seed", args.seed, 0)
    check_jobs(args.jobs)
    options = family_options(args)
    family.option_values(options, generate=True)  # a bad option: before the folder is touched
    if args.split not in family.splits:
        raise CirError(f"unknown split {args.split!r}; expected one of {', '.join(family.splits)}")
    # one generator per output folder: two would share (and delete) one temporary split
    with writer_lock(Path(args.out), "task folder"):
        said = family.generate(Path(args.out), args.split, args.n, args.seed, progress=not args.quiet,
                               jobs=args.jobs, family_options=options)
    if not isinstance(said, str):  # a generator that says nothing: what the folder holds
        said = f"{Path(args.out) / args.split}: {len(family.load_tasks(Path(args.out) / args.split))} {family.name} tasks"
    print(said)
    return 0


def _list(args: argparse.Namespace) -> int:
    from cir.cli.family import family_of

    family = family_of(args)
    if family.list_tasks is not None:
        print(family.list_tasks(args.dir))
        return 0
    tasks = family.load_tasks(args.dir)
    print(f"# {args.dir}: env={family.name} n={len(tasks)}")
    for t in tasks:
        print(f"{t.task_id}  {getattr(t, 'task_type', '')}  {getattr(t, 'split', '')}".rstrip())
    return 0


def _play(args: argparse.Namespace) -> int:
    return play(args.task, sys.stdin, sys.stdout, max_steps=args.max_steps, env=getattr(args, "family", None))


def play(task: str, stdin: TextIO, stdout: TextIO, *, max_steps: int = 200, env: str | None = None) -> int:
    """Interactive loop: print observations, read actions until won, EOF or ``quit``; ``env``:
    the family (ALFWorld by default), which loads ``task`` (one task)."""
    from cir.families.registry import get_family

    family = get_family(env)
    tasks = family.load_tasks(task)
    if len(tasks) != 1:
        raise CirError(f"{task}: holds {len(tasks)} tasks of env {family.name!r}; give one")
    return _play_loop(family.env(tasks[0]), stdin, stdout, max_steps, family.prompt.instructions)


def _play_loop(env: Any, stdin: TextIO, stdout: TextIO, max_steps: int, syntax: str) -> int:
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
            print(f"{syntax}\nPlayer commands: help (this text), admissible (actions the engine accepts now), "
                  "quit.", file=stdout)
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
