"""An agent's name and settings (its label in the paired table) without building the agent."""

from __future__ import annotations

import pytest

from cir.agents.factory import LLMConfig
from cir.agents.llm import LLMAgent
from cir.families.registry import agent_identity, make_agent
from cir.pairs.run import run_agent_identity
from cir.pairs.settings import RunSettings, agent_label
from cir.util.errors import CirError

URL = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("spec, family, options", [
    ("builtin", None, {}), ("builtin:strong", None, {"seed": 7}), ("builtin", "textworld-cooking", {"seed": 2}),
    ("openai:Qwen3-14B", None, {"base_url": URL}),
    ("openai-completion:SmolLM2", "textworld-cooking",
     {"base_url": URL, "seed": 3, "llm": LLMConfig(temperature=0.6, think=True, options={"top_p": 0.95})}),
])
def test_the_identity_is_the_agents_own(spec, family, options):
    agent, identity = make_agent(spec, family=family, **options), agent_identity(spec, family=family, **options)
    assert (identity.name, identity.params()) == (agent.name, agent.params())
    assert agent_label(identity) == agent_label(agent)
    assert identity.uses_cache == hasattr(agent, "cache")


def test_a_run_reads_its_label_without_making_an_llm_agent(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an LLM agent was built for a label")

    monkeypatch.setattr(LLMAgent, "__init__", refuse)
    identity = run_agent_identity(RunSettings(agent="openai:Qwen3-14B", base_url=URL))
    assert identity.name == "openai:Qwen3-14B" and identity.params()["model"] == "Qwen3-14B"


@pytest.mark.parametrize("spec, options, needle", [
    ("openai:", {"base_url": URL}, "name the model"),
    ("openai:Q", {}, "no server address"),
    ("builtin:nope", {}, "agent profile 'nope': unknown"),
    ("builtin", {"llm": LLMConfig(max_tokens=64)}, "are for openai:MODEL"),
    ("gpt", {}, "unknown agent 'gpt'"),
])
def test_it_refuses_what_make_agent_refuses(monkeypatch, spec, options, needle):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for make in (make_agent, agent_identity):
        with pytest.raises(CirError, match=needle):
            make(spec, **options)
