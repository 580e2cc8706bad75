"""``cir estimate``: the requests and tokens a run or a study would send an LLM server, and
how long that takes at a given throughput (a dry run with the built-in agent)."""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from cir.agents.factory import AGENT_SPECS
from cir.cli.family import load_family_tasks
from cir.cli.llm_options import add_llm_options
from cir.cli.run import add_grid_options, grid_settings
from cir.cli.run_settings import run_settings
from cir.cli.style import add_family_options, add_parallel, add_quiet, command
from cir.episode.protocol import DEFAULT_SEED
from cir.util.errors import CirError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers, "estimate",
        help="the requests and tokens a run or a study would send an LLM server, before running it",
        description=(
            "A dry run: the built-in agent plays the LLM's part through the same replayer, so the "
            "requests are those of an LLM whose episodes are as long as the built-in agent's, after "
            "the replayer's prefix sharing and the reply cache's deduplication; every prompt is "
            "rendered as the LLM agent (--agent, its options) would send it, and its tokens counted "
            "at --chars-per-token characters a token. An agent that uses its whole budget needs "
            "more: the upper bound is shown too. With --in-flight and --latency, or --tokens-per-s, "
            "the wall time at that throughput.\n\n"
            "Nothing is sent to any server and no run folder is written."
        ),
        examples=[
            "cir estimate --tasks tasks/valid_unseen --agent openai:Qwen3-14B --in-flight 128 --latency 1.5",
            "cir estimate --study --agent openai:Qwen3-14B --tokens-per-s 20000 --work /tmp/study-tasks",
            "cir estimate --study --quick --agent openai-completion:SmolLM2 --json estimate.json",
        ],
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--tasks", metavar="DIR", help="a folder of tasks, as `cir run --tasks` takes")
    what.add_argument("--study", action="store_true",
                      help="the study `cir reproduce` runs (its experiment configs and cohorts)")
    p.add_argument("--split", default=None, help="only this split of --tasks")
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks (sorted by id)")
    p.add_argument("--quick", action="store_true", help="with --study: its small cohorts")
    p.add_argument("--experiments", default=None, metavar="DIR",
                   help="with --study: folder of experiment configs; without it, the family's own, as "
                        "`cir reproduce` reads them")
    p.add_argument("--work", default=None, metavar="DIR",
                   help="with --study: where its tasks are generated (default: a temporary folder; "
                        "give `cir reproduce`'s --out to reuse them)")
    p.add_argument("--agent", required=True, help=f"the LLM agent the run would use: {AGENT_SPECS}")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help="agent seed (with --study, also of the study's tasks, as `cir reproduce --seed`)")
    add_grid_options(p)
    add_parallel(p)
    add_family_options(p)
    g = p.add_argument_group("throughput (for the wall time)")
    g.add_argument("--in-flight", type=int, default=None, metavar="N", help="requests in flight")
    g.add_argument("--latency", type=float, default=None, metavar="S", help="seconds per request")
    g.add_argument("--tokens-per-s", type=float, default=None, metavar="T",
                   help="tokens the server computes per second (new prompt tokens with prefix "
                        "caching, plus completion tokens)")
    p.add_argument("--chars-per-token", type=float, default=4.0, metavar="C",
                   help="characters a token (English text under BPE tokenizers: about 4)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the estimate as JSON")
    p.add_argument("--prompts", default=None, metavar="FILE",
                   help="also write every request's prompt and the built-in agent's reply, as JSON lines")
    add_quiet(p)
    add_llm_options(p, cache_default="none: nothing is asked")
    p.set_defaults(handler=handle, base_url=None, rpm=None, tpm=None, request_timeout=120.0,
                   retries=4, patience=600.0, concurrency=1)


def _check_throughput(args: argparse.Namespace) -> None:
    if (args.in_flight is None) != (args.latency is None):
        raise CirError("--in-flight and --latency go together (requests in flight, seconds each)")
    if args.in_flight is not None and args.in_flight < 1:
        raise CirError(f"--in-flight {args.in_flight}: expected an integer >= 1")
    for flag, value in (("--latency", args.latency), ("--tokens-per-s", args.tokens_per_s)):
        if value is not None and not value > 0:
            raise CirError(f"{flag} {value}: expected a number > 0")


def handle(args: argparse.Namespace) -> int:
    from cir.pairs.estimate import estimate_run, estimate_runs, llm_renderer

    _check_throughput(args)
    settings = run_settings(args, grid_settings(args))
    llm_renderer(settings)  # an LLM agent and its options: before any task is loaded
    from cir.pairs.outputs import check_output, write_output

    for option, path, kind in (("--json", args.json, "estimate"), ("--prompts", args.prompts, "prompts")):
        if path:
            check_output(path, kind, option)  # before the dry run, not after it
    prompts: list[tuple[str, str]] = []
    keep = prompts if args.prompts else None
    if args.study:
        from cir.study.reproduce import study_runs

        with tempfile.TemporaryDirectory(prefix="cir-estimate-") as tmp:
            runs = study_runs(args.work or tmp, settings, quick=args.quick,
                              experiments_dir=args.experiments, progress=not args.quiet,
                              samples=args.samples)
            result = estimate_runs(runs, name="study", chars_per_token=args.chars_per_token, keep=keep)
    else:
        tasks = load_family_tasks(args, settings.env_family(), args.tasks, args.split)[: args.limit]
        result = estimate_run(tasks, settings, name=str(args.tasks), chars_per_token=args.chars_per_token,
                              keep=keep)
    print(report(result, args))
    if args.json:
        write_output(args.json, json.dumps(_as_json(result, args), indent=1) + "\n", "estimate", "--json")
    if args.prompts:
        write_output(args.prompts, "".join(json.dumps({"prompt": prompt, "reply": reply}, ensure_ascii=False) + "\n"
                                           for prompt, reply in prompts), "prompts", "--prompts")
    return 0


def _wall(result: Any, args: argparse.Namespace) -> dict[str, float]:
    out = {}
    if args.in_flight:
        out[f"{args.in_flight} in flight x {args.latency:g} s"] = result.wall_seconds(
            in_flight=args.in_flight, latency=args.latency)
    if args.tokens_per_s:
        out[f"{args.tokens_per_s:g} tokens/s, prefix cache"] = result.wall_seconds(tokens_per_s=args.tokens_per_s)
        out[f"{args.tokens_per_s:g} tokens/s, no prefix cache"] = result.wall_seconds(
            tokens_per_s=args.tokens_per_s, prefix_cache=False)
    return out


def _as_json(result: Any, args: argparse.Namespace) -> dict[str, Any]:
    return {**result.as_dict(), "agent": args.agent, "chars_per_token": args.chars_per_token,
            "wall_seconds": _wall(result, args)}


def _hours(seconds: float) -> str:
    return f"{seconds:,.0f} s ({seconds / 3600:.2f} h)"


def report(result: Any, args: argparse.Namespace) -> str:
    """The estimate as lines: per run (a study's cohorts), then the total and the wall times."""
    rows = result.parts or [result]
    lines = ["| run | tasks | requests | prompt tokens | new prompt tokens (prefix cache) | "
             "completion tokens | upper bound: requests at the whole turn budget |",
             "|---|---|---|---|---|---|---|"]
    for r in [*rows, *([result] if result.parts else [])]:
        lines.append(f"| {r.name} | {r.tasks} | {r.requests:,} | {r.prompt_tokens:,} | "
                     f"{r.new_prompt_tokens:,} | {r.completion_tokens:,} | {r.budget_requests:,} |")
    per = result.prompt_tokens / result.requests if result.requests else 0.0
    lines.append(f"\n{result.requests:,} requests of about {per:,.0f} prompt tokens "
                 f"({args.chars_per_token:g} characters a token); {result.ended_early:,} of "
                 f"{result.episodes:,} episodes ended before their turn budget (an agent that "
                 "plays on needs more requests, up to the upper bound).")
    if result.sample_requests:
        lines.append(f"{result.sample_requests:,} of the requests are the further draws of --samples "
                     f"{args.samples}: they start at the branch points (the factual runs and every prefix "
                     "up to a branch point are asked once), so requests grow with the samples only after "
                     f"the branch points: {result.requests - result.sample_requests:,} are the first draw's.")
    for what, seconds in _wall(result, args).items():
        lines.append(f"wall time at {what}: {_hours(seconds)}")
    return "\n".join(lines)
