"""Draw the reference study's pooled report again with this cir's report code.

    python experiments/redraw.py WORK          # then: python experiments/publish.py WORK

lays ``data/`` out in ``WORK`` as the ``cir reproduce --replicates`` output it was published
from (each replicate's run folders, tables, routers and manifests; the study's settings),
checks that ``experiments/`` holds the study's experiments, and writes the pooled tables,
figures and ``report.md`` / ``report.html`` there: the pooled analysis computed again from the
run folders with ``data/study.json``'s settings, so its tables are the published ones when
nothing but the page changed (``git diff data/tables`` after publishing says so). The configs of
``experiments/`` must be the study's but for what only the analysis reads (the comparisons an
eval config names); comparisons the study's record does not name were named after it ran, so
they are not drawn as its primary ones. The planted
worlds' rows are not in ``data/`` (``cir reproduce`` fits the worlds again, about half an hour
for 3 x 200 replicates), so their three tables are read as ``data/tables`` holds them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
VALIDATION_TABLES = ("router_validation.csv", "router_validation_margins.csv", "router_validation_criteria.csv")


def lay_out(data: Path, work: Path) -> dict[int, Path]:
    """``data``'s replicates and settings copied into ``work``; the replicates' folders by seed."""
    if work.exists() and any(work.iterdir()):
        raise SystemExit(f"{work}: not empty; give a new folder")
    shutil.copytree(data / "replicates", work / "replicates")
    shutil.copyfile(data / "study.json", work / "study.json")
    (work / "tables").mkdir(parents=True)
    for name in VALIDATION_TABLES:
        shutil.copyfile(data / "tables" / name, work / "tables" / name)
    seeds = json.loads((data / "study.json").read_text(encoding="utf-8"))["replicate_seeds"]
    return {int(s): work / "replicates" / f"seed-{s}" for s in seeds}


def main(argv: list[str] | None = None) -> int:
    from cir.study import validation
    from cir.study.experiments import load_experiments
    from cir.study.pooled import write_pooled_report

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="a new folder to draw the report in")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="the published study (default data/)")
    args = parser.parse_args(argv)
    studies = lay_out(args.data, args.work)
    settings = json.loads((args.work / "study.json").read_text(encoding="utf-8"))["settings"]
    experiments = load_experiments()
    # what the runs were made with must be the same; what the analysis reads of a config beside
    # them (the comparisons it names) may have been added since
    analysis = ("comparisons",)
    if ([{k: v for k, v in e.identity().items() if k not in analysis} for e in experiments]
            != [{k: v for k, v in e.items() if k not in analysis} for e in settings["experiments"]]):
        raise SystemExit("experiments/ no longer holds the study's experiments (data/study.json); the "
                         "report must be drawn from a new `cir reproduce`")

    def published(out: Path, replicates: int, **_: object) -> tuple[pd.DataFrame, ...]:
        return tuple(pd.read_csv(Path(out) / "tables" / name) for name in VALIDATION_TABLES)

    validation.study_validation = published
    # comparisons are primary only when named before the study ran: a record without them has none
    named = {e["name"]: tuple(e.get("comparisons", ())) for e in settings["experiments"]}
    experiments = [replace(e, comparisons=named.get(e.name, ())) for e in experiments]
    report = write_pooled_report(args.work, experiments, studies, resamples=settings["resamples"],
                                 seed=settings["seed"], agent=settings["agent"], quick=settings["quick"],
                                 validation=settings.get("validation_replicates", 200))
    print(f"{report} and {report.with_suffix('.html')}; publish with: python experiments/publish.py {args.work}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
