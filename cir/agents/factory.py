"""Build an agent from a command-line spec: ``builtin``, ``builtin:PROFILE``, ``openai:MODEL``.

The parts that depend on the environment come from its family (``cir.families``, which
passes them here): the model-free agent (``builtin``, a function ``(profile, seed=)``) and the
LLM agent's prompt (:class:`~cir.agents.prompt.LLMPrompt`). ``cir.make_agent``
(:func:`cir.families.registry.make_agent`) is :func:`agent_from_spec` with a family's parts filled in.

The LLM agent's decoding and request settings travel as one plain :class:`LLMConfig`
(from the command line to the worker processes that build the agent), and how hard its
requests may press the server as one :class:`~cir.agents.limits.RequestLimits` (never part
of the agent's params: the same replies come at any rate).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cir.agents.base import Agent
from cir.agents.limits import RequestLimits
from cir.agents.prompt import LLMPrompt
from cir.agents.sampling import check_temperature
from cir.util.errors import CirError

DEFAULT_AGENT = "builtin"
#: The kinds of an LLM agent's spec (``openai:MODEL``); a framework agent's kinds are the adapters'
#: (:data:`cir.adapters.frameworks.FRAMEWORKS`).
_LLM_KINDS = ("openai", "openai-completion")
# The agent specs agent_from_spec understands, for command-line help.
AGENT_SPECS = ("builtin[:PROFILE], openai:MODEL, openai-completion:MODEL, or a framework agent "
               "langgraph:MODULE:ATTR, openai-agents:MODULE:ATTR, inspect:MODULE:ATTR")
@dataclass(frozen=True)
class LLMConfig:
    """How the LLM agent asks its server (``cir.agents.llm.LLMAgent`` says what each does).

    ``max_tokens=None`` is the agent's default (larger with ``think``); ``logprobs=None``
    asks for none; ``options`` are extra request fields. All of it is part of the agent's
    params: it names the agent and keys the reply cache.
    """

    temperature: float = 0.0
    max_tokens: int | None = None
    think: bool = False
    logprobs: int | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def is_default(self) -> bool:
        return self == LLMConfig()

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for study settings); the options sorted by name."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "think": self.think,
                "logprobs": self.logprobs, "options": dict(sorted(self.options.items()))}


def parse_llm_options(items: Sequence[str]) -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` as request fields: a VALUE that parses as JSON is that value
    (``0.9``, ``true``, ``{"enable_thinking": false}``), any other is the string itself."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CirError(f"--llm-option {item!r}: expected KEY=VALUE, e.g. reasoning_effort=low")
        if key in options:
            raise CirError(f"--llm-option {key}: given twice")
        try:
            options[key] = json.loads(text)
        except ValueError:
            options[key] = text
    return options


def agent_from_spec(
    spec: str = DEFAULT_AGENT,
    *,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    cache_dir: str | Path | None = None,
    cache_fallback: Sequence[str | Path] = (),
    seed: int = 0,
    llm: LLMConfig | None = None,
    limits: RequestLimits | None = None,
    builtin: Callable[..., Agent] | None = None,
    prompt: LLMPrompt | None = None,
    family: str = "this environment",
    framework: Callable[..., Agent | None] | None = None,
) -> Agent:
    """The agent named by ``spec``.

    ``builtin[:PROFILE]`` is the family's model-free agent, ``builtin(profile, seed=seed)``
    (ALFWorld's profiles: :data:`cir.families.alfworld.agent.builtin.PROFILES`); ``family``
    names the family in errors. ``openai:MODEL`` talks to the chat endpoint of an
    OpenAI-compatible server at ``base_url`` (or ``$OPENAI_BASE_URL``; a comma list of
    servers spreads the requests over them) with the key
    from ``$OPENAI_API_KEY`` (or the variable named by ``api_key_env``);
    ``openai-completion:MODEL`` sends the same ReAct prompt (``prompt``) as one plain completion, which
    small models follow better. The mode is part of the spec so it is recorded with the run.
    ``llm`` sets how the LLM agent asks (a builtin agent takes its temperature only);
    ``cache_dir`` is where its replies are kept, ``cache_fallback`` caches it reads too.
    ``limits``: the LLM agent's timeout, retries and patience, and the limits of this
    process's limiter for its server (shared by every agent of the process that has them;
    give each worker process its share, :meth:`RequestLimits.share`). ``framework(spec, ...)``
    builds a framework agent (``langgraph:MODULE:ATTR``, ...) or answers None for a spec it does
    not know: the adapters layer's :func:`cir.adapters.frameworks.framework_agent`, which
    :func:`cir.families.registry.make_agent` gives (this layer knows no adapter).
    """
    kind, _, arg = spec.partition(":")
    llm = llm or LLMConfig()
    # Each agent's module is imported when it is asked for: `cir --help` imports this module
    # (for AGENT_SPECS), and the LLM agent brings an HTTP client.
    if kind == "builtin":
        return _builtin_agent(spec, arg or "default", llm, builtin, family, seed)
    if kind not in _LLM_KINDS and framework is not None:
        agent = framework(spec, base_url=base_url, api_key_env=api_key_env, cache_dir=cache_dir,
                          cache_fallback=cache_fallback, llm=llm)
        if agent is not None:
            return agent
    model, mode, url = _llm_spec(spec, base_url, prompt, family)
    return _llm_agent(model, mode, url, prompt, llm, limits or RequestLimits(),  # type: ignore[arg-type]
                      api_key=os.environ.get(api_key_env), cache_dir=cache_dir, cache_fallback=cache_fallback,
                      seed=seed)


@dataclass(frozen=True)
class AgentIdentity:
    """What names an agent, without the agent: its ``name`` and :meth:`params`, as the agent
    would give them (so ``agent_label`` reads it as it reads an agent), and whether it keeps
    replies in a cache."""

    name: str
    fixed: dict[str, Any]
    uses_cache: bool = False

    def params(self) -> dict[str, Any]:
        return dict(self.fixed)


def identity_from_spec(spec: str = DEFAULT_AGENT, *, base_url: str | None = None, seed: int = 0,
                   llm: LLMConfig | None = None, builtin: Callable[..., Agent] | None = None,
                   prompt: LLMPrompt | None = None, family: str = "this environment",
                   framework: Callable[..., Agent | None] | None = None, **_: Any) -> AgentIdentity:
    """The name and params of the agent :func:`agent_from_spec` would build from these arguments
    (the same checks, the same CirErrors), without building it: no reply cache, no server
    limiter, no client. A model-free agent is plain data, so its own ``params()`` are read."""
    kind, _, arg = spec.partition(":")
    llm = llm or LLMConfig()
    if kind == "builtin":
        agent = _builtin_agent(spec, arg or "default", llm, builtin, family, seed)
        return AgentIdentity(agent.name, dict(agent.params()))
    if kind not in _LLM_KINDS and framework is not None:
        # a framework agent's params are the installed framework's and the target's: built to read them
        agent = framework(spec, base_url=base_url, llm=llm)
        if agent is not None:
            try:
                return AgentIdentity(agent.name, dict(agent.params()), uses_cache=True)
            finally:
                getattr(agent, "close", lambda: None)()
    from cir.agents.llm import LLMAgent

    model, mode, _url = _llm_spec(spec, base_url, prompt, family)
    name, params = LLMAgent.describe(model, mode, prompt, seed=seed, temperature=llm.temperature,
                                       max_tokens=llm.max_tokens, think=llm.think, logprobs=llm.logprobs,
                                       options=llm.options)
    return AgentIdentity(name, params, uses_cache=True)


def _llm_spec(spec: str, base_url: str | None, prompt: LLMPrompt | None, family: str) -> tuple[str, str, str]:
    """An LLM agent's model, mode and server address from its spec, or the CirError saying what is missing."""
    kind, _, arg = spec.partition(":")
    if kind not in _LLM_KINDS:
        raise CirError(f"unknown agent {spec!r}: expected {AGENT_SPECS} (a framework agent is built by "
                       "cir.make_agent, which knows the adapters)")
    if not arg:
        raise CirError(f"agent {spec!r}: name the model, e.g. openai:Qwen3-14B")
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if not url:
        raise CirError(f"agent {spec!r}: no server address; pass --base-url URL or set OPENAI_BASE_URL")
    if prompt is None:
        raise CirError(f"agent {spec!r}: {family} has no LLM prompt; give one (--prompt FILE)")
    return arg, "chat" if kind == "openai" else "completion", url


def _builtin_agent(spec: str, profile: str, llm: LLMConfig, builtin: Callable[..., Agent] | None,
                   family: str, seed: int) -> Agent:
    """The family's model-free agent, ``builtin(profile, seed=seed)`` (and ``temperature=`` when
    it samples: :mod:`cir.agents.sampling`)."""
    if replace(llm, temperature=0.0) != LLMConfig():
        raise CirError(f"agent {spec!r}: --max-tokens, --think, --logprobs and --llm-option are for "
                       "openai:MODEL and openai-completion:MODEL agents (a built-in agent takes --temperature)")
    if builtin is None:
        raise CirError(f"agent {spec!r}: {family} has no built-in agent; use openai:MODEL or "
                       "openai-completion:MODEL")
    if llm.temperature == 0:
        return builtin(profile, seed=seed)
    check_temperature(llm.temperature, "--temperature")
    try:
        return builtin(profile, seed=seed, temperature=llm.temperature)
    except TypeError:
        raise CirError(f"agent {spec!r}: {family}'s built-in agent does not sample (its builtin_agent "
                       "takes no temperature); run it at --temperature 0") from None


def _llm_agent(model: str, mode: str, url: str, prompt: LLMPrompt, llm: LLMConfig,
               limits: RequestLimits, *, api_key: str | None, cache_dir: str | Path | None,
               cache_fallback: Sequence[str | Path], seed: int) -> Agent:
    """The LLM agent of ``model`` at ``url`` (a comma list of servers), asking as ``llm`` says."""
    from cir.agents.limits import shared_limiter
    from cir.agents.llm import LLMAgent, base_urls

    return LLMAgent(
        model=model,
        base_url=url,
        api_key=api_key,
        cache_dir=Path(cache_dir) if cache_dir else None,
        cache_fallback=cache_fallback,
        seed=seed,
        temperature=llm.temperature,
        max_tokens=llm.max_tokens,
        mode=mode,
        think=llm.think,
        logprobs=llm.logprobs,
        options=llm.options,
        timeout=limits.timeout,
        max_retries=limits.retries,
        patience=limits.patience,
        # one limiter for all the servers of a comma list (the run's limits are for all)
        limiter=shared_limiter(",".join(base_urls(url)), limits),
        prompt=prompt,
    )
