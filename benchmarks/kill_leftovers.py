"""Processes left 10 s after ``kill -9`` of ``cir run --jobs 2``, over many kills at random times.

Each kill starts a fresh run and SIGKILLs the ``cir`` process after a random delay (seeded,
uniform between ``--from`` and ``--to`` seconds: while the workers start, load their first
task, run, report progress), then counts every process the run had started that is still
alive ``--wait`` seconds later (tests/support/orphans.py, a child subreaper: nothing escapes
the count by being re-parented). Runs alternate between the key-and-door family (slowed
to 20 ms a step) and, with ``--alfworld-tasks``, ALFWorld's engine, with and without the
progress bar. Prints one line per kill and the total left (it must be 0).

    python benchmarks/kill_leftovers.py --kills 12 --alfworld-tasks /work/baseline/quick-a84a68f/tasks/valid_unseen
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.orphans import kill_and_count  # noqa: E402

KEYDOOR = "tests.support.keydoor:FAMILY"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--from", dest="start", type=float, default=0.3)
    ap.add_argument("--to", dest="stop", type=float, default=12.0)
    ap.add_argument("--wait", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alfworld-tasks", default=None, metavar="DIR", help="also kill ALFWorld runs of these tasks")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="cir-kills-"))
    subprocess.run([sys.executable, "-m", "cir", "tasks", "generate", "--family", KEYDOOR, "--split", "train",
                    "--n", "40", "--out", str(work / "kd")], cwd=ROOT, check=True, capture_output=True)
    kinds = [("keydoor", ["--family", KEYDOOR, "--tasks", str(work / "kd" / "train")])]
    if args.alfworld_tasks:
        kinds.append(("alfworld", ["--tasks", args.alfworld_tasks]))
    env = {**os.environ, "KEYDOOR_STEP_SECONDS": "0.02"}
    total, results = 0, []
    for i in range(args.kills):
        name, run_args = kinds[i % len(kinds)]
        quiet = (i // len(kinds)) % 2 == 0
        after = round(rng.uniform(args.start, args.stop), 2)
        out = work / f"run-{i}"
        cmd = [sys.executable, "-m", "cir", "run", *run_args, "--out", str(out), "--jobs", "2",
               *(["--quiet"] if quiet else [])]
        os.chdir(ROOT)
        found = kill_and_count(cmd, after, args.wait, env=env)
        total += found["left"]
        results.append(found)
        print(json.dumps({"kill": i + 1, "run": name, "progress_bar": not quiet, "after_s": after, **found}),
              flush=True)
        shutil.rmtree(out, ignore_errors=True)
    killed = [r for r in results if not r["finished_before_kill"]]
    print(f"\n{len(killed)} of {len(results)} runs killed before they ended (kill -9 of the parent at "
          f"{args.start}-{args.stop} s); helpers alive just before the kills: "
          f"{min(r['helpers_before_kill'] for r in killed)}-{max(r['helpers_before_kill'] for r in killed)}; "
          f"processes left {args.wait:.0f} s after: {total}; the last helper ended within "
          f"{max((r['all_gone_after_s'] or 0) for r in killed):.2f} s of the kill")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if total == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
