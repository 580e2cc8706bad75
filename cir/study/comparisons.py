"""Comparisons named before the study runs: the primary comparisons and the multiplicity of the rest.

A study's held-out evaluation yields hundreds of margins (every router over every policy, by
condition, kind and what the arm showed), each with a paired task-level interval and a sign-flip
p that knows nothing of the others. Read after the fact, some will look positive by chance. So the
held-out cohort's config (``role = "eval"``) names its *primary comparisons* before any cohort
runs (``comparisons = ["cir_paired - anomaly", "cir_multi - anomaly_rewind on lag", ...]``:
``POLICY - VERSUS``, optionally ``on`` a condition, a kind or a kind and what the arm showed,
``lag/looks_right``), the study record keeps them (a resume with other comparisons is refused),
and the summary reports exactly those, each with its interval, its raw p and its p adjusted
for how many were named (Holm's step-down, statsmodels' ``multipletests``), says how many other
margins the tables hold and where, and calls a margin positive or negative only when its
adjusted p is at most 0.05 (:func:`claim`); every other margin is exploratory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from cir.util.errors import CirError

#: The level at which a named comparison's adjusted p makes it a finding.
ALPHA = 0.05
#: ``POLICY - VERSUS`` or ``POLICY - VERSUS on GROUP``.
_PATTERN = re.compile(r"^\s*([A-Za-z0-9_]+)\s+-\s+([A-Za-z0-9_]+)(?:\s+on\s+([A-Za-z0-9_]+(?:/[A-Za-z0-9_]+)?))?\s*$")
COLUMNS = ["comparison", "policy", "versus", "on", "n", "margin_pp", "ci_low_pp", "ci_high_pp", "p_raw",
           "p_holm", "reads"]


@dataclass(frozen=True)
class Comparison:
    """One named comparison: ``policy`` minus ``versus`` on the held-out arms of ``on`` (``all``, a
    condition, a kind or ``kind/shown``)."""

    policy: str
    versus: str
    on: str = "all"

    @property
    def text(self) -> str:
        return f"{self.policy} - {self.versus}" + ("" if self.on == "all" else f" on {self.on}")


def parse_comparison(text: str) -> Comparison:
    """``cir_paired - anomaly`` or ``cir_multi - anomaly_rewind on lag``; a CirError saying the form."""
    match = _PATTERN.match(str(text))
    if not match or match.group(1) == match.group(2):
        raise CirError(f"comparison {text!r}: expected 'POLICY - VERSUS' or 'POLICY - VERSUS on GROUP' (two "
                       "different held-out policies, e.g. 'cir_paired - anomaly', 'cir_multi - anomaly_rewind on "
                       "lag'; GROUP: a condition, a kind or kind/shown such as lag/looks_right)")
    return Comparison(match.group(1), match.group(2), match.group(3) or "all")


def parse_comparisons(texts: Sequence[str]) -> tuple[Comparison, ...]:
    """Several, each once."""
    parsed = tuple(parse_comparison(t) for t in texts)
    seen = [c.text for c in parsed]
    twice = next((t for t in seen if seen.count(t) > 1), None)
    if twice is not None:
        raise CirError(f"comparison {twice!r} is named twice")
    return parsed


def check_comparisons(comparisons: Sequence[str], routers: Sequence[str], policies: Sequence[str],
                      groups: Sequence[str], source: str) -> None:
    """Refuse, before any cohort runs, a named comparison the study cannot measure: its ``policy``
    must be one of the study's ``routers`` (the contenders whose margins are measured), its
    ``versus`` one of the ``policies`` it walks, its group ``all``, a condition or kind of
    ``groups``, or a kind and what was shown (``lag/looks_right``)."""
    from cir.episode.perturb import SHOWN_VALUES

    kinds = {g.rstrip("0123456789") for g in groups}
    for c in parse_comparisons(comparisons):
        if c.policy not in routers:
            raise CirError(f"{source}: comparison {c.text!r}: {c.policy!r} is not one of the study's routers "
                           f"({', '.join(routers)}), whose margins the study measures")
        if c.versus not in policies:
            raise CirError(f"{source}: comparison {c.text!r}: the study walks no policy {c.versus!r} with these "
                           f"operations; it walks {', '.join(policies)}")
        kind, _, shown = c.on.partition("/")
        if not (c.on == "all" or (not shown and (c.on in groups or c.on in kinds))
                or (shown and kind in kinds and shown in SHOWN_VALUES)):
            raise CirError(f"{source}: comparison {c.text!r}: no held-out arms of {c.on!r}; the groups are all, "
                           f"{', '.join(groups)}, their kinds and KIND/SHOWN (SHOWN: {', '.join(SHOWN_VALUES)})")


def claim(margin: float, p_adjusted: float, alpha: float = ALPHA) -> str:
    """What a named margin may be read as: ``positive`` or ``negative`` when its adjusted p is at most
    ``alpha``, else ``no difference shown`` (whatever its sign or its interval)."""
    if p_adjusted <= alpha and margin > 0:
        return "positive"
    if p_adjusted <= alpha and margin < 0:
        return "negative"
    return "no difference shown"


def _row(comparison: Comparison, tables: Mapping[str, pd.DataFrame]) -> pd.Series:
    """The margin row a comparison names, from the margins tables by group: ``condition`` (all and
    each condition), ``kind`` and ``shown`` (a kind and what the arm showed)."""
    policy, versus, on = comparison.policy, comparison.versus, comparison.on
    if "/" in on:
        table, kind, shown = tables.get("shown"), *on.split("/", 1)
        where = None if table is None else (table["kind"] == kind) & (table["shown"].fillna("") == shown)
    else:
        table = tables["condition"]
        where = table["condition"] == on
        if not where.any() and "kind" in tables:
            table = tables["kind"]
            where = table["condition"] == on
    if table is None or where is None or not where.any():
        raise CirError(f"comparison {comparison.text!r}: no held-out arms of {on!r} (the groups are 'all', the "
                       "conditions, the kinds and kind/shown)")
    rows = table[where & (table["policy"] == policy) & (table["versus"] == versus)]
    if rows.empty:
        contenders = sorted(set(table["policy"]))
        versus_known = sorted(set(table.loc[table["policy"] == policy, "versus"])) or sorted(set(table["versus"]))
        raise CirError(f"comparison {comparison.text!r}: no margin of {policy!r} over {versus!r}; the routers "
                       f"whose margins are measured are {', '.join(contenders)}, each over {', '.join(versus_known)}")
    return rows.iloc[0]


def primary_comparisons(named: Sequence[Comparison | str], tables: Mapping[str, pd.DataFrame],
                        alpha: float = ALPHA) -> pd.DataFrame:
    """The named comparisons with their margins, intervals, raw p (the sign-flip test's) and Holm's
    adjusted p over all of them, and what each may be read as (:func:`claim`). ``tables``: the margins
    by ``condition`` (:func:`cir.router.evaluation.summarize_walks`' margins), and, when the study has
    them, by ``kind`` and by kind and ``shown`` (:mod:`cir.study.kinds`, with ``kind`` and ``shown``
    columns)."""
    from statsmodels.stats.multitest import multipletests

    comparisons = [parse_comparison(c) if isinstance(c, str) else c for c in named]
    if not comparisons:
        return pd.DataFrame(columns=COLUMNS)
    rows = [(c, _row(c, tables)) for c in comparisons]
    raw = [float(r["sign_flip_p"]) for _, r in rows]
    adjusted = multipletests(raw, alpha=alpha, method="holm")[1]
    out = []
    for (c, r), p, q in zip(rows, raw, adjusted, strict=True):
        out.append({"comparison": c.text, "policy": c.policy, "versus": c.versus, "on": c.on, "n": int(r["n"]),
                    "margin_pp": float(r["margin_pp"]), "ci_low_pp": float(r["ci_low_pp"]),
                    "ci_high_pp": float(r["ci_high_pp"]), "p_raw": p, "p_holm": float(q),
                    "reads": claim(float(r["margin_pp"]), float(q), alpha)})
    return pd.DataFrame(out, columns=COLUMNS)


def other_margins(primary: pd.DataFrame, margins: Mapping[str, int]) -> int:
    """How many margins the tables hold beside the named ones (``margins``: file -> rows)."""
    return sum(margins.values()) - len(primary)


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _pp(value: float) -> str:
    return f"{'+' if value > 0 else ''}{value:.1f}"


def comparison_text(r: Mapping[str, object]) -> str:
    """One named comparison as the summary says it: margin, interval, raw and adjusted p, reading."""
    return (f"`{r['policy']}` - `{r['versus']}`{'' if r['on'] == 'all' else ' on ' + str(r['on'])} "
            f"{_pp(float(r['margin_pp']))} pp [{_pp(float(r['ci_low_pp']))}, {_pp(float(r['ci_high_pp']))}], "
            f"p {_p(float(r['p_raw']))}, Holm {_p(float(r['p_holm']))}: {r['reads']}")


def comparisons_sentence(primary: pd.DataFrame, margins: Mapping[str, int], source: str,
                         named_before: bool = True) -> str:
    """The summary's sentence: each named comparison (:func:`comparison_text`), then how many other
    margins exist and where (``margins``: file -> rows), read as exploratory. ``named_before``: False
    for comparisons named after the study ran (post hoc), which the sentence then says."""
    if primary.empty:
        return ""
    where = ", ".join(f"{n:,} in `{name}`" for name, n in margins.items() if n)
    when = "Named before the study ran" if named_before else "Named after the study ran (post hoc)"
    return (f"{when} ({source}) and adjusted for the {len(primary)} named (Holm): "
            + "; ".join(comparison_text(r) for _, r in primary.iterrows())
            + f". The tables hold {_margins(other_margins(primary, margins))} ({where}), each with its unadjusted "
            "sign-flip p: exploratory, none a finding by itself.")


def _margins(n: int) -> str:
    return f"{n:,} other margin{'' if n == 1 else 's'}"


def comparisons_block(report, out, experiment, tables: Mapping[str, pd.DataFrame | None], suffix: str = "",
                      named_before: bool = True) -> str:
    """The named comparisons of the held-out ``experiment``'s config over the margins ``tables`` (by
    ``condition``, ``kind``, ``shown``; absent ones None): their table (``primary_comparisons``) in
    the report, and the summary's sentence (:func:`comparisons_sentence`; empty when none are named).
    ``named_before``: False for a study that ran before they were named (post hoc)."""
    from pathlib import Path

    from cir.study.page import save_csv

    if not experiment.comparisons:
        return ""
    present = {k: t for k, t in tables.items() if t is not None}
    primary = primary_comparisons(experiment.comparisons, present)
    path = save_csv(primary, Path(out) / "tables" / f"primary_comparisons{suffix}.csv")
    source = f"`{Path(experiment.source).name}`" if experiment.source else "the held-out cohort's config"
    when = "before the study ran" if named_before else "after the study ran (post hoc)"
    report.table(primary, path, f"The primary comparisons, named in {source} {when}: margins (pp, paired by "
                 "task), the sign-flip p and Holm's adjusted p over the named ones")
    files = {f"tables/cir_margins{'_by_' + k if k != 'condition' else ''}{suffix}.csv": len(t)
             for k, t in present.items()}
    sentence = comparisons_sentence(primary, files, source, named_before)
    report.text(sentence)
    return sentence
