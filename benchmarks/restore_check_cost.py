"""What the replayer's restore check costs a study: ``cir reproduce --quick`` with each
``--restore-check`` (``task``: once per task, the check before branch points; ``branches``:
every branch point, the next env action; ``full``: every branch point, every later env
action), alternately in one sitting, each beside the others; and whether the outputs are the
baseline's (``benchmarks/study_digest.py``: byte-identical tables, timings aside).

    python benchmarks/restore_check_cost.py --family alfworld --baseline /work/baseline/quick-a84a68f
    python benchmarks/restore_check_cost.py --family textworld-cooking --baseline OUT_OF_A_BASELINE

With ``--per-task DIR`` it measures instead, in this process, each task of a folder through
:func:`cir.pairs.replay.run_task_pairs` on the primary cohort's grid (4 conditions x delays
0, 1, 2, 4 x refresh, replan, rewind), every mode on every task in turn (rotated), with the
process CPU seconds of each and the real env steps each made (a counting wrapper around the
family's env: the check's steps are a mode's minus ``task``'s, a count no load changes), and
that the rows and costs of every mode are the same:

    python benchmarks/restore_check_cost.py --family alfworld --per-task /work/baseline/quick-a84a68f/tasks/valid_unseen

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
    cmd = [sys.executable, "-m", "cir", "reproduce", "--quick", "--family", env, "--out", str(out), "--quiet",
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


class _StepCounter:
    """The family's env, its real steps counted (every call of ``step``)."""

    def __init__(self, env: object) -> None:
        self.env, self.steps = env, 0
        self.refresh_query = getattr(env, "refresh_query", "look")

    def reset(self) -> str:
        return self.env.reset()  # type: ignore[attr-defined]

    def step(self, action: str) -> tuple[str, bool, bool]:
        self.steps += 1
        return self.env.step(action)  # type: ignore[attr-defined]

    def snapshot(self) -> object:
        return self.env.snapshot()  # type: ignore[attr-defined]

    def restore(self, snapshot: object) -> None:
        self.env.restore(snapshot)  # type: ignore[attr-defined]

    def close(self) -> None:
        if callable(getattr(self.env, "close", None)):
            self.env.close()  # type: ignore[attr-defined]


def per_task(env: str, folder: Path, modes: list[str], n: int) -> int:
    """Each mode on each task in this process: CPU seconds and real env steps (module docstring)."""
    from cir.families.registry import get_family, make_agent
    from cir.pairs.replay import ReplaySettings, run_task_pairs

    family = get_family(env)
    settings = ReplaySettings(operations=("refresh", "replan", "rewind"))
    tasks = family.load_tasks(folder)[:n]
    cpu = {m: 0.0 for m in modes}
    steps = {m: 0 for m in modes}
    same = True
    for i, task in enumerate(tasks):
        order = modes[i % len(modes):] + modes[: i % len(modes)]
        got = {}
        for mode in order:
            counted = _StepCounter(family.env(task))
            agent = make_agent("builtin", family=family)
            t0 = time.process_time()
            result = run_task_pairs(task, agent, counted, settings, extractor=family.extractor, restore_check=mode)
            cpu[mode] += time.process_time() - t0
            steps[mode] += counted.steps
            counted.close()
            got[mode] = (result.rows, result.costs)
        same = same and all(v == got[modes[0]] for v in got.values())
        print(json.dumps({"task": str(task.task_id), **{m: got[m][1]["env_steps"] for m in modes}}), flush=True)
    base = modes[0]
    print(f"\n{env}, {len(tasks)} tasks of {folder}, in this process")
    print("| --restore-check | CPU s | CPU / task | real env steps | of which the check's | rows and costs |")
    print("|---|---|---|---|---|---|")
    for m in modes:
        print(f"| {m} | {cpu[m]:.1f} | {cpu[m] / cpu[base]:.3f} | {steps[m]} | {steps[m] - steps[base]} "
              f"(+{100 * (steps[m] - steps[base]) / steps[base]:.1f}%) | {'same' if same else 'DIFFERENT'} |")
    return 0 if same else 1


def _span(rows: list[dict[str, float | str]], key: str) -> str:
    values = [float(x[key]) for x in rows]
    return f"{min(values):.1f}-{max(values):.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="alfworld")
    ap.add_argument("--baseline", type=Path, help="a `cir reproduce --quick` output of the code before")
    ap.add_argument("--per-task", type=Path, default=None, metavar="DIR", help="measure per task, in this process")
    ap.add_argument("--n", type=int, default=8, help="tasks of --per-task")
    ap.add_argument("--out", default=Path("/tmp/restore-check-cost"), type=Path)
    ap.add_argument("--modes", default="task,branches,full")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    if args.per_task is not None:
        return per_task(args.env, args.per_task, modes, args.n)
    if args.baseline is None:
        ap.error("--baseline is needed (or --per-task DIR)")
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
