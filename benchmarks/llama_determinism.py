"""Whether llama.cpp's server (llama-cpp-python, SmolLM2-135M-Instruct, one thread) answers the same
request the same way whatever came before it and however many requests are in flight.

A framework run's ``paired.csv`` is identical across ``--jobs`` and ``--concurrency`` given the
model's replies (``benchmarks/frameworks.py``, ``+shared`` runs); a *fresh* run asks the server
again, in another order and several requests at once, so its table is the same only if the server's
answer depends on the request alone. llama.cpp reuses the KV cache of the previous prompt's common
prefix and evaluates the rest in batches whose size depends on that prefix, which can change the
floating-point sums and so a greedy token. This script measures it: N requests a run sent (recorded
by ``benchmarks/frameworks.py`` in ``WORK/requests/*.jsonl``: the body llama saw and its answer) are
replayed against a fresh server three times: in their recorded order one at a time, shuffled one at
a time, and shuffled at ``--concurrency`` in flight; each answer is compared with the recorded one
(the message's text, its tool calls' names and arguments, the finish reason: tool call ids and
timestamps are drawn per answer and are not compared).

    python benchmarks/llama_determinism.py WORK/requests/langgraph-jobs1.jsonl --n 150 --out det.json
    python benchmarks/llama_determinism.py --compare WORK/requests/inspect-jobs1.jsonl \
        WORK/requests/inspect-concurrency16.jsonl    # a fresh run's answers against an earlier run's
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def normal(answer_text: str) -> Any:
    """What of an answer the model decided (no ids, no timestamps, no usage)."""
    try:
        answer = json.loads(answer_text)
        choice = answer["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return {"raw": answer_text}
    if "message" in choice:
        m = choice["message"]
        calls = [(c.get("function", {}).get("name"), c.get("function", {}).get("arguments"))
                 for c in m.get("tool_calls") or ()]
        return {"content": m.get("content"), "tool_calls": calls, "finish_reason": choice.get("finish_reason")}
    return {"text": choice.get("text"), "finish_reason": choice.get("finish_reason")}


def compare_runs(earlier: str, later: str) -> dict[str, int]:
    """Two runs' recorded requests (``WORK/requests/*.jsonl``) without a server: how many of the
    later run's requests the earlier run made too, the tool-call ids the server draws per answer
    aside (a later request quotes the ids of its own earlier answers), and how many of those got
    the same answer. A fresh run that is cut short still says this of what it asked."""
    def answers(log: str) -> dict[str, Any]:
        out = {}
        for line in Path(log).read_text().splitlines():
            r = json.loads(line)
            body = re.sub(r"call_[A-Za-z0-9_-]+", "CALL", json.dumps(r["body"], sort_keys=True))
            out[r["path"] + body] = normal(r["answer"])
        return out

    a, b = answers(earlier), answers(later)
    both = [k for k in b if k in a]
    return {"later_requests": len(b), "made_by_the_earlier_run": len(both),
            "answers_identical": sum(a[k] == b[k] for k in both)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="*", help="recorded requests (JSONL of benchmarks/frameworks.py)")
    parser.add_argument("--compare", nargs=2, metavar=("EARLIER", "LATER"),
                        help="no server: the later run's requests and answers against the earlier run's")
    parser.add_argument("--n", type=int, default=150, help="requests replayed (a seeded sample; 0: all)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passes", default="recorded,shuffled,concurrent")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.compare:
        print(json.dumps(compare_runs(*args.compare)))
        return 0
    if not args.logs:
        parser.error("give the recorded requests (LOGS), or --compare EARLIER LATER")

    import httpx
    from support.llm_server import LlamaServer

    recorded = []
    for log in args.logs:
        for line in Path(log).read_text().splitlines():
            r = json.loads(line)
            if r["status"] == 200:
                recorded.append({**r, "log": Path(log).name})
    rng = random.Random(args.seed)
    index = list(range(len(recorded)))
    chosen = sorted(rng.sample(index, args.n)) if 0 < args.n < len(index) else index  # kept in recorded order
    report: dict[str, Any] = {"logs": [Path(x).name for x in args.logs], "recorded": len(recorded),
                              "replayed": len(chosen), "concurrency": args.concurrency, "seed": args.seed,
                              "passes": {}}
    client = httpx.Client(timeout=1800.0)

    def ask(url: str, i: int) -> tuple[int, Any, float]:
        r = recorded[i]
        t0 = time.perf_counter()
        answer = client.post(url + r["path"], json=r["body"])
        return i, normal(answer.text) if answer.status_code == 200 else {"status": answer.status_code}, \
            time.perf_counter() - t0

    for name in args.passes.split(","):
        order = list(chosen)
        if name != "recorded":
            rng.shuffle(order)
        with LlamaServer() as server:  # fresh: an empty prefix cache
            t0 = time.perf_counter()
            if name == "concurrent":
                with ThreadPoolExecutor(args.concurrency) as pool:
                    answers = list(pool.map(lambda i: ask(server.base_url, i), order))
            else:
                answers = [ask(server.base_url, i) for i in order]
            wall = time.perf_counter() - t0
        same = [i for i, got, _ in answers if got == normal(recorded[i]["answer"])]
        differ = [{"request": i, "log": recorded[i]["log"], "recorded": normal(recorded[i]["answer"]), "now": got}
                  for i, got, _ in answers if got != normal(recorded[i]["answer"])]
        report["passes"][name] = {"identical": len(same), "of": len(answers), "seconds": round(wall, 1),
                                  "differing": differ[:20]}
        print(name, json.dumps({k: v for k, v in report["passes"][name].items() if k != "differing"}), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
