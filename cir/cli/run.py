"""``cir run``: a paired experiment over a folder of tasks, parallel and resumable."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from cir.agents.factory import AGENT_SPECS
from cir.cli.family import add_family
from cir.cli.llm_options import add_llm_options, add_request_options
from cir.cli.run_settings import run_settings
from cir.cli.style import add_family_options, add_parallel, add_quiet, add_restore_check, command
from cir.episode.operations import OPERATIONS
from cir.episode.protocol import (
    DEFAULT_CONDITIONS,
    DEFAULT_DELAYS,
    DEFAULT_FRACTION,
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    DEFAULT_OPERATIONS,
)
from cir.util.errors import CirError

if TYPE_CHECKING:  # pragma: no cover
    from cir.pairs.settings import ReplaySettings


def _comma(values: tuple[object, ...]) -> str:
    return ",".join(map(str, values))


def add_grid_options(p: argparse.ArgumentParser) -> None:
    """What runs per task (``ReplaySettings``): the same on ``cir run`` and ``cir estimate``."""
    p.add_argument("--conditions", default=_comma(DEFAULT_CONDITIONS),
                   help="comma list of clean, staleK, lagK (K>=1), missing")
    p.add_argument("--delays", default=_comma(DEFAULT_DELAYS), help="comma list of delays >= 0")
    p.add_argument("--operations", default=_comma(DEFAULT_OPERATIONS),
                   help=f"comma list of {', '.join(OPERATIONS)}")
    p.add_argument("--perturb-fraction", type=float, default=DEFAULT_FRACTION,
                   help="perturb the env action after this fraction of the factual run")
    p.add_argument("--perturb-at", type=int, default=None, metavar="N",
                   help="perturb env action N of every task instead (the decision point then says "
                        "nothing about the factual run's length)")
    p.add_argument("--perturb-between", default=None, metavar="LO,HI",
                   help="perturb an env action from LO to HI drawn per task from a digest of its id "
                        "(it says nothing about the factual run's length either)")
    p.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS, help="model-turn budget")
    p.add_argument("--max-actions", type=int, default=DEFAULT_MAX_ACTIONS, help="env-action budget")
    p.add_argument("--samples", type=int, default=1, metavar="K",
                   help="continuations per arm and branch from each branch point, each its own draw of "
                        "a sampling agent (an LLM, or the built-in agent at a --temperature): the table "
                        "gains success counts and outcome probabilities per row; the shared prefix is run "
                        "once (one draw: as without samples) (default: %(default)s)")
    p.add_argument("--persistence", default="once", metavar="once|N|refresh",
                   help="how long a perturbed read lasts: once (the perturbation point only), N (a stale "
                        "cache: the same command sent again in the next N env actions is shown the "
                        "perturbed text again) or refresh (until a recovery queries the env afresh; a "
                        "rewind or a replan does not) (default: %(default)s)")


def _between(text: str | None) -> tuple[int, int] | None:
    """``LO,HI`` as two integers (a CirError naming the option otherwise)."""
    if text is None:
        return None
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        from cir.util.errors import CirError

        raise CirError(f"--perturb-between {text!r}: expected two env-action numbers LO,HI (e.g. 3,7)")
    return int(parts[0]), int(parts[1])


def grid_settings(args: argparse.Namespace) -> ReplaySettings:
    """The grid of the parsed options (checked: one error line naming the option)."""
    from cir.pairs.settings import ReplaySettings

    return ReplaySettings.parse(args.conditions, args.delays, args.operations,
                                perturb_fraction=args.perturb_fraction, perturb_at=args.perturb_at,
                                max_turns=args.max_turns, max_actions=args.max_actions,
                                samples=args.samples, perturb_between=_between(args.perturb_between),
                                persistence=args.persistence)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers, "run",
        help="run a paired experiment: factual runs, perturbed arms, recovery branches",
        description=(
            "For every task: the factual run, the perturbation point, one no-recovery arm per "
            "condition and one recovery branch per delay and operation (from snapshots). Writes "
            "RUN_DIR/episodes.jsonl.gz, RUN_DIR/paired.csv and RUN_DIR/run.json as tasks finish. "
            "Rerun the same command to resume an interrupted run."
        ),
        examples=[
            "cir run --tasks tasks/valid_unseen --out run1",
            "cir run --tasks tasks/valid_unseen --out run1 --conditions clean,stale2 --delays 0,4 "
            "--operations refresh,refresh_ablated",
            "cir run --tasks $ALFWORLD_DATA --split valid_unseen --out run-real --backend dask "
            "--scheduler tcp://HOST:8786 --jobs 32",
            "cir run --family examples.counter:FAMILY --tasks counter-tasks --out run-counter",
            "cir run --tasks tasks/valid_unseen --out run-cache --conditions clean,stale2,lag2 "
            "--operations refresh,rewind --persistence refresh",
        ],
    )
    add_family(p)
    p.add_argument("--tasks", required=True, metavar="DIR",
                   help="a folder of the family's tasks (ALFWorld: generated or ALFWorld data, or one game.tw-pddl)")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="run folder (created or resumed)")
    p.add_argument("--split", default=None, help="only this split of --tasks")
    p.add_argument("--agent", default="builtin", help=f"the agent: {AGENT_SPECS}")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server for openai[-completion]:MODEL")
    p.add_argument("--extend", default=None, metavar="OLD_RUN_DIR",
                   help="a run folder this run extends (the same agent and budgets, every task, "
                        "condition, delay and operation of it, and more): its agent replies are "
                        "reused, it is not changed")
    add_grid_options(p)
    add_parallel(p)
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks (sorted by id)")
    p.add_argument("--seed", type=int, default=0, help="agent seed")
    p.add_argument("--snapshots", default="fast", choices=["fast", "replay"],
                   help="env snapshots: engine state ids (fast) or reset+replay")
    add_family_options(p)
    add_restore_check(p)
    add_quiet(p)
    add_llm_options(p, cache_default="RUN_DIR/agent_cache")
    add_request_options(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    # imported here, not at the top: `cir --help` must not load the engine and the models
    from cir.adapters.frameworks import preload_agent
    from cir.pairs.run import run_experiment

    preload_agent(args.agent, args.base_url)  # a framework agent's module may register its own recovery operations
    # every setting checked (where the settings are built) before the engine or the folder
    replay = grid_settings(args)
    settings = run_settings(args, replay)
    if args.limit is not None and args.limit < 1:
        raise CirError(f"--limit {args.limit}: expected an integer >= 1")
    tasks = settings.env_family().load_tasks(args.tasks, split=args.split)
    if args.limit is not None:
        tasks = tasks[: args.limit]
    source = str(Path(args.tasks).expanduser().resolve()) + (f" (split {args.split})" if args.split else "")
    run_experiment(tasks, args.out, settings, tasks_source=source, limit=args.limit,
                   progress=not args.quiet)
    return 0
