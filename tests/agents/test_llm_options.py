"""The LLM agent for real servers, without a model: temperature and extra request fields,
reasoning models' think blocks, logprobs kept with the reply, a cache read through to
another, and the command-line forms of these settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fake_openai import FakeOpenAI, Reply  # noqa: E402
from support.replies import cached_lines, folder_bytes

from cir.agents.cache import ResponseCache, request_key  # noqa: E402
from cir.agents.factory import LLMConfig, parse_llm_options  # noqa: E402
from cir.agents.llm import MAX_TOKENS, THINK_MAX_TOKENS, LLMAgent, strip_thinking  # noqa: E402
from cir.families import make_agent  # noqa: E402
from cir.families.alfworld.prompts import PROMPT as ALFWORLD_PROMPT  # noqa: E402
from cir.pairs.replay import agent_label  # noqa: E402
from cir.util.errors import CirError  # noqa: E402

CONTEXT = [
    {"role": "user", "content": "You are in the middle of a room.\n\nYour task is to: put a pen in drawer."},
    {"role": "assistant", "content": "go to desk 1"},
    {"role": "user", "content": "You arrive at desk 1. On the desk 1, you see a pen 1."},
]
LOGPROBS = {"tokens": [" take", " pen"], "token_logprobs": [-0.1, -0.3],
            "top_logprobs": [{" take": -0.1, " go": -2.5}, {" pen": -0.3, " book": -1.9}]}


def agent_for(server: FakeOpenAI, cache: Path | None = None, **kw) -> LLMAgent:
    kw.setdefault("mode", "completion")
    kw.setdefault("max_retries", 2)
    kw.setdefault("backoff", 0.0)
    return LLMAgent("fake-model", server.base_url, cache_dir=cache, **kw, prompt=ALFWORLD_PROMPT)


# -- temperature and extra request fields --------------------------------------------------------


def test_temperature_and_options_go_into_the_body_the_settings_and_the_cache_key(tmp_path: Path) -> None:
    options = {"chat_template_kwargs": {"enable_thinking": False}, "top_p": 0.9}
    with FakeOpenAI([Reply(text="take pen 1 from desk 1")]) as server:
        agent = agent_for(server, tmp_path, mode="chat", temperature=0.7, options=options)
        assert agent.act(CONTEXT) == "take pen 1 from desk 1"
        body = server.requests[0][2]
        assert body["temperature"] == 0.7 and body["top_p"] == 0.9
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        assert body["stop"] == ["\n"] and body["max_tokens"] == MAX_TOKENS
        settings = agent.params()
        assert settings["temperature"] == 0.7 and settings["options"] == options
        # another option is another agent (label) and another cache entry
        plain = agent_for(server, tmp_path, mode="chat", temperature=0.7)
        assert agent_label(plain) != agent_label(agent)
        plain.act(CONTEXT)
        assert len(server.requests) == 2 and plain.calls == 1
        # the same settings from a new process: the cached reply, no request
        again = agent_for(server, tmp_path, mode="chat", temperature=0.7, options=dict(options))
        assert agent_label(again) == agent_label(agent)
        again.act(CONTEXT)
        assert len(server.requests) == 2 and again.cache_hits == 1


@pytest.mark.parametrize(("options", "needle"), [
    ({"temperature": 1.0}, "--temperature"),
    ({"max_tokens": 10}, "--max-tokens"),
    ({"stop": ["\n\n"]}, "newline stop"),
    ({"logprobs": True}, "--logprobs"),
    ({"stream": True}, "whole answers"),
    ({"messages": []}, "context"),
    ({"x": float("nan")}, "JSON value"),
    ({"x": object()}, "JSON value"),
])
def test_options_the_agent_sets_itself_are_refused(options: dict, needle: str) -> None:
    with pytest.raises(CirError, match="LLM option") as err:
        LLMAgent("m", "http://127.0.0.1:9", options=options, prompt=ALFWORLD_PROMPT)
    assert needle in str(err.value)


@pytest.mark.parametrize(("kw", "needle"), [
    ({"temperature": -0.1}, "temperature -0.1"),
    ({"temperature": float("inf")}, "temperature inf"),
    ({"logprobs": 21}, "logprobs 21"),
    ({"logprobs": -1}, "logprobs -1"),
    ({"max_tokens": 0}, "max_tokens 0"),
])
def test_bad_decoding_settings_are_one_line_errors(kw: dict, needle: str) -> None:
    with pytest.raises(CirError, match=needle):
        LLMAgent("m", "http://127.0.0.1:9", **kw, prompt=ALFWORLD_PROMPT)


def test_llm_option_values_are_json_when_they_parse() -> None:
    assert parse_llm_options(["reasoning_effort=low", "top_p=0.9", "flag=true",
                              'chat_template_kwargs={"enable_thinking": false}', "empty=",
                              "name=a=b"]) == {
        "reasoning_effort": "low", "top_p": 0.9, "flag": True,
        "chat_template_kwargs": {"enable_thinking": False}, "empty": "", "name": "a=b"}
    for bad, needle in (["novalue"], "KEY=VALUE"), (["=1"], "KEY=VALUE"), (["a=1", "a=2"], "twice"):
        with pytest.raises(CirError, match=needle):
            parse_llm_options(bad)


def test_builtin_agent_refuses_llm_settings_but_its_temperature() -> None:
    assert make_agent("builtin", llm=LLMConfig()).name.startswith("builtin")
    assert make_agent("builtin", llm=LLMConfig(temperature=0.5)).params()["temperature"] == 0.5  # it samples
    for llm in (LLMConfig(max_tokens=10), LLMConfig(think=True), LLMConfig(logprobs=2), LLMConfig(options={"a": 1})):
        with pytest.raises(CirError, match="--max-tokens, --think, --logprobs and --llm-option"):
            make_agent("builtin", llm=llm)
    agent = make_agent("openai:m", base_url="http://127.0.0.1:9/v1",
                       llm=LLMConfig(temperature=0.2, think=True, logprobs=3, options={"top_k": 5}))
    assert (agent.temperature, agent.think, agent.logprobs, agent.options) == (0.2, True, 3, {"top_k": 5})
    assert agent.max_tokens == THINK_MAX_TOKENS


# -- reasoning models ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "reply", "still_open"), [
    ("<think>where is it?</think>go to desk 1", "go to desk 1", False),
    ("<THINK>a\nb</THINK>\n\ntake pen 1 from desk 1", "\n\ntake pen 1 from desk 1", False),
    ("<think>x</think> a <think>y</think>b", " a b", False),
    ("the template opened it\n</think>\nopen drawer 1", "\nopen drawer 1", False),
    ("<think>", "", True),
    ("go to desk 1 <think>hmm", "go to desk 1 ", True),
    ("go to desk 1", "go to desk 1", False),
])
def test_think_blocks_are_stripped_only_when_closed(text: str, reply: str, still_open: bool) -> None:
    assert strip_thinking(text) == (reply, still_open)


def test_a_reply_cut_inside_a_think_block_is_a_clear_error_never_an_action(tmp_path: Path) -> None:
    # a reasoning model without --think: the newline stop cuts it right after "<think>"
    with FakeOpenAI([Reply(text="<think>")]) as server:
        agent = agent_for(server, tmp_path, mode="chat")
        with pytest.raises(CirError, match="cut at the newline stop inside an open <think> block") as err:
            agent.act(CONTEXT)
        assert "--think" in str(err.value) and "enable_thinking" in str(err.value)
        assert len(server.requests) == 1  # not a server fault: not asked again
    assert cached_lines(tmp_path) == []  # and not cached
    # with --think: no stop, a larger budget; a reply cut at that budget names it
    with FakeOpenAI([Reply(text="<think>let me see, the pen", finish_reason="length")]) as server:
        agent = agent_for(server, tmp_path, mode="chat", think=True)
        with pytest.raises(CirError, match=f"max_tokens={THINK_MAX_TOKENS}; raise --max-tokens"):
            agent.act(CONTEXT)
        body = server.requests[0][2]
        assert "stop" not in body and body["max_tokens"] == THINK_MAX_TOKENS
    assert cached_lines(tmp_path) == []


def test_a_closed_think_block_is_removed_and_the_whole_answer_cached(tmp_path: Path) -> None:
    answer = "<think>\nThe pen is on the desk.\nI take it.\n</think>\n\ntake pen 1 from desk 1"
    with FakeOpenAI([Reply(text=answer)]) as server:
        agent = agent_for(server, tmp_path, mode="chat", think=True)
        assert agent.act(CONTEXT) == "take pen 1 from desk 1"
    assert agent.recorded(CONTEXT)["text"] == answer
    assert not agent.unparsable


def test_reasoning_without_an_answer_is_a_clear_error(tmp_path: Path) -> None:
    # servers with a reasoning parser send the thinking apart; cut short, there is no content
    with FakeOpenAI([Reply(text=None, reasoning="Okay, the user wants")]) as server:
        agent = agent_for(server, tmp_path, mode="chat")
        with pytest.raises(CirError, match="while thinking \\(reasoning but no answer\\)"):
            agent.act(CONTEXT)
        assert len(server.requests) == 1
    with FakeOpenAI([Reply(text="open drawer 1", reasoning="The drawer holds pens.")]) as server:
        agent = agent_for(server, tmp_path, mode="chat", think=True)
        assert agent.act(CONTEXT) == "open drawer 1"
    assert agent.recorded(CONTEXT)["reasoning"] == "The drawer holds pens."


# -- logprobs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["completion", "chat"])
def test_logprobs_are_asked_for_and_kept_with_the_reply(tmp_path: Path, mode: str) -> None:
    with FakeOpenAI([Reply(text="take pen 1 from desk 1", logprobs=LOGPROBS)]) as server:
        agent = agent_for(server, tmp_path, mode=mode, logprobs=2)
        agent.act(CONTEXT)
        body = server.requests[0][2]
    if mode == "chat":
        assert (body["logprobs"], body["top_logprobs"]) == (True, 2)
    else:
        assert body["logprobs"] == 2 and "top_logprobs" not in body
    assert agent.params()["logprobs"] == 2
    # on disk with the reply, and read back without a request (a new agent, no server)
    fresh = LLMAgent("fake-model", "http://127.0.0.1:9/v1", cache_dir=tmp_path, mode=mode, logprobs=2, prompt=ALFWORLD_PROMPT)
    record = fresh.recorded(CONTEXT)
    assert record["logprobs"] == LOGPROBS and record["text"] == "take pen 1 from desk 1"
    assert fresh.http_requests == 0
    # off by default: none asked for, none stored
    with FakeOpenAI([Reply(text="look", logprobs=LOGPROBS)]) as server:
        plain = agent_for(server, tmp_path / "plain", mode=mode)
        plain.act(CONTEXT)
        assert "logprobs" not in server.requests[0][2]
    assert "logprobs" not in plain.recorded(CONTEXT)


# -- a cache that reads through to another ------------------------------------------------------------


def test_cache_reads_through_to_a_fallback_and_never_writes_to_it(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    key_a, key_b = request_key("chat", {"a": 1}), request_key("chat", {"b": 1})
    ResponseCache(old).put(key_a, {"text": "look"})
    before = folder_bytes(old)
    cache = ResponseCache(new, fallback=[old])
    assert cache.get(key_a) == {"text": "look"} and cache.hits_disk == 1
    assert cache.get(key_b) is None
    cache.put(key_b, {"text": "inventory"})
    # the reply used is now in the new cache too; the old one is as it was
    assert ResponseCache(new).get(key_a) == {"text": "look"}
    assert folder_bytes(old) == before
    assert ResponseCache(old).get(key_b) is None
    with pytest.raises(CirError, match="not found"):
        ResponseCache(new, fallback=[tmp_path / "missing"])
