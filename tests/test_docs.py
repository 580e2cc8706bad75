"""Every document the code and the documentation cite is in the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Files a study writes and benchmarks write (cited as outputs, not as documents of the repository).
OUTPUTS = {"report.md", "length_test.md"}  # length_test.md: benchmarks/length_test.py's table
CITED = re.compile(r"(?<![\w/.-])((?:\.\./)*[\w./-]*[\w-]\.md)\b")


def _sources() -> list[Path]:
    files = [*ROOT.glob("cir/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/*.py"),
             *ROOT.glob("examples/*.py"), *ROOT.glob("*.md"), *ROOT.glob("docs/*.md"),
             *ROOT.glob("experiments/*.md"), *ROOT.glob("benchmarks/*.md")]
    return [f for f in files if f.name != "test_docs.py"]


def test_cited_documents_exist():
    missing = []
    for source in _sources():
        for cited in CITED.findall(source.read_text(encoding="utf-8")):
            if Path(cited).name in OUTPUTS:
                continue
            if not ((source.parent / cited).exists() or (ROOT / cited).exists()):
                missing.append(f"{source.relative_to(ROOT)}: {cited}")
    assert not missing, missing


def test_the_design_page_covers_the_contracts():
    design = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    for part in ("## Vocabulary", "## Data flow", "**Agent**", "**Env**", "refresh_query", "**Harness**",
                 "**Paired replayer**", "**Tool world**", "**Paired table**", "**Feature extractor**", "**Router artifact**",
                 "## The built-in agent as an instrument", "## The explanation trace", "placebo"):
        assert part in design, part
