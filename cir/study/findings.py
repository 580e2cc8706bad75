"""The study's answers in words: one sentence per question of the paper, from its tables.

The report (:mod:`cir.study.report`) opens with these sentences. Each is built from a
table the report also shows, and carries its number, interval and test; nothing is
written by hand. A :class:`Finding` knows whether its interval excludes zero, so the
report can say plainly when the cohorts are too small to conclude anything.

The three questions (paper, sections 5.2-5.4):

1. :func:`effect_finding`: what refresh does to success after a stale and after a clean
   observation (the effect table of an ``effects`` cohort);
2. :func:`mechanism_finding`: whether the content a refresh returns matters, beyond the
   interruption (full vs content-ablated refresh on the same tasks, and the placebo);
3. :func:`cir_finding`: whether CIR gains on held-out tasks without harming clean runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from cir.study.page import format_number


@dataclass(frozen=True)
class Finding:
    """One answer: its label, the sentence, and whether its interval excludes zero."""

    question: str
    sentence: str
    conclusive: bool
    n_tasks: int


def _pp(value: float) -> str:
    return f"{'+' if value > 0 else ''}{format_number(value, 1)} pp"


def _interval(row: pd.Series, low: str = "ci_low_pp", high: str = "ci_high_pp") -> str:
    """``95% CI a to b; sign-flip p = q`` of one table row."""
    return (f"95% CI {format_number(row[low], 1)} to {format_number(row[high], 1)} pp; "
            f"sign-flip p = {format_number(row['sign_flip_p'], 3)}")


def excludes_zero(row: pd.Series, low: str = "ci_low_pp", high: str = "ci_high_pp") -> bool:
    return bool(row[low] > 0 or row[high] < 0)


def _verdict(conclusive: bool, n_tasks: int) -> str:
    if conclusive:
        return "the interval excludes zero."
    return f"the interval includes zero: {n_tasks} tasks cannot tell this from no effect."


def effect_finding(effects: pd.DataFrame, cohort: str, stale: str, delay: int) -> Finding:
    """Refresh's effect under ``stale`` and under clean observations at ``delay``, from an
    effect table by condition and delay (``cir.stats.effects.effect_table``)."""
    at = effects[effects["delay"] == delay].set_index("condition")
    parts, conclusive, n = [], [], 0
    for condition in (stale, "clean"):
        if condition not in at.index:
            continue
        row = at.loc[condition]
        n = max(n, int(row["n"]))
        conclusive.append(excludes_zero(row))
        parts.append(f"after a {condition} observation, refresh at delay {delay} changed success by "
                     f"{_pp(row['effect_pp'])} ({int(row['rescues'])} rescues, {int(row['harms'])} harms; "
                     f"{_interval(row)})")
    spread = effects[effects["condition"] == stale]["effect_pp"]
    also = (f" Across delays {', '.join(map(str, sorted(set(effects['delay']))))} the {stale} effect "
            f"ranges from {_pp(spread.min())} to {_pp(spread.max())}." if len(spread) > 1 else "")
    sentence = (f"In the {cohort} ({n} tasks), " + "; ".join(parts) + "." + also + " "
                + _verdict(all(conclusive), n).capitalize())
    return Finding("Effects of refresh", sentence, all(conclusive), n)


def mechanism_finding(joint_effects: pd.DataFrame, cells: pd.DataFrame, condition: str, delay: int) -> Finding:
    """Full minus content-ablated refresh on the same tasks (``cir.stats.joint.joint_effects``), and
    the placebo's effect from the mechanism cells (``cir.stats.effects.effect_table`` rows)."""
    row = joint_effects.set_index("comparison").loc["refresh vs refresh_ablated"]
    n = int(row["n_tasks"])
    conclusive = excludes_zero(row)
    sentence = (f"At {condition}, delay {delay}, showing what the refresh query returned (full minus "
                f"content-ablated refresh, {n} tasks where both ran) changed success by "
                f"{_pp(row['effect_pp'])} ({_interval(row)})")
    placebo = cells[(cells["operation"] == "placebo") & (cells["condition"] == condition)
                    & (cells["delay"] == delay)]
    if len(placebo):
        p = placebo.iloc[0]
        sentence += (f"; a content-free harness message (placebo) changed it by {_pp(p['effect_pp'])} "
                     f"vs no recovery ({_interval(p)})")
    sentence += ". " + _verdict(conclusive, n).capitalize()
    return Finding("What part of refresh acts", sentence, conclusive, n)


def cir_finding(summary: pd.DataFrame, epsilon: float) -> Finding:
    """CIR against never recovering, always refreshing and the oracle on held-out tasks, from
    the evaluation summary (``cir.router.evaluation.evaluate``)."""
    rows = summary[summary["condition"] == "all"].set_index("policy")
    cir = rows.loc["cir"]
    n = int(cir["n_tasks"])
    clean = summary[(summary["condition"] == "clean") & (summary["policy"] == "cir")]
    harm = (f"harming {format_number(100 * clean.iloc[0]['clean_harm_rate'], 1)}% of clean episodes "
            f"(limit {format_number(100 * epsilon, 1)}%)" if len(clean) else "on no clean episodes")
    conclusive = excludes_zero(cir)
    sentence = (f"On {n} held-out tasks, CIR changed success by {_pp(cir['effect_pp'])} against never "
                f"recovering ({_interval(cir)}), refreshing in "
                f"{format_number(100 * cir['intervention_rate'], 1)}% of episodes and {harm}; always "
                f"refreshing changed it by {_pp(rows.loc['always', 'effect_pp'])} and the oracle by "
                f"{_pp(rows.loc['oracle', 'effect_pp'])}. " + _verdict(conclusive, n).capitalize())
    return Finding("Selective recovery (CIR)", sentence, conclusive, n)


def small_cohort_warning(findings: list[Finding], quick: bool) -> str | None:
    """A plain warning when an answer's interval includes zero (None when all exclude it)."""
    open_ = [f for f in findings if not f.conclusive]
    if not open_:
        return None
    named = "; ".join(f"{f.question}, {f.n_tasks} tasks" for f in open_)
    one = len(open_) == 1
    text = (f"{len(open_)} of these {len(findings)} answers ({named}) {'has' if one else 'have'} an "
            f"interval that includes zero: {'it does' if one else 'they do'} not show an effect either way.")
    if quick:
        text += (" This is a `--quick` run: it checks that the whole pipeline works, and its cohorts are "
                 "too small for an interval to exclude zero unless the effect is very large. The full "
                 "study (`cir reproduce` without `--quick`) uses the paper's cohort sizes.")
    else:
        text += " More tasks (a larger `n_tasks` in `experiments/`) narrow the intervals."
    return text
