"""Token accounting: what each answer cost, as the server reports it, and the sums of a session.

OpenAI-compatible servers send ``usage: {prompt_tokens, completion_tokens}`` with an answer;
the prompt tokens served from the server's prefix cache come as
``usage.prompt_tokens_details.cached_tokens`` (OpenAI, vLLM with prefix caching) or as
``timings.cache_n`` (llama.cpp's ``llama-server``). :func:`usage_of` reads whichever is
there; the LLM agent keeps it with the cached reply, so a study's cost stays known after
its replies come from the cache.
"""

from __future__ import annotations

import threading
from typing import Any

#: The counters a session sums (``LLMAgent.stats``).
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "cached_prompt_tokens")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def usage_of(answer: Any) -> dict[str, int] | None:
    """``{prompt_tokens, completion_tokens[, cached_prompt_tokens]}`` of a parsed answer, or
    None when it reports no usage (Ollama's older versions, some proxies)."""
    if not isinstance(answer, dict):
        return None
    usage = answer.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    out = {"prompt_tokens": prompt, "completion_tokens": completion}
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    timings = answer.get("timings")
    if cached is None and isinstance(timings, dict):
        cached = _count(timings.get("cache_n"))
    if cached is not None:
        out["cached_prompt_tokens"] = cached
    return out


class UsageCounter:
    """Sums of the usage of the answers of a session (thread-safe): tokens, and how many
    answers said what they cost (``replies_with_usage``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.totals = dict.fromkeys(USAGE_FIELDS, 0)
        self.replies_with_usage = 0

    def add(self, usage: dict[str, int] | None) -> None:
        if not usage:
            return
        with self._lock:
            self.replies_with_usage += 1
            for name in USAGE_FIELDS:
                self.totals[name] += usage.get(name, 0)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {**self.totals, "replies_with_usage": self.replies_with_usage}
