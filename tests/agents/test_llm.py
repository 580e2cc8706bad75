"""LLM agent without a model: request shape, cache, retries/backoff/429/timeouts, parsing."""

from __future__ import annotations

import json
import pickle
import socket
from pathlib import Path

import pytest
from support.fake_openai import FakeOpenAI, Reply  # noqa: E402

from cir.agents.cache import ResponseCache, request_key  # noqa: E402
from cir.agents.limits import Limiter
from cir.agents.llm import LLMAgent  # noqa: E402
from cir.families.alfworld.actions import parse_action  # noqa: E402
from cir.families.alfworld.prompts import EXAMPLES, completion_prompt, goal_sentence, task_type  # noqa: E402
from cir.families.alfworld.prompts import PROMPT as ALFWORLD_PROMPT  # noqa: E402
from cir.families.alfworld.text import TASK_TYPES
from cir.util.errors import CirError  # noqa: E402

TASK = (
    "You are in the middle of a room. Looking quickly around you, you see a countertop 1, "
    "a drawer 1, a fridge 1, a microwave 1, and a sinkbasin 1.\n\n"
    "Your task is to: heat some egg and put it in countertop."
)
CONTEXT = [
    {"role": "user", "content": TASK},
    {"role": "assistant", "content": "go to fridge 1"},
    {"role": "user", "content": "You arrive at fridge 1. The fridge 1 is closed."},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sleeps(list):
    """A clock that moves only when slept on: the waits of an agent and of its limiter."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def agent_for(server: FakeOpenAI, tmp_path: Path | None = None, **kw) -> LLMAgent:
    kw.setdefault("mode", "completion")
    sleeps = Sleeps()
    agent = LLMAgent("fake-model", server.base_url, cache_dir=tmp_path,
                     limiter=Limiter(clock=sleeps.clock, sleep=sleeps), **kw, prompt=ALFWORLD_PROMPT)
    agent._sleep = sleeps
    return agent


# -- request shape ---------------------------------------------------------------------------


def test_completion_request_shape_and_key_header() -> None:
    with FakeOpenAI([Reply(text=" > Open fridge 1.")]) as server:
        agent = agent_for(server, api_key="sk-test")
        assert agent.act(CONTEXT) == "open fridge 1"
    path, headers, body = server.requests[0]
    assert path == "/v1/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0.0 and body["seed"] == 0 and body["stop"] == ["\n"]
    prompt = body["prompt"]
    assert prompt.endswith("You arrive at fridge 1. The fridge 1 is closed.\n>")
    assert "> go to fridge 1\n" in prompt
    first, second = EXAMPLES["pick_heat_then_place_in_recep"]  # examples chosen by task type
    assert f"Here are two examples.\n\n{first}\n\n{second}\n\nHere is your task." in prompt
    assert "sk-test" not in json.dumps(agent.params())


def test_chat_request_merges_consecutive_user_messages() -> None:
    context = [*CONTEXT, {"role": "user", "content": "[harness] You are facing the fridge 1."}]
    with FakeOpenAI([Reply(text="Action: open the fridge 1")]) as server:
        agent = agent_for(server, mode="chat")
        assert agent.act(context) == "open fridge 1"
    path, headers, body = server.requests[0]
    assert path == "/v1/chat/completions"
    assert "Authorization" not in headers
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert body["messages"][-1]["content"].endswith("\n[harness] You are facing the fridge 1.")
    system = body["messages"][0]["content"]
    assert "heat egg 1 with microwave 1" in system and "heat potato 1 with microwave 1" in system


def test_bare_host_gets_v1_and_bad_settings_are_rejected() -> None:
    assert LLMAgent("m", "http://127.0.0.1:9", prompt=ALFWORLD_PROMPT).base_url == "http://127.0.0.1:9/v1"
    assert LLMAgent("m", "https://api.example.com/openai/v1/", prompt=ALFWORLD_PROMPT).base_url == "https://api.example.com/openai/v1"
    with pytest.raises(CirError, match="base URL 'localhost:8000'"):
        LLMAgent("m", "localhost:8000", prompt=ALFWORLD_PROMPT)
    with pytest.raises(CirError, match="LLM mode 'edit'"):
        LLMAgent("m", "http://127.0.0.1:9", mode="edit", prompt=ALFWORLD_PROMPT)
    with pytest.raises(CirError, match="timeout"):
        LLMAgent("m", "http://127.0.0.1:9", timeout=0, prompt=ALFWORLD_PROMPT)
    with pytest.raises(CirError, match="context"):
        LLMAgent("m", "http://127.0.0.1:9", prompt=ALFWORLD_PROMPT).act([])


def test_make_agent_builds_llm_agent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from cir.families import make_agent

    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    agent = make_agent("openai:my-model", base_url="http://127.0.0.1:9/v1", cache_dir=tmp_path, seed=3)
    assert isinstance(agent, LLMAgent)
    assert agent.name == "openai:my-model" and agent.api_key == "sk-env"
    assert agent.params()["seed"] == 3 and agent.cache.root == tmp_path
    assert agent.mode == "chat"
    completion = make_agent("openai-completion:qwen2.5:0.5b", base_url="http://127.0.0.1:9/v1")
    assert completion.mode == "completion" and completion.model == "qwen2.5:0.5b"
    assert completion.name == "openai-completion:qwen2.5:0.5b"
    with pytest.raises(CirError, match="openai-completion:MODEL"):
        make_agent("anthropic:claude", base_url="http://127.0.0.1:9/v1")


# -- cache -------------------------------------------------------------------------------------


def test_cache_makes_reruns_free_and_keys_on_settings(tmp_path: Path) -> None:
    with FakeOpenAI([Reply(text="open fridge 1")]) as server:
        agent = agent_for(server, tmp_path)
        assert agent.act(CONTEXT) == "open fridge 1"
        assert agent.act(CONTEXT) == "open fridge 1"
        assert (agent.calls, agent.cache_hits, len(server.requests)) == (1, 1, 1)
        # Another decoding setting is another request.
        other = agent_for(server, tmp_path, seed=1)
        other.act(CONTEXT)
        assert other.calls == 1 and len(server.requests) == 2
    # A new agent (new process in real use) answers from disk, even with no server at all.
    offline = LLMAgent("fake-model", f"http://127.0.0.1:{free_port()}/v1", cache_dir=tmp_path, mode="completion", prompt=ALFWORLD_PROMPT)
    assert offline.act(CONTEXT) == "open fridge 1"
    assert offline.stats() == {
        "model_calls": 0, "cache_hits": 1, "cache_hits_memory": 0, "cache_hits_disk": 1,
        "cache_hit_rate": 1.0, "in_flight_shared": 0, "http_requests": 0, "retries": 0,
        "refusals": 0, "invalid_answers": 0, "unparsable": 0, "limiter_wait_ms": 0,
        "prompt_tokens": 0, "completion_tokens": 0, "cached_prompt_tokens": 0,
        "replies_with_usage": 0,
    }
    offline.act(CONTEXT)  # now from memory
    assert (offline.cache.hits_memory, offline.cache.hits_disk) == (1, 1)


def test_agent_pickles_for_worker_processes(tmp_path: Path) -> None:
    with FakeOpenAI([Reply(text="look")]) as server:
        agent = agent_for(server, tmp_path)
        agent.act(CONTEXT)
        clone = pickle.loads(pickle.dumps(agent))
        assert clone.act(CONTEXT) == "look"
        assert (clone.calls, clone.cache_hits, len(server.requests)) == (1, 1, 1)


# -- retries, backoff, rate limits, timeouts -------------------------------------------------


def test_retries_5xx_with_exponential_backoff() -> None:
    with FakeOpenAI([Reply(status=500), Reply(status=503), Reply(status=502), Reply(text="look")]) as server:
        agent = agent_for(server, backoff=0.5)
        assert agent.act(CONTEXT) == "look"
    assert agent._sleep == [0.5, 1.0, 2.0]
    assert (agent.http_requests, agent.retries, agent.calls) == (4, 3, 1)


def test_429_honours_retry_after() -> None:
    script = [Reply(status=429, headers={"Retry-After": "3"}), Reply(status=429, headers={"Retry-After": "bogus"}),
              Reply(text="inventory")]
    with FakeOpenAI(script) as server:
        agent = agent_for(server, backoff=0.25)
        assert agent.act(CONTEXT) == "inventory"
    assert agent._sleep == [3.0, 0.5]  # the server's wait, then our own backoff (attempt 2)


def test_backoff_is_capped() -> None:
    with FakeOpenAI([Reply(status=429, headers={"Retry-After": "3600"}), Reply(text="look")]) as server:
        agent = agent_for(server, max_backoff=5.0)
        agent.act(CONTEXT)
    assert agent._sleep == [5.0]


def test_gives_up_with_clear_error_after_retries() -> None:
    with FakeOpenAI([Reply(status=500)]) as server:
        agent = agent_for(server, max_retries=2, backoff=0.01)
        with pytest.raises(CirError) as err:
            agent.act(CONTEXT)
    msg = str(err.value)
    assert server.base_url + "/completions" in msg
    assert "HTTP 500: scripted error 500" in msg and "3 attempt(s)" in msg
    assert len(server.requests) == 3


def test_timeout_is_retried_then_reported() -> None:
    with FakeOpenAI([Reply(delay=1.5)]) as server:
        agent = agent_for(server, timeout=0.2, max_retries=1, backoff=0.0)
        with pytest.raises(CirError, match=r"no answer within 0.2 s .*2 attempt\(s\)"):
            agent.act(CONTEXT)


def test_client_errors_are_not_retried() -> None:
    with FakeOpenAI([Reply(status=404)]) as server:
        agent = agent_for(server)
        with pytest.raises(CirError, match=r"HTTP 404 for model 'fake-model' \(check the model name"):
            agent.act(CONTEXT)
    assert len(server.requests) == 1 and agent._sleep == []


def test_unreachable_server_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    agent = LLMAgent("m", url, max_retries=1, backoff=0.0, mode="chat", prompt=ALFWORLD_PROMPT)
    with pytest.raises(CirError, match=rf"LLM server {url}/chat/completions: cannot connect"):
        agent.act(CONTEXT)
    assert agent.http_requests == 2


def test_answer_that_is_not_openai_shaped_is_a_clear_error() -> None:
    with FakeOpenAI([Reply(raw="<html>proxy error</html>")]) as server:
        with pytest.raises(CirError, match="not an OpenAI-style completion.*proxy error"):
            agent_for(server).act(CONTEXT)
    with FakeOpenAI([Reply(raw=json.dumps({"choices": []}))]) as server:
        with pytest.raises(CirError, match="not an OpenAI-style completion"):
            agent_for(server).act(CONTEXT)


# -- replies without an action -----------------------------------------------------------------


def test_unparsable_replies_are_passed_on_and_recorded() -> None:
    with FakeOpenAI([Reply(text="I am not sure what to do here.")]) as server:
        agent = agent_for(server)
        assert agent.act(CONTEXT) == "i am not sure what to do here"
    assert agent.unparsable == ["I am not sure what to do here."]
    assert agent.last is not None and not agent.last.ok


@pytest.mark.parametrize("text", [None, "", " \n "])
def test_null_or_empty_content_is_an_error_after_retries_and_never_cached(tmp_path: Path, text) -> None:
    with FakeOpenAI([Reply(text=text)]) as server:
        agent = agent_for(server, tmp_path, max_retries=2, backoff=0.0)
        with pytest.raises(CirError, match=r"answer has no reply \(content .*3 attempt\(s\)"):
            agent.act(CONTEXT)
        assert (len(server.requests), agent.invalid_answers, agent.calls) == (3, 3, 0)
    assert len(ResponseCache(tmp_path)) == 0 and not list(tmp_path.glob("replies-*"))
    # once the server answers again, the agent asks it (nothing bad was cached)
    with FakeOpenAI([Reply(text=None), Reply(text="look")]) as server:
        agent = agent_for(server, tmp_path, backoff=0.0)
        assert agent.act(CONTEXT) == "look" and agent.retries == 1


def test_an_empty_reply_cached_by_an_older_version_is_not_reused(tmp_path: Path) -> None:
    with FakeOpenAI([Reply(text="look")]) as server:
        agent = agent_for(server, tmp_path)
        key = request_key(*agent.request(CONTEXT))
        ResponseCache(tmp_path)  # the folder
        (tmp_path / key[:2]).mkdir()
        (tmp_path / key[:2] / f"{key}.json").write_text(json.dumps({"text": ""}))
        assert agent.act(CONTEXT) == "look" and agent.calls == 1
    assert ResponseCache(tmp_path).get(key)["text"] == "look"  # the new answer is the one read


def test_oversized_answer_is_refused_before_it_is_read_whole() -> None:
    big = "go to desk 1 " + "x" * 5000
    with FakeOpenAI([Reply(text=big)]) as server:
        agent = agent_for(server, max_retries=1, backoff=0.0, max_reply_bytes=2000)
        with pytest.raises(CirError, match="answer larger than 2000 bytes"):
            agent.act(CONTEXT)
    assert agent.invalid_answers == 2


# -- parsing and prompts -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        ("go to desk 1", "go to desk 1"),
        ("> Go to the Desk 1.", "go to desk 1"),
        ("Action: goto desk 1", "go to desk 1"),
        ("put apple 1 in/on countertop 1", "move apple 1 to countertop 1"),
        ("put the apple 1 in countertop 1", "move apple 1 to countertop 1"),
        ("Put apple 1 on countertop 1.", "move apple 1 to countertop 1"),
        ("place mug 1 into cabinet 2", "move mug 1 to cabinet 2"),
        ("move apple 1 to countertop 1", "move apple 1 to countertop 1"),
        ("pick up the apple 1 from the countertop 1", "take apple 1 from countertop 1"),
        ("take apple 1 from countertop 1\nYou pick up...", "take apple 1 from countertop 1"),
        ("heat egg 1 using microwave 1", "heat egg 1 with microwave 1"),
        ("cool tomato 1 in fridge 1", "cool tomato 1 with fridge 1"),
        ("clean spatula 1 with sinkbasin 1", "clean spatula 1 with sinkbasin 1"),
        ("turn on desklamp 1", "use desklamp 1"),
        ("use desklamp 1", "use desklamp 1"),
        ("look at book 1", "examine book 1"),
        ("examine the drawer 1", "examine drawer 1"),
        ("Look.", "look"),
        ("check inventory", "inventory"),
        ("open fridge 1", "open fridge 1"),
        ("`close fridge 1`", "close fridge 1"),
        ('"open drawer 2"', "open drawer 2"),
        ("1. go to shelf 2", "go to shelf 2"),
        ("\n\n  > think: The Egg may be in the fridge.", "think: The Egg may be in the fridge."),
        ("Thought: I should look in the fridge", "think: I should look in the fridge"),
    ],
)
def test_parse_action_maps_variants_to_alfworld_syntax(reply: str, action: str) -> None:
    parsed = parse_action(reply)
    assert (parsed.action, parsed.ok) == (action, True)


@pytest.mark.parametrize("reply", ["", "   \n ", "I think so.", "dance with the mop"])
def test_parse_action_flags_replies_without_a_command(reply: str) -> None:
    parsed = parse_action(reply)
    assert not parsed.ok and parsed.action
    assert "\n" not in parsed.action


@pytest.mark.parametrize(
    ("goal", "kind"),
    [
        ("put a pen in drawer.", "pick_and_place_simple"),
        ("put some spraybottle on toilet.", "pick_and_place_simple"),
        ("look at book under the desklamp.", "look_at_obj_in_light"),
        ("examine the alarmclock with the desklamp.", "look_at_obj_in_light"),
        ("put a clean spatula in drawer.", "pick_clean_then_place_in_recep"),
        ("clean some lettuce and put it in fridge.", "pick_clean_then_place_in_recep"),
        ("put a hot egg in countertop.", "pick_heat_then_place_in_recep"),
        ("heat some potato and put it in garbagecan.", "pick_heat_then_place_in_recep"),
        ("put a cool tomato in diningtable.", "pick_cool_then_place_in_recep"),
        ("cool some pan and put it in stoveburner.", "pick_cool_then_place_in_recep"),
        ("put two cellphone in bed.", "pick_two_obj_and_place"),
        ("find two pillow and put them in sofa.", "pick_two_obj_and_place"),
    ],
)
def test_task_type_from_goal_sentence(goal: str, kind: str) -> None:
    assert task_type(f"You are in the middle of a room.\n\nYour task is to: {goal}") == kind


def test_every_task_type_has_two_examples_in_alfworld_0_4_syntax() -> None:
    assert set(EXAMPLES) == set(TASK_TYPES)
    for kind, examples in EXAMPLES.items():
        assert len(examples) == 2 and examples[0] != examples[1]
        goals = {" ".join(goal_sentence(example).split()[:2]) for example in examples}
        assert len(goals) == 2, f"{kind}: both examples use one goal template ({goals})"
        for example in examples:
            assert task_type(example) == kind
            commands = [line[2:] for line in example.splitlines() if line.startswith("> ")]
            assert commands, kind
            for command in commands:
                parsed = parse_action(command)
                assert parsed.ok and parsed.action == command, command
            assert not any(c.startswith("put ") for c in commands)
            # every command is answered by one line of the engine's text
            lines = example.splitlines()
            for i, line in enumerate(lines):
                if line.startswith("> "):
                    assert i + 1 < len(lines) and lines[i + 1] and not lines[i + 1].startswith(">")
    assert completion_prompt([{"role": "user", "content": "no goal here"}]).endswith("no goal here\n>")


def test_task_type_matches_every_alfworld_goal_template() -> None:
    goal_library = pytest.importorskip("alfworld.gen.goal_library")
    for kind in TASK_TYPES:
        for template in goal_library.gdict[kind]["templates"]:
            goal = template.format(obj="apple", recep="countertop", toggle="desklamp") + "."
            assert task_type(f"Your task is to: {goal}") == kind, goal
