"""``cir reproduce``: the paper's study end to end on the embedded default (or any agent)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cir.agents.factory import AGENT_SPECS
from cir.cli.family import add_family
from cir.cli.limits import MAX_BUDGET, MAX_RESAMPLES, check_int, writer_lock
from cir.cli.llm_options import add_llm_options, add_request_options
from cir.cli.run_settings import run_settings
from cir.cli.style import add_family_options, add_parallel, add_quiet, add_restore_check, command
from cir.episode.protocol import DEFAULT_RESAMPLES, DEFAULT_SEED
from cir.study.timings import QUICK_STUDY
from cir.util.errors import CirError

#: Replicates of one study: each is a whole study (cir.study.timings.QUICK_STUDY with --quick).
MAX_REPLICATES = 100


def register(subparsers: Any) -> None:
    p = command(
        subparsers, "reproduce",
        help="run the paper's whole study: tasks, paired runs, analysis, CIR, report",
        description="Generate the tasks, run every experiment of experiments/ through the paired "
                    "replayer (resumable), fit CIR on the cohort a config marks fit_cir, evaluate it against "
                    "its baselines and the oracle on the held-out cohort, and write tables, figures, "
                    "report.md and report.html.",
        examples=["cir reproduce --quick --out cir-out",
                  "cir reproduce --out cir-full",
                  "cir reproduce --out cir-replicates --replicates 5 --jobs 2",
                  "cir reproduce --out cir-fixed-point --perturb-at 4",
                  "cir reproduce --family textworld-cooking --quick --out cir-cooking",
                  "cir reproduce --family service-desk --quick --out cir-desk",
                  "cir reproduce --agent openai:Qwen3-14B --base-url http://localhost:8000/v1 --out cir-qwen"],
    )
    p.add_argument("--quick", action="store_true",
                   help=f"small cohorts, the same pipeline: with the built-in agent {QUICK_STUDY.claim()}")
    p.add_argument("--out", default="cir-out", metavar="DIR", help="output folder (created or resumed)")
    add_family(p)
    p.add_argument("--agent", default="builtin", help=f"the agent: {AGENT_SPECS}")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server for openai[-completion]:MODEL")
    add_parallel(p)
    add_family_options(p)
    add_restore_check(p)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of task generation and agent")
    p.add_argument("--replicates", type=int, default=1,
                   help="independent replicates of the whole study (new tasks and agent seed each: seed, "
                        "seed+1000, ...), pooled in one report; each in replicates/seed-S/")
    p.add_argument("--perturb-at", type=int, default=None, metavar="N",
                   help="perturb env action N of every task (default: the one after 25%% of the factual run)")
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples")
    p.add_argument("--samples", type=int, default=1, metavar="K",
                   help="continuations per arm and branch from each branch point in every cohort, each "
                        "its own draw of a sampling agent (an LLM, or the built-in agent at a "
                        "--temperature): effects and routers use the outcome probabilities "
                        "(one draw: as without samples) (default: %(default)s)")
    p.add_argument("--validation-replicates", type=int, default=None, metavar="N",
                   help="replicates of each planted world the report checks the routers on (default: 1 with "
                        "--quick, else 200; 0: none); a setting of the study like its cohorts: a study folder "
                        "resumes only with the value it was written with")
    p.add_argument("--hard-worlds", type=int, default=0, metavar="N",
                   help="replicates of each hard planted world (an interaction, weak detection, clean harm in a "
                        "subgroup, a shifted held-out population, a null world routers recover in) the report "
                        "also checks the routers on, with the coverage of their intervals (default: 0, none: one "
                        "replicate of each adds about 15 s)")
    p.add_argument("--experiments", default=None, metavar="DIR",
                   help="folder of experiment configs (each names the family: env = \"NAME\"); without "
                        "it, the family's own, which travel with the package (their readable source: this "
                        "repository's experiments/, experiments/textworld-cooking/ and experiments/service-desk/)")
    add_quiet(p)
    add_llm_options(p, cache_default="each run folder's own")
    add_request_options(p)
    p.set_defaults(handler=_reproduce)


def _reproduce(args: argparse.Namespace) -> int:
    # the whole study: loaded when the command runs, not for `cir --help`
    from cir.study.reproduce import reproduce

    settings = run_settings(args)  # the agent's, the parallelism's: checked before any folder
    check_int("--resamples", args.resamples, 1, MAX_RESAMPLES)
    check_int("--replicates", args.replicates, 1, MAX_REPLICATES)
    if args.perturb_at is not None:
        check_int("--perturb-at", args.perturb_at, 1, MAX_BUDGET)
    if args.validation_replicates is not None:
        check_int("--validation-replicates", args.validation_replicates, 0, 10_000)
    check_int("--hard-worlds", args.hard_worlds, 0, 10_000)
    from cir.pairs.store import RunStore

    if RunStore(args.out).is_run():  # a study writes its tables, routers and runs in a folder of its own
        raise CirError(f"--out {args.out}: is a run folder (it has run.json or episodes.jsonl.gz); a study "
                       "needs a folder of its own")
    # one study per folder (each run folder also has its own lock)
    with writer_lock(Path(args.out), "study folder"):
        reproduce(args.out, settings, quick=args.quick, replicates=args.replicates,
                  perturb_at=args.perturb_at, resamples=args.resamples,
                  experiments_dir=args.experiments, progress=not args.quiet, samples=args.samples,
                  validation=args.validation_replicates, hard_worlds=args.hard_worlds)
    return 0
