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

from cir.study.page import counted, format_number


@dataclass(frozen=True)
class Finding:
    """One answer: its label, the sentence, and whether its interval excludes zero."""

    question: str
    sentence: str
    conclusive: bool
    n_tasks: int
    #: no perturbed condition made the agent fail without recovery: there was nothing to rescue
    nothing_to_rescue: bool = False


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
    return f"the interval includes zero: {counted(n_tasks, 'task')} cannot tell this from no effect."


def effect_finding(effects: pd.DataFrame, where: str, stale: str) -> Finding:
    """Refresh's effect under ``stale`` and under clean observations at every delay, from an
    effect table by condition and delay (``cir.stats.effects.effect_table``); conclusive when
    every interval excludes zero."""
    delays = sorted(set(effects["delay"]))
    parts, conclusive, n = [], [], 0
    for condition in (stale, "clean"):
        at = effects[effects["condition"] == condition].set_index("delay")
        if at.empty:
            continue
        n = max(n, int(at["n"].max()))
        conclusive += [excludes_zero(at.loc[d]) for d in delays if d in at.index]
        each = ", ".join(f"{_pp(at.loc[d, 'effect_pp'])} [{format_number(at.loc[d, 'ci_low_pp'], 1)}, "
                         f"{format_number(at.loc[d, 'ci_high_pp'], 1)}]" for d in delays if d in at.index)
        rescues, harms = int(at["rescues"].sum()), int(at["harms"].sum())
        parts.append(f"after a {condition} observation refresh changed success by {each} at delays "
                     f"{', '.join(map(str, delays))} ({counted(rescues, 'rescue')} and {counted(harms, 'harm')} over the delays)")
    no_failures = no_failures_without_recovery(effects)
    sentence = (f"In the {where} ({counted(n, 'task')}), " + "; ".join(parts) + " (95% task-level bootstrap CIs). "
                + ("Every interval excludes zero." if all(conclusive) else
                   f"{sum(not c for c in conclusive)} of {len(conclusive)} intervals "
                   f"{'includes' if sum(not c for c in conclusive) == 1 else 'include'} zero: {counted(n, 'task')} "
                   "cannot tell those effects from none."))
    if no_failures:
        sentence += (" No perturbed condition made the agent fail: its success without recovery is "
                     f"{format_number(1.0, 3)} under every condition, so there was nothing for a recovery to "
                     "rescue here, only successes it could harm.")
    return Finding("Effects of refresh", sentence, all(conclusive), n, nothing_to_rescue=no_failures)


def no_failures_without_recovery(effects: pd.DataFrame) -> bool:
    """Whether every perturbed condition's success without recovery is 1 in an effect table
    (``success_without`` by condition and delay): the errors caused no failure at all."""
    perturbed = effects[effects["condition"] != "clean"]
    return bool(len(perturbed)) and "success_without" in perturbed and bool((perturbed["success_without"] >= 1).all())


def mechanism_finding(joint_effects: pd.DataFrame, cells: pd.DataFrame, condition: str, delay: int) -> Finding:
    """Full minus content-ablated refresh on the same tasks (``cir.stats.joint.joint_effects``), and
    the placebo's effect from the mechanism cells (``cir.stats.effects.effect_table`` rows)."""
    row = joint_effects.set_index("comparison").loc["refresh vs refresh_ablated"]
    n = int(row["n_tasks"])
    conclusive = excludes_zero(row)
    sentence = (f"At {condition}, delay {delay}, showing what the refresh query returned (full minus "
                f"content-ablated refresh, {counted(n, 'task')} where both ran) changed success by "
                f"{_pp(row['effect_pp'])} ({_interval(row)})")
    placebo = cells[(cells["operation"] == "placebo") & (cells["condition"] == condition)
                    & (cells["delay"] == delay)]
    if len(placebo):
        p = placebo.iloc[0]
        sentence += (f"; a content-free harness message (placebo) changed it by {_pp(p['effect_pp'])} "
                     f"vs no recovery ({_interval(p)})")
    sentence += ". " + _verdict(conclusive, n).capitalize()
    return Finding("What part of refresh acts", sentence, conclusive, n)


def cir_finding(summary: pd.DataFrame, epsilon: float, routers: tuple[str, ...] = ("cir", "cir_paired")) -> Finding:
    """Each router against never recovering, the anomaly baselines and the oracle on held-out
    tasks, from the evaluation summary (``cir.router.evaluation.evaluate``)."""
    rows = summary[summary["condition"] == "all"].set_index("policy")
    present = [r for r in routers if r in rows.index]
    n = int(rows.loc[present[0], "n_tasks"])
    parts, conclusive = [], []
    for name in present:
        r = rows.loc[name]
        clean = summary[(summary["condition"] == "clean") & (summary["policy"] == name)]
        harm = (f"clean harm {format_number(100 * clean.iloc[0]['clean_harm_rate'], 1)}%"
                if len(clean) else "no clean arms")
        conclusive.append(excludes_zero(r))
        oracle = _oracle_of(r)
        parts.append(f"{name} changed success by {_pp(r['effect_pp'])} against never recovering "
                     f"({_interval(r)}), {format_number(100 * r['oracle_fraction'], 0)}% of the gain of the "
                     f"oracle over {_scope(oracle)}, recovering in {format_number(100 * r['intervention_rate'], 1)}% of arms "
                     f"with {harm}")
    anomaly = rows.loc["anomaly", "effect_pp"] if "anomaly" in rows.index else float("nan")
    used = list(dict.fromkeys([*(_oracle_of(rows.loc[name]) for name in present), "oracle"]))
    oracles = " and ".join(f"over {_scope(o)} by {_pp(rows.loc[o, 'effect_pp'])}" for o in used if o in rows.index)
    sentence = (f"On {counted(n, 'held-out task')}, " + "; ".join(parts) + f" (budget {format_number(100 * epsilon, 1)}%). "
                f"The anomaly rule changed it by {_pp(anomaly)}, the oracle {oracles}. "
                + _verdict(all(conclusive), n).capitalize())
    return Finding("Selective recovery (CIR)", sentence, all(conclusive), n)


def _scope(oracle: str) -> str:
    """What an oracle may use: ``oracle`` every operation, ``oracle_<op>`` that one."""
    return "every operation" if oracle == "oracle" else oracle.removeprefix("oracle_")


def _oracle_of(row: pd.Series) -> str:
    """The oracle a policy's share of the gain is measured against (its own operations')."""
    value = row.get("oracle_policy") if hasattr(row, "get") else None
    return str(value) if isinstance(value, str) and value else "oracle"


def small_cohort_warning(findings: list[Finding], quick: bool) -> str | None:
    """A plain warning when an answer's interval includes zero (None when all exclude it)."""
    open_ = [f for f in findings if not f.conclusive]
    if not open_:
        return None
    named = "; ".join(f"{f.question}, {counted(f.n_tasks, 'task')}" for f in open_)
    one = len(open_) == 1
    text = (f"{len(open_)} of these {len(findings)} answers ({named}) {'has' if one else 'have'} an "
            f"interval that includes zero: {'it does' if one else 'they do'} not show an effect either way.")
    if any(f.nothing_to_rescue for f in findings):
        return text + (" The perturbed observations made no run fail without recovery (success without "
                       "recovery 1.000 under every condition), so there was nothing to rescue: that, not the "
                       "size of the cohorts, is why no rescue shows; a harder task or a less robust agent is "
                       "what would change it.")
    if quick:
        text += (" This is a `--quick` run: it checks that the whole pipeline works, and its cohorts are "
                 "too small for an interval to exclude zero unless the effect is very large. The full "
                 "study (`cir reproduce` without `--quick`) uses the paper's cohort sizes.")
    else:
        text += " More tasks (a larger `n_tasks` in `experiments/`) narrow the intervals."
    return text
