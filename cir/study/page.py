"""A report as a list of blocks, rendered to Markdown and to a self-contained HTML page.

Blocks are plain data (heading, paragraph, warning, finding, table, figure), so one walk
through the study writes both ``report.md`` (figures linked) and ``report.html`` (figures
embedded as base64 PNG). Every table block names the CSV it was read from, so each
number in the report can be traced to a file beside it.

The page shows before it tabulates, and its main text is bounded: a finding has its figure
beside it; a table longer than :data:`MAIN_ROWS` rows is shown in the main text by its
summary (fewer rows, or a sentence, given by the section that writes it) and kept whole in
an appendix at the end of the page (and in its CSV); a cell whose meaning is not the plain
number (``-``, ``never``, a share below zero: :mod:`cir.study.symbols`) is explained once,
under the first table that shows it.

The page fits its width: a table wider than the text scrolls inside its own box, text
columns are left-aligned and numbers right-aligned, headers wrap at underscores, and
figures are scaled to the text width; below :data:`PHONE_BREAK_PX` each figure is the one
drawn for a phone (``cir.study.figures.for_phone``: its panels one under another, its text
as large as on a wide screen), embedded beside the wide one. ``tests/study/test_page.py``
measures it in a headless browser.
"""

from __future__ import annotations

import base64
import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


def save_csv(df: pd.DataFrame, path: Path) -> Path:
    """Write a report table as CSV (the file its block names), its folder made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, float_format="%.6g")
    return path


#: The figures' resolution in ``figures/`` and on a wide page.
DPI = 130
#: A table longer than this is shown in the main text by its summary, and whole in the appendix.
MAIN_ROWS = 12
#: Below this window width the page shows each figure drawn for a phone (``figures.for_phone``).
PHONE_BREAK_PX = 900


@dataclass(frozen=True)
class SavedFigure:
    """A figure written as PNG and SVG (``path``: the PNG), and the same figure drawn for a phone's
    width (``phone``: PNG bytes, for the page only); for each, its width in pixels and the height in
    pixels of its smallest axis text (tick and axis labels), which the page carries so that a
    browser can tell how large that text is shown."""

    path: Path
    phone: bytes
    width_px: int
    text_px: float
    phone_width_px: int
    phone_text_px: float


def save_figure(fig: Any, folder: Path, name: str) -> SavedFigure:
    """Write a matplotlib Figure as PNG and SVG, byte-stable (no dates, a fixed SVG salt), then
    draw it for a phone (in memory: the page embeds it; the files are the wide figure's)."""
    import io

    import matplotlib
    from PIL import Image

    from cir.study.figures import PHONE_DPI, axis_text_points, for_phone

    folder.mkdir(parents=True, exist_ok=True)
    png = folder / f"{name}.png"
    with matplotlib.rc_context({"svg.hashsalt": "cir"}):
        fig.savefig(png, dpi=DPI, metadata={"Software": None})
        fig.savefig(folder / f"{name}.svg", metadata={"Date": None})
    width, text = round(fig.get_figwidth() * DPI), axis_text_points(fig) * DPI / 72
    for_phone(fig)
    drawn, phone = io.BytesIO(), io.BytesIO()
    fig.savefig(drawn, format="png", dpi=PHONE_DPI, metadata={"Software": None})
    # a figure has few colours: in a 128-colour palette the page carries a third of the bytes
    Image.open(drawn).convert("RGB").quantize(colors=128).save(phone, format="PNG", optimize=True)
    return SavedFigure(png, phone.getvalue(), width, round(text, 1), round(fig.get_figwidth() * PHONE_DPI),
                       round(axis_text_points(fig) * PHONE_DPI / 72, 1))


@dataclass
class Report:
    """An ordered list of blocks; ``add_*`` appends, ``write`` renders both formats."""

    title: str
    blocks: list[tuple[str, object]] = field(default_factory=list)

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("heading", (level, text)))

    def text(self, text: str) -> None:
        self.blocks.append(("text", text))

    def warning(self, text: str) -> None:
        """A paragraph the reader must not miss (e.g. cohorts too small to conclude)."""
        self.blocks.append(("warning", text))

    def finding(self, text: str, figure: SavedFigure | None = None, caption: str = "") -> None:
        """A paragraph with its figure beside it (below it on a narrow screen): the figure as
        drawn for a narrow column (:func:`save_figure`'s phone drawing) at every width."""
        self.blocks.append(("finding", (text, figure, caption)))

    def table(self, df: pd.DataFrame, source: Path | None = None, caption: str = "", *,
              summary: pd.DataFrame | str | None = None, summary_caption: str = "") -> None:
        """A table; one longer than :data:`MAIN_ROWS` rows shows ``summary`` in the main text (a
        shorter table under ``summary_caption``, else the caption; or a sentence; without one,
        only where the table is) and is kept whole in the appendix."""
        self.blocks.append(("table", Table(df, source, caption, summary, summary_caption)))

    def figure(self, figure: SavedFigure | Path, caption: str) -> None:
        """A figure (as :func:`save_figure` wrote it; a plain PNG path has no phone drawing)."""
        self.blocks.append(("figure", (figure, caption)))

    def appendix(self) -> list[Table]:
        """The tables kept whole in the appendix, in the order of the page."""
        return [b for kind, b in self.blocks if kind == "table" and b.long]

    def write(self, folder: Path) -> tuple[Path, Path]:
        md = folder / "report.md"
        page = folder / "report.html"
        md.write_text(self.markdown(folder), encoding="utf-8")
        page.write_text(self.html(folder), encoding="utf-8")
        return md, page

    # -- rendering ------------------------------------------------------------------------
    def markdown(self, folder: Path) -> str:
        out = [f"# {self.title}", ""]
        labels = _labels(self.appendix())
        notes = _Notes()
        for kind, payload in self.blocks:
            if kind == "heading":
                level, text = payload
                out += ["#" * level + " " + text, ""]
            elif kind == "text":
                out += [str(payload), ""]
            elif kind == "warning":
                out += [f"> **Warning.** {payload}", ""]
            elif kind == "finding":
                text, figure, caption = payload
                out += [str(text), ""]
                if figure is not None:
                    out += [f"![{caption}]({_rel(figure.path, folder)})", ""]
            elif kind == "table":
                if payload.long:
                    out += _md_summary(payload, labels[id(payload)], folder, notes)
                else:
                    out += _md_table(payload, folder, notes)
            elif kind == "figure":
                figure, caption = payload
                path = figure.path if isinstance(figure, SavedFigure) else figure
                out += [f"![{caption}]({_rel(path, folder)})", "", f"*{caption}*", ""]
        if labels:
            out += ["## Appendix: the long tables whole", "",
                    f"Each table of the report longer than {MAIN_ROWS} rows, as its section summarised it.", ""]
            for table in self.appendix():
                out += [f"<a id=\"{labels[id(table)].lower()}\"></a>", ""]
                out += _md_table(table, folder, notes, label=labels[id(table)])
        return "\n".join(out).rstrip() + "\n"

    def html(self, folder: Path) -> str:
        parts = [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{html.escape(self.title)}</title>",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<style>{_CSS}</style>",
            "</head><body>",
            f"<h1>{html.escape(self.title)}</h1>",
        ]
        labels = _labels(self.appendix())
        notes = _Notes()
        for kind, payload in self.blocks:
            if kind == "heading":
                level, text = payload
                parts.append(f"<h{level}>{html.escape(text)}</h{level}>")
            elif kind == "text":
                parts.append(f"<p>{_inline(str(payload))}</p>")
            elif kind == "warning":
                parts.append(f"<p class='warn'><strong>Warning.</strong> {_inline(str(payload))}</p>")
            elif kind == "finding":
                text, figure, caption = payload
                shown = "" if figure is None else (f"<figure>{html_figure(figure, caption, narrow=True)}"
                                                  f"<figcaption>{_inline(caption)}</figcaption></figure>")
                parts.append(f"<div class='finding'><p>{_inline(str(text))}</p>{shown}</div>")
            elif kind == "table":
                if payload.long:
                    parts += _html_summary(payload, labels[id(payload)], folder, notes)
                else:
                    parts += _html_table(payload, folder, notes)
            elif kind == "figure":
                figure, caption = payload
                parts.append(f"<figure>{html_figure(figure, caption)}<figcaption>{_inline(caption)}"
                             "</figcaption></figure>")
        if labels:
            parts += ["<h2 id='appendix'>Appendix: the long tables whole</h2>",
                      f"<p>Each table of the report longer than {MAIN_ROWS} rows, as its section summarised it.</p>"]
            for table in self.appendix():
                parts += _html_table(table, folder, notes, label=labels[id(table)])
        parts.append("</body></html>")
        return "\n".join(parts) + "\n"


@dataclass
class Table:
    """A table block: the table, the CSV it was saved as, its caption and, for a long one,
    what the main text shows instead (:meth:`Report.table`)."""

    df: pd.DataFrame
    source: Path | None
    caption: str
    summary: pd.DataFrame | str | None = None
    summary_caption: str = ""

    @property
    def long(self) -> bool:
        return len(self.df) > MAIN_ROWS


def _labels(tables: list[Table]) -> dict[int, str]:
    return {id(t): f"A{i}" for i, t in enumerate(tables, 1)}


class _Notes:
    """The cell notes of a page (:mod:`cir.study.symbols`), each given once: under the first table
    that shows such a cell."""

    def __init__(self) -> None:
        self.given: set[tuple[str, str]] = set()

    def new(self, df: pd.DataFrame) -> list[str]:
        from cir.study.symbols import cell_keys, note_texts

        keys = [k for k in dict.fromkeys(cell_keys(df, format_table(df))) if k not in self.given]
        self.given.update(keys)
        return note_texts(keys)


def _where(table: Table, label: str, folder: Path) -> str:
    """Where a long table is whole: its appendix label and CSV."""
    csv = f" and `{_rel(table.source, folder)}`" if table.source is not None else ""
    return f"The whole table, {len(table.df):,} rows: Appendix {label}{csv}."


def _caption(table: Table, df: pd.DataFrame, label: str) -> str:
    if df is not table.df and table.summary_caption:
        return table.summary_caption
    return (label + ". " if label else "") + table.caption


def _md_table(table: Table, folder: Path, notes: _Notes, df: pd.DataFrame | None = None,
              label: str = "") -> list[str]:
    df = table.df if df is None else df
    caption = _caption(table, df, label)
    out = [f"*{caption}*", ""] if caption else []
    out += [markdown_table(df), ""]
    given = notes.new(df)
    if given:
        out += ["<sub>" + "; ".join(given) + ".</sub>", ""]
    if table.source is not None and df is table.df:
        out += [f"<sub>source: `{_rel(table.source, folder)}`</sub>", ""]
    return out


def _md_summary(table: Table, label: str, folder: Path, notes: _Notes) -> list[str]:
    where = _where(table, label, folder)
    if isinstance(table.summary, pd.DataFrame):
        return [*_md_table(table, folder, notes, df=table.summary), f"<sub>{where}</sub>", ""]
    said = f"{table.summary} " if table.summary else ""
    return [f"*{table.caption}*: {said}{where}", ""] if table.caption else [f"{said}{where}", ""]


def _html_table(table: Table, folder: Path, notes: _Notes, df: pd.DataFrame | None = None,
                label: str = "") -> list[str]:
    df = table.df if df is None else df
    parts = []
    anchor = f" id='{label.lower()}'" if label else ""
    caption = _caption(table, df, label)
    if caption:
        parts.append(f"<p class='cap'{anchor}><em>{_inline(caption)}</em></p>")  # `code` as code, as in the text
    parts.append(html_table(df))
    given = notes.new(df)
    if given:
        parts.append("<p class='note'>" + "; ".join(_inline(g) for g in given) + ".</p>")
    if table.source is not None and df is table.df:
        parts.append(f"<p class='src'>source: <code>{html.escape(_rel(table.source, folder))}</code></p>")
    return parts


def _html_summary(table: Table, label: str, folder: Path, notes: _Notes) -> list[str]:
    where = _inline(_where(table, label, folder)).replace(
        f"Appendix {label}", f"<a href='#{label.lower()}'>Appendix {label}</a>", 1)
    if isinstance(table.summary, pd.DataFrame):
        return [*_html_table(table, folder, notes, df=table.summary), f"<p class='src'>{where}</p>"]
    said = f"{_inline(table.summary)} " if table.summary else ""
    cap = f"<em>{_inline(table.caption)}</em>: " if table.caption else ""
    return [f"<p>{cap}{said}{where}</p>"]


_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;"
    "line-height:1.45;color:#222}"
    ".tbl{max-width:100%;overflow-x:auto;margin:.3em 0 .2em}"
    "table{border-collapse:collapse;font-size:.85em}"
    "th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3;font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}"
    "figure{margin:1em 0}img{max-width:100%;height:auto;border:1px solid #eee}"
    f"@media (max-width:{PHONE_BREAK_PX}px){{figure img{{max-width:min(100%,520px)}}}}"
    ".src{color:#777;font-size:.8em;margin-top:0}.cap{margin-bottom:0}"
    ".warn{background:#fff4e5;border-left:4px solid #e69f00;padding:.5em .8em}"
    "figcaption{font-style:italic;color:#444}code{background:#f5f5f5;padding:0 .2em}"
    ".note{color:#555;font-size:.8em;margin:.1em 0}"
    # a finding beside its figure (drawn for a narrow column); one under the other on a narrow screen
    ".finding{margin:1em 0}.finding p{margin-top:0}.finding figure{margin:.3em 0}"
    f"@media (min-width:{PHONE_BREAK_PX + 1}px){{.finding{{display:grid;"
    "grid-template-columns:minmax(0,1fr) 360px;gap:1.2em;align-items:start}}"
)


def html_figure(figure: SavedFigure | Path, caption: str, narrow: bool = False) -> str:
    """The figure embedded: the wide drawing, and below :data:`PHONE_BREAK_PX` the one drawn for a
    phone (``narrow``: that one at every width, for a column beside a finding); each with its
    width and smallest axis text in pixels (``data-*``)."""
    if not isinstance(figure, SavedFigure):
        data = base64.b64encode(Path(figure).read_bytes()).decode("ascii")
        return f"<img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'>"
    phone = base64.b64encode(figure.phone).decode("ascii")
    if narrow:
        return (f"<img alt='{html.escape(caption)}' src='data:image/png;base64,{phone}' "
                f"data-width='{figure.width_px}' data-text-px='{figure.text_px}' "
                f"data-phone-width='{figure.phone_width_px}' data-phone-text-px='{figure.phone_text_px}'>")
    wide = base64.b64encode(figure.path.read_bytes()).decode("ascii")
    return (f"<picture><source media='(max-width: {PHONE_BREAK_PX}px)' srcset='data:image/png;base64,{phone}'>"
            f"<img alt='{html.escape(caption)}' src='data:image/png;base64,{wide}' "
            f"data-width='{figure.width_px}' data-text-px='{figure.text_px}' "
            f"data-phone-width='{figure.phone_width_px}' data-phone-text-px='{figure.phone_text_px}'></picture>")


def html_table(df: pd.DataFrame) -> str:
    """A DataFrame as an HTML table in a scroll box: numbers right-aligned, text left-aligned,
    floats rounded (:func:`format_table`), headers and text cells that may wrap after an
    underscore (a long policy name need not widen its column), and one header row whatever the
    columns' index is named."""
    numeric = [df[c].dtype.kind in "iufb" for c in df.columns]
    shown = format_table(df)

    def cell(tag: str, text: str, num: bool) -> str:
        return f"<{tag} class='num'>{text}</{tag}>" if num else f"<{tag}>{text}</{tag}>"

    def wrappable(value: object) -> str:
        return html.escape(str(value)).replace("_", "_<wbr>")

    head = "".join(cell("th", wrappable(c), num) for c, num in zip(df.columns, numeric, strict=True))
    rows = ["<tr>" + "".join(cell("td", html.escape(str(v)) if num else wrappable(v), num)
                             for v, num in zip(row, numeric, strict=True)) + "</tr>"
            for row in shown.itertuples(index=False)]
    return f"<div class='tbl'><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def _digits(column: str) -> int:
    """Decimals shown: percentage points to 2, p-values to 4, rates and the rest to 3."""
    if column.endswith("_pp"):
        return 2
    if column.endswith("_p") or column == "p":
        return 4
    return 3


def format_table(df: pd.DataFrame) -> pd.DataFrame:
    """Floats as short strings (see :func:`_digits`); NaN and None as ``-``."""
    out = df.copy()
    for column in out.columns:
        digits = _digits(str(column))
        if pd.api.types.is_float_dtype(out[column]):
            out[column] = [format_number(v, digits) for v in out[column]]
        elif out[column].dtype == object:  # e.g. a threshold that is None (never passes)
            out[column] = [format_number(v, digits) if v is None or isinstance(v, float) else v
                           for v in out[column]]
    return out


def markdown_table(df: pd.DataFrame) -> str:
    """A DataFrame as a GitHub Markdown table: numbers right-aligned, floats rounded."""
    align = tuple("right" if df[c].dtype.kind in "iufb" else "left" for c in df.columns)
    return format_table(df).to_markdown(index=False, disable_numparse=True, colalign=align)


def format_number(value: float | None, digits: int) -> str:
    """``value`` with ``digits`` decimals; ``-`` for missing; scientific when it would round to 0."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value != 0 and abs(value) < 10 ** -digits:
        return f"{value:.1e}"
    return f"{value:.{digits}f}"


def counted(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and the noun, singular for one (``1 harm``, ``0 harms``, ``2 replicates``)."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


def _rel(path: Path, folder: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(folder.resolve()))
    except ValueError:
        return str(path)


def _inline(text: str) -> str:
    """Escape, then render the two Markdown inlines the report uses: `code` and **bold**."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", escaped)
