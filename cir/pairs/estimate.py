"""What a run (or a study) would cost an LLM server, before it is run: requests, prompt and
completion tokens, and the wall time at a throughput the user gives.

The estimate is a dry run: the built-in agent plays the LLM's part through the same
replayer, so the requests are the LLM run's would be for an LLM whose episodes are as long
as the built-in agent's: the same prefix sharing (a context reached by two branches is one
call; :class:`~cir.episode.harness.Harness`), the same deduplication across the tasks of a
run (the reply cache: one request per distinct prompt), and every request's prompt
rendered exactly as the LLM agent would send it (:meth:`cir.agents.llm.LLMAgent.request`,
the model's name and options included). Tokens are counted from the text with
:data:`CHARS_PER_TOKEN` characters a token (a rule of thumb for English text and BPE
tokenizers; ``chars_per_token`` sets another), the completion tokens from the built-in
agent's replies. ``new_prompt_tokens`` are those a server with prefix caching computes: of
each prompt, what follows the longest prefix it shares with an earlier prompt of its task.

An agent that uses its whole budget needs more (the issue's study: 183,546 calls after
prefix sharing, up to 446,626): the estimate says how many episodes ended before their
budget, and ``budget_requests`` bounds the requests from above (every episode to its turn
budget).

With ``--samples K`` the K - 1 further draws of every arm and branch start at its branch point:
the factual run and every prefix up to a branch point are asked once, so requests and tokens
grow with K only after the branch points (``sample_requests`` counts those of the further draws,
each its own request: the LLM agent sends each sample its own seed). The dry run's built-in
agent plays each draw at temperature 0, so each is as long as the first.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cir.adapters.frameworks import FRAMEWORKS
from cir.agents.sampling import sample_agent, samples_agent
from cir.families.registry import make_agent
from cir.pairs.replay import run_task_pairs
from cir.pairs.settings import RunSettings
from cir.util.errors import CirError
from cir.util.parallel import parallel_map

#: Characters per token of English text under common BPE tokenizers (a rule of thumb).
CHARS_PER_TOKEN = 4.0
#: Tokens a chat message costs beyond its text (role and separators), OpenAI's rule of thumb.
CHAT_MESSAGE_TOKENS = 4
#: Where the dry run's prompts are rendered: no request is ever sent.
_NOWHERE = "http://127.0.0.1:9/v1"


def approx_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Tokens of ``text`` by the characters rule (at least 1 for a non-empty text)."""
    return math.ceil(len(text) / chars_per_token) if text else 0


def prompt_text(body: dict[str, Any]) -> str:
    """A request's prompt, or its messages' contents one after another."""
    if "prompt" in body:
        return str(body["prompt"])
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", ()))


def framework_renderer(settings: RunSettings) -> Callable[[list[dict[str, str]]], dict[str, Any]]:
    """A framework agent's request for a context: its messages as the framework gets them, each reply
    a call of its command tool answered by the tool's message (one request a turn). The framework's
    own system prompt and tool schemas are not known without running it: the tokens are a lower
    bound, the requests exact for an agent that makes one model call a turn."""
    import json

    agent = make_agent(settings.agent, family=settings.family)
    tools = agent.framework.tools()
    command = [(name, params[0]) for name, params in tools.items() if len(params) == 1]
    if len(command) != 1:
        raise CirError(f"--agent {settings.agent!r}: the estimate renders each reply as a call of the agent's one "
                       f"command tool; its tools are {', '.join(tools) or 'not listed by the framework'}")
    name, param = command[0]

    def render(context: list[dict[str, str]]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        for i, m in enumerate(context):
            if m["role"] == "assistant":
                messages.append({"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"call_{i}", "type": "function",
                     "function": {"name": name, "arguments": json.dumps({param: m["content"].strip()})}}]})
            elif i and context[i - 1]["role"] == "assistant":
                messages.append({"role": "tool", "tool_call_id": f"call_{i - 1}", "content": m["content"]})
            else:
                messages.append(dict(m))
        return {"model": settings.agent, "messages": messages}

    return render


def llm_renderer(settings: RunSettings, sample: int = 0) -> Callable[[list[dict[str, str]]], dict[str, Any]]:
    """The request body the run's LLM agent (drawing ``sample``: its own seed) would send for a context."""
    from cir.agents.llm import LLMAgent

    kind, _, model = settings.agent.partition(":")
    if kind in FRAMEWORKS:
        return framework_renderer(settings)
    if kind not in ("openai", "openai-completion") or not model:
        raise CirError(f"--agent {settings.agent!r}: the estimate is for an LLM agent "
                       "(openai:MODEL or openai-completion:MODEL)")
    llm = settings.llm
    family = settings.env_family()
    prompt = family.prompt.from_file(settings.prompt_file) if settings.prompt_file else family.prompt
    agent = LLMAgent(model, _NOWHERE, prompt=prompt, seed=settings.seed, temperature=llm.temperature,
                     max_tokens=llm.max_tokens, mode="chat" if kind == "openai" else "completion",
                     think=llm.think, logprobs=llm.logprobs, options=llm.options).sample(sample)
    return lambda context: agent.request(context)[1]


class DryAgent:
    """The built-in agent, each call recorded as the LLM agent's request would be.

    With ``--samples``, :meth:`sample` is the dry agent of a further draw: its requests are the
    LLM agent's of that sample (its own seed, so each is a request of its own even where the
    built-in agent's reply is the same), recorded in the same list with the sample index.
    """

    def __init__(self, agent: Any, render: Callable[[list[dict[str, str]]], dict[str, Any]],
                 renderer: Callable[[int], Callable[[list[dict[str, str]]], dict[str, Any]]] | None = None,
                 index: int = 0, calls: list[tuple[dict[str, Any], str, int]] | None = None) -> None:
        self.agent, self.render, self.renderer, self.index = agent, render, renderer, index
        self.calls: list[tuple[dict[str, Any], str, int]] = [] if calls is None else calls  # (body, reply, sample)

    def act(self, context: list[dict[str, str]]) -> str:
        return self.act_traced(context)[0]

    def act_traced(self, context: list[dict[str, str]]) -> tuple[str, Any, Any]:
        """The built-in agent's reply and explanation (the harness records both)."""
        reply, read, decided = self.agent.act_traced(context)
        self.calls.append((self.render(context), reply, self.index))
        return reply, read, decided

    def params(self) -> dict[str, Any]:
        return {**self.agent.params(), **({"sample": self.index} if self.index else {})}

    def sample(self, index: int) -> DryAgent:
        """The dry agent of sample ``index`` (the built-in agent's own sample, the LLM's request)."""
        if self.renderer is None:
            raise CirError("a dry agent without a renderer of samples cannot draw other samples")
        return DryAgent(sample_agent(self.agent, index) if samples_agent(self.agent) else self.agent,
                        self.renderer(index), self.renderer, index, self.calls)

    def __getattr__(self, name: str) -> Any:  # name, params(), the explanation trace
        return getattr(self.agent, name)


@dataclass
class TaskCost:
    """One task's requests (digests of their prompts, for deduplication across tasks) and tokens."""

    task_id: str
    prompts: list[str]
    prompt_tokens: list[int]
    completion_tokens: list[int]
    new_prompt_tokens: int
    episodes: int
    budget_turns: int  # every episode to its turn budget, no prefix shared: an upper bound
    ended_early: int  # episodes that ended before their turn budget (won, or out of env actions)
    samples: list[int] = field(default_factory=list)  # each request's sample (0 without --samples)


def _shared_prefix(earlier: list[str], prompt: str) -> int:
    """Length of the longest prefix ``prompt`` shares with any of ``earlier`` (sorted): it is
    shared with a neighbour of its place in the order."""
    at = bisect.bisect_left(earlier, prompt)
    best = 0
    for other in earlier[max(0, at - 1): at + 1]:
        n = 0
        for a, b in zip(other, prompt, strict=False):
            if a != b:
                break
            n += 1
        best = max(best, n)
    return best


def estimate_task(task: Any, settings: RunSettings, chars_per_token: float = CHARS_PER_TOKEN,
                  keep: bool = False) -> tuple[TaskCost, list[tuple[str, str]]]:
    """The dry run of one task: its cost, and (``keep``) each request's prompt and the reply
    the built-in agent gave."""
    from cir.pairs.run import make_run_env

    family = settings.env_family()
    if family.builtin_agent is None:
        raise CirError(f"family {family.name!r}: cir estimate needs the family's built-in agent for its dry run")
    dry = DryAgent(family.builtin_agent(seed=settings.seed), llm_renderer(settings),
                   lambda index: llm_renderer(settings, index))
    env = make_run_env(task, settings)
    try:
        result = run_task_pairs(task, dry, env, settings.replay,
                                extractor=settings.extractor or family.extractor)
    finally:
        if callable(getattr(env, "close", None)):
            env.close()
    texts = [prompt_text(body) for body, _, _ in dry.calls]
    per_message = [CHAT_MESSAGE_TOKENS * len(body.get("messages", ())) for body, _, _ in dry.calls]
    earlier: list[str] = []
    new = 0
    for text in texts:
        new += approx_tokens(text[_shared_prefix(earlier, text):], chars_per_token)
        bisect.insort(earlier, text)
    turns = settings.replay.max_turns
    own = [e for e in result.episodes if e.model_turns is not None]  # not the same as another's
    ended = sum(1 for e in own if e.model_turns < turns)
    cost = TaskCost(
        task_id=str(task.task_id),
        # a sample's request is another request even where its prompt is another sample's
        prompts=[hashlib.sha256(f"{t}\x1f{i if i else ''}".encode()).hexdigest()[:16]
                 for t, (_, _, i) in zip(texts, dry.calls, strict=True)],
        prompt_tokens=[approx_tokens(t, chars_per_token) + m for t, m in zip(texts, per_message, strict=True)],
        completion_tokens=[approx_tokens(reply, chars_per_token) for _, reply, _ in dry.calls],
        new_prompt_tokens=new, episodes=len(own), budget_turns=turns * len(own),
        ended_early=ended, samples=[i for _, _, i in dry.calls])
    return cost, ([(t, r) for t, (_, r, _) in zip(texts, dry.calls, strict=True)] if keep else [])


def _estimate_worker(task: Any, settings: RunSettings, chars_per_token: float,
                     keep: bool) -> tuple[TaskCost, list[tuple[str, str]]]:
    return estimate_task(task, settings, chars_per_token, keep)


@dataclass
class Estimate:
    """What a run (or the runs of a study) would send its server."""

    name: str
    tasks: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    new_prompt_tokens: int = 0
    episodes: int = 0
    ended_early: int = 0
    budget_requests: int = 0
    #: of ``requests``, those of further draws (``--samples`` above 1): every one after a branch point
    sample_requests: int = 0
    parts: list[Estimate] = field(default_factory=list)

    def add(self, other: Estimate) -> None:
        for key in ("tasks", "requests", "prompt_tokens", "completion_tokens", "new_prompt_tokens",
                    "episodes", "ended_early", "budget_requests", "sample_requests"):
            setattr(self, key, getattr(self, key) + getattr(other, key))
        self.parts.append(other)

    def wall_seconds(self, *, in_flight: int | None = None, latency: float | None = None,
                     tokens_per_s: float | None = None, prefix_cache: bool = True) -> float | None:
        """Seconds at ``in_flight`` requests of ``latency`` s each, or at ``tokens_per_s``
        (prompt tokens the server computes, new ones with ``prefix_cache``, plus completion)."""
        if in_flight and latency:
            return self.requests * latency / in_flight
        if tokens_per_s:
            prompt = self.new_prompt_tokens if prefix_cache else self.prompt_tokens
            return (prompt + self.completion_tokens) / tokens_per_s
        return None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["parts"] = [p.as_dict() for p in self.parts]
        return data


def estimate_run(tasks: Sequence[Any], settings: RunSettings, *, name: str = "run",
                 chars_per_token: float = CHARS_PER_TOKEN,
                 keep: list[tuple[str, str]] | None = None) -> Estimate:
    """The estimate of a run of ``tasks`` with ``settings`` (its agent an LLM), from a dry run
    in ``settings.jobs`` worker processes; ``keep`` collects each request's prompt and reply."""
    if not isinstance(chars_per_token, (int, float)) or not chars_per_token > 0:
        raise CirError(f"--chars-per-token {chars_per_token!r}: expected a number > 0")
    llm_renderer(settings)  # an LLM agent: checked before any task runs
    seen: set[str] = set()
    out = Estimate(name=name)
    dry = replace(settings, requests=replace(settings.requests, concurrency=1))
    for cost, pairs in parallel_map(_estimate_worker, list(tasks), dry, chars_per_token, keep is not None,
                                    jobs=min(settings.jobs, max(1, len(tasks))), backend=settings.backend,
                                    scheduler=settings.scheduler):
        out.tasks += 1
        out.episodes += cost.episodes
        out.ended_early += cost.ended_early
        out.budget_requests += cost.budget_turns
        out.new_prompt_tokens += cost.new_prompt_tokens
        for digest, p, c, i in zip(cost.prompts, cost.prompt_tokens, cost.completion_tokens, cost.samples,
                                   strict=True):
            if digest in seen:  # asked by an earlier task: the reply cache answers it
                continue
            seen.add(digest)
            out.requests += 1
            out.sample_requests += int(i > 0)
            out.prompt_tokens += p
            out.completion_tokens += c
        if keep is not None:
            keep.extend(pairs)
    return out


def estimate_runs(runs: Iterable[tuple[str, Sequence[Any], RunSettings]], name: str = "study",
                  chars_per_token: float = CHARS_PER_TOKEN,
                  keep: list[tuple[str, str]] | None = None) -> Estimate:
    """The estimates of several runs (a study's cohorts: each its own reply cache), summed."""
    total = Estimate(name=name)
    for run_name, tasks, settings in runs:
        total.add(estimate_run(tasks, settings, name=run_name, chars_per_token=chars_per_token, keep=keep))
    return total
