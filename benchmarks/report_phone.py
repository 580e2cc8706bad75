"""How a report page's figures read on a phone, measured in headless Chromium (``apt-get install chromium``).

    python benchmarks/report_phone.py OUT [--sizes-from OTHER_OUT] [--shots DIR]

Opens ``OUT/report.html`` at 1280 and 390 px and prints, per figure: the image the browser
chose (``wide`` or ``phone``), how much it is scaled down (natural pixels / shown CSS px), and
the height in CSS px at which its smallest axis text (tick and axis labels) is shown. A page
carries each figure's smallest axis text in pixels (``data-text-px``, ``cir.study.page``); a
page without it (one written before) takes the sizes of ``--sizes-from``'s page, the same
study's figures drawn by the same code (their PNGs are byte-identical: ``study_digest.py``).
``--shots DIR`` keeps a screenshot of the first screen at each width. The measuring is the
report test's own (``tests/study/test_page.py``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.study.test_page import measure, smallest_text_css_px  # noqa: E402


def _sizes(page: Path, folder: Path) -> dict[str, dict]:
    return {f["caption"]: f for f in measure(page, 1280, folder)["figures"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--sizes-from", default=None)
    ap.add_argument("--shots", default=None)
    args = ap.parse_args()
    if args.shots:
        import os

        os.environ["CIR_SCREENSHOTS"] = args.shots
    page = Path(args.out) / "report.html"
    with tempfile.TemporaryDirectory() as tmp:
        sizes = _sizes(Path(args.sizes_from) / "report.html", Path(tmp)) if args.sizes_from else {}
        for width in (1280, 390):
            m = measure(page, width, Path(tmp))
            print(f"== {page} at {width} px (page {m['page']} px wide, viewport {m['viewport']})")
            for f in m["figures"]:
                known = f if f.get("wide_width") else {**sizes.get(f["caption"], {}), **{
                    k: f[k] for k in ("width", "natural", "caption")}}
                text = smallest_text_css_px(known) if known.get("wide_width") else None
                drawn = "phone" if known.get("phone_width") and f["natural"] == known["phone_width"] else "wide"
                shown = f"{text:5.1f} CSS px" if text is not None else "    ? CSS px"
                print(f"  {drawn:5}  scaled 1/{f['natural'] / f['width']:.2f}  smallest axis text {shown}  "
                      f"{f['caption'][:70]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
