"""LLM studies at the server's speed: the same run at concurrency 1, 8, 32 and 128 against a
latency-bound fake OpenAI-compatible server on loopback.

    python benchmarks/llm_throughput.py                      # 16 generated tasks, 300 ms a request
    python benchmarks/llm_throughput.py --concurrency 1,8 --tasks-at-once 1 --json out.json

The run is the paper's grid (4 conditions x 4 delays x 5 operations) with budgets cut to 12
turns and 12 env actions, so that the sequential run takes minutes, not hours. The server
(``tests/support/fake_openai.py``, its own process) answers every request after
``--latency`` seconds with a command that is a pure function of the prompt, and logs when
each request arrived and was answered. The run: ``--n`` ALFWorld tasks (generated once into
``--work``) through the paired replayer with the LLM agent, spread over ``--processes``
worker processes (fresh ones for each concurrency; one for concurrency 1), each running its
tasks with ``cir.pairs.schedule.run_tasks`` (``--tasks-at-once`` at a time; default: all of
its tasks) and its share of the requests in flight (``RequestLimits(concurrency=C /
processes)``), over one keep-alive pool per process. No reply cache on disk and a fresh
server for each concurrency, so every run asks the server everything.

A hosted API's rate limits: ``--refuse-share S --retry-after R`` (the server answers that
share of requests 429 with ``Retry-After: R``) or ``--server-rpm N`` (it refuses beyond N
requests a minute), with or without ``--client-rpm`` (the run's own limit, shared out to the
processes); what each worker's limiter did is reported beside the table.

Reported per concurrency: wall time (from starting the workers to the last result) against
the ideal (requests x latency / concurrency), start-up (until the server's first request),
requests at the server (every concurrency must send exactly the sequential run's), requests
per second and mean and peak requests in flight over the server's busy window (first request
to last answer), CPU seconds of the workers and of the server, peak RSS summed over the
workers and this process (sampled every 0.1 s with psutil), and the sha256 of the paired
table (as ``paired.csv`` holds it) and of the episode records, which must be identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "support" / "fake_openai.py"


def worker(tasks: list[Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """One worker process: its tasks through run_tasks; plain results and its CPU."""
    from cir.agents.limits import RequestLimits, shared_limiter
    from cir.agents.llm import endpoint_base
    from cir.families import make_agent
    from cir.families.alfworld.env import AlfworldEnv
    from cir.pairs.replay import ReplaySettings, run_task_pairs
    from cir.pairs.schedule import run_tasks

    cpu0 = time.process_time()
    settings = ReplaySettings(**cfg["settings"])
    limits = RequestLimits(concurrency=cfg["concurrency"], rpm=cfg["rpm"])

    def one(task: Any, pool: Any) -> dict[str, Any]:
        agent = make_agent(cfg["agent"], base_url=cfg["base_url"], limits=limits)
        with AlfworldEnv(task.game_file) as env:
            result = run_task_pairs(task, agent, env, settings, pool=pool)
        return {"summary": result.summary(), "episodes": [e.to_dict() for e in result.episodes], "stats": agent.stats()}

    out = list(run_tasks(tasks, one, concurrency=cfg["concurrency"],
                         tasks_at_once=cfg["tasks_at_once"] or len(tasks)))
    limiter = shared_limiter(endpoint_base(cfg["base_url"]), limits).stats()
    return {"results": out, "cpu_s": time.process_time() - cpu0, "limiter": limiter}


class Sampler:
    """Peak of the summed RSS of this process and its children, sampled in a thread."""

    def __init__(self, exclude: set[int]) -> None:
        self.exclude = exclude
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                if proc.pid in self.exclude:
                    continue
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(0.1)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, str(SERVER), "--latency", str(args.latency)]
    if args.refuse_share:
        cmd += ["--refuse-share", str(args.refuse_share), "--retry-after", str(args.retry_after)]
    if args.server_rpm:
        cmd += ["--rpm", str(args.server_rpm)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("port "):
        proc.kill()
        raise SystemExit(f"the fake server did not start (said {line!r})")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def paired_digest(summaries: list[dict[str, Any]], settings: dict[str, Any]) -> str:
    """sha256 of the paired table as run.py writes it (summaries as the store holds them)."""
    from cir.pairs.paired import paired_text

    stored = [json.loads(json.dumps({"kind": "task", **s}, sort_keys=True)) for s in summaries]
    stored.sort(key=lambda s: s["task_id"])
    text = paired_text(stored, tuple(settings["conditions"]), tuple(settings["operations"]))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def measure(tasks: list[Any], concurrency: int, args: argparse.Namespace,
            settings: dict[str, Any]) -> dict[str, Any]:
    """One run at one concurrency, against a fresh server."""
    processes = 1 if concurrency == 1 else min(args.processes, len(tasks))
    share = -(-concurrency // processes)
    server, base_url = start_server(args)
    cfg = {"agent": "openai-completion:fake", "base_url": base_url, "settings": settings,
           "concurrency": share, "tasks_at_once": args.tasks_at_once,
           "rpm": args.client_rpm / processes if args.client_rpm else None}
    slices = [tasks[i::processes] for i in range(processes)]
    server_proc = psutil.Process(server.pid)
    server_cpu0 = sum(server_proc.cpu_times()[:2])
    try:
        with Sampler(exclude={server.pid}) as rss:
            start = time.monotonic()
            with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
                outs = list(pool.map(worker, slices, [cfg] * processes))
            wall = time.monotonic() - start
        stats = httpx.get(f"{base_url}/stats", timeout=10).json()
        server_cpu = sum(server_proc.cpu_times()[:2]) - server_cpu0
    finally:
        server.terminate()
        server.wait()
    results = [r for out in outs for r in out["results"]]
    episodes = json.dumps(sorted(((r["summary"]["task_id"], r["episodes"]) for r in results),
                                 key=lambda x: x[0]), sort_keys=True)
    requests = stats["requests"]
    ideal = requests * args.latency / concurrency
    return {
        "concurrency": concurrency, "processes": processes, "wall_s": round(wall, 2),
        "ideal_s": round(ideal, 2), "startup_s": round(stats["first_s"] - start, 2),
        "busy_s": stats["busy_s"], "requests": requests,
        "requests_per_s": round(requests / stats["busy_s"], 1),
        "mean_in_flight": stats["mean_in_flight"], "peak_in_flight": stats["peak_in_flight"],
        "cpu_workers_s": round(sum(o["cpu_s"] for o in outs), 1), "cpu_server_s": round(server_cpu, 1),
        "peak_rss_mb": round(rss.peak / 2**20), "tasks": len(results),
        "model_calls": sum(r["stats"]["model_calls"] for r in results),
        "refused": stats["refused"], "limiter": _summed([o["limiter"] for o in outs]),
        "paired_sha256": paired_digest([r["summary"] for r in results], settings),
        "episodes_sha256": hashlib.sha256(episodes.encode("utf-8")).hexdigest(),
    }


def _summed(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """The worker processes' limiter counts, summed (the smallest window of any)."""
    out: dict[str, Any] = {}
    for one in stats:
        for key, value in one.items():
            if key in ("window", "window_min"):
                out[key] = value if out.get(key) is None else min(out[key], value if value is not None else out[key])
            elif value is not None:
                out[key] = round(out.get(key, 0) + value, 3)
    return out


def cohort(args: argparse.Namespace) -> list[Any]:
    """The cohort's tasks (generated into --work on the first run)."""
    from cir.families.alfworld.generate import generate_split
    from cir.families.alfworld.tasks import load_tasks

    root = Path(args.work) / f"tasks-seed{args.seed}-n{args.n}"
    if not (root / "valid_unseen").is_dir():
        generate_split(root, "valid_unseen", args.n, args.seed, progress=False)
    return load_tasks(root / "valid_unseen")[: args.n]


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| concurrency | processes | wall s | ideal s | wall / (ideal + start-up) | start-up s | "
            "busy s | requests | requests/s | mean in flight | peak in flight | CPU workers s | "
            "CPU server s | peak RSS MB | paired.csv sha256 | episodes sha256 |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ratio = r["wall_s"] / (r["ideal_s"] + r["startup_s"])
        lines.append(f"| {r['concurrency']} | {r['processes']} | {r['wall_s']} | {r['ideal_s']} | "
                     f"{ratio:.2f} | {r['startup_s']} | {r['busy_s']} | {r['requests']} | "
                     f"{r['requests_per_s']} | {r['mean_in_flight']} | {r['peak_in_flight']} | "
                     f"{r['cpu_workers_s']} | {r['cpu_server_s']} | {r['peak_rss_mb']} | "
                     f"{r['paired_sha256'][:12]} | {r['episodes_sha256'][:12]} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="tasks")
    parser.add_argument("--seed", type=int, default=3, help="task generator seed")
    parser.add_argument("--work", default="/tmp/cir-llm-throughput", help="where tasks are generated")
    parser.add_argument("--concurrency", default="1,8,32,128")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per request at the server")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                        help="worker processes (concurrency 1 uses one)")
    parser.add_argument("--tasks-at-once", type=int, default=0, help="per process; 0: all of its tasks")
    parser.add_argument("--conditions", default="clean,stale2,stale1,missing")
    parser.add_argument("--delays", default="0,1,2,4")
    parser.add_argument("--operations", default="refresh,refresh_ablated,replan,rewind,placebo")
    parser.add_argument("--max-turns", type=int, default=12)
    parser.add_argument("--max-actions", type=int, default=12)
    parser.add_argument("--refuse-share", type=float, default=0.0,
                        help="the server answers this share of requests with 429")
    parser.add_argument("--retry-after", type=float, default=1.0, help="the Retry-After of those 429s")
    parser.add_argument("--server-rpm", type=int, default=0, help="the server refuses beyond this rpm")
    parser.add_argument("--client-rpm", type=float, default=0.0, help="the run's own rpm limit")
    parser.add_argument("--json", help="write the settings and results here")
    args = parser.parse_args()
    settings = {"conditions": args.conditions.split(","),
                "delays": [int(d) for d in args.delays.split(",")],
                "operations": args.operations.split(","),
                "max_turns": args.max_turns, "max_actions": args.max_actions}
    tasks = cohort(args)
    rows = []
    for c in (int(x) for x in args.concurrency.split(",")):
        rows.append(measure(tasks, c, args, settings))
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    same = len({(r["requests"] - r["refused"], r["paired_sha256"], r["episodes_sha256"]) for r in rows}) == 1
    print(f"identical answered requests, paired tables and episodes at every concurrency: {same}")
    for r in rows:
        if r["refused"] or r["limiter"].get("waited_s"):
            print(f"concurrency {r['concurrency']}: {r['refused']} requests refused (429); "
                  f"the limiters: {json.dumps(r['limiter'])}")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": {**vars(args), "replay": settings},
                                               "rows": rows, "identical": same}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
