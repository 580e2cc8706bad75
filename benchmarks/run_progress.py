"""One ``run_experiment`` with the progress bar (and the reports from inside the tasks) on
or off: time the two against each other to see what in-task progress costs.

    python benchmarks/run_progress.py --tasks DIR --progress on  [--jobs 2] [--n 6]
    python benchmarks/run_progress.py --tasks DIR --progress off [--jobs 2] [--n 6]

Each call runs the built-in agent on the first ``n`` tasks of DIR with the paper's grid into
a fresh temporary run folder, and prints the paired table's digest, which must be the same
both ways (progress changes no result).
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", required=True)
    parser.add_argument("--progress", choices=["on", "off"], required=True)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--n", type=int, default=6)
    args = parser.parse_args()  # before the engine: fast_downward rewrites sys.argv

    from cir.families.alfworld.tasks import load_tasks
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import RunSettings

    tasks = load_tasks(args.tasks)[: args.n]
    with tempfile.TemporaryDirectory(prefix="cir-progress-") as tmp:
        run_experiment(tasks, Path(tmp) / "run", RunSettings(jobs=args.jobs),
                       tasks_source=args.tasks, progress=args.progress == "on",
                       echo=lambda line: None)
        digest = hashlib.sha256((Path(tmp) / "run" / "paired.csv").read_bytes()).hexdigest()
    print(f"progress {args.progress}, jobs {args.jobs}, {len(tasks)} tasks: paired.csv sha256 {digest[:16]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
