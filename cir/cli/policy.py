"""``cir fit`` and ``cir evaluate``: learn a CIR router from a paired table, test it on another.

The router file holds everything the evaluation needs: the estimator's models, its
thresholds, and the parameters of the baselines (anomaly threshold, rate-matched
anomaly threshold, the always-recover delay), all chosen on the training table's
out-of-fold predictions. So ``cir evaluate`` needs only the router and the test
table, and nothing is ever tuned on the test table. It refuses a test table that
shares tasks with the training table (``--allow-overlap`` to override).

``cir fit RUN_DIR`` takes the harness budgets (model turns, env actions) from the run's
record, since the features read them: a flag may repeat them, and a flag that disagrees
with the run is refused.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

from cir.cli.analysis import partial_label
from cir.cli.family import family_spec, recorded_family
from cir.cli.limits import MAX_BUDGET, MAX_RESAMPLES, MAX_SEED, check_int
from cir.cli.style import StoreRenamed, add_columns, command
from cir.episode.operations import OPERATIONS
from cir.episode.protocol import (
    DEFAULT_C,
    DEFAULT_CANDIDATE_DELAYS,
    DEFAULT_D_MIN,
    DEFAULT_DELTA,
    DEFAULT_EPSILON,
    DEFAULT_FOLDS,
    DEFAULT_LAMBDA,
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
)
from cir.pairs.outputs import ROUTER, check_output, write_output
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


def _operations(text: str) -> tuple[str, ...]:
    ops = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [o for o in ops if o not in OPERATIONS]
    if not ops or unknown or len(set(ops)) != len(ops):
        raise argparse.ArgumentTypeError(
            f"expected distinct operations among {', '.join(OPERATIONS)}, got {text!r}")
    return ops


def _named_router(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path.strip() or not name.strip().replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(f"expected NAME=ROUTER_FILE (a name of letters, digits, _), got {text!r}")
    return name.strip(), path.strip()


#: What ``cir evaluate`` prints by default in markdown (``--columns all``: every column).
EVALUATE_COLUMNS = ["success_policy", "effect_pp", "ci_low_pp", "ci_high_pp",
                    "intervention_rate", "clean_harm_rate"]
MARGIN_COLUMNS = ["margin_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p"]


def register(subparsers: Any) -> None:
    """Add ``cir fit`` and ``cir evaluate``."""
    _register_fit(subparsers)
    _register_evaluate(subparsers)


def _register_fit(subparsers: Any) -> None:
    f = command(
        subparsers, "fit", help="fit the CIR router (models, thresholds, baselines) on a paired table",
        description="Fit CIR on a training paired table: the estimator's logistic models (paper: p_err, "
                    "p0, p1; paired: p_err, P(rescue), P(harm)), thresholds chosen on grouped "
                    "out-of-fold predictions under the clean-harm budget, the baselines chosen the "
                    "same way; write the router as JSON.",
        examples=["cir fit train_run --out router.json",
                  "cir fit train_run --out router.json --estimator paired",
                  "cir fit train_run --out router.json --budget certified --delta 0.1",
                  "cir fit train_run --out router.json --epsilon 0.05 --candidate-delays 1,2 --report fit-report"])
    f.add_argument("paired", metavar="PAIRED", help="the training table: paired.csv / paired.parquet, or a RUN_DIR "
                   "(with f_* columns)")
    f.add_argument("--out", required=True, metavar="FILE", help="router file to write (JSON)")
    f.add_argument("--estimator", choices=("paper", "paired"), default="paper",
                   help="paper: the paper's three models (p_err, p0, p1); paired: P(rescue) and P(harm) "
                        "fitted on the paired outcome classes")
    f.add_argument("--operations", "--operation", dest="operations", type=_operations, default=("refresh",),
                   help="recovery operation(s) the router may choose (comma list)")
    f.add_argument("--budget", choices=("empirical", "certified"), default="empirical",
                   help="empirical: observed clean harm <= epsilon (the paper); certified: Learn-then-Test, "
                        "clean harm <= epsilon with probability >= 1 - delta")
    f.add_argument("--epsilon", type=float, default=DEFAULT_EPSILON, help="clean-harm limit")
    f.add_argument("--delta", type=float, default=DEFAULT_DELTA, help="the certified budget's error probability")
    f.add_argument("--lam", type=float, default=DEFAULT_LAMBDA, help="harm penalty lambda")
    f.add_argument("--d-min", type=int, default=DEFAULT_D_MIN, help="earliest delay to recover at")
    f.add_argument("--candidate-delays", "--delays", dest="delays", type=_delays, action=StoreRenamed,
                   default=",".join(map(str, DEFAULT_CANDIDATE_DELAYS)),
                   help="the delays the router may recover at, checked in order (--delays: its former name, "
                        "which names the grid's delays in cir run)")
    f.add_argument("--folds", type=int, default=DEFAULT_FOLDS, help="out-of-fold groups of tasks")
    f.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the fold assignment")
    f.add_argument("--C", type=float, default=DEFAULT_C, help="inverse L2 strength (the paper's models)")
    f.add_argument("--threshold-steps", "--grid-size", dest="threshold_steps", type=int, default=21,
                   action=StoreRenamed,
                   help="candidate values of each threshold in the search (quantiles of its score; --grid-size: its "
                        "former name, deprecated)")
    f.add_argument("--max-turns", type=int, default=None,
                   help=f"model-turn budget of the harness (default: the run's; {DEFAULT_MAX_TURNS} for a table)")
    f.add_argument("--max-actions", type=int, default=None,
                   help=f"env-action budget of the harness (default: the run's; {DEFAULT_MAX_ACTIONS} for a table)")
    f.add_argument("--report", default=None, metavar="DIR",
                   help="folder for calibration.csv/.png, candidates.csv (the threshold candidates) and oof.csv of the fit")
    f.add_argument("--allow-partial", action="store_true",
                   help="fit on a run that lacks tasks (refused by default)")
    f.set_defaults(handler=_fit)


def _register_evaluate(subparsers: Any) -> None:
    e = command(
        subparsers, "evaluate", help="evaluate a router and its baselines on a held-out paired table",
        description="Walk the candidate delays on a held-out paired table with CIR, never, "
                    "always, the anomaly baselines and the oracle; effects with task-level "
                    "cluster-bootstrap CIs (the counts' Clopper-Pearson interval where fewer than 40 "
                    "arms differ; the interval column says which), margins of CIR over each, a sign-flip test.",
        examples=["cir evaluate router.json test_run",
                  "cir evaluate router.json test_run --columns all --format csv --out eval.csv",
                  "cir evaluate router.json test_run --calibration reliability.png",
                  "cir evaluate router.json test_run --decisions decisions.csv"])
    e.add_argument("router", metavar="ROUTER", help="router file from `cir fit` (named cir in the output)")
    e.add_argument("paired", metavar="PAIRED", help="the held-out table: paired.csv / paired.parquet, or a RUN_DIR")
    e.add_argument("--compare", type=_named_router, action="append", default=[], metavar="NAME=ROUTER",
                   help="also evaluate this router, as NAME, on the same table (repeatable)")
    e.add_argument("--format", choices=FORMATS, default="markdown", help="output format")
    e.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples")
    e.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed")
    e.add_argument("--out", default=None, metavar="FILE", help="write to FILE instead of standard output")
    e.add_argument("--calibration", default=None, metavar="FILE",
                   help="also write the models' reliability curves on this table to this PNG/SVG")
    e.add_argument("--decisions", default=None, metavar="FILE",
                   help="also write each router's decision on each held-out arm to this CSV (task_id, "
                        "condition, router, recover, delay, operation, y): what a live run of the router "
                        "is compared with, arm by arm")
    e.add_argument("--allow-overlap", action="store_true",
                   help="evaluate even if the table shares tasks with the training table")
    e.add_argument("--allow-partial", action="store_true",
                   help="evaluate on a run that lacks tasks (refused by default); the output says so")
    add_columns(e, EVALUATE_COLUMNS)
    e.set_defaults(handler=_evaluate)


def _fmt(threshold: float | None) -> str:
    """A threshold as the router file holds it: ``null`` is one that is never passed."""
    # pandas: imported when a handler runs, not for `cir --help`
    from cir.study.page import format_number

    return "null" if threshold is None else format_number(threshold, 3)


def _budgets(args: argparse.Namespace, df: Any) -> tuple[int, int]:
    """The harness budgets the features were computed with: the run's, or the flags for a table."""
    from cir.pairs.record import RunRecord
    from cir.pairs.store import RunStore

    run = (df.attrs.get("run") or {}).get("run_dir")
    record = RunRecord.read(RunStore(Path(run))) if run else None
    if record is None:
        turns = DEFAULT_MAX_TURNS if args.max_turns is None else args.max_turns
        actions = DEFAULT_MAX_ACTIONS if args.max_actions is None else args.max_actions
        return turns, actions
    found = {"--max-turns": record.settings.replay.max_turns, "--max-actions": record.settings.replay.max_actions}
    for flag, given in (("--max-turns", args.max_turns), ("--max-actions", args.max_actions)):
        if given is not None and given != found[flag]:
            raise CirError(f"{flag} {given}: the run {run} was made with {flag} {found[flag]}, and the "
                           "features read it; leave the flag out (the run's is used) or fit on a run "
                           "made with that budget")
    return found["--max-turns"], found["--max-actions"]


def _print_fit(policy: Any) -> None:
    t, s, b = policy.thresholds_, policy.oof_summary_, policy.budget_
    print(f"fitted the {policy.estimator} estimator for {', '.join(policy.operations)} on {policy.n_tasks_} "
          f"tasks, {policy.training_['decision_cells']} decision cells ({policy.training_['arms']} arms; "
          f"delays {','.join(map(str, policy.delays))})")
    print("thresholds: " + " ".join(f"{k}={_fmt(v)}" for k, v in t.items())
          + f" (lambda={policy.lam}, epsilon={policy.epsilon}, d_min={policy.d_min})")
    print(f"budget ({b['kind']}): {b['candidates_within_budget']} of {b['candidates_searched']} threshold "
          "candidates within it" + ("" if b["bound"] else ", so it did not bind"))
    if b["kind"] == "certified" and not b["certified_any"]:
        print(f"note: no recovering threshold candidate could be certified at epsilon={b['epsilon']}, "
              f"delta={b['delta']} with {b['n_clean']} clean arms (one candidate with no observed harm needs "
              f"{b['clean_arms_to_certify_one']}); the router never recovers")
    elif policy.never_recovers:
        print(f"note: the router {policy.never_recovers} (no threshold candidate gained under erroneous "
              "observations within the clean-harm budget); every decision it makes says "
              "blocked_by=no_threshold")
    print(f"out-of-fold: net gain under erroneous observations {100 * s['net_gain']:+.2f} pp, "
          f"clean harm {100 * s['clean_harm']:.2f}% (limit {100 * policy.epsilon:.2f}%), "
          f"intervention rate {100 * s['intervention_rate']:.1f}%")
    base = policy.baselines_
    for name in ("anomaly", "anomaly_rate_matched"):
        print(f"baseline {name}: alpha={_fmt(base[name]['alpha'])}, OOF net gain "
              f"{100 * base[name]['oof_net_gain']:+.2f} pp, clean harm {100 * base[name]['oof_clean_harm']:.2f}%, "
              f"intervention rate {100 * base[name]['oof_intervention_rate']:.1f}%")
    a = base["always"]
    print(f"baseline always: delay {a['delay']}, training net gain {100 * a['train_net_gain']:+.2f} pp, "
          f"clean harm {100 * a['train_clean_harm']:.2f}%"
          + ("" if a["meets_epsilon"] else " (no delay meets the clean-harm budget)"))


def _fit(args: argparse.Namespace) -> int:
    # imported here, not at the top: `cir --help` must not load pandas and scikit-learn
    from cir.families.registry import get_family
    from cir.pairs.paired import read_paired
    from cir.router.calibration import calibration_figure, calibration_table
    from cir.router.policy import CIRPolicy

    for flag, value in (("--max-turns", args.max_turns), ("--max-actions", args.max_actions)):
        if value is not None:
            check_int(flag, value, 1, MAX_BUDGET)
    check_int("--seed", args.seed, 0, MAX_SEED)
    check_output(args.out, ROUTER, "--out")  # before the fit, not after it
    report_files = _report_files(args.report)
    env = family_spec(args, args.paired)
    df = read_paired(args.paired, require_features=True, allow_partial=args.allow_partial)
    max_turns, max_actions = _budgets(args, df)
    policy = CIRPolicy(estimator=args.estimator, operations=args.operations, budget=args.budget,
                       lam=args.lam, epsilon=args.epsilon, delta=args.delta, d_min=args.d_min,
                       delays=args.delays, C=args.C, folds=args.folds, threshold_steps=args.threshold_steps, seed=args.seed,
                       extractor=get_family(env).extractor)
    policy.fit(df)
    router = policy.to_router(max_turns=max_turns, max_actions=max_actions, task_ids=sorted(set(df["task_id"])),
                              family=env)
    out = router.save(args.out)
    _print_fit(policy)
    print(f"harness budgets: {max_turns} model turns, {max_actions} env actions")
    if args.report:
        report = Path(args.report)
        try:
            report.mkdir(parents=True, exist_ok=True)
            write_output(report_files["calibration.csv"], calibration_table(policy).to_csv(index=False), "report")
            png = io.BytesIO()
            calibration_figure(policy).savefig(png, dpi=120, format="png")
            write_output(report_files["calibration.png"], png.getvalue(), "figure")
            write_output(report_files["candidates.csv"], policy.candidates_.to_csv(index=False), "report")
            write_output(report_files["oof.csv"], policy.oof_.to_csv(index=False), "report")
        except OSError as err:
            raise disk_error(err.filename or report, err) from None
        cal = calibration_table(policy).groupby("model", sort=False)["brier"].first()
        print("OOF Brier: " + ", ".join(f"{k} {v:.3f}" for k, v in cal.items()) + f"; report in {report}")
    partial = partial_label(df)
    if partial:
        print(f"note: fitted on a partial run ({partial})")
    print(f"router written to {out}")
    return 0


def _figure_format(path: str) -> str:
    """The image format a figure file's name asks for (matplotlib's, PNG without a suffix)."""
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix if suffix in ("png", "svg", "pdf", "jpg", "jpeg") else "png"


def _report_files(report: str | None) -> dict[str, Path]:
    """The files ``cir fit --report DIR`` writes, each checked before the fit (check_output)."""
    if not report:
        return {}
    kinds = {"calibration.csv": "report", "calibration.png": "figure", "candidates.csv": "report", "oof.csv": "report"}
    return {name: check_output(Path(report) / name, kind, "--report") for name, kind in kinds.items()}


def _evaluate(args: argparse.Namespace) -> int:
    # imported here, not at the top: `cir --help` must not load pandas and scikit-learn
    from cir.cli.analysis import select_columns
    from cir.families.registry import get_family
    from cir.pairs.paired import read_paired
    from cir.router.calibration import calibration_figure
    from cir.router.evaluation import evaluate
    from cir.router.runtime import Router

    check_int("--resamples", args.resamples, 1, MAX_RESAMPLES)
    check_int("--seed", args.seed, 0, MAX_SEED)
    if args.out:
        check_output(args.out, "table", "--out")
    if args.calibration:
        check_output(args.calibration, "figure", "--calibration")
    files = {"cir": args.router, **dict(args.compare)}
    if len(files) != 1 + len(args.compare):
        raise CirError("--compare: each router needs its own name (cir is the first router's)")
    extractor = get_family(family_spec(args, args.paired)).extractor if (
        args.family or recorded_family(args.paired)) else None
    routers = {name: Router.load(path, extractor=extractor) for name, path in files.items()}
    df = read_paired(args.paired, require_features=True, allow_partial=args.allow_partial)
    for name, router in routers.items():
        _check_held_out(router, files[name], df, args)
    result = evaluate(routers, df, resamples=args.resamples, seed=args.seed, source=str(args.paired))
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
    text = _render(result, summary, margins, partial, args.format)
    try:
        if args.calibration:
            png = io.BytesIO()
            calibration_figure(routers["cir"], df).savefig(png, dpi=120, format=_figure_format(args.calibration))
            write_output(args.calibration, png.getvalue(), "figure", "--calibration")
        if args.decisions:
            from cir.router.evaluation import arm_decisions

            decisions = arm_decisions(result["episodes"], list(routers))
            if partial:
                decisions = decisions.assign(partial_run=partial)
            write_output(args.decisions, decisions.to_csv(index=False), "table", "--decisions")
        if args.out:
            write_output(args.out, text, "table", "--out")
    except OSError as err:
        raise disk_error(err.filename or args.out or args.calibration, err) from None
    if args.decisions:
        print(f"wrote {args.decisions}", file=sys.stderr)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _render(result: dict[str, Any], summary: Any, margins: Any, partial: str | None, fmt: str) -> str:
    """The evaluation as ``fmt``: JSON, one CSV of both tables, or markdown under a heading."""
    import pandas as pd

    from cir.study.page import markdown_table

    if fmt == "json":
        return json.dumps({"settings": result["settings"],
                           "summary": json.loads(summary.to_json(orient="records")),
                           "margins": json.loads(margins.to_json(orient="records"))}, indent=2)
    if fmt == "csv":
        return pd.concat([summary.assign(table="summary"),
                          margins.assign(table="margins")], ignore_index=True).to_csv(index=False)
    s = result["settings"]
    fitted = "; ".join(f"{name}: {r['estimator']} estimator, {', '.join(r['operations'])}, "
                       + " ".join(f"{k}={_fmt(v)}" for k, v in r["thresholds"].items())
                       + (f", {r['never_recovers']}" if r.get("never_recovers") else "")
                       for name, r in s["routers"].items())
    head = (f"Routers on {s['tasks']} held-out tasks"
            + (f" (partial run: {partial})" if partial else "")
            + f", {s['episodes']} arms ({fitted}); "
            f"{s['resamples']} task-level bootstrap resamples (seed {s['seed']})")
    return (head + "\n\n" + markdown_table(summary) + "\n\nMargins of each router (pp, paired by task):\n\n"
            + markdown_table(margins) + "\n")


def _check_held_out(router: Any, path: str, df: Any, args: argparse.Namespace) -> None:
    """Refuse a test table that shares tasks with the router's training; warn on another agent."""
    trained = set(router.training.get("task_ids", []))
    overlap = sorted(trained & set(df["task_id"]))
    if overlap and not args.allow_overlap:
        raise CirError(f"{args.paired}: {len(overlap)} task(s) of the test table were used to fit "
                       f"{path} (e.g. {overlap[0]!r}); evaluate on held-out tasks "
                       "(or pass --allow-overlap)")
    agents = set(router.training.get("agents", []))
    test_agents = set(df["agent"].astype(str)) if "agent" in df.columns else set()
    if agents and test_agents and test_agents != agents:
        print(f"cir: warning: the test table's agent(s) {', '.join(sorted(test_agents))} differ from the "
              f"training agent(s) of {path}: {', '.join(sorted(agents))}", file=sys.stderr)
