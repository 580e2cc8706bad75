"""The LLM agent on the real ALFWorld engine without a model: an unreachable server,
replies with no action (answered ``Nothing happens.``) and answers with no reply at all
(asked again, never sent to the engine), through the harness."""

from __future__ import annotations

import pytest
from support.fake_openai import FakeOpenAI, Reply  # noqa: E402
from support.llm_server import free_port  # noqa: E402

from cir.agents.llm import LLMAgent  # noqa: E402
from cir.episode.harness import Harness  # noqa: E402
from cir.families.alfworld.env import AlfworldEnv  # noqa: E402
from cir.families.alfworld.prompts import PROMPT as ALFWORLD_PROMPT  # noqa: E402
from cir.util.errors import CirError  # noqa: E402


def test_unreachable_server_is_a_clear_error(pick_place_task, pick_place_env: AlfworldEnv) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    agent = LLMAgent("some-model", url, mode="completion", max_retries=1, backoff=0.0, prompt=ALFWORLD_PROMPT)
    with pytest.raises(CirError, match=rf"LLM server {url}/completions: cannot connect .*2 attempt\(s\)"):
        Harness(agent, max_turns=4, max_actions=4).episode(pick_place_env, pick_place_task.task_id)


def test_reply_without_an_action_meets_nothing_happens(pick_place_task, pick_place_env: AlfworldEnv) -> None:
    script = [Reply(text="Hmm, I am not sure."), Reply(text=""), Reply(text=None), Reply(text="look")]
    with FakeOpenAI(script) as fake:
        agent = LLMAgent("fake", fake.base_url, mode="completion", backoff=0.0, prompt=ALFWORLD_PROMPT)
        t = Harness(agent, max_turns=2, max_actions=2).episode(pick_place_env, pick_place_task.task_id)
    # the empty and the null answer were asked again, not sent to the engine as an action
    assert [s.action for s in t.steps] == ["hmm, i am not sure", "look"]
    assert t.steps[0].observation == "Nothing happens."
    assert agent.unparsable == ["Hmm, I am not sure."]
    assert (agent.http_requests, agent.retries, agent.invalid_answers) == (4, 2, 2)
