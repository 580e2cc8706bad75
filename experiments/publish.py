"""Publish a ``cir reproduce`` output as this repository's reference study.

    python experiments/publish.py STUDY_DIR

copies the study's data into ``data/`` (report, tables, router, study settings, each
cohort's run folder: paired table, run record, episode store; each split's task manifest)
and its figures into ``figures/``, replacing what the two folders held before. The
report's figure links are rewritten to ``../figures/``. The generated games themselves
are left out: ``cir reproduce`` with the settings in ``data/study.json`` rebuilds them
identically, and the manifests list them with their digests.

``data/README.md`` (how the study was made, what it shows) is written by hand and kept, but
for its summary and the top-level README's: for a study with replicates, the text between
``<!-- summary -->`` and ``<!-- /summary -->`` in both files is generated here from the
study's pooled tables (:func:`summary`), so no number in them is typed by hand.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_FILES = ("paired.csv", "run.json", "episodes.jsonl.gz")
KEPT = {"README.md", "fixed-point", "frameworks", "planted", "persistent", "service-desk"}  # hand-written, and side studies (each its own README or docs)
BEGIN, END = "<!-- summary -->", "<!-- /summary -->"


def _clear(folder: Path) -> None:
    """Remove what a previous publish wrote (everything but the hand-written README)."""
    if not folder.exists():
        return
    for item in folder.iterdir():
        if item.name in KEPT or item.name.startswith("calibration"):  # a family's calibration evidence
            continue
        shutil.rmtree(item) if item.is_dir() else item.unlink()


def publish(study: Path, data: Path, figures: Path, what: str = "the repository's reference study") -> list[Path]:
    """Copy ``study`` into ``data`` and ``figures`` (``what``: the study's name in the report's
    first lines); the files written."""
    pooled = (study / "tables" / "headlines_pooled.csv").exists()
    needed = ("report.md", "report.html", "study.json", "tables") if pooled else (
        "report.md", "report.html", "router.json", "study.json", "tables", "runs")
    missing = [name for name in needed if not (study / name).exists()]
    if missing:
        raise SystemExit(f"{study}: not a finished `cir reproduce` output (no {', '.join(missing)})")
    _clear(data)
    _clear(figures)
    data.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    written = []

    def copy(src: Path, dst: Path) -> None:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        written.append(dst)

    link = (figures.relative_to(data) if figures.is_relative_to(data)
            else Path("..") / figures.relative_to(data.parent) if figures.parent == data.parent else figures)
    report = (study / "report.md").read_text(encoding="utf-8").replace("](figures/", f"]({link.as_posix()}/")
    title, _, rest = report.partition("\n")
    here = data.relative_to(ROOT).as_posix() if data.is_relative_to(ROOT) else data.name
    shown = figures.relative_to(ROOT).as_posix() if figures.is_relative_to(ROOT) else figures.name
    report = (f"{title}\n\n> This is {what}: its data are in `{here}/` (this folder; the generated tasks "
              f"themselves are left out, `tasks/` holds their manifests) and its figures in `{shown}/`. "
              f"`{here}/README.md` says how it was made.\n{rest}")
    (data / "report.md").write_text(report, encoding="utf-8")
    written.append(data / "report.md")
    for name in ("report.html", "study.json"):  # report.html embeds its figures
        copy(study / name, data / name)
    for table in sorted((study / "tables").glob("*.csv")):
        copy(table, data / "tables" / table.name)
    for fig in sorted((study / "figures").iterdir()):
        copy(fig, figures / fig.name)
    # one study's data, or each replicate's (its report, tables, routers, runs and manifests)
    singles = [(study, data)] if not pooled else [
        (r, data / "replicates" / r.name) for r in sorted((study / "replicates").iterdir()) if r.is_dir()]
    for src, dst in singles:
        for name in ("report.md", "study.json", *sorted(p.name for p in src.glob("router*.json"))):
            if (src / name).exists() and not (src is study and name == "report.md"):
                copy(src / name, dst / name)
        if src is not study:
            for table in sorted((src / "tables").glob("*.csv")):
                copy(table, dst / "tables" / table.name)
        for run in sorted(p for p in (src / "runs").iterdir() if p.is_dir()):
            for name in RUN_FILES:
                if (run / name).exists():
                    copy(run / name, dst / "runs" / run.name / name)
        for manifest in sorted((src / "tasks").glob("*/manifest.json")):
            copy(manifest, dst / "tasks" / manifest.parent.name / "manifest.json")
    return written


def _pp(v: float) -> str:
    return f"{'+' if v > 0 else ''}{v:.1f}"


def _row(spread, **where: object) -> object:
    rows = spread
    for k, v in where.items():
        rows = rows[rows[k].astype(str) == str(v)]
    return rows.iloc[0] if len(rows) else None


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _tested(value: float, low: float, high: float, p: float) -> str:
    """``+x.x pp [lo, hi], p q``, and, when the test does not reject (p above 0.05), that no
    difference is shown: never a margin or an effect read as one though its p says otherwise."""
    text = f"{_pp(value)} pp [{_pp(low)}, {_pp(high)}], p {_p(p)}"
    return text + (" (no difference shown)" if p > 0.05 else "")


def _headline(r: object) -> str:
    """``+x.x pp [lo, hi] (replicates a to b)`` of one spread row."""
    return (f"{_pp(r['pooled_pp'])} pp [{_pp(r['pooled_ci_low_pp'])}, {_pp(r['pooled_ci_high_pp'])}] "
            f"(replicates {_pp(r['min_pp'])} to {_pp(r['max_pp'])})")


def summary(study: Path) -> str:
    """The study's headlines in a few lines of Markdown, from its pooled tables alone."""
    import pandas as pd

    tables = study / "tables"
    spread = pd.read_csv(tables / "replicate_spread.csv", dtype={"delay": str})
    text = spread.select_dtypes(exclude="number").columns  # blank keys read as "", numbers stay NaN
    spread[text] = spread[text].fillna("")
    spread["delay"] = [str(int(float(d))) if d != "" else "" for d in spread["delay"]]
    evaluation = pd.read_csv(tables / "cir_eval_pooled.csv")
    fits = pd.read_csv(tables / "cir_fit_replicates.csv")
    n = int(spread["replicates"].max())
    lines = [f"Pooled over {n} replicates (95% task-level cluster-bootstrap intervals; the replicates' "
             "range beside each):", ""]
    effects = []
    for condition in ("clean", "stale2"):
        each = [f"delay {d}: {_headline(r)}" for d in ("0", "1", "2", "4")
                if (r := _row(spread, headline="effect", condition=condition, delay=d)) is not None]
        effects.append(f"- **Refresh after a {condition} observation** (primary cohort, factual-success "
                       f"tasks): " + "; ".join(each) + ".")
    lines += effects
    r = _row(spread, headline="stale2 minus clean", delay="0")
    if r is not None:
        lines.append(f"- **stale2 minus clean** at delay 0: {_headline(r)}.")
    controls = [f"{op} {_headline(r)}" for op in ("refresh", "refresh_ablated", "replan", "rewind", "placebo")
                if (r := _row(spread, headline="mechanism control", condition="stale2", operation=op)) is not None]
    if controls:
        lines.append("- **Mechanism controls** at stale2 / delay 4: " + "; ".join(controls) + ".")
    rows = evaluation[evaluation["condition"] == "all"].set_index("policy")
    clean = evaluation[evaluation["condition"] == "clean"].set_index("policy")
    held = []
    for policy in HELD_OUT:
        if policy in rows.index:
            p = rows.loc[policy]
            own = p.get("oracle_policy") if isinstance(p.get("oracle_policy"), str) else "oracle"
            share = "" if policy.startswith("oracle") or pd.isna(p["oracle_fraction"]) else (
                f", {100 * p['oracle_fraction']:.0f}% of the gain of `{own}`")
            held.append(f"`{policy}` {_tested(p['effect_pp'], p['ci_low_pp'], p['ci_high_pp'], p['sign_flip_p'])}"
                        f"{share}, recovering in {100 * p['intervention_rate']:.1f}% of arms, clean harm "
                        f"{100 * clean.loc[policy, 'clean_harm_rate']:.1f}%")
    lines.append(f"- **Held out** ({int(rows.loc['never', 'n_tasks'])} tasks): " + "; ".join(held) + ".")
    bound = fits.groupby("router")["budget_bound"].apply(lambda b: int(b.astype(bool).sum()))
    lines.append("- **The clean-harm budget** bound the threshold search in " + ", ".join(
        f"{bound[r]} of {n} replicates for `{r}`" for r in bound.index) + ".")
    lines += _kind_lines(tables) + _margin_lines(tables, spread) + _explain_lines(tables) + _validation_lines(tables)
    return "\n".join(lines)


#: The held-out policies the summary gives: rewinding where the anomaly rule fires, and always, stand
#: beside cir_multi (which mostly rewinds).
HELD_OUT = ("cir", "cir_paired", "cir_multi", "anomaly_rewind", "always_rewind", "anomaly", "anomaly_rate_matched",
            "anomaly_rate_matched_heldout", "oracle_refresh", "oracle")


#: The margins the summary shows beside the primary comparisons (over all arms when none are named,
#: and by kind): each with its raw p and Holm's p over every one of them it shows.
SHOWN_MARGINS = (("cir_paired", "anomaly"), ("cir_paired", "anomaly_matched_cir_paired"),
                 ("cir_paired", "anomaly_matched_heldout_cir_paired"), ("cir", "anomaly"),
                 ("cir_multi", "anomaly_rewind"), ("cir_multi", "always_rewind"))


def _margin_lines(tables: Path, spread: object) -> list[str]:
    """The primary comparisons (named before the study ran) with raw and Holm-adjusted p and how many
    other margins the tables hold; then the other margins the summary shows (over all arms when
    none were named, and by kind), each with its raw p and Holm's adjusted p over all of those
    shown, read as a difference only when that is at most 0.05."""
    import pandas as pd
    from statsmodels.stats.multitest import multipletests

    from cir.study.comparisons import claim, comparison_text

    lines = []
    files = {name: len(pd.read_csv(tables / name)) for name in (
        "cir_margins_pooled.csv", "cir_margins_by_kind_pooled.csv", "cir_margins_by_shown_pooled.csv")
        if (tables / name).exists()}
    named = tables / "primary_comparisons_pooled.csv"
    primary = pd.read_csv(named, keep_default_na=False) if named.exists() else None
    if primary is not None:
        others = sum(files.values()) - len(primary)
        where = ", ".join(f"{n:,} in `tables/{name}`" for name, n in files.items())
        lines.append(f"- **Primary comparisons** (named in `experiments/cir_eval.toml` before the study ran; p: the "
                     f"task-level sign-flip test, Holm: adjusted for the {len(primary)} named): "
                     + "; ".join(comparison_text(r) for _, r in primary.iterrows())
                     + f". The tables hold {others:,} other margin{'' if others == 1 else 's'} ({where}), each with "
                     "its unadjusted p: exploratory.")
    shown: list[tuple[str, str, object]] = []  # (line, label, row)
    if primary is None and "cir_margins_pooled.csv" in files:
        margins = pd.read_csv(tables / "cir_margins_pooled.csv")
        margins = margins[margins["condition"] == "all"]
        for a, b in SHOWN_MARGINS:
            r = margins[(margins["policy"] == a) & (margins["versus"] == b)]
            if len(r):
                spread_row = _row(spread, headline="held-out margin", policy=a, versus=b)
                reps = "" if spread_row is None else (f" (replicates {_pp(spread_row['min_pp'])} to "
                                                      f"{_pp(spread_row['max_pp'])})")
                shown.append(("all", f"`{a}` - `{b}`", r.iloc[0], reps))
    if "cir_margins_by_kind_pooled.csv" in files:
        by_kind = pd.read_csv(tables / "cir_margins_by_kind_pooled.csv")
        for a, b in SHOWN_MARGINS:
            for kind in ("stale", "lag"):
                r = by_kind[(by_kind["policy"] == a) & (by_kind["versus"] == b) & (by_kind["condition"] == kind)]
                if len(r):
                    shown.append(("kind", f"`{a}` - `{b}` on {kind}", r.iloc[0], ""))
    if shown:
        holm = multipletests([float(r["sign_flip_p"]) for _, _, r, _ in shown], method="holm")[1]
        texts = {"all": [], "kind": []}
        for (line, label, r, reps), q in zip(shown, holm, strict=True):
            reading = claim(float(r["margin_pp"]), float(q))
            texts[line].append(f"{label} {_pp(r['margin_pp'])} pp [{_pp(r['ci_low_pp'])}, {_pp(r['ci_high_pp'])}]"
                               f"{reps}, p {_p(r['sign_flip_p'])}, Holm {_p(q)}"
                               + ("" if reading != "no difference shown" else " (no difference shown)"))
        counted = f"{len(shown)} margin{'' if len(shown) == 1 else 's'} shown here"
        family = (f"Holm: adjusted for the {counted}; none named before the study ran" if primary is None
                  else f"Holm: adjusted for the {counted}; exploratory")
        if texts["all"]:
            lines.append(f"- **Margins** (p: the task-level sign-flip test; {family}): " + "; ".join(texts["all"]) + ".")
        if texts["kind"]:
            lines.append(f"- **Margins by kind** (p: the sign-flip test; {family}): " + "; ".join(texts["kind"]) + ".")
    return lines


def _interval(r: object) -> str:
    return _tested(r["effect_pp"], r["ci_low_pp"], r["ci_high_pp"], r["sign_flip_p"])


def _kind_lines(tables: Path) -> list[str]:
    """By perturbation kind (a study with lagK beside staleK): what each kind held (the true text, an
    anomalous text, a wrong text that looks right), the error model's AUC by kind and by what was
    shown, the held-out policies on the lag arms and by what they showed, and the margins by kind,
    each with its p (nothing for a study without them)."""
    import pandas as pd

    if not (tables / "cir_eval_by_kind_pooled.csv").exists():
        return []
    lines = []
    if (tables / "shown_split_pooled.csv").exists():
        split = pd.read_csv(tables / "shown_split_pooled.csv")
        kinds = split[split["condition"] == "all"]
        lines.append("- **What each kind held** (no-recovery arms of every cohort: the true text, a text the "
                     "family's test sees is anomalous, a wrong text that looks right): " + "; ".join(
                         f"{r['kind']} {int(r['arms']):,} arms: {int(r['true']):,} true ({100 * r['true_share']:.1f}%), "
                         f"{int(r['anomalous']):,} anomalous ({100 * r['anomalous_share']:.1f}%), "
                         f"{int(r['looks_right']):,} looks right ({100 * r['looks_right_share']:.1f}%)"
                         for _, r in kinds.iterrows()) + ".")
    detection = pd.read_csv(tables / "cir_error_detection_pooled.csv")
    auc = detection[detection["router"] == "cir_paired"].set_index("kind")["auc_p_err"]
    kinds = [k for k in ("stale", "lag", "missing") if k in auc.index]
    if kinds:
        line = ("- **The error model** (`p_err` of `cir_paired`, held out, ROC AUC against the clean cells): "
                + "; ".join(f"{k} {auc[k]:.3f}" for k in kinds))
        if (tables / "cir_error_detection_by_shown_pooled.csv").exists():
            parts = pd.read_csv(tables / "cir_error_detection_by_shown_pooled.csv")
            parts = parts[parts["router"] == "cir_paired"]
            line += "; by what the arm showed (against the clean cells of the same tasks beside): " + "; ".join(
                f"{r['kind']} {r['shown']} {r['auc_p_err']:.3f} ({_same_tasks(r)}{int(r['cells']):,} cells)"
                for _, r in parts.iterrows())
        lines.append(line + ".")
    evaluation = pd.read_csv(tables / "cir_eval_by_kind_pooled.csv")
    lag = evaluation[evaluation["condition"] == "lag"].set_index("policy")
    held = []
    for policy in ("cir", "cir_paired", "cir_multi", "anomaly_rewind", "always_rewind", "anomaly",
                   "anomaly_rate_matched_heldout", "anomaly_matched_heldout_cir_paired", "oracle_refresh", "oracle"):
        if policy in lag.index:
            r = lag.loc[policy]
            share = "" if policy.startswith("oracle") or pd.isna(r["oracle_fraction"]) else (
                f", {100 * r['oracle_fraction']:.0f}% of the gain of `{r['oracle_policy']}`")
            held.append(f"`{policy}` {_interval(r)}{share}, recovering in {100 * r['intervention_rate']:.1f}% of arms")
    if held:
        lines.append(f"- **On the lagK arms** ({int(lag['n'].iloc[0]):,} held-out arms): " + "; ".join(held) + ".")
    if (tables / "cir_eval_by_shown_pooled.csv").exists():
        parts = pd.read_csv(tables / "cir_eval_by_shown_pooled.csv", keep_default_na=False)
        lag = parts[parts["kind"] == "lag"]
        each = []
        for shown in ("true", "anomalous", "looks_right"):
            part = lag[lag["shown"] == shown].set_index("policy")
            if part.empty:
                continue
            effects = [f"`{p}` {_interval(part.loc[p])}" for p in (
                "cir", "cir_paired", "cir_multi", "anomaly_rewind", "always_rewind", "anomaly", "oracle")
                if p in part.index]
            each.append(f"{shown} ({int(part['n'].iloc[0]):,} arms): " + ", ".join(effects))
        if each:
            lines.append("- **The lagK arms by what they showed**: " + "; ".join(each) + ".")
    return lines


def _same_tasks(r: object) -> str:
    """The AUC against the clean cells of the same tasks, when the table has it."""
    value = r.get("auc_p_err_same_tasks") if hasattr(r, "get") else None
    return "" if value is None or value != value else f"{value:.3f}; "


def _explain_lines(tables: Path) -> list[str]:
    """How the divergences of every pair split: a mechanism on the divergent decision, the budget,
    none; and the harms that ended on the budget."""
    import pandas as pd

    if not (tables / "attribution_split_pooled.csv").exists():
        return []
    r = pd.read_csv(tables / "attribution_split_pooled.csv").set_index("operation").loc["all"]
    line = (f"- **Why arms diverge** ({int(r['diverged']):,} of {int(r['pairs']):,} pairs): {int(r['mechanism']):,} "
            f"attributed to a mechanism that fired on the divergent decision, {int(r['budget']):,} to the budget, "
            f"{int(r['unattributed']):,} unattributed; {int(r['unexplained'])} with no mechanism at all")
    if (tables / "harms_by_mechanism_pooled.csv").exists():
        harms = pd.read_csv(tables / "harms_by_mechanism_pooled.csv")
        line += (f"; of {int(harms['harms'].sum()):,} harm attributions {int(harms['ended_by_budget'].sum()):,} "
                 "ended on the budget")
    return [line + "."]


def _validation_lines(tables: Path) -> list[str]:
    """The planted worlds' checks, as measured."""
    import pandas as pd

    if not (tables / "router_validation_criteria.csv").exists():
        return []
    checks = pd.read_csv(tables / "router_validation_criteria.csv")
    summary = pd.read_csv(tables / "router_validation.csv")
    reps = int(summary["replicates"].max())
    parts = [f"({r['world']}) {r['criterion']}: {r['value']:.3f}" + (
        "" if pd.isna(r["met"]) else f" (target {r['target']}: {'met' if str(r['met']) == 'True' else 'missed'})")
        for _, r in checks.iterrows()]
    return [f"- **Where the answer is known** (planted worlds, {reps} replicates each): " + "; ".join(parts) + "."]


def fill_summary(path: Path, text: str) -> bool:
    """Replace the generated block of ``path`` (between the markers) with ``text``; False if
    the file has no such block."""
    if not path.exists():
        return False
    content = path.read_text(encoding="utf-8")
    if BEGIN not in content or END not in content:
        return False
    head, rest = content.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path, help="a finished `cir reproduce` output folder")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="where the data go (default data/)")
    parser.add_argument("--figures", type=Path, default=ROOT / "figures",
                        help="where the figures go (default figures/)")
    parser.add_argument("--what", default="the repository's reference study",
                        help="the study's name in the report's first lines")
    args = parser.parse_args(argv)
    written = publish(args.study, args.data.resolve(), args.figures.resolve(), args.what)
    print(f"{len(written)} files into {args.data} and {args.figures}", file=sys.stderr)
    if (args.study / "tables" / "headlines_pooled.csv").exists():
        text = summary(args.study)
        for readme in (args.data.resolve() / "README.md", ROOT / "README.md"):
            print(f"{readme}: summary {'written' if fill_summary(readme, text) else 'not written (no markers)'}",
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
