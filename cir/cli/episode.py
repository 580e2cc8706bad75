"""``cir episode``: one episode of one task, printed readably."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from cir.agents.factory import AGENT_SPECS
from cir.cli.family import add_family
from cir.cli.limits import MAX_BUDGET, check_int
from cir.cli.llm_options import add_llm_options, add_request_options, llm_config, request_limits
from cir.cli.style import add_quiet, command
from cir.episode.protocol import DEFAULT_FRACTION, DEFAULT_MAX_ACTIONS, DEFAULT_MAX_TURNS
from cir.util.errors import CirError
from cir.util.files import disk_error
from cir.util.progress import bar_settings

_COLOURS = {"agent": "36", "harness": "35", "obs": "0", "perturbed": "33", "won": "32", "lost": "31",
            "dim": "2", "bold": "1"}


class Painter:
    """ANSI colours when stdout is a terminal (and NO_COLOR is unset)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, what: str) -> str:
        if not self.enabled:
            return text
        return f"\033[{_COLOURS[what]}m{text}\033[0m"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers, "episode",
        help="run one episode of one task and print its transcript",
        description=(
            "Run one episode (clean by default). A perturbed condition first runs the factual "
            "episode to find the perturbation point. --router applies a CIR router's refresh "
            "decisions at its candidate delays. The task is named as `cir run` names it (its id "
            "below the split folder, and the split)."
        ),
        examples=["cir episode tasks/valid_unseen/pick_and_place_simple-Mug-None-Shelf-329/trial_T00000000_3_000011",
                  "cir episode TASK --condition stale2 --show",
                  "cir episode TASK --condition stale2 --router cir-out/router.json --json episode.json"],
    )
    p.add_argument("task", metavar="TASK",
                   help="a task the family loads (ALFWorld: a game.tw-pddl or a trial folder holding one), "
                        "or with --tasks a task id")
    add_family(p, reads_runs=True)
    p.add_argument("--tasks", default=None, metavar="DIR", help="a folder of the family's tasks; TASK is then a task id")
    p.add_argument("--agent", default="builtin", help=f"the agent: {AGENT_SPECS}")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server for openai[-completion]:MODEL")
    p.add_argument("--condition", default="clean", help="clean, staleK, lagK or missing")
    p.add_argument("--persistence", default="once", metavar="once|N|refresh",
                   help="how long the perturbed read lasts: once, N env actions or until a refresh (the same "
                        "command sent again is shown the perturbed text again; see `cir run --help`)")
    p.add_argument("--router", default=None, metavar="ROUTER_JSON", help="a router file from `cir fit`")
    p.add_argument("--seed", type=int, default=0, help="agent seed")
    p.add_argument("--perturb-fraction", type=float, default=DEFAULT_FRACTION,
                   help="perturb the env action after this fraction of the factual run")
    p.add_argument("--perturb-at", type=int, default=None, metavar="N",
                   help="perturb env action N instead")
    p.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS, help="model-turn budget")
    p.add_argument("--max-actions", type=int, default=DEFAULT_MAX_ACTIONS, help="env-action budget")
    p.add_argument("--show", action="store_true",
                   help="print the full transcript (task text, every observation, events)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the transcript as JSON")
    add_quiet(p)
    add_llm_options(p, cache_default="none, replies kept in memory")
    add_request_options(p, concurrency=False)  # one episode: one request at a time
    p.set_defaults(handler=handle)


class _Ticking:
    """The env, ticking a progress bar per env action (the episode can take a minute)."""

    def __init__(self, env: Any, bar: Any) -> None:
        self.env, self.bar = env, bar

    def reset(self) -> str:
        return self.env.reset()

    def step(self, action: str) -> tuple[str, bool, bool]:
        self.bar.update(1)
        return self.env.step(action)

    def snapshot(self) -> Any:
        return self.env.snapshot()

    def restore(self, snapshot: Any) -> None:
        self.env.restore(snapshot)


def handle(args: argparse.Namespace) -> int:
    # imported here, not at the top: `cir --help` must not load the engine and the models
    from tqdm import tqdm

    from cir.episode.perturb import parse_condition, parse_persistence
    from cir.families.registry import DEFAULT_FAMILY, get_family, make_agent
    from cir.router.live import run_episode
    from cir.router.runtime import Router

    cond = parse_condition(args.condition)
    persistence = parse_persistence(args.persistence)
    check_int("--max-turns", args.max_turns, 1, MAX_BUDGET)
    check_int("--max-actions", args.max_actions, 1, MAX_BUDGET)
    if args.json and Path(args.json).is_dir():  # found out before the episode runs, not after
        raise CirError(f"--json {args.json}: is a folder; give a file name for the transcript")
    # the family: --family, else the router's (its file names it), else ALFWorld
    router = Router.load(args.router) if args.router and not args.family else None
    env_spec = args.family or (router.family if router is not None else DEFAULT_FAMILY)
    family = get_family(env_spec)
    if args.router and router is None:
        router = Router.load(args.router, extractor=family.extractor)
    task = _one_task(family, args.task, args.tasks)
    from cir.pairs.settings import RunSettings

    # the request options checked as a run's are (one line naming the option)
    requests = RunSettings(base_url=args.base_url, family=env_spec, requests=request_limits(args)).limits()
    agent = make_agent(args.agent, family=env_spec, prompt_file=args.prompt, base_url=args.base_url,
                       seed=args.seed, llm=llm_config(args), cache_dir=args.cache_dir, limits=requests)
    # a bar of env actions (factual run, then the episode): an LLM episode can take minutes
    with tqdm(desc=f"episode ({cond.name})", bar_format="{desc}: {n} env actions [{elapsed}]",
              disable=args.quiet, leave=False, **bar_settings()) as bar:
        factual, episode, info = run_episode(
            task.task_id, agent, _Ticking(family.env(task), bar), cond.name, router=router,
            perturb_fraction=args.perturb_fraction, perturb_at=args.perturb_at, max_turns=args.max_turns,
            max_actions=args.max_actions, persistence=persistence,
        )
    paint = Painter(sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    print(format_episode(episode, task, info, paint, full=args.show))
    if callable(getattr(agent, "stats", None)):  # what the episode cost the LLM server
        llm = agent.stats()
        print(f"LLM: {llm['http_requests']} HTTP requests ({llm['retries']} retries), "
              f"{llm['cache_hits_disk']} replies from the disk cache, {llm['unparsable']} unparsable",
              file=sys.stderr)
    if args.json:
        try:
            Path(args.json).write_text(json.dumps({"task_id": task.task_id, "info": info,
                                                   "transcript": episode.to_dict(),
                                                   "factual": factual.to_dict()}, indent=1) + "\n")
        except OSError as err:
            raise disk_error(args.json, err) from None
    return 0


def _one_task(family: Any, task: str, folder: str | None) -> Any:
    """TASK of the family: a task id of ``folder``, or what ``load_tasks(TASK)`` finds (one task)."""
    if folder is not None:
        found = [t for t in family.load_tasks(folder) if str(t.task_id) == task]
        if not found:
            raise CirError(f"--tasks {folder}: no task {task!r}")
        return found[0]
    tasks = family.load_tasks(task)
    if len(tasks) != 1:
        raise CirError(f"{task}: holds {len(tasks)} tasks; give one task (ALFWorld: one game.tw-pddl or "
                       "the trial folder of one task), or --tasks DIR and a task id")
    return tasks[0]


def _clip(text: str, width: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 3] + "..."


def format_episode(episode: Any, task: Any, info: dict[str, Any], paint: Painter, full: bool = False) -> str:
    """The transcript, one block per step, and the result line."""
    lines = [paint(f"task {task.task_id}", "bold") + f"  ({getattr(task, 'task_type', '')}, "
                                                       f"{getattr(task, 'split', '')})"]
    if full:
        lines += ["  " + line for line in episode.task_text.splitlines()]
    else:
        goal = [ln for ln in episode.task_text.splitlines() if ln.startswith("Your task")]
        lines.append("  " + (goal[0] if goal else _clip(episode.task_text, 100)))
    indent = " " * 7
    for i, step in enumerate(episode.steps, 1):
        if step.actor == "harness":
            head = paint(f"{i:>4} H {step.reply}", "harness")
            if step.action:
                head += paint(f" ({step.action})", "dim")
            if step.rewind_to is not None:
                head += paint(f" (context back to step {step.rewind_to})", "dim")
        else:
            head = f"{i:>4} " + paint(f"> {step.reply.strip()}", "agent")
        lines.append(head)
        perturbed = step.observation is not None and step.shown != step.observation
        shown = step.shown if full else _clip(step.shown, 110)
        if step.actor == "agent" and step.action is None and not full:
            lines[-1] += paint("  OK.", "dim")
        else:
            body = textwrap.indent(shown, indent) if full else indent + shown
            lines.append(paint(body, "perturbed" if perturbed else "obs"))
            if perturbed and (full or step.actor == "agent"):
                true = step.observation if full else _clip(step.observation or "", 100)
                lines.append(paint(f"{indent}(true: {true})", "dim"))
        if step.events and (full or any(not e.startswith("recovery") for e in step.events)):
            lines.append(paint(f"{indent}[{', '.join(step.events)}]", "dim"))
    won = episode.won
    result = "WON" if won else ("LOST (budget)" if not episode.done else "LOST")
    tail = (f"{result}: {episode.env_actions} env actions, {episode.model_turns} model turns; "
            f"condition {info['condition']}")
    if info.get("point"):
        tail += f" at env action {info['point']}"
        fact = "won" if info["factual_success"] else "lost"
        tail += f"; factual run {fact} in {info['factual_env_actions']} env actions"
    if info.get("router_decisions") is not None:
        dec = ", ".join(f"d={x['delay']}:{x['operation'] or 'skip'}" for x in info["router_decisions"]) or "none"
        tail += f"; router {dec}"
    lines.append(paint(tail, "won" if won else "lost"))
    return "\n".join(lines)
