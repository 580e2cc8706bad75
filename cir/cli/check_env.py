"""``cir check-env``: check an environment family's snapshots and determinism before a study.

Random walks over a few tasks, a snapshot before every step, and each restored and stepped
again (:func:`cir.envs.check.check_env`); one line per failure naming the task, the step and
what differed; exit status 1 when there is one.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cir.cli.env import add_env
from cir.cli.limits import check_int
from cir.cli.style import command


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers, "check-env", help="check an environment's snapshots, restores and determinism",
        description="Random walks over a few tasks of the family: every step's snapshot restored and the "
                    "step sent again (observation, done and won must be the walk's), a new env reset and "
                    "walked the same (the same answers), and the refresh query sent twice (the same "
                    "answer). Run it on your own environment before a study: a restore that forgets "
                    "part of the state gives wrong paired labels that nothing else notices.",
        examples=["cir check-env --env examples.counter:FAMILY",
                  "cir check-env --env alfworld --tasks tasks/valid_unseen --n 3",
                  "cir check-env --env textworld-cooking --steps 40"])
    add_env(p)
    p.add_argument("--tasks", default=None, metavar="DIR",
                   help="a folder of the family's tasks; without it a few are generated in a temporary folder")
    p.add_argument("--split", default=None, help="only this split of --tasks (generated: the family's first)")
    p.add_argument("--n", type=int, default=3, help="tasks to walk")
    p.add_argument("--steps", type=int, default=20, help="steps of each random walk")
    p.add_argument("--seed", type=int, default=0, help="seed of the walks (and of generated tasks)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cir.cli.env import family_of

    check_int("--n", args.n, 1, 1000)
    check_int("--steps", args.steps, 1, 10_000)
    check_int("--seed", args.seed, 0)
    return on_tasks(family_of(args), args, args.n, _check)


def on_tasks(family: Any, args: argparse.Namespace, n: int,
             check: Callable[[Any, list, argparse.Namespace], int]) -> int:
    """``check(family, tasks, args)`` on the tasks of ``--tasks`` (``--split``), or on ``n`` tasks
    generated with ``--seed`` into a temporary folder (of ``--split``, else the family's first)."""
    if args.tasks is not None:
        return check(family, family.load_tasks(args.tasks, split=args.split), args)
    with tempfile.TemporaryDirectory(prefix=f"cir-{args.command}-") as folder:
        split = args.split or family.splits[0]
        family.generate(Path(folder), split, n, args.seed, progress=False)
        return check(family, family.load_tasks(Path(folder) / split), args)


def _check(family: object, tasks: list, args: argparse.Namespace) -> int:
    from cir.util.errors import CirError

    tasks = list(tasks)[: args.n]
    if not tasks:
        raise CirError(f"{args.tasks or 'generated tasks'}: no tasks to check")
    report = family.check(tasks, steps=args.steps, seed=args.seed)  # type: ignore[attr-defined]
    for line in report.failures:
        print(line)
    print(f"env {family.name!r}: {report.summary()}")  # type: ignore[attr-defined]
    return 0 if report.ok else 1
