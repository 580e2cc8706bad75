"""A fixed study cohort with the engine's savings on and off, in one run: CPU, shares, memory.

    python benchmarks/study_bench.py                         # 20 tasks x 4 conditions x 4 delays
    python benchmarks/study_bench.py --n 24 --arms savings,main --json out.json

Each arm runs in a fresh child process (so CPU and peak RSS are its own), one after the
other, ``--repeats`` times in turn (A B C A B C ...); ratios are taken pair by pair.

1. Task generation: the same ``--n`` tasks (valid_unseen, ``--seed``) generated with the
   engine's savings and without them (``cir.families.alfworld.verify``): CPU per task, and the sha256
   of every file of the split (names and bytes), which must be equal.
2. The cohort through ``cir.pairs.run.run_experiment`` (jobs 1, the built-in agent) with
   ``--conditions`` x ``--delays`` x ``--operations``, one arm per engine setting:
   ``savings`` (all of ``cir.families.alfworld.engine.Savings``), ``main`` (only the text memo, what the
   engine ran before them) and ``none`` (textworld's engine unmodified). Per arm: CPU,
   peak RSS, the sha256 of ``paired.csv`` and of the episode store's decompressed lines
   (the per-task wall time ``seconds`` taken out of the task lines; nothing else differs),
   which must be equal across arms; and the shares of CPU time by group, from exclusive
   timers at the group boundaries (wrappers around the env and the agent):

   - load: building the env for a task (game file read, grammar parse, translation);
   - reset, step: the env's ``reset`` and ``step`` (engine text and admissible commands);
   - snapshot/restore: the env's ``snapshot`` and ``restore``;
   - agent: ``agent.act``;
   - rest: everything else (harness, features, hashing, store, pandas).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

ARMS = ("savings", "main", "none")
GROUPS = ("load", "reset", "step", "snapshot/restore", "agent")


def savings_of(arm: str) -> Any:
    from cir.families.alfworld.engine import Savings

    return {"savings": Savings(), "main": replace(Savings.none(), memo_text=True),
            "none": Savings.none()}[arm]


# -- exclusive timers at the group boundaries ------------------------------------------------


class Timers:
    """CPU seconds per group; a group entered inside another pauses the outer one."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(GROUPS, 0.0)
        self._stack: list[list[Any]] = []  # [group, started, time taken by inner groups]

    @contextmanager
    def group(self, name: str) -> Iterator[None]:
        frame = [name, time.process_time(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            self._stack.pop()
            spent = time.process_time() - frame[1]
            self.seconds[name] += spent - frame[2]
            if self._stack:
                self._stack[-1][2] += spent


TIMERS = Timers()


class TimedEnv:
    """The env, with its calls timed (the Env contract only)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self) -> str:
        with TIMERS.group("reset"):
            return self.env.reset()

    def step(self, action: str) -> tuple[str, bool, bool]:
        with TIMERS.group("step"):
            return self.env.step(action)

    def snapshot(self) -> Any:
        with TIMERS.group("snapshot/restore"):
            return self.env.snapshot()

    def restore(self, snapshot: Any) -> None:
        with TIMERS.group("snapshot/restore"):
            self.env.restore(snapshot)


class TimedAgent:
    """The agent, with ``act`` timed (name and settings as the agent's own)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.name = agent.name

    def params(self) -> dict[str, Any]:
        return self.agent.params()

    def act(self, context: list[dict[str, str]]) -> str:
        with TIMERS.group("agent"):
            return self.agent.act(context)


def make_env(task: Any, *, snapshots: str, savings: Any) -> TimedEnv:
    from cir.families.alfworld.env import AlfworldEnv

    with TIMERS.group("load"):
        return TimedEnv(AlfworldEnv(task.game_file, snapshots=snapshots, savings=savings))  # type: ignore[arg-type]


def timed_agent(spec: str, *, seed: int) -> TimedAgent:
    from cir.families import make_agent as build

    return TimedAgent(build(spec, seed=seed))


# -- what a child process does ---------------------------------------------------------------


def tree_sha256(root: Path) -> str:
    """sha256 over every file under ``root``: relative path and bytes, in sorted order."""
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def store_sha256(run_dir: Path) -> str:
    """sha256 of the episode store's decompressed lines, task lines without ``seconds``."""
    h = hashlib.sha256()
    with gzip.open(run_dir / "episodes.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith('{"'):
                rec = json.loads(line)
                if rec.get("kind") == "task":
                    rec.pop("seconds", None)
                    line = json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n"
            h.update(line.encode("utf-8"))
    return h.hexdigest()


def child_generate(cfg: dict[str, Any]) -> dict[str, Any]:
    from cir.families.alfworld.generate import generate_split

    out = Path(cfg["out"])
    t0 = time.process_time()
    generate_split(out, "valid_unseen", cfg["n"], cfg["seed"], progress=False,
                   savings=savings_of(cfg["arm"]))
    cpu = time.process_time() - t0
    return {"cpu_s": cpu, "cpu_per_task_s": cpu / cfg["n"], "split_sha256": tree_sha256(out)}


def child_run(cfg: dict[str, Any]) -> dict[str, Any]:
    import cir.families.alfworld.agent.builtin  # noqa: F401 - imported before the clock starts, as the engine
    import cir.families.alfworld.env  # noqa: F401
    from cir.families.alfworld.tasks import load_tasks
    from cir.pairs.replay import ReplaySettings
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import RunSettings

    settings = ReplaySettings(conditions=tuple(cfg["conditions"]), delays=tuple(cfg["delays"]),
                              operations=tuple(cfg["operations"]))
    tasks = load_tasks(cfg["tasks"])
    out = Path(cfg["out"])
    t0 = time.process_time()
    run_experiment(tasks, out,
                   RunSettings(replay=settings, jobs=1, agent_factory=timed_agent, env_factory=partial(make_env, savings=savings_of(cfg["arm"]))),
                   progress=False, echo=lambda _: None)
    cpu = time.process_time() - t0
    groups = dict(TIMERS.seconds)
    groups["rest"] = cpu - sum(groups.values())
    return {
        "cpu_s": cpu,
        "shares": {k: v / cpu for k, v in groups.items()},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "paired_sha256": hashlib.sha256((out / "paired.csv").read_bytes()).hexdigest(),
        "store_sha256": store_sha256(out),
    }


def in_child(kind: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """Run ``kind`` in a fresh Python process; its JSON result."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--child", kind, json.dumps(cfg), str(result)]
        subprocess.run(cmd, check=True)
        return json.loads(result.read_text())


# -- the benchmark ---------------------------------------------------------------------------


def interleaved(arms: list[str], repeats: int, run: Callable[[str, int], dict[str, Any]]
                ) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
    for r in range(repeats):
        for arm in arms:
            out[arm].append(run(arm, r))
    return out


def ratios(results: dict[str, list[dict[str, Any]]], a: str, b: str, key: str) -> float:
    """Median over repeats of b/a (how many times less ``a`` costs than ``b``)."""
    return statistics.median(rb[key] / ra[key] for ra, rb in zip(results[a], results[b], strict=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20, help="tasks in the cohort (default 20)")
    ap.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    ap.add_argument("--gen-n", type=int, default=None, help="tasks to generate per generation arm "
                    "(default --n)")
    ap.add_argument("--arms", default=",".join(ARMS), help=f"run arms (default {','.join(ARMS)})")
    ap.add_argument("--conditions", default="clean,stale2,stale1,missing")
    ap.add_argument("--delays", default="0,1,2,4")
    ap.add_argument("--operations", default="refresh")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "CONFIG", "RESULT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, cfg, result = args.child
        out = (child_generate if kind == "generate" else child_run)(json.loads(cfg))
        Path(result).write_text(json.dumps(out))
        return 0

    arms = args.arms.split(",")
    unknown = set(arms) - set(ARMS)
    if unknown:
        ap.error(f"--arms: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(ARMS)}")
    grid = {"conditions": args.conditions.split(","), "delays": [int(d) for d in args.delays.split(",")],
            "operations": args.operations.split(",")}
    report: dict[str, Any] = {"n_tasks": args.n, "seed": args.seed, "grid": grid, "repeats": args.repeats}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        gen_n = args.gen_n or args.n

        def gen(arm: str, r: int) -> dict[str, Any]:
            return in_child("generate", {"arm": arm, "n": gen_n, "seed": args.seed,
                                         "out": str(tmp_path / f"gen-{arm}-{r}")})

        generation = interleaved(["savings", "none"], args.repeats, gen)
        shas = {res["split_sha256"] for rs in generation.values() for res in rs}
        report["generation"] = {
            "cpu_per_task_s": {a: statistics.median(x["cpu_per_task_s"] for x in rs)
                               for a, rs in generation.items()},
            "ratio_none_over_savings": ratios(generation, "savings", "none", "cpu_s"),
            "split_sha256": sorted(shas), "identical": len(shas) == 1,
        }
        if args.n > gen_n:
            raise SystemExit(f"--n {args.n} > --gen-n {gen_n}: the cohort comes from the generated split")
        cohort = tmp_path / "gen-savings-0" / "valid_unseen"
        if args.n < gen_n:
            from cir.families.alfworld.tasks import load_tasks

            keep = tmp_path / "cohort"
            for ref in load_tasks(cohort)[: args.n]:
                target = keep / ref.task_id
                target.mkdir(parents=True)
                for f in ref.game_file.parent.iterdir():
                    (target / f.name).write_bytes(f.read_bytes())
            cohort = keep

        def run(arm: str, r: int) -> dict[str, Any]:
            return in_child("run", {"arm": arm, "tasks": str(cohort), **grid,
                                    "out": str(tmp_path / f"run-{arm}-{r}")})

        runs = interleaved(arms, args.repeats, run)
    paired = {x["paired_sha256"] for rs in runs.values() for x in rs}
    store = {x["store_sha256"] for rs in runs.values() for x in rs}
    report["runs"] = {
        arm: {"cpu_s": statistics.median(x["cpu_s"] for x in rs),
              "peak_rss_mb": max(x["peak_rss_mb"] for x in rs),
              "shares": {g: statistics.median(x["shares"][g] for x in rs) for g in rs[0]["shares"]}}
        for arm, rs in runs.items()
    }
    report["paired_sha256"] = sorted(paired)
    report["store_sha256"] = sorted(store)
    report["identical"] = len(paired) == 1 and len(store) == 1
    if "savings" in arms:
        report["cpu_ratio_vs_savings"] = {a: ratios(runs, "savings", a, "cpu_s") for a in arms
                                          if a != "savings"}
    show(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return 0 if report["identical"] and report["generation"]["identical"] else 1


def show(report: dict[str, Any]) -> None:
    g = report["generation"]
    print(f"generation ({report['n_tasks']} valid_unseen tasks, seed {report['seed']}): CPU per task "
          + ", ".join(f"{a} {v:.2f} s" for a, v in g["cpu_per_task_s"].items())
          + f"; none/savings {g['ratio_none_over_savings']:.2f}x; identical files: {g['identical']}")
    grid = report["grid"]
    print(f"\ncir run: {report['n_tasks']} tasks x {len(grid['conditions'])} conditions x "
          f"{len(grid['delays'])} delays x {', '.join(grid['operations'])}, jobs 1")
    groups = list(next(iter(report["runs"].values()))["shares"])
    print(f"{'arm':8s} {'CPU s':>8s} {'peak MB':>8s}  " + " ".join(f"{g:>16s}" for g in groups))
    for arm, r in report["runs"].items():
        print(f"{arm:8s} {r['cpu_s']:8.1f} {r['peak_rss_mb']:8.0f}  "
              + " ".join(f"{r['shares'][g]:16.1%}" for g in groups))
    for arm, ratio in report.get("cpu_ratio_vs_savings", {}).items():
        print(f"CPU {arm} / savings: {ratio:.2f}x")
    print(f"paired.csv sha256 {', '.join(report['paired_sha256'])}")
    print(f"episode store sha256 {', '.join(report['store_sha256'])}")
    print(f"identical across arms: {report['identical']}")


if __name__ == "__main__":
    sys.exit(main())
