"""The LLM agent's options, the same on every command that takes an agent (run, reproduce, episode)."""

from __future__ import annotations

import argparse

from cir.agents.factory import LLMConfig, parse_llm_options


def add_llm_options(parser: argparse.ArgumentParser, cache_default: str) -> None:
    """``--temperature``, ``--max-tokens``, ``--think``, ``--logprobs``, ``--llm-option`` and
    ``--cache-dir`` in a group of their own; ``cache_default`` says where replies go without it."""
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
    g.add_argument("--cache-dir", default=None, metavar="DIR",
                   help=f"where the agent's replies are kept (default: {cache_default}); share "
                        "one between runs and `cir episode` and each reply is paid for once")


def llm_config(args: argparse.Namespace) -> LLMConfig:
    """The LLM settings of the parsed command line (checked when the agent is made)."""
    return LLMConfig(temperature=args.temperature, max_tokens=args.max_tokens, think=args.think,
                     logprobs=args.logprobs, options=parse_llm_options(args.llm_option or []))
