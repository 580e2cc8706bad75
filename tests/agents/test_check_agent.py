"""``cir check-agent`` (cir.agents.check): the action-match rate of an agent asked the same
context several times, each answer its own sample."""

from __future__ import annotations

import json

import pytest
from support.fake_openai import FakeOpenAI, sampling_answer

from cir.agents.check import check_agent, match_rate
from cir.agents.llm import LLMAgent
from cir.cli import main
from cir.families.alfworld.prompts import PROMPT
from cir.util.errors import CirError

CONTEXTS = [
    [{"role": "user", "content": f"You are in the middle of a room. Looking quickly around you, you see a "
                                 f"cabinet {i}, a drawer 1, a fridge 1, a shelf 2, and a sinkbasin 1.\n\n"
                                 "Your task is to: put a clean mug in shelf."},
     {"role": "assistant", "content": "go to drawer 1"},
     {"role": "user", "content": "You arrive at drawer 1. On the drawer 1, you see a mug 1 and a pen 2."}]
    for i in range(1, 7)
]


def test_match_rate_is_the_chance_that_two_answers_agree():
    assert match_rate(["a", "a", "a"]) == 1.0
    assert match_rate(["a", "b"]) == 0.0
    assert match_rate(["a", "a", "b", "b"]) == pytest.approx(4 / 12)
    with pytest.raises(CirError, match="--n"):
        check_agent(object(), CONTEXTS, 1)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_an_llm_server_asked_each_context_as_samples(temperature):
    with FakeOpenAI(answer=sampling_answer) as server:
        agent = LLMAgent("fake", server.base_url, prompt=PROMPT, temperature=temperature, mode="completion")
        result = check_agent(agent, CONTEXTS, 8)
        seeds = {body["seed"] for _, _, body in server.requests}
    assert result.requests == server.count == len(CONTEXTS) * 8  # each answer its own request
    assert len(seeds) == 8
    if temperature == 0:
        assert result.match_rate == 1.0 and result.deterministic
        assert "whole truth" in result.summary()
    else:
        assert 0 < result.match_rate < 1 and "--samples" in result.summary()


def test_the_command_on_the_builtin_agent(tmp_path, pick_place_task, capsys):
    folder = pick_place_task.game_file.parents[2]
    out = tmp_path / "check.json"
    assert main(["check-agent", "--tasks", str(folder), "--contexts", "2", "--n", "12",
                 "--temperature", "1.0", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["n"] == 12 and len(data["per_context"]) == 2 and data["requests"] is None
    assert data["match_rate"] < 1  # content-keyed: the same on every machine for this task
    assert "action-match rate" in capsys.readouterr().out
    assert main(["check-agent", "--tasks", str(folder), "--contexts", "2", "--n", "3"]) == 0
    assert "1.000" in capsys.readouterr().out  # the built-in agent at temperature 0
