"""Build an agent from a command-line spec: ``builtin``, ``builtin:PROFILE``, ``openai:MODEL``."""

from __future__ import annotations

import os
from pathlib import Path

from cir.agents.base import Agent
from cir.errors import CirError

DEFAULT_AGENT = "builtin"
# The agent specs make_agent understands, for command-line help.
AGENT_SPECS = "builtin[:PROFILE], openai:MODEL or openai-completion:MODEL"


def make_agent(
    spec: str = DEFAULT_AGENT,
    *,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    cache_dir: str | Path | None = None,
    seed: int = 0,
) -> Agent:
    """The agent named by ``spec``.

    ``builtin[:PROFILE]`` is the model-free agent (profiles: see
    :data:`cir.agents.builtin.PROFILES`). ``openai:MODEL`` talks to the chat endpoint of an
    OpenAI-compatible server at ``base_url`` (or ``$OPENAI_BASE_URL``) with the key
    from ``$OPENAI_API_KEY`` (or the variable named by ``api_key_env``);
    ``openai-completion:MODEL`` sends the same ReAct prompt as one plain completion, which
    small models follow better. The mode is part of the spec so it is recorded with the run.
    """
    kind, _, arg = spec.partition(":")
    # Each agent's module is imported when it is asked for: `cir --help` imports this module
    # (for AGENT_SPECS), and the LLM agent brings an HTTP client.
    if kind == "builtin":
        from cir.agents.builtin import BuiltinAgent

        return BuiltinAgent(profile=arg or "default", seed=seed)
    if kind in ("openai", "openai-completion"):
        if not arg:
            raise CirError(f"agent {spec!r}: name the model, e.g. openai:Qwen3-14B")
        from cir.agents.llm import LLMAgent

        url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise CirError(
                f"agent {spec!r}: no server address; pass --base-url URL or set OPENAI_BASE_URL"
            )
        return LLMAgent(
            model=arg,
            base_url=url,
            api_key=os.environ.get(api_key_env),
            cache_dir=Path(cache_dir) if cache_dir else None,
            seed=seed,
            mode="chat" if kind == "openai" else "completion",
        )
    raise CirError(
        f"unknown agent {spec!r}: expected builtin, builtin:PROFILE, openai:MODEL or openai-completion:MODEL"
    )
