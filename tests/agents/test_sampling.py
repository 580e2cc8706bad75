"""Agents that sample (cir.agents.sampling): the softmax of the built-in agents, per-sample seeds
and settings, and the agents' sample(index)."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from cir.agents.sampling import (
    MARGIN,
    check_samples,
    sample_agent,
    sample_seed,
    softmax_choice,
)
from cir.families.alfworld.agent.builtin import BuiltinAgent
from cir.util.errors import CirError


def test_softmax_choice_draws_as_a_softmax_and_is_the_decided_reply_at_temperature_zero():
    alts = ["look", "inventory", "go to desk 1", "look"]  # the repeated one counts once
    assert all(softmax_choice("go to bed 1", alts, 0.0, u / 100) == "go to bed 1" for u in range(100))
    assert softmax_choice("go to bed 1", [], 1.0, 0.99) == "go to bed 1"
    n, temperature = 20_000, 0.7
    counts = Counter(softmax_choice("go to bed 1", alts, temperature, (i + 0.5) / n) for i in range(n))
    odds = math.exp(-MARGIN / temperature)
    assert counts["go to bed 1"] / n == pytest.approx(1 / (1 + 3 * odds), abs=1e-3)
    for alt in ("look", "inventory", "go to desk 1"):
        assert counts[alt] / n == pytest.approx(odds / (1 + 3 * odds), abs=1e-3)


def test_sample_seeds_and_bad_sample_counts():
    assert sample_seed(7, 0) == 7
    seeds = {sample_seed(s, i) for s in (0, 1000, 2000) for i in range(1, 50)}
    assert len(seeds) == 3 * 49 and all(0 <= x < 2**31 for x in seeds)
    assert sample_seed(0, 3) == sample_seed(0, 3)
    for bad in (0, -1, 1.5, True, "4", 10**6):
        with pytest.raises(CirError, match="samples"):
            check_samples(bad)


def test_an_agent_without_sample_is_refused_and_sample_zero_is_the_agent():
    class Plain:
        name = "plain"

    agent = Plain()
    assert sample_agent(agent, 0) is agent
    with pytest.raises(CirError, match="does not sample"):
        sample_agent(agent, 1)


def test_the_builtin_agent_at_temperature_zero_is_unchanged_and_its_own_sample():
    a, b = BuiltinAgent(), BuiltinAgent(temperature=0.0)
    assert a.params() == b.params() and "temperature" not in a.params()
    assert a.sample(3) is a


def test_the_builtin_agent_samples_by_content_and_index():
    hot = BuiltinAgent(temperature=1.0)
    assert hot.params()["temperature"] == 1.0 and "sample" not in hot.params()
    s1 = hot.sample(1)
    assert s1.params()["sample"] == 1 and s1.sample(1) is s1
    task = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a "
            "countertop 1, a drawer 1, a drawer 2, a fridge 1, a shelf 1, and a sinkbasin 1.\n\n"
            "Your task is to: put some apple in fridge.")
    context = [{"role": "user", "content": task}, {"role": "assistant", "content": "go to countertop 1"},
               {"role": "user", "content": "You arrive at countertop 1. On the countertop 1, you see a knife 1."}]
    replies = {i: hot.sample(i).act_traced(context) for i in range(40)}
    # a fresh agent gives every sample the same reply (a pure function of context and index)
    fresh = BuiltinAgent(temperature=1.0)
    assert all(fresh.sample(i).act(context) == replies[i][0] for i in range(40))
    decided = BuiltinAgent().act(context)
    different = [i for i, (reply, _, _) in replies.items() if reply != decided]
    assert 0 < len(different) < 40  # about 17% at T = 1
    for reply, _, fired in replies.values():  # a reply other than the decided one is a named draw
        assert (reply != decided) == any(f.mechanism == "sampled_choice" for f in fired)


def test_the_llm_agent_sends_each_sample_its_own_seed_and_shares_its_counters(tmp_path):
    from cir.agents.llm import LLMAgent
    from cir.families.alfworld.prompts import PROMPT

    agent = LLMAgent("m", "http://127.0.0.1:9/v1", prompt=PROMPT, seed=5, temperature=0.7,
                     cache_dir=tmp_path)
    twin = agent.sample(2)
    context = [{"role": "user", "content": "Your task is to: look at a mug under the desklamp."}]
    assert agent.request(context)[1]["seed"] == 5
    assert twin.request(context)[1]["seed"] == sample_seed(5, 2) != 5
    assert "sample" not in agent.params() and twin.params()["sample"] == 2
    assert twin.cache is agent.cache and twin._counts is agent._counts and twin.usage is agent.usage


def test_the_factory_gives_a_builtin_agent_its_temperature_and_refuses_other_llm_options():
    from cir.agents.factory import LLMConfig
    from cir.families.registry import make_agent

    assert make_agent("builtin", llm=LLMConfig(temperature=0.7)).params()["temperature"] == 0.7
    assert "temperature" not in make_agent("builtin", llm=LLMConfig()).params()
    with pytest.raises(CirError, match="--max-tokens, --think"):
        make_agent("builtin", llm=LLMConfig(temperature=0.7, max_tokens=10))
    with pytest.raises(CirError, match="--temperature"):
        make_agent("builtin", llm=LLMConfig(temperature=-1.0))

    def no_sampling(profile, *, seed=0):
        return BuiltinAgent(profile, seed)

    from cir.agents.factory import agent_from_spec

    with pytest.raises(CirError, match="does not sample"):
        agent_from_spec("builtin", builtin=no_sampling, llm=LLMConfig(temperature=0.5))
