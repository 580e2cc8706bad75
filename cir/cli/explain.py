"""``cir explain``: why the two arms of a pair differ, from a run's explanation traces.

With ``--task``, ``--condition``, ``--delay`` and ``--operation`` it prints the two arms
side by side from the branch point, marks the first divergence and names the mechanisms
that caused it. Without them it prints, per operation, how many pairs diverge and which
mechanisms explain them (and the count of unexplained divergences, which must be 0 for
the built-in agent).
"""

from __future__ import annotations

import argparse

from cir.cli.style import command


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers, "explain", help="why the two arms of a pair differ (the agent's mechanisms)",
        description="The two arms of one pair side by side from the branch point, the first divergence "
                    "and the mechanisms that caused it; or, for a whole run, what explains its divergences.",
        examples=["cir explain run1                      # what explains the divergences of the whole run",
                  "cir explain run1 --task pick_and_place_simple-Mug-None-Shelf-329/trial_T00000000_3_000011 "
                  "--condition stale2 --delay 1 --operation refresh"])
    p.add_argument("run", metavar="RUN_DIR", help="a run folder (episodes.jsonl.gz)")
    p.add_argument("--task", help="task id (as in paired.csv)")
    p.add_argument("--condition", help="observation condition, e.g. stale2")
    p.add_argument("--delay", type=int, help="recovery delay")
    p.add_argument("--operation", help="recovery operation, e.g. refresh")
    p.add_argument("--width", type=int, default=60, help="width of each arm's column")
    p.add_argument("--allow-partial", action="store_true",
                   help="explain a run that lacks tasks (refused by default); the output says so")
    p.set_defaults(handler=_explain)


def _explain(args: argparse.Namespace) -> int:
    from cir.cli.analysis import partial_label
    from cir.cli.env import env_spec
    from cir.stats.explain import explain_run, find_pair, format_pair, mechanism_counts
    from cir.study.page import markdown_table
    from cir.util.errors import CirError

    env = env_spec(args, args.run)  # the run's family, whose agent names the mechanisms
    one = [args.task, args.condition, args.delay, args.operation]
    if any(v is not None for v in one):
        if any(v is None for v in one):
            raise CirError("explain one pair: give --task, --condition, --delay and --operation together")
        print(format_pair(find_pair(args.run, args.task, args.condition, args.delay, args.operation,
                                    allow_partial=args.allow_partial, env=env), width=args.width))
        return 0
    table = explain_run(args.run, allow_partial=args.allow_partial, env=env)
    if table.empty:
        raise CirError(f"{args.run}: no recovery pairs in the episode store")
    by_op = table.groupby("operation", sort=False).agg(
        pairs=("diverged", "size"), diverged=("diverged", "sum"),
        unexplained=("explained", lambda s: int((~s).sum()))).reset_index()
    partial = partial_label(table)
    if partial:
        print(f"partial run: these pairs are those of {partial}\n")
    print(markdown_table(by_op))
    print()
    print(markdown_table(mechanism_counts(table)))
    unexplained = int((~table["explained"]).sum())
    if unexplained:
        print(f"\n{unexplained} divergences are explained by no mechanism (the agent records none, "
              "as an LLM or an agent of one's own, or an instrument defect of a built-in agent)")
    return 0
