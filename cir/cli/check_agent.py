"""``cir check-agent``: ask an agent the same contexts several times and report how often its
answers are the same action (:func:`cir.agents.check.check_agent`), so a user knows before a
study whether one sample per arm is enough.

The contexts are those a study's agent sees: the start of a few of the family's tasks and, when
the family has a built-in agent, the context at the perturbation point of that agent's run of
the task (25% of its env actions). Every answer is a request of its own (its own sample index
and seed), never read from a reply cache.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from cir.agents.factory import AGENT_SPECS
from cir.cli.check_env import on_tasks
from cir.cli.family import add_family
from cir.cli.limits import check_int
from cir.cli.llm_options import add_llm_options, add_request_options
from cir.cli.style import add_family_options, command, family_options


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers, "check-agent", help="how often an agent answers the same context with the same action",
        description="Asks the agent each of a few contexts of the family's tasks --n times, each answer its "
                    "own request (a sample index with its own seed), and reports the action-match rate: "
                    "the chance that two answers to one context are the same action. At 1.000 one sample "
                    "per arm is the whole truth; below it, run the study with --samples K and read each "
                    "effect beside its noise floor (a sampling LLM, or a server that is not deterministic "
                    "even at temperature 0).",
        examples=["cir check-agent --agent openai:Qwen3-14B --base-url http://localhost:8000/v1 "
                  "--tasks tasks/valid_unseen",
                  "cir check-agent --agent openai:Qwen3-14B --base-url URL --temperature 0.7 --n 16",
                  "cir check-agent --agent builtin --temperature 0.7 --tasks tasks/valid_unseen"])
    add_family(p)
    p.add_argument("--agent", default="builtin", help=f"the agent: {AGENT_SPECS}")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server for openai[-completion]:MODEL")
    p.add_argument("--tasks", default=None, metavar="DIR",
                   help="a folder of the family's tasks; without it a few are generated in a temporary folder")
    p.add_argument("--split", default=None, help="only this split of --tasks (generated: the family's first)")
    p.add_argument("--contexts", type=int, default=8, metavar="N", help="contexts to ask (two per task)")
    p.add_argument("--n", type=int, default=8, metavar="N", help="answers to each context")
    p.add_argument("--seed", type=int, default=0, help="agent seed (sample i draws with its own seed from it)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the result as JSON")
    add_llm_options(p, cache_default=None)
    add_request_options(p, concurrency=False)
    add_family_options(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cir.cli.family import family_of

    check_int("--contexts", args.contexts, 1, 1000)
    check_int("--n", args.n, 2, 1000)
    check_int("--seed", args.seed, 0)
    family = family_of(args)
    family.option_values(family_options(args))  # a bad option: one line before any work
    return on_tasks(family, args, math.ceil(args.contexts / 2), _check)


def study_contexts(family: Any, tasks: list[Any], n: int, options: dict[str, str] | None = None) -> list[list[dict[str, str]]]:
    """Up to ``n`` contexts: per task its start and, with a built-in agent, the context after its
    run's perturbation point (the env action after 25% of its env actions; for an env with reads,
    the first read at or after it: :func:`cir.episode.perturb.find_point`)."""
    from cir.episode.harness import Harness
    from cir.episode.perturb import find_point

    contexts: list[list[dict[str, str]]] = []
    for task in tasks:
        if len(contexts) >= n:
            break
        env = family.env(task, options)
        try:
            if family.builtin_agent is None:
                contexts.append([{"role": "user", "content": env.reset()}])
                continue
            run = Harness(family.builtin_agent("default", seed=0)).episode(env, str(task.task_id))
            point = find_point(run, [], env=env).at if run.env_actions >= 2 else None
        finally:
            if callable(getattr(env, "close", None)):
                env.close()
        contexts.append(run.prefix(0).context())
        if point is not None and len(contexts) < n:
            contexts.append(run.prefix(run.steps_until_env_action(point)).context())
    return contexts


def _check(family: Any, tasks: list[Any], args: argparse.Namespace) -> int:
    from cir.agents.check import check_agent
    from cir.cli.run_settings import run_settings
    from cir.pairs.run import make_run_agent
    from cir.study.page import markdown_table
    from cir.util.errors import CirError

    args.jobs, args.backend, args.scheduler, args.cache_dir = 1, "loky", None, None
    settings = run_settings(args)  # every agent option checked as `cir run` checks it
    if args.json:
        from cir.pairs.outputs import check_output

        check_output(args.json, "agent check", "--json")  # before the agent is asked, not after
    agent = make_run_agent(settings)  # no --cache-dir: replies kept in memory only, never reused
    contexts = study_contexts(family, list(tasks), args.contexts, settings.family_options)
    if not contexts:
        raise CirError(f"{args.tasks or 'generated tasks'}: no tasks to take contexts from")
    result = check_agent(agent, contexts, args.n)
    import pandas as pd

    shown = pd.DataFrame(result.per_context)
    shown["modal_action"] = shown["modal_action"].str.slice(0, 60)
    print(markdown_table(shown))
    print(f"\nagent {settings.agent!r}: {result.summary()}")
    if args.json:
        from cir.pairs.outputs import write_output

        write_output(args.json, json.dumps({"agent": settings.agent, "n": result.n, "requests": result.requests,
                                            "match_rate": result.match_rate, "per_context": result.per_context},
                                           indent=1) + "\n", "agent check", "--json")
    return 0
