"""The study's phases against a baseline checkout, and the engine's savings on and off, in one sitting.

    python benchmarks/study_bench.py --baseline /tmp/cir-main              # the phases, against main
    python benchmarks/study_bench.py --baseline /tmp/cir-main --phases quick,worlds --write-measured
    python benchmarks/study_bench.py                         # the engine: 20 tasks x 4 conditions x 4 delays
    python benchmarks/study_bench.py --n 24 --arms savings,main --json out.json

**The phases** (``--baseline DIR``: a checkout of the code to compare with, e.g. ``git worktree
add /tmp/cir-main main``; both run with this venv, each from its own tree through ``PYTHONPATH``).
Each phase runs in a fresh child process, the baseline's then this tree's, ``--repeats`` times in
turn (A B A B ...), each with a user cache of its own (``CIR_CACHE_DIR``: a new folder whose
``sas`` is the user's SAS cache, so the engine's translations are warm and the planted worlds
are cold); ratios are baseline over this tree, pair by pair (median), with the host's load
average beside every measurement:

1. ``quick``: ``cir reproduce --quick --jobs 2`` into a new folder: tasks, runs, the analysis by
   section, the whole call; then the same call again on the finished folder (the second call);
   the digests of both arms' tables, figures, reports and routers compared file by file;
2. ``worlds``: ``--worlds-replicates`` replicates of each planted world (``--jobs 2``), fitted;
3. ``replicate``: the analysis of one full replicate of the reference study
   (``data/replicates/seed-0``'s run folders, copied), by section, planted worlds aside;
4. ``pooled``: the pooled analysis of the reference study's five replicates (``data/``,
   copied: run folders, routers, tables), by section, planted worlds aside.

``--write-measured`` writes this tree's median times, the host's load and the date into
``cir/study/measured.json``, which ``cir.study.timings`` reads: the one place the README and
``cir reproduce --help`` quote them from.

**The engine**: a fixed study cohort with the engine's savings on and off, in one run: CPU,
shares, memory.

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
import os
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


# -- the phases of a study against a baseline checkout -----------------------------------------

PHASES = ("quick", "worlds", "replicate", "pooled")
REPO = Path(__file__).resolve().parent.parent
#: The report's steps, by the function that computes each (the same names on main and here; a
#: name a tree lacks is left out of its sections).
STUDY_SECTIONS = {"_fit_routers": "routers", "_setup_section": "setup", "_effects_section": "effects",
                  "_mechanism_section": "mechanism", "_explanation_section": "explanation",
                  "_cir_section": "selective", "validation_section": "planted worlds"}
POOLED_SECTIONS = {"_pooled_tables": "replicates pooled", "_effects": "effects", "_mechanism": "mechanism",
                   "explanation_tables": "explanation", "_selective": "selective",
                   "which_recovery_section": "which recovery", "kind_section": "by kind",
                   "validation_section": "planted worlds"}


def _timed_sections(module: Any, names: dict[str, str], times: dict[str, float]) -> None:
    """Wrap each named function of ``module`` so that its wall seconds add up in ``times``."""
    for attr, label in names.items():
        fn = getattr(module, attr, None)
        if fn is None:
            continue

        def timed(*a: Any, _fn: Any = fn, _label: str = label, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                times[_label] = times.get(_label, 0.0) + time.perf_counter() - t0

        setattr(module, attr, timed)


def _report_write_timed(times: dict[str, float]) -> None:
    from cir.study.page import Report

    write = Report.write

    def timed(self: Any, *a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return write(self, *a, **k)
        finally:
            times["report page"] = times.get("report page", 0.0) + time.perf_counter() - t0

    Report.write = timed  # type: ignore[method-assign]


def _copy_runs(src: Path, dst: Path, extras: tuple[str, ...] = ()) -> None:
    import shutil

    dst.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src / "runs", dst / "runs")
    for pattern in extras:
        for f in src.glob(pattern):
            (shutil.copytree if f.is_dir() else shutil.copy)(f, dst / f.name)


def _output_digests(out: Path) -> dict[str, str]:
    """sha256 of each table, figure, report and router an analysis wrote under ``out``."""
    found = {}
    for pattern in ("tables/*", "figures/*", "report.md", "report.html", "router*.json"):
        for f in sorted(out.glob(pattern)):
            found[f.relative_to(out).as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
    return found


def child_phase(cfg: dict[str, Any]) -> dict[str, Any]:
    """One phase in this process, on the tree first on ``sys.path``; its times and digests."""
    phase, work = cfg["phase"], Path(cfg["work"])
    times: dict[str, float] = {}
    out: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    t0, c0 = time.perf_counter(), time.process_time()
    if phase == "quick":
        import cir.study.report as report_module
        from cir.pairs.settings import RunSettings
        from cir.study.reproduce import reproduce

        _timed_sections(report_module, STUDY_SECTIONS, times)
        _report_write_timed(times)
        reproduce(work / "study", RunSettings(jobs=2), quick=True, progress=False, echo=lambda _: None)
        out["seconds"] = time.perf_counter() - t0
        study = json.loads((work / "study" / "study.json").read_text())
        for key in ("tasks_seconds", "runs_seconds", "analysis_seconds"):
            out[key.removesuffix("_seconds")] = study["timings"].get(key)
        out["digests"] = _output_digests(work / "study")
        t1 = time.perf_counter()
        reproduce(work / "study", RunSettings(jobs=2), quick=True, progress=False, echo=lambda _: None)
        out["second call"] = time.perf_counter() - t1
    elif phase == "worlds":
        import inspect

        from cir.study.validation import run_validation

        kwargs = {"cache": False} if "cache" in inspect.signature(run_validation).parameters else {}
        run_validation(cfg["worlds_replicates"], seed=0, jobs=2, **kwargs)
        out["seconds"] = time.perf_counter() - t0
    elif phase == "replicate":
        import cir.study.report as report_module
        from cir.pairs.record import RunRecord
        from cir.pairs.settings import RunSettings
        from cir.pairs.store import RunStore
        from cir.study.reproduce import study_experiments

        src, dst = REPO / "data" / "replicates" / "seed-0", work / "replicate"
        _copy_runs(src, dst)
        experiments = study_experiments(RunSettings(), None)
        records = {e.name: RunRecord.read(RunStore(dst / "runs" / e.name)) for e in experiments}
        _timed_sections(report_module, STUDY_SECTIONS, times)
        _report_write_timed(times)
        t0, c0 = time.perf_counter(), time.process_time()
        report_module.write_study_report(dst, experiments, records, resamples=10_000, seed=0, agent="builtin",
                                         quick=False, validation=0, jobs=2)
        out["seconds"] = time.perf_counter() - t0
        out["digests"] = _output_digests(dst)
    elif phase == "pooled":
        import cir.study.pooled as pooled_module
        from cir.pairs.settings import RunSettings
        from cir.study.reproduce import study_experiments

        studies = {}
        for seed in (0, 1000, 2000, 3000, 4000):
            src, dst = REPO / "data" / "replicates" / f"seed-{seed}", work / "pooled" / "replicates" / f"seed-{seed}"
            _copy_runs(src, dst, ("router*.json", "tables"))
            studies[seed] = dst
        experiments = study_experiments(RunSettings(), None)
        _timed_sections(pooled_module, POOLED_SECTIONS, times)
        _report_write_timed(times)
        t0, c0 = time.perf_counter(), time.process_time()
        pooled_module.write_pooled_report(work / "pooled", experiments, studies, resamples=10_000, seed=0,
                                          agent="builtin", quick=False, validation=0, jobs=2)
        out["seconds"] = time.perf_counter() - t0
        out["digests"] = _output_digests(work / "pooled")
    out["cpu_seconds"] = time.process_time() - c0
    out["sections"] = times
    out["load_after"] = os.getloadavg()[0]
    return out


def _phase_in_child(tree: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """``child_phase`` in a fresh process on ``tree``'s code, with a user cache of its own."""
    import shutil

    work = Path(cfg["work"])
    cache = work / "cache"
    cache.mkdir(parents=True)
    sas = Path(os.environ.get("CIR_CACHE_DIR") or Path.home() / ".cache" / "cir") / "sas"
    if sas.is_dir():  # the engine's translations warm, everything else of the cache cold
        (cache / "sas").symlink_to(sas)
    env = {**os.environ, "PYTHONPATH": str(tree), "CIR_CACHE_DIR": str(cache)}
    result = work / "result.json"
    cmd = [sys.executable, __file__, "--child", "phase", json.dumps(cfg), str(result)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=tree)
    out = json.loads(result.read_text())
    out["process_seconds"] = time.perf_counter() - t0
    shutil.rmtree(work, ignore_errors=True)
    return out


def _medians(results: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in ("seconds", "tasks", "runs", "analysis", "second call", "cpu_seconds") if results[0].get(k) is not None]
    out: dict[str, Any] = {k: statistics.median(r[k] for r in results) for k in keys}
    labels = dict.fromkeys(label for r in results for label in r["sections"])
    out["sections"] = {label: statistics.median(r["sections"].get(label, 0.0) for r in results) for label in labels}
    out["load"] = [round(x, 2) for r in results for x in (r["load_before"], r["load_after"])]
    return out


def phases(args: argparse.Namespace) -> int:
    import tempfile

    baseline = Path(args.baseline).resolve()
    if not (baseline / "cir" / "__init__.py").is_file():
        raise SystemExit(f"--baseline {baseline}: not a checkout of cir (no cir/__init__.py)")
    chosen = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = set(chosen) - set(PHASES)
    if unknown:
        raise SystemExit(f"--phases: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(PHASES)}")
    arms = {"baseline": baseline, "this": REPO}
    report: dict[str, Any] = {"baseline": str(baseline), "this": str(REPO), "repeats": args.repeats,
                              "date": time.strftime("%Y-%m-%d", time.gmtime()), "cores": os.cpu_count(),
                              "worlds_replicates": args.worlds_replicates, "phases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for phase in chosen:
            runs: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
            for r in range(args.repeats):
                for arm, tree in arms.items():
                    cfg = {"phase": phase, "work": str(Path(tmp) / f"{phase}-{arm}-{r}"),
                           "worlds_replicates": args.worlds_replicates}
                    runs[arm].append(_phase_in_child(tree, cfg))
                    print(f"{phase} {arm} #{r + 1}: {runs[arm][-1]['seconds']:.1f} s (load "
                          f"{runs[arm][-1]['load_before']:.1f} -> {runs[arm][-1]['load_after']:.1f})", flush=True)
            entry = {arm: _medians(rs) for arm, rs in runs.items()}
            entry["ratio"] = statistics.median(b["seconds"] / t["seconds"]
                                               for b, t in zip(runs["baseline"], runs["this"], strict=True))
            if "digests" in runs["this"][0]:
                a, b = runs["baseline"][0]["digests"], runs["this"][0]["digests"]
                entry["outputs_compared"] = len(set(a) & set(b))
                entry["outputs_differing"] = sorted(k for k in set(a) & set(b) if a[k] != b[k])
                entry["outputs_only_one"] = sorted(set(a) ^ set(b))
            report["phases"][phase] = entry
    show_phases(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    if args.write_measured:
        write_measured(report)
    return 0


def show_phases(report: dict[str, Any]) -> None:
    print(f"\n{report['date']}, {report['cores']} cores; baseline {report['baseline']}; medians of "
          f"{report['repeats']} run(s) each, interleaved; ratio = baseline / this")
    print(f"{'phase':32s} {'baseline s':>10s} {'this s':>9s} {'ratio':>7s}  load (before, after each run)")
    for phase, e in report["phases"].items():
        b, t = e["baseline"], e["this"]
        print(f"{phase:32s} {b['seconds']:10.1f} {t['seconds']:9.1f} {e['ratio']:6.2f}x  "
              f"{b['load']} / {t['load']}")
        for key in ("tasks", "runs", "analysis", "second call"):
            if key in t:
                print(f"  {key:30s} {b.get(key) or 0:10.1f} {t[key]:9.1f} "
                      f"{(b.get(key) or 0) / t[key] if t[key] else float('nan'):6.2f}x")
        for label in dict.fromkeys([*b["sections"], *t["sections"]]):
            bs, ts = b["sections"].get(label, 0.0), t["sections"].get(label, 0.0)
            print(f"  {'section: ' + label:30s} {bs:10.1f} {ts:9.1f} {bs / ts if ts else float('nan'):6.2f}x")
        if "outputs_compared" in e:
            print(f"  outputs compared: {e['outputs_compared']}, differing: {e['outputs_differing'] or 'none'}"
                  + (f", in one arm only: {e['outputs_only_one']}" if e["outputs_only_one"] else ""))


def write_measured(report: dict[str, Any]) -> None:
    """This tree's times into ``cir/study/measured.json`` (``cir.study.timings``: the README and the help
    quote them), each with the baseline's time measured beside it and the load."""
    path = REPO / "cir" / "study" / "measured.json"
    measured = json.loads(path.read_text()) if path.exists() else {}
    host = {"date": report["date"], "cores": report["cores"],
            "command": f"python benchmarks/study_bench.py --baseline {Path(report['baseline']).name}"}

    def entry(phase: str, seconds: float, baseline: float | None) -> dict[str, Any]:
        return {"seconds": round(seconds, 1), "baseline_seconds": None if baseline is None else round(baseline, 1),
                "load": report["phases"][phase]["this"]["load"], **host}

    quick = report["phases"].get("quick")
    if quick:
        t, b = quick["this"], quick["baseline"]
        measured["quick_study"] = {**entry("quick", t["seconds"], b["seconds"]),
                                   "phases": {k: round(t[k], 1) for k in ("tasks", "runs", "analysis") if t.get(k)}}
        measured["second_call_quick"] = entry("quick", t["second call"], b.get("second call"))
    worlds = report["phases"].get("worlds")
    if worlds:
        n = report["worlds_replicates"]
        measured["planted_worlds"] = {**entry("worlds", worlds["this"]["seconds"], worlds["baseline"]["seconds"]),
                                      "replicates": n, "jobs": 2}
    for phase, key in (("replicate", "replicate_analysis"), ("pooled", "pooled_analysis")):
        if phase in report["phases"]:
            e = report["phases"][phase]
            measured[key] = entry(phase, e["this"]["seconds"], e["baseline"]["seconds"])
    path.write_text(json.dumps(measured, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="a checkout to compare the study's phases with (this runs the phases, not the engine)")
    ap.add_argument("--phases", default=",".join(PHASES), help=f"with --baseline: some of {','.join(PHASES)}")
    ap.add_argument("--worlds-replicates", type=int, default=10,
                    help="with --baseline: replicates of each planted world in the worlds phase (default 10)")
    ap.add_argument("--write-measured", action="store_true",
                    help="with --baseline: write this tree's times into cir/study/measured.json")
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
        out = {"generate": child_generate, "run": child_run, "phase": child_phase}[kind](json.loads(cfg))
        Path(result).write_text(json.dumps(out))
        return 0
    if args.baseline:
        return phases(args)

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
