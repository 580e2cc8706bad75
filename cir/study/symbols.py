"""What a report's table cells mean where a number is not the plain reading.

A table shows ``-`` where it has no value, a router's threshold that is never passed as
``never``, and a share of an oracle's gain below zero; each means something that depends on
its column. The page (:mod:`cir.study.page`) explains each such cell once, under the first table
of the page that shows it, from :data:`CELL_NOTES`: column -> what a cell shows -> its meaning.
The keys of a column's notes are ``missing`` (a cell shown ``-``), ``negative`` (a number below
zero) or the text a cell shows (``never``, ``n/a``).
"""

from __future__ import annotations

import pandas as pd

_NO_CLEAN = "no clean arms in this row: clean harm is measured on clean arms only"
_NO_INTERVAL = "one replicate: no interval over replicates"
_NO_AUC = "the cells hold no case of this outcome (or only such cases): no AUC"
_NO_ORACLE_GAIN = "the oracle gains nothing here, so there is no share of its gain"

CELL_NOTES: dict[str, dict[str, str]] = {
    **{gate: {"never": "no threshold: no candidate gained within the clean-harm budget on the fitting "
                       "table, so the gate never passes and the router never recovers",
              "n/a": "the estimator has no such gate (the paired estimator has no beta)"}
       for gate in ("alpha", "beta", "gamma")},
    "clean_harm_rate": {"missing": _NO_CLEAN},
    "oracle_fraction": {"missing": _NO_ORACLE_GAIN,
                        "negative": "the policy loses where the oracle gains: -1.000 is a loss as large as the "
                                    "oracle's gain, -9.000 nine times as large"},
    "share_feature_oracle": {"missing": "the feature oracle gains nothing in this world: no share of its gain",
                             "negative": "the policy loses where the oracle gains"},
    "auc_score": {"missing": _NO_AUC},
    "auc_utility": {"missing": _NO_AUC},
    "auc_p_err": {"missing": "no cells of this kind, or no clean cells: no AUC"},
    "p_err_auc": {"missing": "a policy without an error model"},
    "ci_low_pp": {"missing": _NO_INTERVAL},
    "ci_high_pp": {"missing": _NO_INTERVAL},
    "value": {"missing": "not measurable here (one replicate: no interval over replicates)"},
    "met": {"missing": "no target: the number is shown beside the others"},
    "sign_flip_p": {"missing": "no task with a difference: no test"},
    "shown_true_share": {"missing": "no arms of this condition"},
    "circle_median": {"missing": "no harm of this cause ended going round: no median"},
}

#: A cell's note when its column has none of its own.
GENERIC = {"missing": "no value (an empty cell of the CSV): nothing to compute it from"}


def cell_keys(df: pd.DataFrame, shown: pd.DataFrame) -> list[tuple[str, str]]:
    """(column, key) of every kind of cell in ``df`` that needs a note, in column order;
    ``shown`` is the table as it is printed (:func:`cir.study.page.format_table`)."""
    keys: list[tuple[str, str]] = []
    for column in df.columns:
        name = str(column)
        notes = CELL_NOTES.get(name, {})
        printed = set(shown[column].astype(str))
        if "-" in printed:
            keys.append((name, "missing"))
        if "negative" in notes and pd.api.types.is_numeric_dtype(df[column]) and (df[column] < 0).any():
            keys.append((name, "negative"))
        keys += [(name, text) for text in notes if text not in ("missing", "negative") and text in printed]
    return keys


def meaning(column: str, key: str) -> str:
    """``column``'s note for ``key`` (the generic one for a cell shown ``-`` without its own)."""
    return CELL_NOTES.get(column, {}).get(key) or GENERIC.get(key, "")


def note_texts(keys: list[tuple[str, str]]) -> list[str]:
    """The notes of ``keys`` in words, the columns whose cells mean the same said together
    (``auc_score``, ``auc_utility`` -: ...)."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for column, key in keys:
        grouped.setdefault((key, meaning(column, key)), []).append(column)
    shown = {"missing": "-", "negative": "below 0"}
    return [f"{', '.join(f'`{c}`' for c in columns)} {shown.get(key, key)}: {text}"
            for (key, text), columns in grouped.items()]
