"""report.html fits the page: measured in headless Chromium, not guessed from the HTML.

Run by .ci/run after the quick reproduction (Debian's `chromium` installed there):
`CIR_OUT=DIR pytest -m report`, DIR being the `--out` of `cir reproduce --quick`, and again
with DIR = `data` (the committed study's pooled report).
At a 1280-px-wide window no table is wider than its text column (so none needs its
scroll box) and no figure is wider than the viewport or scaled down so far that its text
becomes unreadable; at 760 px the page itself never scrolls sideways (wide tables scroll
inside their own box).
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

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]

MEASURE = """<script>
window.addEventListener("load", () => {
  const box = (e) => e.getBoundingClientRect().width;
  const out = {
    viewport: document.documentElement.clientWidth,
    page: document.documentElement.scrollWidth,
    tables: [...document.querySelectorAll("table")].map((t) => ({
      width: box(t), column: box(t.parentElement.parentElement),
      caption: (t.parentElement.previousElementSibling || {}).textContent || ""})),
    figures: [...document.querySelectorAll("img")].map((i) => ({
      width: box(i), natural: i.naturalWidth, caption: i.alt})),
  };
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed (apt-get install -y chromium)")
    return found


def measure(page: Path, width: int, tmp_path: Path) -> dict:
    """Open ``page`` at ``width`` px and return what the browser laid out."""
    probe = tmp_path / f"probe-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    profile = tmp_path / f"profile-{width}"
    done = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},900",
         "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=180, check=False)
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium printed no measurement (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


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
    shrunk = [(f["caption"][:60], f["natural"], round(f["width"])) for f in m["figures"]
              if f["natural"] > MAX_SHRINK * f["width"]]
    assert not shrunk, f"figures scaled down more than {MAX_SHRINK}x (text unreadable): {shrunk}"


def test_a_narrow_window_never_scrolls_sideways(page: Path, tmp_path: Path):
    m = measure(page, 760, tmp_path)
    assert m["page"] <= m["viewport"], "the page is wider than a 760-px window"
    assert all(f["width"] <= m["viewport"] for f in m["figures"])
