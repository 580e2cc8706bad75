"""The paper's figures from any paired table (figures 2, 3, 5 and 6).

Every figure is a function ``paired DataFrame -> matplotlib Figure`` for notebooks;
:func:`write_figures` saves them all as PNG and SVG. Figures are built on
``matplotlib.figure.Figure`` directly (no pyplot, no global state), so they are
safe in scripts, tests and servers. A figure whose data is missing (e.g. one
operation only: no joint heatmap) raises :class:`FigureSkipped` with the reason.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from tqdm import tqdm

from cir import __version__
from cir.episode.protocol import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED, PRIMARY_STALE
from cir.pairs.outputs import check_output, write_output
from cir.pairs.paired import OUTCOMES
from cir.stats.counts import FEW_DISCORDANT
from cir.stats.decompose import count_outcomes, select_subset, sort_groups
from cir.stats.effects import effect_table
from cir.stats.joint import joint_matrix, joint_outcomes
from cir.util.deprecation import renamed_parameters
from cir.util.errors import CirError
from cir.util.progress import bar_settings

# Okabe-Ito colours: distinguishable with common colour-vision deficiencies.
_PALETTE = ["#0072B2", "#E69F00", "#D55E00", "#CC79A7", "#009E73", "#56B4E9", "#F0E442", "#000000"]
_CONDITION_COLORS = {"clean": "#0072B2", "stale1": "#E69F00", "stale2": "#D55E00", "missing": "#CC79A7",
                     "lag1": "#009E73", "lag2": "#56B4E9"}
_OUTCOME_COLORS = {
    "stable_success": "#56B4E9",
    "rescue": "#009E73",
    "harm": "#D55E00",
    "stable_failure": "#BBBBBB",
}
_OPERATION_COLORS = {"refresh": "#0072B2", "refresh_ablated": "#56B4E9", "replan": "#E69F00",
                     "rewind": "#009E73", "placebo": "#CC79A7"}
#: Held-out policies by what they are: a fitted router, a rule without a model, an oracle.
_POLICY_COLORS = {"router": "#0072B2", "baseline": "#E69F00", "oracle": "#009E73"}
_OUTCOME_LABELS = {
    "stable_success": "stable success",
    "rescue": "rescue",
    "harm": "harm",
    "stable_failure": "stable failure",
}
FIGURES = ("effects_by_delay", "mechanism_controls", "outcome_partitions", "joint_outcomes")


class FigureSkipped(CirError):
    """The table lacks what a figure needs (the message says what)."""


def _color(value: str, i: int, table: dict[str, str] | None = None) -> str:
    if table and value in table:
        return table[value]
    return _PALETTE[i % len(_PALETTE)]


def _subset_text(subset: str, rows: pd.DataFrame) -> str:
    name = "factual-success subset" if subset == "factual-success" else "all prefix-feasible tasks"
    return f"{name}, {rows['task_id'].nunique()} tasks"


# Figures are at most this wide (inches): at the report's 130 dpi and text width, their
# text stays legible (tests/test_report_page.py measures the scaling in a browser).
MAX_WIDTH = 11.0
MIN_WIDTH = 7.0  # room for a two-line title over a single panel


#: A figure drawn for a phone (:func:`for_phone`) is this wide (inches): on a 390-px screen the
#: report's text column is 358 CSS px, so an inch of it is about 99 CSS px and 8-pt text 11 px.
PHONE_WIDTH = 3.6
PHONE_DPI = 300  # sharp on a screen of 3 device pixels per CSS px
_PHONE_PANEL = 2.5  # inches: the least height of a panel drawn for a phone
_PHONE_CHARS = 40  # a title line's characters at PHONE_WIDTH
_PHONE_TEXT = 1.1  # every text a tenth larger: 8-pt tick labels shown 12 CSS px tall on a 390-px screen


def axis_text_points(fig: Figure) -> float:
    """The smallest axis text of a figure in points: tick labels and axis labels of every shown
    axes (what a reader must read to read the figure)."""
    sizes = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        labels = [ax.xaxis.label, ax.yaxis.label, *ax.get_xticklabels(), *ax.get_yticklabels()]
        sizes += [t.get_fontsize() for t in labels if t.get_visible() and t.get_text().strip()]
    return float(min(sizes)) if sizes else float("nan")


def for_phone(fig: Figure) -> Figure:
    """The same figure drawn for a phone's width, in place (after its wide files are saved): its
    panels one under another, :data:`PHONE_WIDTH` wide, the figure legends in two columns, long
    titles, axis labels and tick labels wrapped, every text :data:`_PHONE_TEXT` times its size."""
    import textwrap

    from matplotlib.text import Text

    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_subplotspec() is not None
              and not hasattr(ax, "_colorbar")]
    rows = max((ax.get_subplotspec().get_gridspec().nrows for ax in panels), default=1)
    height = max(_PHONE_PANEL, (fig.get_figheight() - 1.2) / rows)
    if len(panels) == 1 and panels[0].images:  # a square image: no taller than it is wide
        height = min(height, PHONE_WIDTH)
    # a colour bar beside the panel takes part of the width its axis label may use
    chars = 30 if any(hasattr(ax, "_colorbar") for ax in fig.axes) else _PHONE_CHARS
    if len(panels) > 1:
        grid = fig.add_gridspec(len(panels), 1)
        for i, ax in enumerate(panels):
            ax.set_subplotspec(grid[i, 0])
            ax.tick_params(labelleft=True, labelbottom=True)  # a shared axis shows its ticks in each row
    wrap = lambda text, width: "\n".join(textwrap.fill(line, width, break_long_words=False)  # noqa: E731
                                          for line in text.split("\n"))
    for ax in panels:
        ax.set_title(wrap(ax.get_title(), _PHONE_CHARS), fontsize=ax.title.get_fontsize())
        for label in (ax.xaxis.label, ax.yaxis.label):
            label.set_text(wrap(label.get_text(), chars))
        ticks = ax.get_yticklabels()
        if any(len(t.get_text()) > 14 for t in ticks):  # long row names: two lines, more room for the plot
            # a policy's name breaks after an underscore (anomaly_rate_ / matched_heldout)
            names = [wrap(t.get_text().replace("_", "_ "), 16).replace("_ ", "_") for t in ticks]
            ax.set_yticks(ax.get_yticks(), names, fontsize=ticks[0].get_fontsize())
        for tick in ax.get_xticklabels():
            if len(tick.get_text()) > 5:  # column names side by side overlap at this width
                tick.set_rotation(max(45, tick.get_rotation() % 360))
                tick.set_horizontalalignment("right")
    if fig._suptitle is not None:  # matplotlib keeps the figure's title there
        fig._suptitle.set_text(wrap(fig._suptitle.get_text(), _PHONE_CHARS))
    for legend in list(fig.legends):  # in two columns: drawn again, a legend keeps its first layout
        _legend_in_columns(fig, legend, 2)
    for text in fig.findobj(Text):
        text.set_fontsize(text.get_fontsize() * _PHONE_TEXT)
    fig.set_layout_engine("constrained")
    fig.set_size_inches(PHONE_WIDTH, 1.5 + height * len(panels or [None]))
    return fig


def _legend_in_columns(fig: Figure, legend: Any, ncols: int) -> None:
    """A figure legend drawn again below the panels in ``ncols`` columns (its entries, title and sizes)."""
    names = [t.get_text() for t in legend.get_texts()]
    found: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(label, handle)
    if not names or any(n not in found for n in names):
        return  # entries this figure's axes do not hold: leave the legend as it is
    size = legend.get_texts()[0].get_fontsize()
    title = legend.get_title()
    legend.remove()
    fig.legend([found[n] for n in names], names, loc="outside lower center", ncols=ncols, fontsize=size,
               title=title.get_text() or None, title_fontsize=title.get_fontsize(), frameon=False)


def _panels(n: int, width: float = 4.6, height: float = 3.8, max_cols: int = 3) -> tuple[Figure, list]:
    """``n`` panels, at most ``max_cols`` a row, the figure between MIN_WIDTH and MAX_WIDTH."""
    cols = min(n, max_cols)
    rows = int(np.ceil(n / cols))
    total = min(max(width * cols, MIN_WIDTH), MAX_WIDTH)
    fig = Figure(figsize=(total, height * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _dodged_errorbars(ax, table: pd.DataFrame, x_key: str, series_key: str, colors: dict[str, str] | None,
                      series_label: str) -> None:
    """Points with CI bars: x positions are the values of ``x_key``, one offset per series."""
    x_values = list(dict.fromkeys(sort_groups(table[[x_key]].drop_duplicates(), [x_key])[x_key]))
    series = list(dict.fromkeys(sort_groups(table[[series_key]].drop_duplicates(), [series_key])[series_key]))
    width = 0.7 / max(len(series), 1)
    for i, s in enumerate(series):
        part = table[table[series_key] == s]
        pos = [x_values.index(v) - 0.35 + width * (i + 0.5) for v in part[x_key]]
        low = part["effect_pp"] - part["ci_low_pp"]
        high = part["ci_high_pp"] - part["effect_pp"]
        ax.errorbar(pos, part["effect_pp"], yerr=[low.to_numpy(), high.to_numpy()], fmt="o", capsize=3,
                    color=_color(str(s), i, colors), label=f"{series_label}{s}", markersize=5, linewidth=1.4)
    ax.axhline(0, color="#444444", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(x_values)))
    ax.set_xticklabels([str(v) for v in x_values])
    ax.set_xlim(-0.6, len(x_values) - 0.4)
    ax.grid(axis="y", alpha=0.3)


@renamed_parameters("cohort=", cohort="subset")
def plot_effects(
    df: pd.DataFrame,
    subset: str = "all",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> Figure:
    """Effect of recovery by delay and condition with task-level bootstrap CIs (paper fig. 2).

    One panel per operation; x is the recovery delay, one colour per condition.
    """
    rows = select_subset(df, subset, True)
    table = effect_table(rows, by=["operation", "condition", "delay"], subset="all",
                         resamples=resamples, seed=seed, level=level)
    operations = list(dict.fromkeys(table["operation"]))
    fig, axes = _panels(len(operations))
    for ax, op in zip(axes, operations, strict=True):
        _dodged_errorbars(ax, table[table["operation"] == op], "delay", "condition", _CONDITION_COLORS, "")
        ax.set_title(f"operation: {op}")
        ax.set_xlabel("recovery delay d (env actions after the modified observation)", fontsize=9)
    axes[0].set_ylabel("effect on task success (pp)\nsuccess with - without recovery")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="observation condition", loc="outside lower center",
               ncols=len(labels), fontsize=9, title_fontsize=9, frameon=False)
    fig.suptitle(
        f"Effect of recovery by delay and observation condition\n"
        f"({_subset_text(subset, rows)}; bars: {level:.0%} task-level cluster-bootstrap CI)",
        fontsize=11,
    )
    return fig


@renamed_parameters("cohort=", cohort="subset")
def plot_mechanisms(
    df: pd.DataFrame,
    subset: str = "all",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> Figure:
    """Mechanism controls: effect of each recovery operation, per condition (paper fig. 3).

    One panel per condition; x is the operation (refresh, content-ablated refresh,
    replan, rewind), one colour per delay. Needs at least two operations.
    """
    rows = select_subset(df, subset, True)
    operations = rows["operation"].unique()
    if len(operations) < 2:
        raise FigureSkipped(
            f"mechanism controls need at least two operations; the table has only {operations[0]!r}"
        )
    table = effect_table(rows, by=["condition", "operation", "delay"], subset="all",
                         resamples=resamples, seed=seed, level=level)
    conditions = list(dict.fromkeys(table["condition"]))
    fig, axes = _panels(len(conditions), width=max(4.6, 0.9 * len(operations) + 1.5), height=3.4, max_cols=2)
    delays = list(dict.fromkeys(sort_groups(table[["delay"]].drop_duplicates(), ["delay"])["delay"]))
    delay_colors = {str(d): _PALETTE[i % len(_PALETTE)] for i, d in enumerate(delays)}
    for ax, cond in zip(axes, conditions, strict=True):
        _dodged_errorbars(ax, table[table["condition"] == cond], "operation", "delay", delay_colors, "d=")
        ax.set_title(f"condition: {cond}")
        ax.set_xlabel("recovery operation")
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    axes[0].set_ylabel("effect on task success (pp)\nvs no recovery")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="recovery delay", loc="outside lower center",
               ncols=len(labels), fontsize=9, title_fontsize=9, frameon=False)
    fig.suptitle(
        f"Mechanism controls: effect of each recovery operation\n"
        f"({_subset_text(subset, rows)}; bars: {level:.0%} task-level cluster-bootstrap CI)",
        fontsize=11,
    )
    return fig


@renamed_parameters("cohort=", cohort="subset")
def plot_partitions(df: pd.DataFrame, subset: str = "all") -> Figure:
    """Paired outcome partition (stable success, rescue, harm, stable failure) as stacked bars (fig. 6).

    One panel per operation, one bar per condition and delay, segment width = count.
    """
    rows = select_subset(df, subset, True)
    table = count_outcomes(rows, ["operation", "condition", "delay"])
    operations = list(dict.fromkeys(table["operation"]))
    n_bars = int(table.groupby("operation").size().max())
    cols = min(len(operations), 3)
    n_rows = int(np.ceil(len(operations) / cols))
    fig = Figure(figsize=(min(max(MIN_WIDTH, 3.4 * cols + 1.2), MAX_WIDTH), 1.4 + n_rows * (0.32 * n_bars + 0.9)),
                 layout="constrained")
    axes = list(fig.subplots(n_rows, cols, squeeze=False, sharex=True).ravel())
    for ax in axes[len(operations):]:
        ax.set_visible(False)
    axes = axes[: len(operations)]
    columns = {"stable_success": "stable_success", "rescue": "rescues", "harm": "harms",
               "stable_failure": "stable_failure"}
    for ax, op in zip(axes, operations, strict=True):
        part = table[table["operation"] == op].iloc[::-1]
        labels = [f"{c}, d={d}" for c, d in zip(part["condition"], part["delay"], strict=True)]
        left = np.zeros(len(part))
        for outcome in OUTCOMES:
            values = part[columns[outcome]].to_numpy(dtype=float)
            bars = ax.barh(labels, values, left=left, color=_OUTCOME_COLORS[outcome],
                           label=_OUTCOME_LABELS[outcome], edgecolor="white", linewidth=0.5)
            total = part["n"].to_numpy(dtype=float)
            for bar, v, t in zip(bars, values, total, strict=True):
                if v > 0 and v / t >= 0.06:
                    ax.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2,
                            f"{int(v)}", ha="center", va="center", fontsize=7)
            left += values
        ax.set_title(f"operation: {op}", fontsize=10)
        ax.set_xlabel("task pairs (count)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(axis="x", labelbottom=True)  # a panel with none below it keeps its counts
        ax.tick_params(axis="y", labelsize=8)
    axes[0].set_ylabel("condition, delay")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=9, frameon=False)
    fig.suptitle(f"Paired outcome partition per condition and delay ({_subset_text(subset, rows)})",
                 fontsize=11)
    return fig


def _default_pair(rows: pd.DataFrame) -> tuple[str, str]:
    ops = list(dict.fromkeys(sort_groups(rows[["operation"]].drop_duplicates(), ["operation"])["operation"]))
    if len(ops) < 2:
        raise FigureSkipped(
            f"the joint outcome heatmap needs two operations on the same tasks; the table has only {ops[0]!r}"
        )
    if "refresh" in ops and "refresh_ablated" in ops:
        return "refresh", "refresh_ablated"
    return ops[0], ops[1]


def _default_cell(rows: pd.DataFrame) -> tuple[str, int]:
    conditions = list(rows["condition"].unique())
    stale = sorted(c for c in conditions if c.startswith("stale"))
    if PRIMARY_STALE in conditions:
        condition = PRIMARY_STALE
    elif stale:
        condition = stale[0]
    else:
        condition = sorted(c for c in conditions if c != "clean")[0] if len(conditions) > 1 else conditions[0]
    return condition, int(rows.loc[rows["condition"] == condition, "delay"].max())


@renamed_parameters("cohort=", cohort="subset")
def plot_joint(
    df: pd.DataFrame,
    a: str | None = None,
    b: str | None = None,
    condition: str | None = None,
    delay: int | None = None,
    subset: str = "all",
) -> Figure:
    """Heatmap of joint outcomes of two operations on the same tasks (paper fig. 5).

    Rows: outcome under ``a``; columns: under ``b``; both relative to the same
    no-recovery run. Defaults: refresh vs refresh_ablated (else the first two
    operations), condition stale2 (else the first stale/non-clean one), its largest delay.
    """
    rows = select_subset(df, subset, True)
    if a is None or b is None:
        a, b = _default_pair(rows)
    if condition is None or delay is None:
        default_condition, default_delay = _default_cell(rows)
        condition = condition if condition is not None else default_condition
        delay = delay if delay is not None else default_delay
    counts = joint_outcomes(rows, a, b, condition=condition, delay=delay, subset="all")
    matrix = joint_matrix(counts)
    n = int(matrix.to_numpy().sum())
    fig = Figure(figsize=(7.2, 6.0), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(matrix.to_numpy(), cmap="Blues")
    labels = [_OUTCOME_LABELS[o] for o in OUTCOMES]
    ax.set_xticks(range(4), labels, rotation=20)
    ax.set_yticks(range(4), labels)
    peak = max(int(matrix.to_numpy().max()), 1)
    for i in range(4):
        for j in range(4):
            v = int(matrix.iloc[i, j])
            ax.text(j, i, str(v), ha="center", va="center", fontsize=11,
                    color="white" if v > 0.6 * peak else "black")
    ax.set_ylabel(f"outcome under {a} (rows)")
    ax.set_xlabel(f"outcome under {b} (columns)")
    agree = int(np.trace(matrix.to_numpy()))
    excluded = counts.attrs.get("excluded_not_executed", 0)
    bar = fig.colorbar(image, ax=ax, label="tasks", shrink=0.8)
    bar.locator = MaxNLocator(integer=True)  # counts: no fractional ticks
    bar.update_ticks()
    fig.suptitle(
        f"Joint outcomes of {a} (rows) vs {b} (columns)\ncondition {condition}, delay {delay}: "
        f"{n} tasks where both ran, {agree} on the diagonal (same outcome)"
        + (f"\n{excluded} task(s) excluded: recovery not executed" if excluded else ""),
        fontsize=11,
    )
    return fig


@renamed_parameters("cohort=", cohort="subset")
def write_figures(
    df: pd.DataFrame,
    out: str | Path,
    subset: str = "all",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    formats: Sequence[str] = ("png", "svg"),
    joint: dict | None = None,
    progress: bool = False,
) -> dict[str, list[Path] | str]:
    """Write every figure the table supports to ``out`` (PNG and SVG) with a ``figures.json`` manifest.

    ``joint`` may set ``a``, ``b``, ``condition``, ``delay`` of the joint heatmap
    (see :func:`plot_joint` for the defaults); ``progress`` shows a bar on standard error
    (each figure bootstraps its intervals: seconds to a minute). Returns {figure name:
    written paths, or the reason it was skipped}.
    """
    rows = select_subset(df, subset, True)
    out = Path(out)
    builders = {
        "effects_by_delay": lambda: plot_effects(rows, "all", resamples, seed, level),
        "mechanism_controls": lambda: plot_mechanisms(rows, "all", resamples, seed, level),
        "outcome_partitions": lambda: plot_partitions(rows, "all"),
        "joint_outcomes": lambda: plot_joint(rows, subset="all", **(joint or {})),
    }
    for path in [out / f"{name}.{fmt}" for name in builders for fmt in formats]:  # before any is drawn
        check_output(path, "figure")
    check_output(out / "figures.json", "figures manifest")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CirError(f"{out}: cannot create the output folder ({err.strerror})") from None
    settings = {"cir_version": __version__, "subset": subset, "resamples": int(resamples), "seed": int(seed),
                "level": level, "tasks": int(rows["task_id"].nunique()), "rows": len(rows)}
    result: dict[str, list[Path] | str] = {}
    bar = tqdm(builders.items(), total=len(builders), unit="figure", desc="figures", disable=not progress,
               **bar_settings())
    for name, build in bar:
        bar.set_postfix_str(name)
        try:
            fig = build()
        except FigureSkipped as err:
            result[name] = f"skipped: {err}"
            continue
        paths = []
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            meta = {"Title": name, "Description": json.dumps(settings, sort_keys=True)}
            if fmt == "png":
                meta["Software"] = f"cir {__version__}"
            else:
                meta["Date"] = None
            image = io.BytesIO()
            with matplotlib.rc_context({"svg.hashsalt": "cir"}):
                fig.savefig(image, dpi=150, metadata=meta, format=fmt)
            write_output(path, image.getvalue(), "figure")
            paths.append(path)
        result[name] = paths
    manifest = {"settings": settings,
                "figures": {k: [p.name for p in v] if isinstance(v, list) else v for k, v in result.items()}}
    write_output(out / "figures.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n", "figures manifest")
    return result


def plot_recovery_mix(mix: pd.DataFrame) -> Figure:
    """Which operation a router chose, by condition (panels) and delay (bars): the shares of a
    condition's arms recovered with each operation at each delay (``cir.study.selective.mix_table``).
    Only the conditions it recovered in have a panel (the title names the others); the colours
    are the operations' everywhere (:data:`_OPERATION_COLORS`), the legend one for all panels."""
    chosen = mix[mix["operation"] != "none"]
    if chosen.empty:
        raise FigureSkipped("the router recovered in no arm")
    conditions = sorted(set(chosen["condition"]), key=lambda c: (c != "clean", c))
    idle = sorted(set(mix["condition"]) - set(conditions), key=lambda c: (c != "clean", c))
    ops = list(dict.fromkeys(chosen["operation"]))
    delays = sorted(set(chosen["delay"]))
    fig, axes = _panels(len(conditions), width=2.6 + 0.35 * len(delays), height=2.9, max_cols=3)
    for ax, condition in zip(axes, conditions, strict=True):
        part = chosen[chosen["condition"] == condition]
        bottom = np.zeros(len(delays))
        for i, op in enumerate(ops):
            share = [float(part[(part["delay"] == d) & (part["operation"] == op)]["share"].sum()) for d in delays]
            ax.bar([str(d) for d in delays], share, bottom=bottom, color=_color(op, i, _OPERATION_COLORS), label=op)
            bottom += np.asarray(share)
        ax.set_title(f"condition: {condition}", fontsize=9)
        ax.set_xlabel("recovery delay")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("share of the condition's arms")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:  # an operation chosen only in a later panel
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, title="operation", loc="outside lower center", ncols=len(labels), fontsize=9,
               title_fontsize=9, frameon=False)
    fig.suptitle(f"Which recovery {mix['policy'].iloc[0]} chose, by condition and delay"
                 + (f"\n(no recovery in {', '.join(idle)})" if idle else ""), fontsize=10)
    return fig


def _policy_kind(policy: str) -> str:
    if policy.startswith("oracle"):
        return "oracle"
    return "router" if policy.startswith("cir") else "baseline"


def plot_heldout(summary: pd.DataFrame, policies: Sequence[str], level: float = DEFAULT_LEVEL) -> Figure:
    """Held-out policies against never recovering: each policy's effect on success (pp) with its
    task-level cluster-bootstrap interval, one row per policy in the order given, coloured by
    what it is (a fitted router, a rule without a model, an oracle). ``summary``: the held-out
    evaluation (``cir.router.evaluation``), its ``all`` rows read."""
    rows = summary[summary["condition"] == "all"].set_index("policy")
    shown = [p for p in dict.fromkeys(policies) if p in rows.index]
    if not shown:
        raise FigureSkipped("none of the policies is in the held-out summary")
    fig = Figure(figsize=(MIN_WIDTH, 0.9 + 0.32 * len(shown) + 0.9), layout="constrained")
    ax = fig.subplots()
    for y, policy in enumerate(shown):
        r = rows.loc[policy]
        kind = _policy_kind(policy)
        ax.errorbar([r["effect_pp"]], [y], xerr=[[r["effect_pp"] - r["ci_low_pp"]], [r["ci_high_pp"] - r["effect_pp"]]],
                    fmt="o", capsize=3, color=_POLICY_COLORS[kind], markersize=5, linewidth=1.4,
                    label=kind)
    ax.axvline(0, color="#444444", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(shown)), shown)
    ax.invert_yaxis()
    ax.set_xlabel("success vs never\nrecovering (pp)")
    ax.grid(axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    once = dict(zip(labels, handles, strict=True))
    fig.legend(list(once.values()), list(once), loc="outside lower center", ncols=len(once), fontsize=9,
               frameon=False)
    n = int(rows.loc[shown[0], "n_tasks"]) if "n_tasks" in rows.columns else None
    fig.suptitle("Held-out tasks: each policy against never recovering\n("
                 + (f"{n} tasks; " if n else "") + f"bars: {level:.0%} task-level cluster-bootstrap CI,\nthe counts' "
                 f"Clopper-Pearson interval where fewer than {FEW_DISCORDANT} arms differ)", fontsize=11)
    return fig
