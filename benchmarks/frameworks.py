"""Framework agents (LangGraph, the OpenAI Agents SDK, Inspect AI) through ``cir run``, against a
model: the measurements of docs/frameworks.md, per framework.

For each framework's example agent on N key-and-door tasks (clean, stale2, missing; delays 0, 2;
refresh, replan): ``cir run`` at ``--jobs 1``, ``--jobs 2`` and ``--concurrency 16`` (each its own
run folder and reply cache: nothing is shared), whether the three ``paired.csv`` are byte-identical,
``prefix_match`` on every row, ``cir table`` reading it; a paired router fitted on the table and run
live in the framework's own loop (its native hook) on every arm, its decisions against the offline
walk's, and an advisor that always recovers at delay 2 against the replayer's ``y1``; the lines the
example marks ``cir:``. Then ``cir``'s own LLM agent (``openai:MODEL``, chat) on the same tasks and
grid, for the comparison. Prints one JSON object; ``--out FILE`` writes it too.

    python benchmarks/frameworks.py --server llama --tasks 8          # SmolLM2-135M behind llama-cpp-python
    python benchmarks/frameworks.py --server fake --tasks 8           # the key-and-door fake chat server
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))


def outcomes(table) -> dict[str, int]:
    return {k: int(v) for k, v in table["outcome"].value_counts().sort_index().items()}


class _Skip(Exception):
    pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("llama", "fake"), default="llama")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--frameworks", default="langgraph,openai-agents,inspect")
    parser.add_argument("--runs", default="jobs1,jobs2,concurrency16",
                        help="which cir runs of each framework (jobs1 is always run: the others are compared with it)")
    parser.add_argument("--own", default="openai,openai-completion", help="cir's own LLM agent's modes ('' for none)")
    parser.add_argument("--no-live", action="store_true", help="skip the router live in the framework's loop")
    parser.add_argument("--work", default=None, help="the folder of the runs (a second call resumes them)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import pandas as pd
    from support.fake_openai import FakeOpenAI
    from support.framework_checks import (
        CLI_GRID,
        ENV,
        SPECS,
        cir_run,
        live_for,
        live_router_matches_the_walk,
    )
    from support.keydoor import generate_tasks
    from support.llm_server import MODEL_NAME, LlamaServer
    from support.toy_framework import keydoor_answer

    from cir.agents.factory import agent_from_spec

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="cir-frameworks-"))
    generate_tasks(work / "tasks", "test", args.tasks, 0)  # the same tasks again on a second call
    tasks = work / "tasks" / "test"
    server = LlamaServer(log_path=work / "llama.log") if args.server == "llama" else FakeOpenAI(answer=keydoor_answer)
    report: dict = {"server": args.server, "tasks": args.tasks, "grid": " ".join(CLI_GRID), "frameworks": {}}
    os.chdir(ROOT)
    with server:
        for kind in args.frameworks.split(","):
            spec = SPECS[kind]
            out: dict = {}
            tables = {}
            runs = {"jobs1": ["--jobs", "1"], "jobs2": ["--jobs", "2"],
                    "concurrency16": ["--jobs", "1", "--concurrency", "16"]}
            for name, extra in runs.items():
                if name != "jobs1" and name not in args.runs.split(","):
                    continue
                t0 = time.perf_counter()
                tables[name] = cir_run(spec, work / kind / name, tasks, server.base_url, *extra)
                record = json.loads((work / kind / name / "run.json").read_text())
                out[name] = {"seconds": round(time.perf_counter() - t0, 1),
                             "llm": record["timings"]["sessions"][0]["llm"]}
            for name in tables:
                if name != "jobs1":
                    out[f"{name}_identical"] = tables[name] == tables["jobs1"]
            table = pd.read_csv(work / kind / "jobs1" / "paired.csv")
            out["rows"], out["prefix_match_all"] = len(table), bool(table["prefix_match"].all())
            out["outcomes"] = outcomes(table)
            shown = subprocess.run([sys.executable, "-m", "cir", "table", str(work / kind / "jobs1"),
                                    "--by", "condition,delay,operation"], capture_output=True, text=True)
            out["cir_table_reads"] = shown.returncode == 0
            out["table"] = shown.stdout
            # the router live in the framework's loop, its model behind the jobs1 run's replies
            agent = agent_from_spec(spec, base_url=server.base_url, cache_dir=work / kind / "jobs1" / "agent_cache")
            try:
                if args.no_live:
                    raise _Skip
                t0 = time.perf_counter()
                out["live"] = live_router_matches_the_walk(table, tasks, live_for(kind), require_recovery=False)
                out["live"]["seconds"] = round(time.perf_counter() - t0, 1)
                out["live"]["decisions_equal_walk"] = True  # (asserted on every arm)
                out["live"]["llm"] = agent.stats()
            except _Skip:
                pass
            finally:
                agent.close()
            example = (ROOT / "examples" / f"{spec.split(':')[1].split('.')[-1]}.py").read_text()
            out["cir_lines"] = sum(1 for line in example.splitlines() if "# cir" in line)
            report["frameworks"][kind] = out
            print(kind, json.dumps({k: v for k, v in out.items() if k != "table"}), flush=True)
        # cir's own LLM agent: the same model and tasks, text replies with the family's ReAct prompt
        own = {}
        for mode in [m for m in args.own.split(",") if m]:
            folder = work / "cir-own" / mode
            cmd = [sys.executable, "-m", "cir", "run", "--family", ENV, "--tasks", str(tasks), "--out", str(folder),
                   "--agent", f"{mode}:{MODEL_NAME}", "--base-url", server.base_url, "--quiet", *CLI_GRID]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                own[mode] = {"error": done.stderr[-400:]}
                continue
            t = pd.read_csv(folder / "paired.csv")
            own[mode] = {"rows": len(t), "outcomes": outcomes(t), "prefix_match_all": bool(t["prefix_match"].all())}
        report["cir_llm_agent"] = own
    print(json.dumps({k: v for k, v in report.items() if k != "frameworks"}, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
