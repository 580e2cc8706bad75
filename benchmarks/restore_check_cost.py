"""What the replayer's restore check costs a study: ``cir reproduce --quick`` with each
``--restore-check`` (``task``: once per task, the check before branch points; ``branches``:
every branch point, the next env action; ``full``: every branch point, every later env
action), alternately in one sitting, each beside the others; and whether the outputs are the
baseline's (``benchmarks/study_digest.py``: byte-identical tables, timings aside).

    python benchmarks/restore_check_cost.py --env alfworld --baseline /work/baseline/quick-a84a68f
    python benchmarks/restore_check_cost.py --env textworld-cooking --baseline OUT_OF_A_BASELINE

Each study starts from a copy of the baseline's ``tasks`` folder (the study leaves generated
tasks as they are), so the time is that of the runs and the analysis, not of generating the
same games again. Per study: the wall time of the command, the runs' seconds (``study.json``),
and the CPU seconds of the command and every process it started (user + system, from the
kernel's account of waited-for children). Prints one line per study, then per mode the
median and range, and the ratio of the medians to ``task``'s.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_study(env: str, mode: str, baseline: Path, out: Path, jobs: int) -> dict[str, float | str]:
    """One quick study into ``out`` (from a copy of the baseline's tasks): its times and digest verdict."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copytree(baseline / "tasks", out / "tasks")
    cmd = [sys.executable, "-m", "cir", "reproduce", "--quick", "--env", env, "--out", str(out), "--quiet",
           "--jobs", str(jobs), "--restore-check", mode]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    timings = json.loads((out / "study.json").read_text())["timings"]
    digest = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "study_digest.py"), str(baseline), str(out)],
                            cwd=ROOT, capture_output=True, text=True)
    different = [line for line in digest.stdout.splitlines() if not line.startswith("same")]
    return {"mode": mode, "wall_s": round(wall, 1), "runs_s": float(timings["runs_seconds"]),
            "cpu_s": round(cpu, 1), "digest": "same" if digest.returncode == 0 else f"DIFFERENT: {different[:3]}"}


def _span(rows: list[dict[str, float | str]], key: str) -> str:
    values = [float(x[key]) for x in rows]
    return f"{min(values):.1f}-{max(values):.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--baseline", required=True, type=Path, help="a `cir reproduce --quick` output of the code before")
    ap.add_argument("--out", default=Path("/tmp/restore-check-cost"), type=Path)
    ap.add_argument("--modes", default="task,branches,full")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    results = []
    for r in range(args.rounds):
        order = modes if r % 2 == 0 else modes[::-1]  # A B C, C B A, ...: drift falls on every mode alike
        for mode in order:
            res = one_study(args.env, mode, args.baseline, args.out / f"{mode}-{r}", args.jobs)
            results.append(res)
            print(json.dumps(res), flush=True)
    print(f"\n{args.env}, {args.rounds} rounds, --jobs {args.jobs}")
    print("| --restore-check | wall s (median, range) | runs s | CPU s | wall / task | CPU / task | digest |")
    print("|---|---|---|---|---|---|---|")
    med = {m: {k: statistics.median(float(x[k]) for x in results if x["mode"] == m) for k in ("wall_s", "runs_s", "cpu_s")}
           for m in modes}
    base = modes[0]
    for m in modes:
        rows = [x for x in results if x["mode"] == m]
        verdict = "same" if all(x["digest"] == "same" for x in rows) else "DIFFERENT"
        print(f"| {m} | {med[m]['wall_s']:.1f} ({_span(rows, 'wall_s')}) | {med[m]['runs_s']:.1f} "
              f"({_span(rows, 'runs_s')}) | {med[m]['cpu_s']:.1f} ({_span(rows, 'cpu_s')}) | {med[m]['wall_s'] / med[base]['wall_s']:.3f} | "
              f"{med[m]['cpu_s'] / med[base]['cpu_s']:.3f} | {verdict} |")
    return 0 if all(x["digest"] == "same" for x in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
