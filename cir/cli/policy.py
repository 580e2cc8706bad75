"""``cir fit`` and ``cir evaluate``: learn a CIR router from a paired table, test it on another.

The router file holds everything the evaluation needs: the three models, CIR's
thresholds, and the parameters of the baselines (anomaly threshold, rate-matched
anomaly threshold, the always-refresh delay), all chosen on the training table's
out-of-fold predictions. So ``cir evaluate`` needs only the router and the test
table, and nothing is ever tuned on the test table. It refuses a test table that
shares tasks with the training table (``--allow-overlap`` to override).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cir.cli.analysis import partial_label
from cir.cli.limits import MAX_BUDGET, MAX_RESAMPLES, MAX_SEED, check_int
from cir.cli.style import add_columns, command
from cir.episode.protocol import (
    DEFAULT_C,
    DEFAULT_CANDIDATE_DELAYS,
    DEFAULT_D_MIN,
    DEFAULT_EPSILON,
    DEFAULT_FOLDS,
    DEFAULT_LAMBDA,
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
)
from cir.util.errors import CirError
from cir.util.files import disk_error

FORMATS = ("markdown", "csv", "json")


def _delays(text: str) -> tuple[int, ...]:
    try:
        delays = tuple(int(x) for x in text.split(",") if x.strip() != "")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not delays:
        raise argparse.ArgumentTypeError("expected at least one delay")
    return delays


#: What ``cir evaluate`` prints by default in markdown (``--columns all``: every column).
EVALUATE_COLUMNS = ["success_policy", "effect_pp", "ci_low_pp", "ci_high_pp",
                    "intervention_rate", "clean_harm_rate"]
MARGIN_COLUMNS = ["margin_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p"]


def register(subparsers: Any) -> None:
    """Add ``cir fit`` and ``cir evaluate``."""
    f = command(
        subparsers, "fit", help="fit the CIR router (three models, thresholds, baselines) on a paired table",
        description="Fit CIR on a training paired table: three logistic models, thresholds chosen "
                    "on grouped out-of-fold predictions under the clean-harm limit, the baselines "
                    "chosen the same way; write the router as JSON.",
        examples=["cir fit train_run --out router.json",
                  "cir fit train_run --out router.json --epsilon 0.05 --delays 1,2 --report fit-report"])
    f.add_argument("paired", help="training paired.csv/.parquet or RUN_DIR (with f_* columns)")
    f.add_argument("--out", required=True, help="router file to write (JSON)")
    f.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON, help="clean-harm limit")
    f.add_argument("--lam", type=float, default=DEFAULT_LAMBDA, help="harm penalty lambda")
    f.add_argument("--d-min", type=int, default=DEFAULT_D_MIN, help="earliest delay to refresh at")
    f.add_argument("--delays", type=_delays, default=",".join(map(str, DEFAULT_CANDIDATE_DELAYS)),
                   help="candidate delays, checked in order")
    f.add_argument("--folds", type=int, default=DEFAULT_FOLDS, help="out-of-fold groups of tasks")
    f.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the fold assignment")
    f.add_argument("--C", type=float, default=DEFAULT_C, help="inverse L2 strength")
    f.add_argument("--operation", default="refresh", help="recovery operation")
    f.add_argument("--grid-size", type=int, default=21, help="quantiles per threshold in the search grid")
    f.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS,
                   help="model-turn budget of the harness")
    f.add_argument("--max-actions", type=int, default=DEFAULT_MAX_ACTIONS,
                   help="env-action budget of the harness")
    f.add_argument("--report", default=None, metavar="DIR",
                   help="folder for calibration.csv/.png, grid.csv and oof.csv of the fit")
    f.add_argument("--allow-partial", action="store_true",
                   help="fit on a run that lacks tasks (refused by default)")
    f.set_defaults(handler=_fit)

    e = command(
        subparsers, "evaluate", help="evaluate a router and its baselines on a held-out paired table",
        description="Walk the candidate delays on a held-out paired table with CIR, never, "
                    "always, the anomaly baselines and the oracle; effects with task-level "
                    "cluster-bootstrap CIs, margins of CIR over each, a sign-flip test.",
        examples=["cir evaluate router.json test_run",
                  "cir evaluate router.json test_run --columns all --format csv --out eval.csv",
                  "cir evaluate router.json test_run --calibration reliability.png"])
    e.add_argument("router", help="router file from `cir fit`")
    e.add_argument("paired", help="held-out paired.csv/.parquet or RUN_DIR")
    e.add_argument("--format", choices=FORMATS, default="markdown", help="output format")
    e.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples")
    e.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed")
    e.add_argument("--out", default=None, help="write the output here instead of stdout")
    e.add_argument("--calibration", default=None,
                   help="also write the models' reliability curves on this table to this PNG/SVG")
    e.add_argument("--allow-overlap", action="store_true",
                   help="evaluate even if the table shares tasks with the training table")
    e.add_argument("--allow-partial", action="store_true",
                   help="evaluate on a run that lacks tasks (refused by default); the output says so")
    add_columns(e, EVALUATE_COLUMNS)
    e.set_defaults(handler=_evaluate)


def _fmt(threshold: float | None) -> str:
    # pandas: imported when a handler runs, not for `cir --help`
    from cir.study.page import format_number

    return format_number(threshold, 3)


def _fit(args: argparse.Namespace) -> int:
    # imported here, not at the top: `cir --help` must not load pandas and scikit-learn
    from cir.pairs.paired import read_paired
    from cir.router.calibration import calibration_figure, calibration_table
    from cir.router.policy import CIRPolicy

    check_int("--max-turns", args.max_turns, 1, MAX_BUDGET)
    check_int("--max-actions", args.max_actions, 1, MAX_BUDGET)
    check_int("--seed", args.seed, 0, MAX_SEED)
    df = read_paired(args.paired, require_features=True, allow_partial=args.allow_partial)
    policy = CIRPolicy(lam=args.lam, epsilon=args.epsilon, d_min=args.d_min, delays=args.delays,
                       C=args.C, folds=args.folds, operation=args.operation,
                       grid_size=args.grid_size, seed=args.seed)
    policy.fit(df)
    router = policy.to_router(max_turns=args.max_turns, max_actions=args.max_actions,
                              task_ids=sorted(set(df["task_id"])))
    out = router.save(args.out)
    t = policy.thresholds_
    s = policy.oof_summary_
    print(f"fitted on {policy.n_tasks_} tasks, {policy.training_['decision_cells']} decision cells "
          f"({policy.training_['episodes']} episodes; delays {','.join(map(str, policy.delays))})")
    print(f"thresholds: alpha={_fmt(t['alpha'])} beta={_fmt(t['beta'])} gamma={_fmt(t['gamma'])} "
          f"(lambda={policy.lam}, epsilon={policy.epsilon}, d_min={policy.d_min})")
    if t["alpha"] is None:
        print("note: no threshold setting gained under erroneous observations within the clean-harm "
              "limit; the router never refreshes")
    print(f"out-of-fold: net gain under erroneous observations {100 * s['net_gain']:+.2f} pp, "
          f"clean harm {100 * s['clean_harm']:.2f}% (limit {100 * policy.epsilon:.2f}%), "
          f"intervention rate {100 * s['intervention_rate']:.1f}%")
    b = policy.baselines_
    for name in ("anomaly", "anomaly_rate_matched"):
        print(f"baseline {name}: alpha={_fmt(b[name]['alpha'])}, OOF net gain "
              f"{100 * b[name]['oof_net_gain']:+.2f} pp, clean harm {100 * b[name]['oof_clean_harm']:.2f}%, "
              f"intervention rate {100 * b[name]['oof_intervention_rate']:.1f}%")
    a = b["always"]
    print(f"baseline always: delay {a['delay']}, training net gain {100 * a['train_net_gain']:+.2f} pp, "
          f"clean harm {100 * a['train_clean_harm']:.2f}%"
          + ("" if a["meets_epsilon"] else " (no delay meets the clean-harm limit)"))
    if args.report:
        report = Path(args.report)
        try:
            report.mkdir(parents=True, exist_ok=True)
            calibration_table(policy).to_csv(report / "calibration.csv", index=False)
            fig = calibration_figure(policy)
            fig.savefig(report / "calibration.png", dpi=120)
            policy.grid_.to_csv(report / "grid.csv", index=False)
            policy.oof_.to_csv(report / "oof.csv", index=False)
        except OSError as err:
            raise disk_error(err.filename or report, err) from None
        cal = calibration_table(policy).groupby("model", sort=False)["brier"].first()
        print("OOF Brier: " + ", ".join(f"{k} {v:.3f}" for k, v in cal.items()) + f"; report in {report}")
    partial = partial_label(df)
    if partial:
        print(f"note: fitted on a partial run ({partial})")
    print(f"router written to {out}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    # imported here, not at the top: `cir --help` must not load pandas and scikit-learn
    import pandas as pd

    from cir.cli.analysis import select_columns
    from cir.pairs.paired import read_paired
    from cir.router.calibration import calibration_figure
    from cir.router.evaluation import evaluate
    from cir.router.runtime import Router
    from cir.study.page import markdown_table

    check_int("--resamples", args.resamples, 1, MAX_RESAMPLES)
    check_int("--seed", args.seed, 0, MAX_SEED)
    router = Router.load(args.router)
    df = read_paired(args.paired, require_features=True, allow_partial=args.allow_partial)
    trained = set(router.training.get("task_ids", []))
    overlap = sorted(trained & set(df["task_id"]))
    if overlap and not args.allow_overlap:
        raise CirError(f"{args.paired}: {len(overlap)} task(s) of the test table were used to fit "
                       f"{args.router} (e.g. {overlap[0]!r}); evaluate on held-out tasks "
                       "(or pass --allow-overlap)")
    agents = set(router.training.get("agents", []))
    test_agents = set(df["agent"].astype(str)) if "agent" in df.columns else set()
    if agents and test_agents and test_agents != agents:
        print(f"cir: warning: the test table's agent(s) {', '.join(sorted(test_agents))} differ from the "
              f"router's training agent(s) {', '.join(sorted(agents))}", file=sys.stderr)
    result = evaluate(router, df, resamples=args.resamples, seed=args.seed, source=str(args.paired))
    summary, margins = result["summary"], result["margins"]
    asked = [c.strip() for c in (args.columns or "").split(",") if c.strip() and c.strip() != "all"]
    unknown = [c for c in asked if c not in summary.columns and c not in margins.columns]
    if unknown:
        raise CirError(f"--columns: {', '.join(map(repr, unknown))} not in the result; available: "
                       f"{', '.join(dict.fromkeys([*summary.columns[2:], *margins.columns[3:]]))} (or all)")
    summary = select_columns(summary, ["policy", "condition"], args.columns, EVALUATE_COLUMNS, args.format,
                             missing_ok=True)
    margins = select_columns(margins, ["policy", "versus", "condition"], args.columns, MARGIN_COLUMNS,
                             args.format, missing_ok=True)
    partial = partial_label(df)
    if partial and args.format != "markdown":  # markdown says it in its first line
        result["settings"]["partial_run"] = partial
        summary, margins = summary.assign(partial_run=partial), margins.assign(partial_run=partial)
    if args.format == "json":
        text = json.dumps({"settings": result["settings"],
                           "summary": json.loads(summary.to_json(orient="records")),
                           "margins": json.loads(margins.to_json(orient="records"))}, indent=2)
    elif args.format == "csv":
        text = pd.concat([summary.assign(table="summary"),
                          margins.assign(table="margins")], ignore_index=True).to_csv(index=False)
    else:
        s = result["settings"]
        t = s["thresholds"]
        head = (f"CIR on {s['tasks']} held-out tasks"
                + (f" (partial run: {partial})" if partial else "")
                + f", {s['episodes']} episodes; thresholds "
                f"alpha={_fmt(t['alpha'])} beta={_fmt(t['beta'])} gamma={_fmt(t['gamma'])}; "
                f"{s['resamples']} task-level bootstrap resamples (seed {s['seed']})")
        text = (head + "\n\n" + markdown_table(summary) + "\n\nMargins of CIR (pp, paired by task):\n\n"
                + markdown_table(margins) + "\n")
    try:
        if args.calibration:
            calibration_figure(router, df).savefig(args.calibration, dpi=120)
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
    except OSError as err:
        raise disk_error(err.filename or args.out or args.calibration, err) from None
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
