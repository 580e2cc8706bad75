"""``cir explain``: why the two arms of a pair differ, from a run's explanation traces.

With ``--task``, ``--condition``, ``--delay`` and ``--operation`` it prints the two arms
side by side from the branch point, marks the first divergence and names what it is
attributed to. Without them it prints, per operation, how many pairs diverge and how their
divergences split: attributed to a mechanism that fired on the divergent decision, to the
budget, or unattributed (with the count no mechanism explains at all, which must be 0 for the
built-in agent); then the pairs, rescues and harms of each cause, and per cause of a harm how
many ended on the budget and how many turns the branch lost (:mod:`cir.stats.explain`).
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
    from cir.cli.family import family_spec
    from cir.stats.explain import (
        attribution_split,
        explain_run,
        find_pair,
        format_pair,
        harm_table,
        mechanism_counts,
    )
    from cir.study.page import markdown_table
    from cir.util.errors import CirError

    env = family_spec(args, args.run)  # the run's family, whose agent names the mechanisms
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
    partial = partial_label(table)
    if partial:
        print(f"partial run: these pairs are those of {partial}\n")
    print("Divergences by what they are attributed to (a mechanism on the divergent decision, the budget, "
          "none); unexplained: no mechanism at all since the recovery")
    print(markdown_table(attribution_split(table)))
    print()
    print(markdown_table(mechanism_counts(table)))
    harms = harm_table(table)
    if len(harms):
        print("\nHarms by cause: ended on the budget, model turns the branch took beyond the arm's, "
              "ended going round one or two commands")
        print(markdown_table(harms))
    unexplained = int((~table["explained"]).sum())
    if unexplained:
        print(f"\n{unexplained} divergences are explained by no mechanism (the agent records none, "
              "as an LLM or an agent of one's own, or an instrument defect of a built-in agent)")
    return 0
