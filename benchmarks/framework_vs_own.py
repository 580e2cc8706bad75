"""A framework agent against ``cir``'s own LLM agent on the same model, tasks and grid: how their paired
tables differ and why, read from the runs of ``benchmarks/frameworks.py`` (its ``--work`` folder).

For each agent (each framework's ``--jobs 1`` run; ``cir``'s own ``openai`` chat agent with the
family's prompt and with the framework examples' instructions as ``--prompt``; ``openai-completion``):
the table (rows, outcomes, factual successes), the requests, cache hits and tokens, and from the
episode store what the model did (the factual runs' env actions, the share that are commands the
env knows, the most common ones, the share of observations that are "Nothing happens."). From the
recorded requests (``WORK/requests/``): the prompt the model was given, rendered with the model's
own chat template (llama-cpp-python's formatter, the template in the GGUF file) and checked against
the server's count of prompt tokens, so what the model saw is shown, not supposed; whether the
agent's earlier commands are in it. Then each pair of tables row by row (outcome, y0, y1).

    python benchmarks/framework_vs_own.py WORK [--out FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

COMMANDS = {"right", "left", "take key", "open door", "look"}
AGENTS = {"langgraph": "langgraph/jobs1", "openai-agents": "openai-agents/jobs1", "inspect": "inspect/jobs1",
          "cir openai (family prompt)": "cir-own/openai", "cir openai (--prompt: the examples' instructions)":
          "cir-own/openai-prompt", "cir openai-completion (family prompt)": "cir-own/openai-completion"}
LOGS = {"langgraph/jobs1": "langgraph-jobs1", "openai-agents/jobs1": "openai-agents-jobs1",
        "inspect/jobs1": "inspect-jobs1", "cir-own/openai": "cir-own-openai",
        "cir-own/openai-prompt": "cir-own-openai-prompt", "cir-own/openai-completion": "cir-own-openai-completion"}


def formatter() -> tuple[Any, Any]:
    """The model's chat template as llama-cpp-python renders it, and its tokenizer."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from support.llm_server import smollm2_model_path

    llm = Llama(model_path=str(smollm2_model_path()), vocab_only=True, verbose=False)
    meta = llm.metadata
    eos = llm._model.token_get_text(int(meta["tokenizer.ggml.eos_token_id"]))
    bos = llm._model.token_get_text(int(meta["tokenizer.ggml.bos_token_id"]))
    return Jinja2ChatFormatter(meta["tokenizer.chat_template"], eos_token=eos, bos_token=bos), llm


def rendered(body: dict[str, Any], fmt: Any) -> str:
    if "prompt" in body:
        return str(body["prompt"])
    return fmt(messages=body["messages"], tools=body.get("tools"), tool_choice=body.get("tool_choice")).prompt


def reply_of(message: dict[str, Any]) -> str:
    """What an assistant message said: its text, else its tool call's command (or arguments)."""
    if message.get("content"):
        return str(message["content"]).strip()
    for call in message.get("tool_calls") or ():
        raw = call.get("function", {}).get("arguments") or ""
        try:
            return str(json.loads(raw).get("command", raw)).strip()
        except (ValueError, AttributeError):
            return raw.strip()
    return ""


def agent_summary(folder: Path, log: Path | None, fmt: Any, llm: Any) -> dict[str, Any]:
    import pandas as pd

    from cir.pairs.store import read_episodes

    table = pd.read_csv(folder / "paired.csv")
    record = json.loads((folder / "run.json").read_text())
    usage: dict[str, int] = collections.Counter()
    for s in record["timings"]["sessions"]:
        usage.update({k: v for k, v in (s.get("llm") or {}).items() if isinstance(v, int)})
    factual = [r for r in read_episodes(folder) if r.role == "factual"]
    actions = [s.action for r in factual for s in r.transcript.steps if s.actor == "agent"]
    shown = [s.shown for r in factual for s in r.transcript.steps if s.actor == "agent" and s.action is not None]
    out: dict[str, Any] = {
        "rows": len(table), "prefix_match_all": bool(table["prefix_match"].all()),
        "outcomes": {k: int(v) for k, v in table["outcome"].value_counts().sort_index().items()},
        "factual_success": int(record["counts"]["factual_success"]), "tasks": int(record["counts"]["tasks"]),
        "http_requests": usage["http_requests"],
        "cache_hits": usage.get("cache_hits", 0) + usage.get("cache_hits_disk", 0) + usage.get("cache_hits_memory", 0),
        "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
        "prompt_tokens_per_request": round(usage["prompt_tokens"] / max(1, usage["http_requests"]), 1),
        "completion_tokens_per_request": round(usage["completion_tokens"] / max(1, usage["http_requests"]), 1),
        "factual_env_actions": [r.env_actions for r in factual],
        "factual_model_turns": [r.model_turns for r in factual],
        "agent_steps": len(actions),
        "steps_without_env_action": sum(1 for a in actions if a is None),
        "known_commands": sum(1 for a in actions if a in COMMANDS),
        "moves": sum(1 for a in actions if a in ("right", "left")),
        "top_actions": collections.Counter(a if a is None else a[:60] for a in actions).most_common(5),
        "nothing_happens_share": round(sum(1 for x in shown if x.startswith("Nothing happens")) / max(1, len(shown)), 3),
    }
    if log is not None and log.is_file():
        requests = [json.loads(line) for line in log.read_text().splitlines()]
        checked = agrees = with_replies = replies_shown = 0
        for r in requests:
            text = rendered(r["body"], fmt)
            if checked < 60 and "usage" in (answer := json.loads(r["answer"])):
                checked += 1
                agrees += len(llm.tokenize(text.encode(), add_bos=False, special=True)) \
                    == answer["usage"]["prompt_tokens"]
            said = [reply_of(m) for m in r["body"].get("messages", ()) if m.get("role") == "assistant"]
            said = [x for x in said if x and not x.startswith("look")]  # (a refresh's call is the harness's)
            if said:
                with_replies += 1
                replies_shown += all(x in text for x in said)
        # the third request of the run (a request after two replies of its first task)
        third = requests[2]
        out.update({"prompt_render_checked": checked, "prompt_render_token_count_equal": agrees,
                    "third_request_prompt": rendered(third["body"], fmt),
                    "third_request_answer": json.loads(third["answer"])["choices"][0],
                    "request_fields": sorted(third["body"]),
                    "requests_after_a_reply": with_replies,
                    "requests_whose_prompt_shows_every_earlier_reply": replies_shown})
    return out


def compare(a: Path, b: Path) -> dict[str, int]:
    import pandas as pd

    key = ["task_id", "condition", "delay", "operation"]
    x, y = pd.read_csv(a / "paired.csv"), pd.read_csv(b / "paired.csv")
    both = x.merge(y, on=key, suffixes=("_a", "_b"), how="inner")
    return {"rows_a": len(x), "rows_b": len(y), "rows_both": len(both),
            "outcome_equal": int((both["outcome_a"] == both["outcome_b"]).sum()),
            "y0_equal": int((both["y0_a"] == both["y0_b"]).sum()), "y1_equal": int((both["y1_a"] == both["y1_b"]).sum())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    work = Path(args.work)
    fmt, llm = formatter()
    report: dict[str, Any] = {"agents": {}, "pairs": {}}
    present = {name: work / sub for name, sub in AGENTS.items() if (work / sub / "episodes.jsonl.gz").is_file()}
    for name, folder in present.items():
        sub = AGENTS[name]
        report["agents"][name] = agent_summary(folder, work / "requests" / f"{LOGS[sub]}.jsonl", fmt, llm)
        print(name, json.dumps({k: v for k, v in report["agents"][name].items()
                                if k not in ("third_request_prompt", "third_request_answer")}, default=str), flush=True)
    names = list(present)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            report["pairs"][f"{a} | {b}"] = compare(present[a], present[b])
    for name, summary in report["agents"].items():
        if "third_request_prompt" in summary:
            print(f"\n--- {name}: the third request's prompt as the model saw it ---\n{summary['third_request_prompt']}")
    print(json.dumps(report["pairs"], indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
