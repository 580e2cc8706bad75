"""``cir table | contrast | joint | figures``: paired outcome analysis from the command line.

PAIRED is a ``paired.csv`` / ``paired.parquet`` or a RUN_DIR holding one. Tables
print as markdown (default), CSV or JSON (a list of objects, one per group); the
markdown output ends with the settings that produced it. The analysis modules (pandas,
scipy, matplotlib) are imported inside the handlers, so that ``cir --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys

from cir.cli.limits import MAX_RESAMPLES, MAX_SEED, check_int
from cir.cli.style import StoreRenamed, add_columns, add_quiet, command
from cir.episode.protocol import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED
from cir.util.errors import CirError

FORMATS = ("markdown", "csv", "json")


def _keys(text: str) -> list[str]:
    return [k.strip() for k in text.split(",") if k.strip()] if text else []


#: What ``cir table`` / ``contrast`` / ``joint`` print by default in markdown (``--columns all``: every column).
TABLE_COLUMNS = ["n", "rescues", "harms", "effect_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p"]
CONTRAST_COLUMNS = ["n_paired", "effect_a_pp", "effect_b_pp", "difference_pp", "ci_low_pp", "ci_high_pp",
                    "sign_flip_p"]
JOINT_COLUMNS = ["comparison", "n_tasks", "wins", "losses", "effect_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p"]


def _common(parser: argparse.ArgumentParser, resamples: bool = True, fmt: bool = True) -> None:
    parser.add_argument("paired", metavar="PAIRED", help="paired.csv / paired.parquet, or a RUN_DIR")
    parser.add_argument("--subset", "--cohort", dest="subset", choices=["all", "factual-success"], default="all",
                        action=StoreRenamed,
                        help="all prefix-feasible tasks, or only tasks whose factual run succeeded "
                             "(--cohort: its former name, deprecated)")
    parser.add_argument("--keep-prefix-mismatch", action="store_true",
                        help="keep rows whose two arms differ before the branch point (dropped by default)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="analyse a run that lacks tasks (refused by default); the output says so")
    if resamples:
        parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                            help="task-level bootstrap resamples")
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap / test seed")
        parser.add_argument("--level", type=float, default=DEFAULT_LEVEL, help="confidence level")
    if fmt:
        parser.add_argument("--format", choices=FORMATS, default="markdown", help="output format")
        parser.add_argument("--out", metavar="FILE", help="write to FILE instead of standard output")


def register(subparsers: argparse._SubParsersAction) -> None:
    for add in (_register_table, _register_contrast, _register_joint, _register_figures):
        add(subparsers)


def _register_table(subparsers: argparse._SubParsersAction) -> None:
    p = command(subparsers, "table", help="paired outcomes and recovery effects with bootstrap CIs",
                description="Rescue/harm counts, effect of recovery (pp) with task-level cluster-bootstrap "
                            "CI, sign-flip and McNemar p, Tian-Pearl bounds, per group. Pairs of different "
                            "recovery operations are never added together: group by operation, or keep one "
                            "with --operation.",
                examples=["cir table run1",
                          "cir table run1 --by condition,delay --operation refresh --subset factual-success",
                          "cir table run1 --columns all --format csv --out effects.csv"])
    _common(p)
    p.add_argument("--by", default="condition,delay,operation", metavar="KEYS", help="comma list of grouping columns")
    p.add_argument("--operation", metavar="NAME", help="only the rows of this recovery operation")
    p.add_argument("--bootstrap", choices=["tasks", "tasks+samples"], default="tasks",
                   help="what the interval resamples in a table of --samples: the tasks (the effect over "
                        "the population of tasks, each task's sampling noise included), or also each row's "
                        "draws (wider: that noise counted twice) (default: %(default)s)")
    add_columns(p, TABLE_COLUMNS)
    p.set_defaults(handler=_table)


def _register_contrast(subparsers: argparse._SubParsersAction) -> None:
    p = command(subparsers, "contrast", help="difference of recovery effects between two conditions",
                description="Effect under --a minus effect under --b (e.g. stale2 - clean) per group, on "
                            "shared task resamples.",
                examples=["cir contrast run1 --a stale2 --b clean",
                          "cir contrast run1 --a stale2 --b clean --by delay --operation refresh"])
    _common(p)
    p.add_argument("--a", required=True, help="first value (e.g. stale2)")
    p.add_argument("--b", required=True, help="second value (e.g. clean)")
    p.add_argument("--on", default="condition", help="column that holds a and b")
    p.add_argument("--by", default="operation,delay", metavar="KEYS", help="comma list of grouping columns")
    p.add_argument("--operation", metavar="NAME", help="only the rows of this recovery operation")
    add_columns(p, CONTRAST_COLUMNS)
    p.set_defaults(handler=_contrast)


def _register_joint(subparsers: argparse._SubParsersAction) -> None:
    p = command(subparsers, "joint", help="joint outcomes of two recovery operations on the same tasks",
                description="Joint outcome table (rows: outcome under --a, columns: under --b) and paired "
                            "effects, on tasks where both operations ran.",
                examples=["cir joint run1 --a refresh --b refresh_ablated --condition stale2 --delay 4",
                          "cir joint run1 --format csv --counts --out joint.csv"])
    _common(p)
    p.add_argument("--a", default="refresh", help="first operation")
    p.add_argument("--b", default="refresh_ablated", help="second operation")
    p.add_argument("--on", default="operation", help="column that holds a and b")
    p.add_argument("--condition", help="only this condition (e.g. stale2)")
    p.add_argument("--delay", type=int, help="only this delay (e.g. 4)")
    p.add_argument("--by", default="condition,delay", metavar="KEYS", help="comma list of grouping columns")
    p.add_argument("--counts", action="store_true",
                   help="with --format csv: write the tidy joint counts instead of the effects")
    p.add_argument("--include-not-executed", action="store_true",
                   help="also count pairs where a recovery did not run (excluded by default)")
    add_columns(p, JOINT_COLUMNS)
    p.set_defaults(handler=_joint)


def _register_figures(subparsers: argparse._SubParsersAction) -> None:
    p = command(subparsers, "figures", help="write the paper's figures (PNG and SVG)",
                description="Effects by delay and condition, mechanism controls, outcome partitions and the "
                            "joint outcome heatmap; figures the table cannot support are skipped with a note.",
                examples=["cir figures run1 --out figs",
                          "cir figures run1 --out figs --a refresh --b replan --condition missing --delay 2"])
    _common(p, fmt=False)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--a", help="joint heatmap: first operation; without it refresh, else the table's first")
    p.add_argument("--b", help="joint heatmap: second operation; without it refresh_ablated, else the second")
    p.add_argument("--condition", help="joint heatmap: condition; without it stale2, else the first stale one")
    p.add_argument("--delay", type=int, help="joint heatmap: delay; without it the condition's largest")
    add_quiet(p)
    p.set_defaults(handler=_figures)


# --------------------------------------------------------------------------- output


def _markdown(df) -> str:  # noqa: ANN001 - pandas DataFrame
    from cir.study.page import markdown_table

    return markdown_table(df)


def _settings_line(attrs: dict) -> str:
    skip = {"by", "kind"}
    parts = [f"{k}={v}" for k, v in attrs.items() if k not in skip and v is not None]
    return "_" + ", ".join(parts) + "_"


def _records(df) -> list[dict]:  # noqa: ANN001
    return json.loads(df.to_json(orient="records", double_precision=10))


def _emit(text: str, out: str | None) -> None:
    if out:
        from cir.pairs.outputs import write_output

        write_output(out, text, "table", "--out")
    else:
        sys.stdout.write(text)


def _check_out(args: argparse.Namespace) -> None:
    """``--out FILE`` checked before the command's work (cir.pairs.outputs): never a run's file."""
    if getattr(args, "out", None):
        from cir.pairs.outputs import check_output

        check_output(args.out, "table", "--out")


def partial_label(df) -> str | None:  # noqa: ANN001 - pandas DataFrame
    """``"4 of 5 tasks"`` for the table of a partial run read with --allow-partial, else None."""
    run = df.attrs.get("run") or {}
    if not run.get("partial"):
        return None
    if run.get("tasks_done") is None:
        return "unchecked run folder"
    return f"{run['tasks_done']} of {run['tasks']} tasks"


def _mark_partial(table, partial: str | None):  # noqa: ANN001, ANN202
    """The result of a partial run says so: a ``partial_run`` column and settings entry."""
    if partial is None:
        return table
    out = table.assign(partial_run=partial)
    out.attrs.update(table.attrs)
    out.attrs["partial_run"] = partial
    return out


def _render(df, fmt: str) -> str:  # noqa: ANN001
    if fmt == "csv":
        return df.to_csv(index=False, float_format="%.6g")
    if fmt == "json":
        return json.dumps(_records(df), indent=2) + "\n"
    shown = df.drop(columns=["partial_run"]) if "partial_run" in df.columns else df
    return _markdown(shown) + "\n\n" + _settings_line(df.attrs) + "\n"


def select_columns(table, keys: list[str], wanted: str | None, compact: list[str], fmt: str,  # noqa: ANN001, ANN202
                   missing_ok: bool = False):
    """The grouping keys and the ``--columns`` asked for: by default the compact set in
    markdown and every column in csv/json; ``all``: every column. ``missing_ok``: skip asked
    columns the table lacks (a command printing two tables checks them against both)."""
    if wanted is None:
        wanted = ",".join(compact) if fmt == "markdown" else "all"
    if wanted.strip() == "all":
        return table
    columns = _keys(wanted)
    unknown = [c for c in columns if c not in table.columns]
    if unknown and not missing_ok:
        available = [c for c in table.columns if c not in keys]
        raise CirError(f"--columns: {', '.join(repr(c) for c in unknown)} not in the result; "
                       f"available: {', '.join(available)} (or all)")
    out = table[keys + [c for c in columns if c not in keys and c in table.columns]]
    out.attrs.update(table.attrs)
    return out


def _load(args: argparse.Namespace):  # noqa: ANN202
    from cir.pairs.paired import read_paired
    from cir.stats.decompose import check_value

    if hasattr(args, "resamples"):
        check_int("--resamples", args.resamples, 1, MAX_RESAMPLES)
        check_int("--seed", args.seed, 0, MAX_SEED)
    df = read_paired(args.paired, allow_partial=args.allow_partial)
    if getattr(args, "operation", None):
        check_value(df, "operation", args.operation)
        attrs = dict(df.attrs)  # what the run folder said (e.g. a partial run)
        df = df[df["operation"].astype(str) == args.operation]
        df.attrs.update(attrs)
    mismatched = int((df["prefix_match"] == 0).sum())
    if mismatched and not args.keep_prefix_mismatch:
        print(f"cir: note: {mismatched} row(s) with prefix_match false dropped "
              "(the two arms differ before the branch point); --keep-prefix-mismatch keeps them",
              file=sys.stderr)
    return df


# --------------------------------------------------------------------------- handlers


def _table(args: argparse.Namespace) -> int:
    from cir.stats.effects import effect_table

    _check_out(args)
    df = _load(args)
    table = effect_table(df, by=_keys(args.by), subset=args.subset, resamples=args.resamples,
                         seed=args.seed, level=args.level,
                         require_prefix_match=not args.keep_prefix_mismatch, bootstrap=args.bootstrap)
    noise = [c for c in ("noise_floor_pp", "within_noise") if c in table.columns]  # a table of --samples
    table = select_columns(table, list(table.attrs["by"]), args.columns, [*TABLE_COLUMNS, *noise], args.format)
    _emit(_render(_mark_partial(table, partial_label(df)), args.format), args.out)
    return 0


def _contrast(args: argparse.Namespace) -> int:
    from cir.stats.effects import contrast_table

    _check_out(args)
    df = _load(args)
    table = contrast_table(df, args.a, args.b, on=args.on, by=_keys(args.by), subset=args.subset,
                           resamples=args.resamples, seed=args.seed, level=args.level,
                           require_prefix_match=not args.keep_prefix_mismatch)
    table = select_columns(table, list(table.attrs["by"]), args.columns, CONTRAST_COLUMNS, args.format)
    _emit(_render(_mark_partial(table, partial_label(df)), args.format), args.out)
    return 0


def _joint(args: argparse.Namespace) -> int:
    from cir.stats.decompose import group_index
    from cir.stats.joint import joint_effects, joint_matrix, joint_outcomes

    _check_out(args)
    df = _load(args)
    common = dict(a=args.a, b=args.b, on=args.on, by=_keys(args.by), condition=args.condition,
                  delay=args.delay, subset=args.subset,
                  require_prefix_match=not args.keep_prefix_mismatch,
                  require_executed=not args.include_not_executed)
    counts = joint_outcomes(df, **common)
    effects = joint_effects(df, resamples=args.resamples, seed=args.seed, level=args.level, **common)
    keys = list(counts.attrs["by"])
    effects = select_columns(effects, keys, args.columns, JOINT_COLUMNS, args.format)
    partial = partial_label(df)
    if args.format == "csv":
        _emit(_render(_mark_partial(counts if args.counts else effects, partial), "csv"), args.out)
        return 0
    _, groups = group_index(counts, keys)
    blocks, records = [], []
    for _, group in groups.iterrows():
        mask_c = (counts[keys] == group[keys].to_numpy()).all(axis=1) if keys else counts.index >= 0
        mask_e = (effects[keys] == group[keys].to_numpy()).all(axis=1) if keys else effects.index >= 0
        matrix = joint_matrix(counts[mask_c])
        part = effects[mask_e]
        label = ", ".join(f"{k}={group[k]}" for k in keys) or "all rows"
        n = int(matrix.to_numpy().sum())
        if args.format == "json":
            records.append({**(_records(groups.loc[[group.name], keys])[0] if keys else {}),
                            "a": args.a, "b": args.b, "n_tasks": n,
                            **({"partial_run": partial} if partial else {}),
                            "counts": {row: {col: int(matrix.loc[row, col]) for col in matrix.columns}
                                       for row in matrix.index},
                            "effects": _records(part.drop(columns=keys))})
        else:
            shown = matrix.copy()
            shown.index = [f"{args.a}: {o}" for o in shown.index]
            shown.columns = [f"{args.b}: {o}" for o in shown.columns]
            blocks.append(f"### {label} ({n} tasks where both ran)\n\n"
                          + shown.reset_index(names="").to_markdown(index=False) + "\n\n"
                          + _markdown(part.drop(columns=keys)))
    if args.format == "json":
        _emit(json.dumps(records, indent=2) + "\n", args.out)
    else:
        attrs = {**effects.attrs, **({"partial_run": partial} if partial else {})}
        _emit("\n\n".join(blocks) + "\n\n" + _settings_line(attrs) + "\n", args.out)
    return 0


def _figures(args: argparse.Namespace) -> int:
    from cir.study.figures import write_figures

    df = _load(args)
    if args.keep_prefix_mismatch:
        df = df.assign(prefix_match=1)
    joint = {"a": args.a, "b": args.b, "condition": args.condition, "delay": args.delay}
    result = write_figures(df, args.out, subset=args.subset, resamples=args.resamples, seed=args.seed,
                           level=args.level, joint=joint, progress=not args.quiet)
    for name, paths in result.items():
        if isinstance(paths, str):
            print(f"{name}: {paths}")
        else:
            print(f"{name}: " + ", ".join(str(p) for p in paths))
    partial = partial_label(df)
    if partial:
        print(f"partial run: these figures show {partial}")
    return 0
