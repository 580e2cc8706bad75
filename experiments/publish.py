"""Publish a ``cir reproduce`` output as this repository's reference study.

    python experiments/publish.py STUDY_DIR

copies the study's data into ``data/`` (report, tables, router, study settings, each
cohort's run folder: paired table, run record, episode store; each split's task manifest)
and its figures into ``figures/``, replacing what the two folders held before. The
report's figure links are rewritten to ``../figures/``. The generated games themselves
are left out: ``cir reproduce`` with the settings in ``data/study.json`` rebuilds them
identically, and the manifests list them with their digests.

``data/README.md`` (what the study shows) is written by hand and kept.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_FILES = ("paired.csv", "run.json", "episodes.jsonl.gz")
KEPT = {"README.md"}  # hand-written, not part of the study's output


def _clear(folder: Path) -> None:
    """Remove what a previous publish wrote (everything but the hand-written README)."""
    if not folder.exists():
        return
    for item in folder.iterdir():
        if item.name in KEPT:
            continue
        shutil.rmtree(item) if item.is_dir() else item.unlink()


def publish(study: Path, data: Path, figures: Path) -> list[Path]:
    """Copy ``study`` into ``data`` and ``figures``; the files written."""
    missing = [name for name in ("report.md", "report.html", "router.json", "study.json", "tables", "runs")
               if not (study / name).exists()]
    if missing:
        raise SystemExit(f"{study}: not a finished `cir reproduce` output (no {', '.join(missing)})")
    _clear(data)
    _clear(figures)
    data.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    written = []

    def copy(src: Path, dst: Path) -> None:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        written.append(dst)

    link = Path("..") / figures.relative_to(data.parent) if figures.parent == data.parent else figures
    report = (study / "report.md").read_text(encoding="utf-8").replace("](figures/", f"]({link.as_posix()}/")
    title, _, rest = report.partition("\n")
    report = (f"{title}\n\n> This is the repository's reference study: its data are in `data/` (this "
              f"folder; the generated games themselves are left out, `tasks/` holds their manifests) and "
              f"its figures in `figures/`. `data/README.md` says how it was made.\n{rest}")
    (data / "report.md").write_text(report, encoding="utf-8")
    written.append(data / "report.md")
    for name in ("report.html", "router.json", "study.json"):  # report.html embeds its figures
        copy(study / name, data / name)
    for table in sorted((study / "tables").glob("*.csv")):
        copy(table, data / "tables" / table.name)
    for run in sorted(p for p in (study / "runs").iterdir() if p.is_dir()):
        for name in RUN_FILES:
            if (run / name).exists():
                copy(run / name, data / "runs" / run.name / name)
    for manifest in sorted((study / "tasks").glob("*/manifest.json")):
        copy(manifest, data / "tasks" / manifest.parent.name / "manifest.json")
    for fig in sorted((study / "figures").iterdir()):
        copy(fig, figures / fig.name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path, help="a finished `cir reproduce` output folder")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="where the data go (default data/)")
    parser.add_argument("--figures", type=Path, default=ROOT / "figures",
                        help="where the figures go (default figures/)")
    args = parser.parse_args(argv)
    written = publish(args.study, args.data.resolve(), args.figures.resolve())
    print(f"{len(written)} files into {args.data} and {args.figures}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
