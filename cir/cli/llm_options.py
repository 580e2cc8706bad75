"""The LLM agent's options, the same on every command that takes an agent (run, reproduce, episode)."""

from __future__ import annotations

import argparse
from typing import Any

from cir.agents.factory import LLMConfig, parse_llm_options


def add_llm_options(parser: argparse.ArgumentParser, cache_default: str | None) -> None:
    """``--temperature``, ``--max-tokens``, ``--think``, ``--logprobs``, ``--llm-option`` and
    ``--cache-dir`` in a group of their own; ``cache_default`` says where replies go without it
    (None: a command that never keeps replies, without ``--cache-dir``)."""
    g = parser.add_argument_group("LLM agent (openai:MODEL, openai-completion:MODEL)")
    g.add_argument("--temperature", type=float, default=0.0, metavar="T",
                   help="sampling temperature; 0 is greedy. Replies are cached, so a rerun "
                        "repeats the sampled replies (default: %(default)s)")
    g.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help="most tokens per reply (default: 96, or 4096 with --think)")
    g.add_argument("--think", action="store_true",
                   help="a reasoning model that thinks in <think>...</think> before it answers "
                        "(Qwen3, DeepSeek-R1): no newline stop, a larger --max-tokens; the closed "
                        "thinking is removed from the reply")
    g.add_argument("--logprobs", type=int, default=None, metavar="N",
                   help="store the reply tokens' log probabilities, with the N most likely "
                        "alternatives (0-20), beside each cached reply (default: none)")
    g.add_argument("--llm-option", action="append", default=None, metavar="KEY=VALUE",
                   help="an extra field of the request body (repeatable); VALUE is JSON when it "
                        "parses, else a string: e.g. reasoning_effort=low, "
                        """chat_template_kwargs='{"enable_thinking": false}'""")
    g.add_argument("--prompt", default=None, metavar="FILE",
                   help="the LLM's prompt from a TOML file (instructions = \"...\", examples = [\"...\"]) "
                        "instead of the environment family's; replies are still parsed by the family")
    if cache_default is None:
        return
    g.add_argument("--cache-dir", default=None, metavar="DIR",
                   help=f"where the agent's replies are kept (default: {cache_default}); share "
                        "one between runs and `cir episode` and each reply is paid for once")


def add_request_options(parser: argparse.ArgumentParser, *, concurrency: bool = True) -> None:
    """How hard the LLM agent presses its server: ``--concurrency`` (where a command runs
    requests at once), ``--rpm``, ``--tpm``, ``--request-timeout``, ``--retries``,
    ``--patience``; checked by RunSettings (one ``cir: error:`` line naming the option)."""
    g = parser.add_argument_group("LLM requests (how hard the agent presses its server; "
                                  "never changes the results)")
    if concurrency:
        g.add_argument("--concurrency", type=int, default=1, metavar="N",
                       help="agent requests in flight at most across the run. Each of the --jobs "
                            "worker processes gets N / jobs of them (rounded up, at least one) and "
                            "runs several tasks and their branches in threads to fill them; "
                            "engine work stays one process per --jobs. Give the number of "
                            "sequences your server batches (vLLM's --max-num-seqs)")
    g.add_argument("--rpm", type=float, default=None, metavar="R",
                   help="requests per minute at most across the run (evenly spaced; default: no limit)")
    g.add_argument("--tpm", type=float, default=None, metavar="T",
                   help="prompt + completion tokens per minute at most across the run "
                        "(default: no limit)")
    g.add_argument("--request-timeout", type=float, default=120.0, metavar="S",
                   help="seconds one attempt may take (connect, send, the whole answer)")
    g.add_argument("--retries", type=int, default=4, metavar="K",
                   help="attempts after the first for faults (timeouts, lost connections, HTTP "
                        "5xx); refusals (429/503) are waited out instead, within --patience")
    g.add_argument("--patience", type=float, default=600.0, metavar="S",
                   help="seconds a request may go on being refused (HTTP 429/503) before the run "
                        "stops with a line that says so")


def request_limits(args: argparse.Namespace) -> Any:
    """The request options of the parsed command line, as one RequestLimits (RunSettings.requests;
    checked where it is built: a bad value is a SettingError naming its option)."""
    from cir.agents.limits import RequestLimits

    return RequestLimits(concurrency=getattr(args, "concurrency", 1), rpm=args.rpm, tpm=args.tpm,
                         timeout=args.request_timeout, retries=args.retries, patience=args.patience)


def llm_config(args: argparse.Namespace) -> LLMConfig:
    """The LLM settings of the parsed command line (checked when the agent is made)."""
    return LLMConfig(temperature=args.temperature, max_tokens=args.max_tokens, think=args.think,
                     logprobs=args.logprobs, options=parse_llm_options(args.llm_option or []))
