"""``cir reproduce``: the paper's study end to end on the embedded default (or any agent)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cir.agents.factory import AGENT_SPECS
from cir.cli.limits import MAX_RESAMPLES, MAX_SEED, check_int, writer_lock
from cir.cli.llm_options import add_llm_options, llm_config
from cir.protocol import DEFAULT_RESAMPLES, DEFAULT_SEED


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "reproduce",
        help="run the paper's whole study: tasks, paired runs, analysis, CIR, report",
        description="Generate the tasks, run every experiment of experiments/ through the paired "
                    "replayer (resumable), fit CIR on the training cohort, evaluate it against its "
                    "baselines and the oracle on the held-out cohort, and write tables, figures, "
                    "report.md and report.html.",
    )
    p.add_argument("--quick", action="store_true",
                   help="small cohorts (the same pipeline; under 10 minutes on 2 cores)")
    p.add_argument("--out", default="cir-out", help="output folder (default cir-out)")
    p.add_argument("--agent", default="builtin", help=f"{AGENT_SPECS} (default builtin)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server for openai[-completion]:MODEL")
    p.add_argument("--jobs", type=int, default=2, help="parallel worker processes (default 2)")
    p.add_argument("--backend", default="loky", help="joblib backend: loky, threading or dask")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help=f"seed of task generation and agent (default {DEFAULT_SEED})")
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                   help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
    p.add_argument("--experiments", default=None, help="folder of experiment configs (default experiments/)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_llm_options(p, cache_default="each run folder's own")
    p.set_defaults(handler=_reproduce)


def _reproduce(args: argparse.Namespace) -> int:
    # the whole study: loaded when the command runs, not for `cir --help`
    from cir.parallel import check_jobs
    from cir.reproduce import reproduce

    check_jobs(args.jobs, args.backend)
    check_int("--resamples", args.resamples, 1, MAX_RESAMPLES)
    check_int("--seed", args.seed, 0, MAX_SEED)
    llm = llm_config(args)
    # one study per folder (each run folder also has its own lock)
    with writer_lock(Path(args.out), "study folder"):
        reproduce(args.out, quick=args.quick, agent=args.agent, jobs=args.jobs, seed=args.seed,
                  resamples=args.resamples, backend=args.backend, base_url=args.base_url,
                  llm=llm, cache_dir=args.cache_dir, experiments_dir=args.experiments,
                  progress=not args.no_progress)
    return 0
