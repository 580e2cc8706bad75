"""LLM studies at the server's speed: the same `cir run` at --concurrency 1, 8, 32 and 128
against a latency-bound fake OpenAI-compatible server on loopback.

    python benchmarks/llm_throughput.py                      # 16 generated tasks, 300 ms a request
    python benchmarks/llm_throughput.py --concurrency 1,8 --json out.json

The run is the paper's grid (4 conditions x 4 delays x 5 operations) with budgets cut to
``--max-turns``/``--max-actions``, so that the sequential run takes minutes, not hours. The
server (``tests/support/fake_openai.py``, its own process) answers every request after
``--latency`` seconds with a command that is a pure function of the prompt, and logs when
each request arrived and was answered. Each concurrency is one real ``cir run`` (the command
line, its worker processes, its run folder) of ``--n`` ALFWorld tasks (generated once into
``--work``) with ``--agent openai-completion:fake --jobs P --concurrency C`` (``--jobs 1``
at concurrency 1), into a fresh run folder (so a fresh reply cache) against a fresh server:
every run asks the server everything.

A hosted API's rate limits: ``--refuse-share S --retry-after R`` (the server answers that
share of requests 429 with ``Retry-After: R``) or ``--server-rpm N`` (it refuses beyond N
requests a minute), with or without ``--client-rpm`` (the run's ``--rpm``); what the run's
limiters did (``run.json``) is reported beside the table.

Reported per concurrency: wall time of the command (start to exit) against the ideal
(requests x latency / concurrency), start-up (until the server's first request), requests at
the server (every concurrency must send exactly the sequential run's), requests per second
and mean and peak requests in flight over the server's busy window (first request to last
answer), CPU seconds of the command's processes and of the server, peak RSS summed over the
command's processes (sampled every 0.1 s with psutil), and the sha256 of ``paired.csv`` and of
the episode records (the store's lines but each task's wall seconds and engine restores),
which must be identical.

The baseline, measured in the same sitting: the built-in agent (no model, no server) playing
the same tasks through the same grid and budgets at ``--jobs P``. Its CPU seconds are the
host's floor for the engine work of the run; each row's CPU is also given as a ratio to it, so
that runs on hosts of other speeds compare (``--no-baseline`` skips it).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "support" / "fake_openai.py"
CIR = [sys.executable, "-m", "cir"]


class Sampler:
    """Peak of the summed RSS of a process and its descendants, and their CPU seconds (the
    last sample of each process), sampled in a thread every 0.1 s."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self.processes = 0
        self.cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for proc in procs:
                try:
                    total += proc.memory_info().rss
                    times = proc.cpu_times()
                    self.cpu[proc.pid] = times.user + times.system
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self.processes = max(self.processes, len(procs))
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
    if args.answers:
        cmd += ["--answers", args.answers]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("port "):
        proc.kill()
        raise SystemExit(f"the fake server did not start (said {line!r})")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def episodes_digest(out: Path) -> str:
    """sha256 of the episode store's lines in a fixed order, but each task's wall seconds and
    engine restores (they differ between any two runs; the episode records do not)."""
    with gzip.open(out / "episodes.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = []
        for line in f:
            data = json.loads(line)
            if data.get("kind") == "task":
                data.pop("seconds", None)
                data.get("costs", {}).pop("env_restores", None)
                line = json.dumps(data, sort_keys=True)
            lines.append(line)
    return hashlib.sha256("".join(sorted(lines)).encode("utf-8")).hexdigest()


def run_command(tasks_dir: Path, out: Path, jobs: int, args: argparse.Namespace, *agent: str) -> list[str]:
    """`cir run` of the benchmark's tasks, grid and budgets; ``agent``: the agent's options
    (none: the built-in agent)."""
    return [*CIR, "run", "--tasks", str(tasks_dir), "--out", str(out), *agent, "--jobs", str(jobs),
            "--conditions", args.conditions, "--delays", args.delays, "--operations", args.operations,
            "--max-turns", str(args.max_turns), "--max-actions", str(args.max_actions), "--quiet"]


def run_sampled(cmd: list[str]) -> tuple[float, float, Sampler]:
    """Run ``cmd`` under a Sampler: its start (monotonic), wall seconds and samples."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    with Sampler(proc.pid) as sampled:
        said, _ = proc.communicate()
    wall = time.monotonic() - start
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[2:4])} failed ({proc.returncode}): {said}")
    return start, wall, sampled


def measure(tasks_dir: Path, concurrency: int, args: argparse.Namespace) -> dict[str, Any]:
    """One `cir run` at one concurrency, against a fresh server, into a fresh run folder."""
    jobs = 1 if concurrency == 1 else args.processes
    out = Path(args.work) / f"run-c{concurrency}"
    shutil.rmtree(out, ignore_errors=True)
    server, base_url = start_server(args)
    cmd = run_command(tasks_dir, out, jobs, args, "--agent", "openai-completion:fake", "--base-url", base_url,
                      "--concurrency", str(concurrency))
    if args.client_rpm:
        cmd += ["--rpm", str(args.client_rpm)]
    server_proc = psutil.Process(server.pid)
    server_cpu0 = sum(server_proc.cpu_times()[:2])
    try:
        start, wall, sampled = run_sampled(cmd)
        stats = httpx.get(f"{base_url}/stats", timeout=10).json()
        log = httpx.get(f"{base_url}/log", timeout=10).json()
        server_cpu = sum(server_proc.cpu_times()[:2]) - server_cpu0
    finally:
        server.terminate()
        server.wait()
    record = json.loads((out / "run.json").read_text())
    session = record["timings"]["sessions"][-1]
    requests = stats["requests"]
    answered = requests - stats["refused"]
    return {
        "concurrency": concurrency, "jobs": jobs, "wall_s": round(wall, 2),
        "ideal_s": round(answered * args.latency / concurrency, 2),
        "startup_s": round(stats["first_s"] - start, 2), "busy_s": stats["busy_s"],
        "requests": requests, "answered": answered, "requests_per_s": round(requests / stats["busy_s"], 1),
        "mean_in_flight": stats["mean_in_flight"], "peak_in_flight": stats["peak_in_flight"],
        "cpu_cir_s": round(sum(sampled.cpu.values()), 1), "cpu_server_s": round(server_cpu, 1),
        "peak_rss_mb": round(sampled.peak / 2**20), "processes": sampled.processes,
        "tasks": record["counts"]["tasks_done"], "pairs": record["counts"]["pairs"],
        "http_requests": session["llm"].get("http_requests", 0),
        "prompt_tokens": session["llm"].get("prompt_tokens", 0),
        "completion_tokens": session["llm"].get("completion_tokens", 0),
        "refused": stats["refused"], "limiter": session.get("limiter", {}),
        "paired_sha256": hashlib.sha256((out / "paired.csv").read_bytes()).hexdigest(),
        "episodes_sha256": episodes_digest(out),
        "in_flight_per_s": timeline(log),
    }


def measure_builtin(tasks_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The baseline: the same tasks, grid and budgets played by the built-in agent."""
    out = Path(args.work) / "run-builtin"
    shutil.rmtree(out, ignore_errors=True)
    _, wall, sampled = run_sampled(run_command(tasks_dir, out, args.processes, args))
    record = json.loads((out / "run.json").read_text())
    return {"wall_s": round(wall, 2), "cpu_s": round(sum(sampled.cpu.values()), 1),
            "jobs": args.processes, "pairs": record["counts"]["pairs"]}


def timeline(log: list[list[float]]) -> list[float]:
    """Mean requests in flight in each second of the busy window (where the run waits)."""
    if not log:
        return []
    first = min(a for a, _, _ in log)
    seconds = [0.0] * (int(max(e for _, e, _ in log) - first) + 1)
    for arrived, answered, _ in log:
        a, e = arrived - first, answered - first
        for b in range(int(a), int(e) + 1):
            seconds[b] += max(0.0, min(e, b + 1) - max(a, b))
    return [round(x, 1) for x in seconds]


def cohort(args: argparse.Namespace) -> Path:
    """The cohort's task folder (generated into --work on the first run)."""
    root = Path(args.work) / f"tasks-seed{args.seed}-n{args.n}"
    if not (root / "valid_unseen").is_dir():
        subprocess.run([*CIR, "tasks", "generate", "--out", str(root), "--split", "valid_unseen",
                        "--n", str(args.n), "--seed", str(args.seed), "--quiet"], check=True)
    return root / "valid_unseen"


def run_estimate(tasks_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """`cir estimate` of the benchmark's run; the server then answers its prompts as recorded."""
    prompts, out = Path(args.work) / "estimate-prompts.jsonl", Path(args.work) / "estimate.json"
    subprocess.run([*CIR, "estimate", "--tasks", str(tasks_dir), "--agent", "openai-completion:fake",
                    "--conditions", args.conditions, "--delays", args.delays, "--operations", args.operations,
                    "--max-turns", str(args.max_turns), "--max-actions", str(args.max_actions),
                    "--jobs", str(args.processes), "--prompts", str(prompts), "--json", str(out), "--quiet"],
                   check=True, stdout=subprocess.DEVNULL)
    args.answers = str(prompts)
    return json.loads(out.read_text())


def table(rows: list[dict[str, Any]], baseline: dict[str, Any] | None = None) -> str:
    head = ("| --concurrency | --jobs | wall s | ideal s | wall / (ideal + start-up) | start-up s | "
            "busy s | requests | requests/s | mean in flight (busy window) | peak in flight | "
            "CPU cir s | CPU cir / built-in | CPU server s | peak RSS MB (processes) | "
            "paired.csv sha256 | episodes sha256 |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ratio = r["wall_s"] / (r["ideal_s"] + r["startup_s"])
        cpu_ratio = f"{r['cpu_cir_s'] / baseline['cpu_s']:.2f}" if baseline and baseline["cpu_s"] else "-"
        lines.append(f"| {r['concurrency']} | {r['jobs']} | {r['wall_s']} | {r['ideal_s']} | "
                     f"{ratio:.2f} | {r['startup_s']} | {r['busy_s']} | {r['requests']} | "
                     f"{r['requests_per_s']} | {r['mean_in_flight']} | {r['peak_in_flight']} | "
                     f"{r['cpu_cir_s']} | {cpu_ratio} | {r['cpu_server_s']} | {r['peak_rss_mb']} ({r['processes']}) | "
                     f"{r['paired_sha256'][:12]} | {r['episodes_sha256'][:12]} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="tasks")
    parser.add_argument("--seed", type=int, default=3, help="task generator seed")
    parser.add_argument("--work", default="/tmp/cir-llm-throughput", help="where tasks and runs go")
    parser.add_argument("--concurrency", default="1,8,32,128")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per request at the server")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                        help="--jobs of the runs (concurrency 1 uses one)")
    parser.add_argument("--conditions", default="clean,stale2,stale1,missing")
    parser.add_argument("--delays", default="0,1,2,4")
    parser.add_argument("--operations", default="refresh,refresh_ablated,replan,rewind,placebo")
    parser.add_argument("--max-turns", type=int, default=12)
    parser.add_argument("--max-actions", type=int, default=12)
    parser.add_argument("--refuse-share", type=float, default=0.0,
                        help="the server answers this share of requests with 429")
    parser.add_argument("--retry-after", type=float, default=1.0, help="the Retry-After of those 429s")
    parser.add_argument("--server-rpm", type=int, default=0, help="the server refuses beyond this rpm")
    parser.add_argument("--client-rpm", type=float, default=0.0, help="the run's own --rpm")
    parser.add_argument("--estimate", action="store_true",
                        help="first `cir estimate` the run, and let the server answer as the built-in "
                             "agent did there (an LLM whose episodes are the built-in agent's): the "
                             "estimate's requests and tokens against the runs' counts")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the built-in agent's run of the same tasks (the CPU baseline)")
    parser.add_argument("--json", help="write the settings and results here")
    args = parser.parse_args()
    args.answers = None
    tasks_dir = cohort(args)
    estimate = run_estimate(tasks_dir, args) if args.estimate else None
    baseline = None if args.no_baseline else measure_builtin(tasks_dir, args)
    if baseline is not None:
        print(f"baseline: the built-in agent, the same tasks and grid at --jobs {baseline['jobs']}: "
              f"{baseline['pairs']} pairs, wall {baseline['wall_s']} s, CPU {baseline['cpu_s']} s", flush=True)
    rows = []
    for c in (int(x) for x in args.concurrency.split(",")):
        rows.append(measure(tasks_dir, c, args))
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows, baseline))
    same = len({(r["answered"], r["paired_sha256"], r["episodes_sha256"]) for r in rows}) == 1
    print(f"identical answered requests, paired tables and episodes at every concurrency: {same}")
    for r in rows:
        if r["refused"] or r["limiter"].get("waited_s"):
            print(f"concurrency {r['concurrency']}: {r['refused']} requests refused (429); "
                  f"the limiters: {json.dumps(r['limiter'])}")
    if estimate is not None:
        for r in rows:
            print(f"concurrency {r['concurrency']}: estimate / run: requests {estimate['requests']} / "
                  f"{r['http_requests']}, prompt tokens {estimate['prompt_tokens']} / {r['prompt_tokens']}, "
                  f"completion tokens {estimate['completion_tokens']} / {r['completion_tokens']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "rows": rows, "identical": same,
                                               "estimate": estimate, "baseline": baseline}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
