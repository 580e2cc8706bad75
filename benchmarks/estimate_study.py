"""`cir estimate --study` against a real study on a fake server: requests and tokens.

    python benchmarks/estimate_study.py                 # the paper's full study (takes long)
    python benchmarks/estimate_study.py --quick         # the quick study

1. ``cir estimate --study`` (a dry run of the built-in agent through the replayer, each
   prompt rendered as the LLM agent sends it) writes every prompt and the built-in agent's
   reply (``--prompts``);
2. the fake OpenAI-compatible server (``tests/support/fake_openai.py --answers``) answers each
   prompt with that reply, and counts tokens as the estimate does (characters / 4): an LLM
   whose episodes are the built-in agent's;
3. ``cir reproduce --agent openai-completion:fake`` runs the same study against it, and the
   requests and tokens its sessions record in ``run.json`` (summed over the study's runs and
   replicates) are set beside the estimate's.

This checks what the estimate counts (requests after the replayer's prefix sharing, and the
prompts' length) against a real run through the HTTP agent, its cache and the farm; it does
not check the 4-characters-per-token rule against a real tokenizer.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
from llm_throughput import CIR, start_server


def run_counts(study: Path) -> dict[str, int]:
    """Requests and tokens the study's sessions record, over every run of every replicate."""
    total = dict.fromkeys(("http_requests", "prompt_tokens", "completion_tokens"), 0)
    for path in sorted(study.rglob("runs/*/run.json")):
        for session in json.loads(path.read_text())["timings"]["sessions"]:
            for key in total:
                total[key] += session.get("llm", {}).get(key, 0)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the quick study")
    parser.add_argument("--work", default="/tmp/cir-estimate-study", help="where the study goes")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--json", default=None, help="also write the comparison here")
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    quick = ["--quick"] if args.quick else []
    prompts, estimate_json = work / "prompts.jsonl", work / "estimate.json"
    t0 = time.monotonic()
    subprocess.run([*CIR, "estimate", "--study", *quick, "--agent", "openai-completion:fake",
                    "--work", str(work / "estimate"), "--jobs", str(args.jobs), "--prompts", str(prompts),
                    "--json", str(estimate_json), "--quiet"], check=True, stdout=subprocess.DEVNULL)
    estimate_s = time.monotonic() - t0
    estimate = json.loads(estimate_json.read_text())
    server, base_url = start_server(argparse.Namespace(latency=0.0, refuse_share=0.0, server_rpm=0,
                                                       answers=str(prompts)))
    try:
        t0 = time.monotonic()
        subprocess.run([*CIR, "reproduce", *quick, "--agent", "openai-completion:fake", "--base-url", base_url,
                        "--out", str(work / "study"), "--jobs", str(args.jobs),
                        "--concurrency", str(args.concurrency), "--quiet"], check=True, stdout=subprocess.DEVNULL)
        study_s = time.monotonic() - t0
        stats = httpx.get(f"{base_url}/stats", timeout=30).json()
    finally:
        server.terminate()
        server.wait()
    run = run_counts(work / "study")
    rows = {"requests": (estimate["requests"], run["http_requests"]),
            "prompt_tokens": (estimate["prompt_tokens"], run["prompt_tokens"]),
            "completion_tokens": (estimate["completion_tokens"], run["completion_tokens"])}
    print(f"{'full' if not args.quick else 'quick'} study: estimate {estimate_s:.0f} s, the study on the "
          f"fake server {study_s:.0f} s; {stats['requests']} requests at the server, "
          f"{stats.get('unrecorded', 0)} of them not in the estimate's prompts")
    print("| count | estimate | run | run / estimate |\n|---|---|---|---|")
    for key, (est, got) in rows.items():
        print(f"| {key} | {est:,} | {got:,} | {got / est:.4f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "estimate_s": estimate_s,
                                               "study_s": study_s, "server": stats,
                                               "rows": rows}, indent=1) + "\n")
    return 0 if all(abs(got / est - 1) <= 0.10 for est, got in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
