"""report.html fits the page: measured in headless Chromium, not guessed from the HTML.

Run by .ci/run after the quick reproduction (Debian's `chromium` installed there):
`CIR_OUT=DIR pytest -m report`, DIR being the `--out` of `cir reproduce --quick`, and again
with DIR = `data` (the committed study's pooled report).
The page shows before it tabulates: a figure beside the findings and the first section's figure
within one screen after them, at 1280 and at 390 px, and no table of the main text longer than
``cir.study.page.MAIN_ROWS`` rows (the longer ones are whole in the appendix).
At a 1280-px-wide window no table is wider than its text column (so none needs its
scroll box) and no figure is wider than the viewport or scaled down so far that its text
becomes unreadable; at 760 px the page itself never scrolls sideways (wide tables scroll
inside their own box); at 390 px, a phone's width, every figure is the one drawn for a phone
and its smallest axis text (tick and axis labels) is shown at least MIN_TEXT_CSS_PX tall.
``CIR_SCREENSHOTS=DIR`` keeps a screenshot of the page's first screen at 1280 and 390 px there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.report

#: A figure may be drawn at most this much smaller than its pixels (130 dpi, 8-pt text and up).
MAX_SHRINK = 1.6
#: The smallest axis text of a figure on a phone, in CSS px (11 px is the least a phone's own
#: text uses; 10 leaves room for rounding)
MIN_TEXT_CSS_PX = 10.0

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]

MEASURE = """<script>
// where a reader meets things, in CSS px from the top of the page: the end of the findings (the
// next section's heading), the first figure; and the table rows before the appendix and in it
function layout() {
  const top = (e) => e.getBoundingClientRect().top + window.scrollY;
  const h2 = [...document.querySelectorAll("h2")];
  const findings = h2.findIndex((h) => h.textContent.trim() === "Findings");
  const after = findings >= 0 ? h2[findings + 1] : null;
  const appendix = document.getElementById("appendix");
  const inMain = (e) => !appendix || (appendix.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_PRECEDING);
  const rows = (main) => [...document.querySelectorAll("table tbody tr")].filter((r) => !!inMain(r) === main).length;
  const imgs = [...document.querySelectorAll("figure img")];
  const end = after ? top(after) : 0;
  const next = imgs.find((i) => top(i) >= end);
  return {screen: window.innerHeight, findings_end: after ? end : null,
          first_figure: imgs.length ? top(imgs[0]) : null, next_figure: next ? top(next) : null,
          rows_main: rows(true), rows_appendix: rows(false),
          main_tables: [...document.querySelectorAll("table")].filter((t) => !!inMain(t)).map((t) => ({
            rows: t.querySelectorAll("tbody tr").length,
            caption: (t.parentElement.previousElementSibling || {}).textContent || ""}))};
}
window.addEventListener("load", () => {
  const box = (e) => e.getBoundingClientRect().width;
  const out = {
    viewport: document.documentElement.clientWidth,
    page: document.documentElement.scrollWidth,
    tables: [...document.querySelectorAll("table")].map((t) => ({
      width: box(t), column: box(t.parentElement.parentElement),
      caption: (t.parentElement.previousElementSibling || {}).textContent || ""})),
    figures: [...document.querySelectorAll("img")].map((i) => ({
      width: box(i), natural: i.naturalWidth, caption: i.alt, wide_width: +i.dataset.width,
      text_px: +i.dataset.textPx, phone_width: +i.dataset.phoneWidth, phone_text_px: +i.dataset.phoneTextPx})),
    layout: layout(),
  };
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
  if (window.parent !== window) window.parent.postMessage(pre.textContent, "*");
});
</script>"""

#: Headless Chromium's window is at least 500 px wide: a narrower screen is a frame of that
#: width in a page (its media queries and layout are the frame's), which passes the measurement up.
FRAME = """<!doctype html><html><body style="margin:0">
<iframe src="{src}" style="width:{width}px;height:{height}px;border:0;display:block"></iframe>
<script>window.addEventListener("message", (e) => {{
  const pre = document.createElement("pre"); pre.id = "measured"; pre.textContent = e.data;
  document.body.appendChild(pre); }});</script></body></html>"""
MIN_WINDOW = 500


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed (apt-get install -y chromium)")
    return found


def measure(page: Path, width: int, tmp_path: Path) -> dict:
    """Open ``page`` at ``width`` px and return what the browser laid out (and, with
    ``CIR_SCREENSHOTS``, keep a screenshot of its first screen)."""
    probe = tmp_path / f"probe-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    profile = tmp_path / f"profile-{width}"
    height = 844 if width < MIN_WINDOW else 900
    opened, window = probe, width
    if width < MIN_WINDOW:
        opened, window = tmp_path / f"frame-{width}.html", MIN_WINDOW
        opened.write_text(FRAME.format(src=probe.name, width=width, height=height), encoding="utf-8")
    flags = [*CHROMIUM_FLAGS, "--hide-scrollbars"] if width < MIN_WINDOW else CHROMIUM_FLAGS  # a phone's overlay
    done = subprocess.run(
        [chromium(), *flags, f"--user-data-dir={profile}", f"--window-size={window},{height}",
         "--virtual-time-budget=10000", "--dump-dom", opened.as_uri()],
        capture_output=True, text=True, timeout=180, check=False)
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium printed no measurement (exit {done.returncode}): {done.stderr[-2000:]}"
    shots = os.environ.get("CIR_SCREENSHOTS")
    if shots:
        shot = Path(shots) / f"{page.parent.name}-{width}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        framed = opened if width < MIN_WINDOW else page.resolve()
        subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={window},{height}",
                        "--virtual-time-budget=10000", "--hide-scrollbars", f"--screenshot={shot}", framed.as_uri()],
                       capture_output=True, timeout=180, check=False)
        if width < MIN_WINDOW and shot.exists():  # the frame alone
            from PIL import Image

            Image.open(shot).crop((0, 0, width, height)).save(shot)
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def smallest_text_css_px(figure: dict) -> float | None:
    """The height in CSS px at which a figure's smallest axis text is shown: its height in the
    image the browser chose (the wide drawing or the phone's) times the image's scale."""
    if not figure["wide_width"]:
        return None  # a figure embedded without its measurements
    phone = figure["natural"] == figure["phone_width"]
    return (figure["phone_text_px"] if phone else figure["text_px"]) * figure["width"] / figure["natural"]


@pytest.fixture(scope="module")
def page() -> Path:
    out = os.environ.get("CIR_OUT")
    if not out or not (Path(out) / "report.html").exists():
        pytest.fail("set CIR_OUT to the output folder of `cir reproduce --quick --out DIR`")
    return Path(out) / "report.html"


def test_tables_and_figures_fit_a_1280_px_window(page: Path, tmp_path: Path):
    m = measure(page, 1280, tmp_path)
    assert m["tables"] and m["figures"]
    assert m["page"] <= m["viewport"]
    wide = [(t["caption"][:60], round(t["width"]), round(t["column"])) for t in m["tables"]
            if t["width"] > t["column"] + 1]
    assert not wide, f"tables wider than the text column: {wide}"
    raw = [t["caption"][:60] for t in m["tables"] if "`" in t["caption"]]
    assert not raw, f"captions show markdown's backticks (HTML captions are plain text): {raw}"
    big = [(f["caption"][:60], round(f["width"])) for f in m["figures"] if f["width"] > m["viewport"]]
    assert not big, f"figures wider than the viewport: {big}"
    # a wide drawing is scaled down at most MAX_SHRINK; one drawn for a narrow column (beside a
    # finding: the phone's drawing) is read by its smallest axis text, as on a phone
    narrow = [f for f in m["figures"] if f["wide_width"] and f["natural"] == f["phone_width"]]
    shrunk = [(f["caption"][:60], f["natural"], round(f["width"])) for f in m["figures"]
              if f not in narrow and f["natural"] > MAX_SHRINK * f["width"]]
    assert not shrunk, f"figures scaled down more than {MAX_SHRINK}x (text unreadable): {shrunk}"
    small = [(f["caption"][:60], round(smallest_text_css_px(f), 1)) for f in narrow
             if smallest_text_css_px(f) < MIN_TEXT_CSS_PX]
    assert not small, f"axis text below {MIN_TEXT_CSS_PX} CSS px beside the findings: {small}"


@pytest.mark.parametrize("width", [1280, 390])
def test_the_page_shows_before_it_tabulates(page: Path, tmp_path: Path, width: int):
    """A figure beside the findings, and the first section's figure within one screen after them;
    every table of the main text at most MAIN_ROWS rows (the longer ones whole in the appendix)."""
    from cir.study.page import MAIN_ROWS

    m = measure(page, width, tmp_path)["layout"]
    print(f"\n{width} px: first figure {m['first_figure']:.0f} px from the top, the findings end at "
          f"{m['findings_end']:.0f} px, the next figure at {m['next_figure']:.0f} px (a screen is {m['screen']} px); "
          f"{m['rows_main']} table rows in {len(m['main_tables'])} tables of the main text, "
          f"{m['rows_appendix']} in the appendix")
    assert m["findings_end"] is not None and m["first_figure"] is not None
    assert m["first_figure"] < m["findings_end"], "no figure beside the findings"
    assert m["next_figure"] is not None and m["next_figure"] - m["findings_end"] <= m["screen"], \
        "the first figure after the findings is more than a screen below them"
    long = [(t["caption"][:60], t["rows"]) for t in m["main_tables"] if t["rows"] > MAIN_ROWS]
    assert not long, f"tables of the main text longer than {MAIN_ROWS} rows: {long}"


def test_a_narrow_window_never_scrolls_sideways(page: Path, tmp_path: Path):
    m = measure(page, 760, tmp_path)
    assert m["page"] <= m["viewport"], "the page is wider than a 760-px window"
    assert all(f["width"] <= m["viewport"] for f in m["figures"])


def test_every_figure_reads_on_a_phone(page: Path, tmp_path: Path):
    m = measure(page, 390, tmp_path)
    assert m["page"] <= m["viewport"], "the page is wider than a 390-px screen"
    measured = [(f["caption"][:50], smallest_text_css_px(f), f["natural"] == f["phone_width"]) for f in m["figures"]]
    if m["figures"] and all(text is None for _, text, _ in measured):
        pytest.skip(f"{page} was written before its figures were drawn for a phone (no data-text-px); "
                    "write it again (cir reproduce, or experiments/publish.py for data/) to measure them")
    print("\n".join(f"390 px: {text:.1f} CSS px  phone drawing {phone}  {caption}" for caption, text, phone in measured
                    if text is not None))
    assert all(phone for _, text, phone in measured if text is not None), "a wide drawing on a phone"
    small = [(caption, round(text, 1)) for caption, text, _ in measured if text is not None and text < MIN_TEXT_CSS_PX]
    assert not small, f"axis text below {MIN_TEXT_CSS_PX} CSS px at 390 px: {small}"
