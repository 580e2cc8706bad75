"""An agent backed by any OpenAI-compatible server (vLLM, llama.cpp, Ollama, hosted APIs).

Talks plain HTTP with httpx (no vendor SDK): ``/chat/completions`` (``mode="chat"``) or
``/completions`` (``mode="completion"``: a ReAct transcript the model continues; small
models follow the format better this way). Decoding is greedy by default (``temperature``
0) with a fixed seed and a newline stop, so one request is one command; ``options`` adds
fields to the request body (``chat_template_kwargs``, ``reasoning_effort``, ``top_p``...).
Every answer is stored in a persistent cache keyed by the full request, which makes the
agent a pure function of its context (the contract of :mod:`cir.agents.base`) even when
the server is not deterministic or samples, and makes the shared prefix of paired
branches and every rerun free. What a request says and how a reply becomes an action are
the environment's: its family's :class:`~cir.agents.prompt.LLMPrompt` (``prompt=``), whose
version is part of the agent's params.

Reasoning models: with ``think=True`` there is no newline stop and ``max_tokens`` is
larger by default (:data:`THINK_MAX_TOKENS`); a ``<think>...</think>`` block is removed
from the reply only when it is closed. A reply that ends inside an open block (cut at the
newline stop or at ``max_tokens``), or a server's reasoning with no answer, is a
:class:`~cir.util.errors.CirError` saying which setting to change: never an action, never
cached. ``logprobs=N`` stores the tokens' log probabilities (top ``N``) with each answer
in the cache (:meth:`LLMAgent.recorded` reads them back).

Faults are retried with exponential backoff, ``max_retries`` times: connection errors,
timeouts (``timeout`` seconds per attempt), HTTP 5xx but 503, and answers that hold no
reply (not JSON, no ``choices``, ``null`` or empty content, or more than
``max_reply_bytes``, read no further). A *refusal* (HTTP 429 or 503: a rate limit or an
overloaded server) is not a fault: it shrinks the process's requests in flight and pauses
every thread for its ``Retry-After`` (:mod:`cir.agents.limits`), and the request is sent
again however often, until it has been refused for ``patience`` seconds. When retries or
patience run out, or the server rejects the request (other 4xx),
:class:`~cir.util.errors.CirError` says which URL failed and how; a bad answer is never taken
as an action and never cached.

Threads. The agent is ``thread_safe``: branches run in threads share it, its requests
overlap over the process's one keep-alive pool (:mod:`cir.agents.pool`) within its limiter,
and a request that another thread is sending right now is not sent twice (the second
caller waits for the first one's answer: :class:`~cir.util.singleflight.SingleFlight`), so
a run sends as many requests at any concurrency as it does in one thread.

Tokens. Each answer's ``usage`` (prompt, completion and cached prompt tokens, where the
server reports them: :mod:`cir.agents.usage`) is kept with the cached reply and summed in
:meth:`LLMAgent.stats`.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from cir.agents.cache import ResponseCache, request_key
from cir.agents.limits import Limiter, RequestLimits, shared_limiter
from cir.agents.pool import shared_client, shared_servers
from cir.agents.prompt import LLMPrompt, ParsedAction
from cir.agents.sampling import sample_seed, twin
from cir.agents.usage import UsageCounter, usage_of
from cir.util.errors import CirError
from cir.util.singleflight import SingleFlight

MODES = ("chat", "completion", "tools")
#: An answer longer than this is not a reply to a request for one short command.
MAX_REPLY_BYTES = 1 << 20
#: ``max_tokens`` by default: one command (about 10 tokens) with room for a ``think:`` line.
MAX_TOKENS = 96
#: ``max_tokens`` by default with ``think=True``: reasoning models think for hundreds of tokens.
THINK_MAX_TOKENS = 4096
#: Most alternatives per token that ``logprobs`` may ask for (OpenAI's ``top_logprobs`` cap).
MAX_LOGPROBS = 20
#: Request fields the agent sets itself, and the setting that sets each (for ``options``).
RESERVED_FIELDS = {
    "model": "the agent's model", "messages": "the agent's context", "prompt": "the agent's context",
    "temperature": "temperature (--temperature)", "seed": "seed (--seed)",
    "max_tokens": "max_tokens (--max-tokens)", "stop": "the newline stop (off with --think)",
    "logprobs": "logprobs (--logprobs)", "top_logprobs": "logprobs (--logprobs)",
    "stream": "the agent (it reads whole answers)", "n": "the agent (it reads one choice)",
    "tools": "the family's tools (a tool world's, sent with every request of an openai:MODEL agent)",
}
_THINK_CLOSED = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_END = re.compile(r"</think>", re.IGNORECASE)


def strip_thinking(text: str) -> tuple[str, bool]:
    """``text`` without its closed ``<think>...</think>`` blocks, and whether one is left open.

    A ``</think>`` with no opening tag closes a block the chat template opened in the
    prompt (Qwen3, DeepSeek-R1): everything up to it is thinking too.
    """
    text = _THINK_CLOSED.sub("", text)
    ends = list(_THINK_END.finditer(text))
    if ends:
        text = text[ends[-1].end():]
    opened = _THINK_OPEN.search(text)
    if opened:
        return text[: opened.start()], True
    return text, False


def endpoint_base(base_url: str) -> str:
    """``base_url`` as the OpenAI SDK takes it (ending in ``/v1`` or a provider's own path).

    A bare ``http://host:port`` gets ``/v1`` appended, since every server named above
    serves the API there.
    """
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CirError(
            f"base URL {base_url!r}: expected http(s)://HOST[:PORT][/PATH], e.g. http://127.0.0.1:8000/v1"
        )
    url = base_url.strip().rstrip("/")
    if parts.path in ("", "/"):
        url += "/v1"
    return url


class _TooLarge(Exception):
    """The answer passed the size cap (reading stopped there)."""


#: Counters of an agent (``LLMAgent.stats``), all integers so that a session can sum them.
_COUNTERS = ("calls", "cache_hits", "in_flight_shared", "http_requests", "retries",
             "refusals", "invalid_answers", "limiter_wait_ms")
#: Exponent cap of the backoff (2**30 backoffs are longer than any patience).
_MAX_DOUBLINGS = 30


@dataclass(frozen=True)
class _Outcome:
    """One attempt's result: a record to cache, or why not (a refusal asks to ``wait``)."""

    record: dict[str, Any] | None = None
    problem: str = ""
    refused: bool = False
    wait: float | None = None


def _counter(name: str, doc: str) -> property:
    """A read-only view of one of an agent's counters."""
    return property(lambda self: self._counts[name], doc=doc)


def _estimate_tokens(body: dict[str, Any], max_tokens: int) -> int:
    """A request's tokens before it is sent (for ``tpm``): about 4 characters a prompt
    token, and the whole ``max_tokens`` (servers that limit tokens count it so)."""
    if "prompt" in body:
        chars = len(str(body["prompt"]))
    else:
        chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", ()))
    return chars // 4 + max_tokens


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait (``Retry-After``: seconds or an HTTP date)."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _snippet(raw: bytes, limit: int = 300) -> str:
    text = " ".join(raw[: 4 * limit].decode("utf-8", "replace").split())
    return text[:limit] + ("..." if len(text) > limit else "")


def _error_detail(raw: bytes) -> str:
    """The server's own error message, shortened to one line."""
    try:
        data = json.loads(raw)
    except ValueError:
        return _snippet(raw)
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data))
        if isinstance(err, dict):
            err = err.get("message", err)
        return _snippet(str(err).encode("utf-8"))
    return _snippet(str(data).encode("utf-8"))


def _check_agent(prompt: Any, model: Any, mode: str | None) -> str:
    """Check what the agent is (its prompt, model and mode); the mode, ``chat`` by default."""
    if not isinstance(prompt, LLMPrompt):
        raise CirError(f"LLMAgent prompt={prompt!r}: expected an LLMPrompt, an environment family's "
                       "(e.g. cir.families.get_family('alfworld').prompt)")
    if not model or not isinstance(model, str):
        raise CirError(f"LLM model {model!r}: expected a model name, e.g. Qwen3-14B")
    mode = mode or "chat"
    if mode not in MODES:
        raise CirError(f"LLM mode {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "tools" and (not prompt.tools or prompt.read_call is None):
        raise CirError(f"LLM mode 'tools' (function calling): prompt {prompt.version!r} has no tools; it is a "
                       "tool world's (cir.tools)")
    return mode


def base_urls(base_url: str) -> list[str]:
    """The servers of ``base_url``, a comma list: several servers of the model, requests spread over them."""
    urls = [endpoint_base(u) for u in str(base_url).split(",") if u.strip()]
    if not urls:
        raise CirError(f"base URL {base_url!r}: expected http(s)://HOST[:PORT][/PATH]")
    return urls


class LLMAgent:
    """ReAct agent over an OpenAI-compatible API, with a persistent response cache.

    Counters for reporting (per instance, :meth:`stats`): ``calls`` (answers obtained from
    the server), ``cache_hits`` (in memory or on disk: ``cache.hits_memory``,
    ``cache.hits_disk``; and answers shared with a thread that was asking the same),
    ``http_requests`` (attempts, retries included), ``retries``, ``refusals`` (429/503),
    ``invalid_answers`` (answers without a reply, retried), ``unparsable`` (replies with no
    recognisable command; they are still returned, cleaned, so the engine answers
    ``Nothing happens.``), and the tokens of the answers (``usage``).

    ``client``: an ``httpx.Client`` to send with (default: the process's shared pool);
    ``limiter``: the :class:`~cir.agents.limits.Limiter` to respect (default: the process's
    one for this server, without limits). Neither is part of the agent's params.
    """

    thread_safe = True  # the harness may call act() from several threads at once

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        cache_dir: str | Path | None = None,
        seed: int = 0,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 4,
        *,
        mode: str | None = None,
        think: bool = False,
        logprobs: int | None = None,
        options: Mapping[str, Any] | None = None,
        cache_fallback: Sequence[str | Path] = (),
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        patience: float = 600.0,
        client: httpx.Client | None = None,
        limiter: Limiter | None = None,
        prompt: LLMPrompt | None = None,
    ) -> None:
        mode = _check_agent(prompt, model, mode)
        if max_tokens is None:
            max_tokens = THINK_MAX_TOKENS if think else MAX_TOKENS
        _check_decoding(temperature, logprobs)
        _check_requests(timeout=timeout, max_tokens=max_tokens, max_reply_bytes=max_reply_bytes,
                        patience=patience, max_retries=max_retries, backoff=backoff,
                        max_backoff=max_backoff)
        self.model = model
        self.prompt = prompt
        self.base_urls = base_urls(base_url)
        self.base_url = ",".join(self.base_urls)
        self.api_key = api_key
        self.mode = mode
        self.seed = int(seed)
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.timeout, self.max_retries = float(timeout), int(max_retries)
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        self.max_reply_bytes = int(max_reply_bytes)
        self.patience = float(patience)
        self.think = bool(think)
        self.logprobs = logprobs
        self.options = check_options(options or {})
        self.name, fixed = self.describe(model, mode, prompt, seed=seed, temperature=temperature,
                                         max_tokens=max_tokens, think=think, logprobs=logprobs, options=options)
        self.stop = fixed["stop"]
        self.sample_index = 0  # sample 0 is the agent itself (cir.agents.sampling)
        self.cache = ResponseCache(cache_dir, fallback=cache_fallback)
        self.unparsable: list[str] = []
        self.last: ParsedAction | None = None  # with threads: of the latest call
        self._client = client
        self._limiter = limiter
        # what the limiter limits, to find the same shared one in a worker process
        self._limits = RequestLimits() if limiter is None else RequestLimits(
            concurrency=limiter.concurrency, rpm=limiter.rpm, tpm=limiter.tpm)
        self._start_counting()

    def _start_counting(self) -> None:
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._counts_lock = threading.Lock()
        self.usage = UsageCounter()
        self._in_flight: SingleFlight[tuple[dict[str, Any], bool]] = SingleFlight()
        self._sleep: Callable[[float], None] = time.sleep

    def _add(self, **counts: int) -> None:
        with self._counts_lock:
            for name, n in counts.items():
                self._counts[name] += n

    calls = _counter("calls", "Answers obtained from the server.")
    cache_hits = _counter("cache_hits", "Replies without a request (cache, or a request in flight).")
    in_flight_shared = _counter("in_flight_shared", "Replies taken from another thread's request.")
    http_requests = _counter("http_requests", "Attempts sent.")
    retries = _counter("retries", "Attempts after a request's first.")
    refusals = _counter("refusals", "HTTP 429/503 answers.")
    invalid_answers = _counter("invalid_answers", "Answers without a reply (retried).")

    # -- the Agent contract -------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """What fixes the reply besides the context (no address, no key; the sample index above 0)."""
        fixed = self.describe(self.model, self.mode, self.prompt, seed=self.seed, temperature=self.temperature,
                              max_tokens=self.max_tokens, think=self.think, logprobs=self.logprobs,
                              options=self.options)[1]
        # sample 0 is the agent itself: its params (and so its label) are unchanged
        return {**fixed, **({"sample": self.sample_index} if self.sample_index else {})}

    @staticmethod
    def describe(model: str, mode: str | None, prompt: LLMPrompt | None, *, seed: int = 0,
                 temperature: float = 0.0, max_tokens: int | None = None, think: bool = False,
                 logprobs: int | None = None, options: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """The name and :meth:`params` of the agent these arguments make (checked as the
        constructor checks them), without making it: ``cir.agents.factory.identity_from_spec``."""
        mode = _check_agent(prompt, model, mode)
        if max_tokens is None:
            max_tokens = THINK_MAX_TOKENS if think else MAX_TOKENS
        _check_decoding(temperature, logprobs)
        # function calling is how openai:MODEL asks a tool world (the spec names the endpoint)
        name = f"openai:{model}" if mode in ("chat", "tools") else f"openai-{mode}:{model}"
        return name, {
            "agent": "openai",
            "model": model,
            "mode": mode,
            "prompt": prompt.version,  # type: ignore[union-attr]
            "temperature": float(temperature),
            "seed": int(seed),
            "max_tokens": int(max_tokens),
            # one line is one command; a reasoning model's thinking spans lines, a tool call is no line
            "stop": [] if think or mode == "tools" else ["\n"],
            "think": bool(think),
            "logprobs": logprobs,
            "options": dict(sorted(check_options(options or {}).items())),
        }

    def sample(self, index: int) -> LLMAgent:
        """The agent drawing its ``index``-th sample (:mod:`cir.agents.sampling`): the same
        requests with the sampling seed of that sample, so each is its own request and its own
        cache entry. It shares this agent's cache, connection pool, limiter and counters."""
        return twin(self, index)

    def act(self, context: list[dict[str, str]]) -> str:
        """The next command (or ``think: ...``) for ``context``; from the cache when seen before."""
        if not context or not all(isinstance(m, dict) and "role" in m and "content" in m for m in context):
            raise CirError("LLM agent context: expected a non-empty list of {role, content} messages")
        endpoint, body = self.request(context)
        key = request_key(endpoint, body)
        record = self.cache.get(key)
        asked = shared = False
        if record is None:  # ask, or wait for the thread that is asking right now
            (record, asked), shared = self._in_flight.do(key, lambda: self._fetch(key, endpoint, body))
        if not asked or shared:
            self._add(cache_hits=1, in_flight_shared=int(shared))
        text = self._reply(record)
        parsed = self.prompt.parse(text)
        if not parsed.ok:
            self.unparsable.append(parsed.raw)
        self.last = parsed
        return parsed.action

    def _fetch(self, key: str, endpoint: str, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The cached record (and False), or the server's, cached (and True)."""
        record = self.cache.get(key)
        if record is not None:
            return record, False
        with self.cache.asking(key):  # an agent of another task or process asking the same waits
            record = self.cache.stored(key)
            if record is not None:
                return record, False
            record = self._complete(endpoint, body)
            self._add(calls=1)
            self._reply(record)  # before caching: a cut reply is never stored
            self.cache.put(key, record)
        return record, True

    def recorded(self, context: list[dict[str, str]]) -> dict[str, Any] | None:
        """The stored answer to ``context`` (``text``, ``finish_reason``, and ``logprobs``,
        ``reasoning`` or ``usage`` when there are some), or None; never a request."""
        return self.cache.get(request_key(*self.request(context)))

    def step_records(self, transcript: Any) -> list[tuple[int, dict[str, Any] | None]]:
        """``(i, stored answer)`` for each agent step ``i`` of a transcript (a
        :class:`cir.episode.transcript.Transcript`): the answer to the context it was given."""
        return [(i, self.recorded(transcript.prefix(i).context()))
                for i, step in enumerate(transcript.steps) if step.actor == "agent"]

    def _reply(self, record: dict[str, Any]) -> str:
        """The answer's text without closed think blocks; a CirError when one is left open."""
        text, still_open = strip_thinking(str(record.get("text") or ""))
        if still_open:
            raise CirError(self._cut_inside_thinking(record.get("finish_reason")))
        return text

    def _cut_inside_thinking(self, finish_reason: Any) -> str:
        head = f"LLM {self.model!r}: the reply "
        if finish_reason == "length":
            return (head + f"was cut inside an open <think> block at max_tokens={self.max_tokens}; "
                    "raise --max-tokens")
        if self.stop:
            return (head + "was cut at the newline stop inside an open <think> block: the model "
                    f"thinks before it answers; pass --think (no newline stop, max_tokens "
                    f"{THINK_MAX_TOKENS}), or turn its thinking off, e.g. "
                    """--llm-option 'chat_template_kwargs={"enable_thinking": false}'""")
        return head + f"ends inside an open <think> block (finish_reason {finish_reason!r})"

    # -- reporting ------------------------------------------------------------------------
    @property
    def hit_rate(self) -> float:
        """Share of ``act`` calls answered from the cache (0 before any call)."""
        total = self.calls + self.cache_hits
        return self.cache_hits / total if total else 0.0

    def stats(self) -> dict[str, float | int]:
        """The counters (recorded per session in ``run.json``, which sums the integers)."""
        with self._counts_lock:
            counts = dict(self._counts)
        return {
            "model_calls": counts["calls"],
            "cache_hits": counts["cache_hits"],
            "cache_hits_memory": self.cache.hits_memory,
            "cache_hits_disk": self.cache.hits_disk,
            "cache_hit_rate": self.hit_rate,
            "in_flight_shared": counts["in_flight_shared"],
            "http_requests": counts["http_requests"],
            "retries": counts["retries"],
            "refusals": counts["refusals"],
            "invalid_answers": counts["invalid_answers"],
            "unparsable": len(self.unparsable),
            "limiter_wait_ms": counts["limiter_wait_ms"],
            **self.usage.as_dict(),
        }

    # -- HTTP -------------------------------------------------------------------------------
    def request(self, context: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
        """The endpoint kind and JSON body for ``context`` (also the cache key's input)."""
        body: dict[str, Any] = {"model": self.model}
        if self.mode == "chat":
            body["messages"] = self.prompt.chat_messages(context)
        elif self.mode == "tools":  # function calling: the tool world's schemas, the calls as tool calls
            body["messages"] = self.prompt.tool_messages(context)
            body["tools"] = [dict(t) for t in self.prompt.tools]
        else:
            body["prompt"] = self.prompt.completion_prompt(context)
        body.update(temperature=self.temperature, seed=sample_seed(self.seed, self.sample_index),
                    max_tokens=self.max_tokens)
        if self.stop:
            body["stop"] = list(self.stop)
        if self.logprobs is not None:  # the two endpoints ask for them differently
            if self.mode in ("chat", "tools"):
                body.update(logprobs=True, top_logprobs=self.logprobs)
            else:
                body["logprobs"] = self.logprobs
        body.update(self.options)
        return self.mode, body

    @property
    def url(self) -> str:
        """The endpoint (of the first server, when there are several)."""
        return self._url(self.base_urls[0])

    def _url(self, base: str) -> str:
        return f"{base}/{'completions' if self.mode == 'completion' else 'chat/completions'}"

    @property
    def limiter(self) -> Limiter:
        """The limiter this agent's requests go through."""
        if self._limiter is None:
            self._limiter = shared_limiter(self.base_url, self._limits)
        return self._limiter

    def _post(self, url: str, body: dict[str, Any]) -> tuple[int, httpx.Headers, bytes]:
        """POST and read the answer: status, headers, body. Reading stops at the size cap
        (:class:`_TooLarge`) and at the timeout, also for a server that trickles bytes."""
        client = self._client if self._client is not None else shared_client()
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0))
        deadline = time.monotonic() + self.timeout
        with client.stream("POST", url, json=body, headers=headers, timeout=timeout) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_reply_bytes:
                raise _TooLarge
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_reply_bytes:
                    raise _TooLarge
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("answer still arriving at the timeout")
                chunks.append(chunk)
            return response.status_code, response.headers, b"".join(chunks)

    def _complete(self, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` until an answer holds a reply: faults retried ``max_retries`` times
        with backoff, refusals waited out with every thread (within ``patience``); the record
        to cache."""
        url, limiter = self.url, self.limiter
        start = time.monotonic()
        tokens = _estimate_tokens(body, self.max_tokens)
        faults, refused_since, attempt = 0, None, -1
        while True:
            attempt += 1
            if attempt:
                self._add(retries=1)
            ticket = limiter.acquire(tokens)
            self._add(http_requests=1, limiter_wait_ms=round(ticket.waited * 1000))
            servers = shared_servers(self.base_urls) if len(self.base_urls) > 1 else None
            server = servers.take() if servers is not None else 0
            try:
                outcome = self._attempt(self._url(self.base_urls[server]), endpoint, body)
            except BaseException:
                limiter.release(ticket)
                raise
            finally:
                if servers is not None:
                    servers.give(server)
            delay = self.backoff * 2 ** min(attempt, _MAX_DOUBLINGS)
            if outcome.record is not None:
                usage = outcome.record.get("usage")
                limiter.release(ticket, tokens=None if usage is None else
                                usage["prompt_tokens"] + usage["completion_tokens"])
                self.usage.add(usage)
                return outcome.record
            if outcome.refused:
                now = limiter.now()
                refused_since = now if refused_since is None else refused_since
                wait = min(delay if outcome.wait is None else outcome.wait, self.max_backoff)
                limiter.release(ticket, refused=True, wait=wait)
                self._add(refusals=1)
                if now + wait - refused_since > self.patience:
                    raise CirError(
                        f"LLM server {url}: {outcome.problem}; refused for {now - refused_since:.0f} s, "
                        f"longer than the patience of {self.patience:g} s (a rate limit or an "
                        "overloaded server): lower the request rate (rpm, tpm, concurrency) or raise "
                        "the patience")
                continue
            limiter.release(ticket)
            faults += 1
            if faults > self.max_retries:
                raise CirError(f"LLM server {url}: {outcome.problem}; gave up after {attempt + 1} "
                               f"attempt(s) in {time.monotonic() - start:.1f} s")
            self._sleep(min(delay, self.max_backoff))

    def _attempt(self, url: str, endpoint: str, body: dict[str, Any]) -> _Outcome:
        """One POST: the record, or what went wrong; a CirError when the server rejects it."""
        try:
            status, headers, raw = self._post(url, body)
        except httpx.TimeoutException as exc:
            return _Outcome(problem=f"no answer within {self.timeout:g} s ({type(exc).__name__})")
        except httpx.ConnectError:
            return _Outcome(problem="cannot connect (is the server running and the address right?)")
        except httpx.TransportError as exc:
            return _Outcome(problem=f"connection failed ({type(exc).__name__}: {exc})")
        except _TooLarge:
            self._add(invalid_answers=1)
            return _Outcome(problem=f"answer larger than {self.max_reply_bytes} bytes (not one short command)")
        if status == 200:
            record, problem = self._record(endpoint, raw)
            if record is None:
                self._add(invalid_answers=1)
            return _Outcome(record, problem)
        if status in (429, 503):
            return _Outcome(problem=f"HTTP {status}: {_error_detail(raw)}", refused=True,
                            wait=_retry_after(headers))
        if status >= 500:
            return _Outcome(problem=f"HTTP {status}: {_error_detail(raw)}")
        hint = {
            401: " (check the API key variable)",
            403: " (check the API key variable)",
            404: " (check the model name and that the base URL ends in /v1)",
        }.get(status, "")
        raise CirError(f"LLM server {url}: HTTP {status} for model {self.model!r}{hint}: "
                       f"{_error_detail(raw)}")

    def _record(self, endpoint: str, raw: bytes) -> tuple[dict[str, Any] | None, str]:
        """The record to cache from a 200 answer, or None and what is wrong with it."""
        try:
            data = json.loads(raw)
        except ValueError:
            return None, f"answer is not an OpenAI-style completion (not JSON): {_snippet(raw, 200)!r}"
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None, f"answer is not an OpenAI-style completion (no choices): {_snippet(raw, 200)!r}"
        choice = choices[0]
        reasoning = None
        if endpoint in ("chat", "tools"):
            message = choice.get("message")
            message = message if isinstance(message, dict) else {}
            text = message.get("content")
            if endpoint == "tools":
                text = _tool_call_text(message, text)
            # servers that parse the thinking out put it beside the answer (vLLM, llama.cpp)
            reasoning = message.get("reasoning_content") or message.get("reasoning")
        else:
            text = choice.get("text")
        finish = choice.get("finish_reason")
        if not isinstance(text, str) or not text.strip():
            if isinstance(reasoning, str) and reasoning.strip():
                # thinking without an answer is not a server fault: asking again gives the same
                raise CirError(self._cut_inside_thinking(finish).replace(
                    "inside an open <think> block", "while thinking (reasoning but no answer)"))
            shown = "null" if text is None else repr(text) if isinstance(text, str) else type(text).__name__
            return None, f"answer has no reply (content {shown})"
        record = {"text": text, "finish_reason": finish, "model": self.model, "endpoint": endpoint}
        if isinstance(reasoning, str) and reasoning:
            record["reasoning"] = reasoning
        if self.logprobs is not None:
            record["logprobs"] = choice.get("logprobs")
        usage = usage_of(data)
        if usage is not None:
            record["usage"] = usage
        return record, ""

    # -- lifetime -----------------------------------------------------------------------------
    def close(self) -> None:
        """Nothing to free: the pool is the process's (or the caller's, given as ``client``)."""

    def __enter__(self) -> LLMAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        """Picklable for worker processes (joblib): the pool, the limiter and the counters'
        locks are the process's own, found again (or made) there."""
        state = self.__dict__.copy()
        for name in ("_client", "_limiter", "_counts_lock", "usage", "_in_flight", "_sleep"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        counts = state.pop("_counts", None)
        self.__dict__.update(state)
        self._client = None
        self._limiter = None
        self._start_counting()
        if counts:
            self._counts.update(counts)

    def __repr__(self) -> str:
        return f"LLMAgent(model={self.model!r}, base_url={self.base_url!r}, mode={self.mode!r})"


def _tool_call_text(message: dict[str, Any], text: Any) -> Any:
    """A function-calling answer as the reply text the family's parser reads: its first tool call in
    OpenAI's form (``{"name": ..., "arguments": "..."}``; one call per reply, the rest not sent to the
    env), else the message's text (a model that wrote its call, or a thought, as text)."""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls and isinstance(calls[0], dict):
        function = calls[0].get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return json.dumps({"name": function["name"], "arguments": function.get("arguments") or "{}"},
                              ensure_ascii=False)
    return text


def _check_requests(*, max_retries: int, backoff: float, max_backoff: float, **above: float) -> None:
    for field, value in above.items():
        low = 0.0 if field in ("timeout", "patience") else 1
        if not value > low:
            raise CirError(f"LLM {field} {value!r}: expected a number above {low}")
    if max_retries < 0 or backoff < 0 or max_backoff < 0:
        raise CirError(
            f"LLM retries: max_retries={max_retries}, backoff={backoff}, max_backoff={max_backoff}; expected values >= 0"
        )


def _check_decoding(temperature: Any, logprobs: Any) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not math.isfinite(temperature) or temperature < 0:
        raise CirError(f"LLM temperature {temperature!r}: expected a number >= 0 (0 is greedy)")
    if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int)
                                 or not 0 <= logprobs <= MAX_LOGPROBS):
        raise CirError(f"LLM logprobs {logprobs!r}: expected an integer from 0 (the chosen "
                       f"tokens only) to {MAX_LOGPROBS} alternatives per token")


def check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Extra request fields, checked: string keys the agent does not set itself, JSON values."""
    if not isinstance(options, Mapping):
        raise CirError(f"LLM options {options!r}: expected a mapping of request fields to values")
    for key, value in options.items():
        if not isinstance(key, str) or not key:
            raise CirError(f"LLM option {key!r}: expected a request field name")
        if key in RESERVED_FIELDS:
            raise CirError(f"LLM option {key!r}: set by {RESERVED_FIELDS[key]}, not by an option")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise CirError(f"LLM option {key}={value!r}: expected a JSON value") from None
    return dict(options)
