"""``cir repair``: bring a run folder in line with its episode store, keeping what it replaces.

The analysis commands only read a run folder; this command (and ``cir run`` when it resumes)
is what rewrites one: damaged members and another run's tasks are set aside, a torn tail is
cut off, and ``paired.csv`` and ``run.json`` are rebuilt from the store, each old file kept
beside the new one. Missing tasks are run by the same ``cir run`` command.
"""

from __future__ import annotations

import argparse

from cir.cli.style import command


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers, "repair", help="rebuild a run folder's table and record from its episode store",
        description="Set aside damaged parts of the episode store and tasks of another run (the old "
                    "file kept beside it), then rebuild paired.csv and run.json from the store, keeping "
                    "the old ones as NAME.replaced-<time>. Reading a run folder never changes it; this "
                    "command does, under the folder's lock. Tasks it leaves missing are run by the same "
                    "`cir run` command.",
        examples=["cir repair run1", "cir repair cir-out/runs/primary"])
    p.add_argument("run", metavar="RUN_DIR", help="a run folder (run.json, episodes.jsonl.gz)")
    p.set_defaults(handler=_repair)


def _repair(args: argparse.Namespace) -> int:
    from cir.pairs.repair import repair_run

    repair_run(args.run)
    return 0
