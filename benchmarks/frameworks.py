"""Framework agents (LangGraph, the OpenAI Agents SDK, Inspect AI) through ``cir run``, against a
model: the measurements of docs/frameworks.md, per framework.

For each framework's example agent on N key-and-door tasks (clean, stale2, missing; delays 0, 2;
refresh, replan): ``cir run`` at ``--jobs 1``, ``--jobs 2`` and ``--concurrency 16``, whether their
``paired.csv`` are byte-identical to the ``--jobs 1`` run's, ``prefix_match`` on every row, ``cir
table`` reading each; a paired router fitted on the table and run live in the framework's own loop
(its native hook) on every arm, its decisions against the offline walk's, and an advisor that always
recovers at delay 2 against the replayer's ``y1``; the lines the example marks ``cir:``. Then
``cir``'s own LLM agent (``openai:MODEL``, chat; ``openai-completion:MODEL``) on the same tasks and
grid, for the comparison. Prints one JSON object; ``--out FILE`` writes it too (merged into the
file's earlier content: one call per framework adds up to one report).

Two modes of the runs after ``--jobs 1`` (``--runs``; the report names each run's mode):

* ``jobs2``, ``concurrency16``: a **fresh** run, its own reply cache: the model is asked again, so
  the comparison holds only if the server answers the same requests the same in another order and
  at another concurrency (``benchmarks/llama_determinism.py`` measures that of llama.cpp alone);
* ``jobs2+shared``, ``concurrency16+shared``: the run reads and writes a **copy of the ``--jobs 1``
  run's reply cache** (``--cache-dir``), so it tests ``cir``'s scheduling given the model's
  replies: every request it sends to the server is one the ``--jobs 1`` run never made (counted in
  its ``llm.http_requests``: 0 when the scheduling asks exactly the same requests).

The live router runs on another copy of the ``--jobs 1`` run's replies (its requests counted too);
``--live-strict`` asserts every arm as the tests do, else the arms that differ are counted.

    python benchmarks/frameworks.py --server llama --tasks 8 --frameworks langgraph \\
        --runs jobs2+shared,concurrency16+shared --work /tmp/fw --out /tmp/fw/report.json
    python benchmarks/frameworks.py --server fake --tasks 8           # the key-and-door fake chat server

An example whose code changed since an earlier ``--work`` folder gets a new agent label, so its runs
are not resumed; ``--seed-replies OLD`` starts the new ``--jobs 1`` runs on a copy of OLD's replies
(the requests they never made are asked, and counted).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

#: each run after --jobs 1: its extra options
RUNS = {"jobs1": ["--jobs", "1"], "jobs2": ["--jobs", "2"], "concurrency16": ["--jobs", "1", "--concurrency", "16"]}


def outcomes(table) -> dict[str, int]:
    return {k: int(v) for k, v in table["outcome"].value_counts().sort_index().items()}


def run_stats(folder: Path) -> dict[str, Any]:
    """The run's seconds and LLM counters over all its sessions (a resumed run has several)."""
    record = json.loads((folder / "run.json").read_text())
    sessions = record["timings"]["sessions"]
    llm: dict[str, int] = {}
    for s in sessions:
        for k, v in (s.get("llm") or {}).items():
            if isinstance(v, int):
                llm[k] = llm.get(k, 0) + v
    return {"seconds": round(sum(s["seconds"] for s in sessions), 1), "sessions": len(sessions), "llm": llm,
            "cache_dir": sessions[-1].get("cache_dir"), "factual_success": record["counts"]["factual_success"],
            "tasks_feasible": record["counts"]["tasks_feasible"]}


def table_summary(folder: Path) -> dict[str, Any]:
    import pandas as pd

    t = pd.read_csv(folder / "paired.csv")
    shown = subprocess.run([sys.executable, "-m", "cir", "table", str(folder), "--by", "condition,delay,operation"],
                           capture_output=True, text=True, cwd=ROOT)
    return {"rows": len(t), "prefix_match_all": bool(t["prefix_match"].all()),
            "prefix_match_rows": int(t["prefix_match"].sum()), "outcomes": outcomes(t),
            "y0_mean_by_condition": {c: round(float(g["y0"].mean()), 3) for c, g in t.groupby("condition")},
            "y1_mean_by_operation": {o: round(float(g["y1"].mean()), 3) for o, g in t.groupby("operation")},
            "executed": int(t["executed"].sum()),
            "cir_table_reads": shown.returncode == 0, "table": shown.stdout}


def differing_rows(a: Path, b: Path) -> int:
    """Rows of two paired tables that differ (keyed by task, condition, delay, operation)."""
    import pandas as pd

    key = ["task_id", "condition", "delay", "operation"]
    x, y = pd.read_csv(a).set_index(key).sort_index(), pd.read_csv(b).set_index(key).sort_index()
    if not x.index.equals(y.index):
        return -1
    cols = [c for c in x.columns if c in y.columns]
    return int((x[cols].astype(str) != y[cols].astype(str)).any(axis=1).sum())


def episodes_of(folder: Path) -> dict[tuple, str]:
    """Each episode of the run's store (task, role, condition, delay, operation, sample) -> a digest of
    its transcript (every step's actor, reply, action, observation, shown text, events, end) and
    outcome: two runs' stores compared episode by episode, a stronger check than the table when the
    model wins nothing."""
    import hashlib

    from cir.pairs.store import read_episodes

    out = {}
    for r in read_episodes(folder):
        steps = None if r.transcript is None else [
            (s.actor, s.reply, s.action, s.observation, s.shown, list(s.events), s.done, s.won, s.rewind_to)
            for s in r.transcript.steps]
        body = json.dumps([steps, r.won, r.executed, r.branch_step, r.same_as], default=str)
        out[(r.task_id, r.role, r.condition, r.delay, r.operation, r.sample)] = hashlib.sha256(body.encode()).hexdigest()
    return out


def same_episodes(a: Path, b: Path) -> dict[str, int]:
    x, y = episodes_of(a), episodes_of(b)
    return {"episodes": len(x), "episodes_other": len(y),
            "episodes_identical": sum(1 for k, v in x.items() if y.get(k) == v)}


def copy_cache(source: Path, target: Path) -> Path:
    """A copy of a run's reply cache (made once: a second call resumes with it)."""
    if not target.exists():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("asking.lock"))
    return target


class RecordingProxy:
    """A loopback proxy in front of the model's server that writes every request it forwards and the
    answer to ``self.log`` (a JSONL file, switched between runs): what ``benchmarks/llama_determinism.py``
    replays against a fresh server."""

    def __init__(self, upstream: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import httpx

        self.upstream = upstream.rstrip("/")
        self.log: Path | None = None
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=900.0)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))) if method == "POST" else None
                path = self.path[len("/v1"):] if self.path.startswith("/v1") else self.path
                t0 = time.time()
                answer = proxy._client.request(method, proxy.upstream + path, content=body,
                                               headers={"Content-Type": "application/json"})
                if method == "POST" and proxy.log is not None:
                    line = json.dumps({"path": path, "body": json.loads(body or b"{}"), "status": answer.status_code,
                                       "answer": answer.text, "seconds": round(time.time() - t0, 3)})
                    with proxy._lock, open(proxy.log, "a") as f:
                        f.write(line + "\n")
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def do_GET(self) -> None:  # noqa: N802
                self._forward("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._forward("POST")

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._client.close()


def prompt_file(work: Path) -> Path:
    """A ``--prompt`` file with the framework examples' instructions (no worked examples): cir's own
    LLM agent with the frameworks' system text."""
    import ast

    # the same text in the three examples (read, not imported: importing builds the example's model)
    tree = ast.parse((ROOT / "examples" / "langgraph_agent.py").read_text())
    INSTRUCTIONS = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)  # noqa: N806
                        and any(getattr(t, "id", None) == "INSTRUCTIONS" for t in n.targets))
    path = work / "framework_prompt.toml"
    path.write_text(f"instructions = {json.dumps(INSTRUCTIONS)}\nexamples = []\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("llama", "fake"), default="llama")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--frameworks", default="langgraph,openai-agents,inspect", help="'' for none")
    parser.add_argument("--runs", default="jobs2,concurrency16",
                        help="the runs after --jobs 1 (always run), each compared with it: jobs2, concurrency16, "
                             "each fresh or with +shared (a copy of the --jobs 1 run's replies; see the text)")
    parser.add_argument("--own", default="openai,openai+prompt,openai-completion",
                        help="cir's own LLM agent's modes: openai (chat, the family's prompt), openai+prompt (chat, "
                             "--prompt with the framework examples' instructions), openai-completion; '' for none")
    parser.add_argument("--no-live", action="store_true", help="skip the router live in the framework's loop")
    parser.add_argument("--live-strict", action="store_true", help="assert every live arm (as the tests do)")
    parser.add_argument("--work", default=None, help="the folder of the runs (a second call resumes them)")
    parser.add_argument("--out", default=None, help="the report (JSON), merged into what the file holds")
    parser.add_argument("--seed-replies", default=None, metavar="WORK",
                        help="start each --jobs 1 run on a copy of the replies of WORK's --jobs 1 run of the same "
                             "framework (an earlier --work folder whose runs the agent's changed code cannot "
                             "resume); requests it never made are asked and counted")
    args = parser.parse_args()

    import pandas as pd
    from support.fake_openai import FakeOpenAI
    from support.framework_checks import (
        CLI_GRID,
        ENV,
        SPECS,
        live_for,
        live_router_matches_the_walk,
        stored_steps,
    )
    from support.keydoor import generate_tasks
    from support.llm_server import MODEL_NAME, LlamaServer
    from support.toy_framework import keydoor_answer

    from cir.adapters.frameworks import framework_agent as agent_from_spec

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="cir-frameworks-"))
    generate_tasks(work / "tasks", "test", args.tasks, 0)  # the same tasks again on a second call
    tasks = work / "tasks" / "test"
    runs = [r for r in args.runs.split(",") if r]
    for r in runs:
        if r.split("+")[0] not in RUNS or r.split("+")[0] == "jobs1" or r.count("+") > 1 or \
                ("+" in r and not r.endswith("+shared")):
            parser.error(f"--runs {r!r}: expected jobs2 or concurrency16, each with or without +shared")
    report: dict[str, Any] = {}
    if args.out and Path(args.out).is_file():
        report = json.loads(Path(args.out).read_text())
        if (report.get("server"), report.get("tasks")) != (args.server, args.tasks):
            parser.error(f"--out {args.out}: holds a report of another server or number of tasks")
    report.update({"server": args.server, "tasks": args.tasks, "grid": " ".join(CLI_GRID), "host_cpus": os.cpu_count()})
    report.setdefault("frameworks", {})
    report.setdefault("cir_llm_agent", {})

    def save() -> None:
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=1, default=str) + "\n")

    server = LlamaServer(log_path=work / "llama.log") if args.server == "llama" else FakeOpenAI(answer=keydoor_answer)
    os.chdir(ROOT)
    (work / "requests").mkdir(exist_ok=True)
    with server:
        recorder = RecordingProxy(server.base_url)  # every request the model answers, by run (work/requests/)
        server_url = recorder.base_url
        for kind in [k for k in args.frameworks.split(",") if k]:
            spec = SPECS[kind]
            out: dict[str, Any] = report["frameworks"].setdefault(kind, {})
            out.setdefault("runs", {})
            for name in ["jobs1", *runs]:
                base, shared = name.split("+")[0], name.endswith("+shared")
                folder = work / kind / (f"{base}-shared" if shared else base)
                extra = list(RUNS[base])
                if shared:
                    extra += ["--cache-dir", str(copy_cache(work / kind / "jobs1" / "agent_cache",
                                                            work / kind / f"{base}-shared-cache"))]
                seeded = args.seed_replies and name == "jobs1" and not folder.exists() and \
                    (Path(args.seed_replies) / kind / "jobs1" / "agent_cache").is_dir()
                if seeded:  # a folder holding only an agent_cache is a new run folder that reads those replies
                    copy_cache(Path(args.seed_replies) / kind / "jobs1" / "agent_cache", folder / "agent_cache")
                    out["jobs1_seeded_from"] = str(Path(args.seed_replies) / kind / "jobs1")
                cmd = [sys.executable, "-m", "cir", "run", "--family", ENV, "--tasks", str(tasks), "--out", str(folder),
                       "--agent", spec, "--base-url", server_url, "--quiet", *CLI_GRID, *extra]
                recorder.log = work / "requests" / f"{kind}-{folder.name}.jsonl"
                t0 = time.perf_counter()
                done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                wall = round(time.perf_counter() - t0, 1)
                key = f"{base}-shared" if shared else base
                if done.returncode != 0:
                    out["runs"][key] = {"error": done.stderr[-1500:], "wall_this_call": wall}
                    save()
                    print(kind, key, "failed:", done.stderr[-400:], flush=True)
                    continue
                if shared:
                    mode = "reads and writes a copy of the jobs1 run's reply cache: cir's scheduling given the model's replies"
                elif name == "jobs1" and "jobs1_seeded_from" in out:
                    mode = "on a copy of an earlier jobs1 run's replies (jobs1_seeded_from), new requests asked"
                else:
                    mode = "fresh: its own reply cache, the model asked"
                entry = {"mode": mode,
                         "options": " ".join(extra).replace(str(work), "WORK"),
                         **run_stats(folder), "wall_this_call": wall, **table_summary(folder)}
                if name != "jobs1":
                    same = (folder / "paired.csv").read_bytes() == (work / kind / "jobs1" / "paired.csv").read_bytes()
                    entry["paired_csv_identical_to_jobs1"] = same
                    entry["episodes_vs_jobs1"] = same_episodes(work / kind / "jobs1", folder)
                    if not same:
                        entry["rows_differing_from_jobs1"] = differing_rows(folder / "paired.csv",
                                                                            work / kind / "jobs1" / "paired.csv")
                out["runs"][key] = entry
                save()
                print(kind, key, json.dumps({k: v for k, v in entry.items() if k != "table"}), flush=True)
            if "error" in out["runs"].get("jobs1", {}):
                continue
            table = pd.read_csv(work / kind / "jobs1" / "paired.csv")
            # the router live in the framework's loop, its model behind a copy of the jobs1 run's replies
            if not args.no_live:
                cache = copy_cache(work / kind / "jobs1" / "agent_cache", work / kind / "live-cache")
                recorder.log = work / "requests" / f"{kind}-live.jsonl"
                agent = agent_from_spec(spec, base_url=server_url, cache_dir=cache)
                try:
                    t0 = time.perf_counter()
                    live = live_router_matches_the_walk(table, tasks, live_for(kind), require_recovery=False,
                                                        strict=args.live_strict,
                                                        stored=stored_steps(work / kind / "jobs1"))
                    live["seconds"] = round(time.perf_counter() - t0, 1)
                    live["llm"] = agent.stats()
                    out["live"] = live
                except Exception as err:  # noqa: BLE001 - reported, the other frameworks go on
                    out["live"] = {"error": f"{type(err).__name__}: {err}"[:1500]}
                finally:
                    agent.close()
                save()
                print(kind, "live", json.dumps(out["live"], default=str)[:2000], flush=True)
            example = (ROOT / "examples" / f"{spec.split(':')[1].split('.')[-1]}.py").read_text()
            out["cir_lines"] = sum(1 for line in example.splitlines() if "# cir" in line)
            save()
        # cir's own LLM agent: the same model and tasks, text replies
        for mode in [m for m in args.own.split(",") if m]:
            kind, _, variant = mode.partition("+")
            folder = work / "cir-own" / mode.replace("+", "-")
            extra = ["--prompt", str(prompt_file(work))] if variant == "prompt" else []
            cmd = [sys.executable, "-m", "cir", "run", "--family", ENV, "--tasks", str(tasks), "--out", str(folder),
                   "--agent", f"{kind}:{MODEL_NAME}", "--base-url", server_url, "--quiet", *CLI_GRID, *extra]
            recorder.log = work / "requests" / f"cir-own-{folder.name}.jsonl"
            t0 = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            wall = round(time.perf_counter() - t0, 1)
            if done.returncode != 0:
                report["cir_llm_agent"][mode] = {"error": done.stderr[-1500:]}
            else:
                report["cir_llm_agent"][mode] = {"prompt": "the framework examples' instructions (--prompt)"
                                                 if variant == "prompt" else "the family's prompt",
                                                 **run_stats(folder), "wall_this_call": wall, **table_summary(folder)}
            save()
            print("cir-own", mode, json.dumps({k: v for k, v in report["cir_llm_agent"][mode].items()
                                                if k != "table"}), flush=True)
        recorder.close()
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
