"""A framework agent whose framework is not installed is refused with the extra to install, judged
by distribution: a folder named agents/ on the path (as tests/agents is here) is a namespace
package that ``import agents`` finds, so an import check would pass and the adapter then fail."""

from __future__ import annotations

import pytest

from cir.adapters import frameworks as factory  # the framework agents' part of the agent factory
from cir.util.errors import CirError


def test_a_framework_not_installed_names_the_distribution_and_the_extra(monkeypatch):
    monkeypatch.setitem(factory.FRAMEWORK_DISTRIBUTIONS, "openai-agents", ("cir-no-such-distribution",))
    with pytest.raises(CirError) as err:
        factory.framework_agent("openai-agents:examples.openai_agents_agent:agent", base_url="http://127.0.0.1:9")
    message = str(err.value)
    assert "cir-no-such-distribution" in message
    assert 'pip install "cir[openai-agents]"' in message
    assert factory.missing_framework("openai-agents") == ["cir-no-such-distribution"]


def test_an_installed_framework_is_not_missing(monkeypatch):
    monkeypatch.setitem(factory.FRAMEWORK_DISTRIBUTIONS, "inspect", ("pytest",))
    assert factory.missing_framework("inspect") == []
