"""``cir check-env``: check an environment family's snapshots and determinism before a study.

Per task, a random walk (by the weights of the family's ``walk_actions`` when it gives them),
the family's built-in agent's episode, and with ``--run`` the factual runs a run folder
recorded: every step's snapshot restored and the step sent again, a new env walked the same,
the refresh query sent twice (:func:`cir.envs.check.check_env`); one line per failure naming
the task, the walk, the step and what differed; exit status 1 when there is one.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cir.cli.family import add_family, load_family_tasks
from cir.cli.limits import check_int
from cir.cli.style import add_family_options, add_quiet, command, family_options


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers, "check-env", help="check an environment's snapshots, restores and determinism",
        description="Walks over a few tasks of the family: a random walk (weighted toward the actions that "
                    "change the state when the family's walk_actions gives weights), the family's built-in "
                    "agent's episode, and with --run the factual runs of a run folder (each answer against the "
                    "one the run recorded). Every step's snapshot is restored and the step sent again "
                    "(observation, done and won must be the walk's), a new env is reset and walked the same "
                    "(the same answers), and the refresh query is sent twice (the same answer). Run it on your "
                    "own environment before a study: a restore that forgets part of the state gives wrong "
                    "paired labels that nothing else notices, and a random walk alone can miss a field that "
                    "matters only late in a task (a key in hand at the door), where agents do walk.",
        examples=["cir check-env --family examples.counter:FAMILY",
                  "cir check-env --family path/to/keydoor.py:FAMILY --tasks kd-tasks/train",
                  "cir check-env --family alfworld --tasks tasks/valid_unseen --n 3",
                  "cir check-env --run kd-train      # the family, tasks and factual runs of a run folder",
                  "cir check-env --family textworld-cooking --steps 40"])
    add_family(p, reads_runs=True)
    p.add_argument("--tasks", default=None, metavar="DIR",
                   help="a folder of the family's tasks; without it a few are generated in a temporary folder "
                        "(with --run: the run's own)")
    p.add_argument("--split", default=None, help="only this split of --tasks (generated: the family's first)")
    p.add_argument("--run", default=None, metavar="RUN_DIR",
                   help="also walk this run folder's factual runs (its family and tasks unless given); a "
                        "quarantined folder is read too: this is how to find what its restore forgets")
    p.add_argument("--n", type=int, default=None, help="tasks to walk; when not given, 3, or with --run every task of the run")
    p.add_argument("--steps", type=int, default=20, help="steps of each random walk")
    p.add_argument("--agent-walk", action=argparse.BooleanOptionalAction, default=True,
                   help="walk the family's built-in agent's episode too, and its episodes with one observation "
                        "missing, as a study's arms walk (when the family has one)")
    p.add_argument("--deep", type=int, default=4, metavar="N",
                   help="restore points of each walk from which every later step is sent again (a field the "
                        "restore forgets may matter only actions later); 0: only the step after each restore")
    p.add_argument("--seed", type=int, default=0, help="seed of the walks (and of generated tasks)")
    add_family_options(p)
    add_quiet(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cir.cli.family import family_of

    if args.n is not None:
        check_int("--n", args.n, 1, 100_000)
    check_int("--steps", args.steps, 1, 10_000)
    check_int("--deep", args.deep, 0, 10_000)
    check_int("--seed", args.seed, 0)
    family = family_of(args, args.run)
    family.option_values(family_options(args))  # a bad option: one line before any work
    if args.run is not None:
        factual, tasks = _run_factual(family, Path(args.run), args)
        return _check(family, tasks, args, factual)
    return on_tasks(family, args, args.n or 3, _check)


def on_tasks(family: Any, args: argparse.Namespace, n: int,
             check: Callable[[Any, list, argparse.Namespace], int]) -> int:
    """``check(family, tasks, args)`` on the tasks of ``--tasks`` (``--split``), or on ``n`` tasks
    generated with ``--seed`` (and ``--family-option``) into a temporary folder (of ``--split``,
    else the family's first)."""
    from cir.util.progress import Steps

    if args.tasks is not None:
        return check(family, load_family_tasks(args, family, args.tasks, args.split), args)
    with tempfile.TemporaryDirectory(prefix=f"cir-{args.command}-") as folder:
        split = args.split or family.splits[0]
        with Steps(f"{args.command}: generating {n} task(s)", enabled=not getattr(args, "quiet", False)) as steps:
            steps.next("generating")
            family.generate(Path(folder), split, n, args.seed, progress=False, family_options=family_options(args))
        return check(family, family.load_tasks(Path(folder) / split), args)


def _run_factual(family: Any, run_dir: Path, args: argparse.Namespace) -> tuple[dict[str, Any], list[Any]]:
    """A run folder's factual transcripts by task, and its tasks that have one (in the run's order)."""
    from cir.pairs.episode_record import FACTUAL
    from cir.pairs.record import RunRecord, foreign_member
    from cir.pairs.store import RunStore, read_episodes
    from cir.util.errors import CirError

    store = RunStore(run_dir)
    record = RunRecord.read(store) if store.dir.is_dir() else None
    if record is None or not store.episodes_path.exists():
        raise CirError(f"--run {run_dir}: not a run folder with an episode store (run.json, episodes.jsonl.gz)")
    # read as a diagnosis, not as results: a quarantined folder too (never its rows)
    scan = store.scan(foreign_member(record.settings, record.task_ids), record.members)
    factual = {ep.task_id: ep.transcript for ep in read_episodes(store.episodes_path, scan)
               if ep.role == FACTUAL and ep.transcript is not None}
    source = args.tasks or _tasks_folder(record.settings.tasks, run_dir)
    order = {t: i for i, t in enumerate(record.task_ids or sorted(factual))}
    tasks = sorted((t for t in family.load_tasks(source, split=args.split) if str(t.task_id) in factual),
                   key=lambda t: order.get(str(t.task_id), len(order)))
    if not tasks:
        raise CirError(f"--run {run_dir}: none of its {len(factual)} factual run(s) is a task of {source}")
    return factual, tasks


def _tasks_folder(source: str | None, run_dir: Path) -> str:
    """Where a run's tasks are: the folder it was given, or a study's ``tasks/SPLIT`` for a
    cohort (``SPLIT[NAME]``, the study folder two levels up)."""
    from cir.util.errors import CirError

    if source and Path(source).is_dir():
        return source
    cohort = re.fullmatch(r"(\w+)\[.+\]", source or "")
    study = run_dir.resolve().parent.parent / "tasks"
    if cohort and (study / cohort.group(1)).is_dir():
        return str(study / cohort.group(1))
    raise CirError(f"--run {run_dir}: its tasks came from {source!r}, which is not a folder here; pass --tasks DIR")


def _factual_walk(transcript: Any) -> Any:
    """A check_env walk: the factual run's env actions again, from reset, each answer against its own."""
    def walk(env: Any) -> list[tuple[str, bool, bool]]:
        env.reset()
        recorded = []
        for step in transcript.steps:
            if step.action is not None and step.action.strip():  # an empty action never reached the env
                env.step(step.action)
                recorded.append((str(step.observation), bool(step.done), bool(step.won)))
        return recorded

    return walk


def _check(family: Any, tasks: list, args: argparse.Namespace, factual: dict[str, Any] | None = None) -> int:
    from cir.util.errors import CirError

    n = args.n or (None if factual is not None else 3)
    tasks = list(tasks)[:n]
    if not tasks:
        raise CirError(f"{args.tasks or 'generated tasks'}: no tasks to check")
    label = f"the factual run in {args.run}"
    walks = None if factual is None else (
        lambda task: [(label, _factual_walk(factual[str(task.task_id)]))])
    from cir.envs.check import EnvCheck
    from cir.util.progress import Steps

    report = EnvCheck()
    # task by task, for a line that moves (a deep check of ALFWorld takes ~10 s a task); each
    # task's walks are seeded by its own name, so the checks are those of one call on all of them
    with Steps("check-env", {"walking the tasks": 1.0}, enabled=not args.quiet) as steps:
        steps.next("walking the tasks", parts=len(tasks))
        for task in tasks:
            one = family.check([task], steps=args.steps, seed=args.seed, agent=args.agent_walk, walks=walks,
                               family_options=family_options(args), deep=args.deep)
            report.tasks += one.tasks
            report.restores += one.restores
            report.failures.extend(one.failures)
            for kind, n in one.walked.items():
                report.add_steps(kind, n)
            steps.advance()
    for line in report.failures:
        print(line)
    print(f"family {family.name!r}: {report.summary()}")
    return 0 if report.ok else 1
