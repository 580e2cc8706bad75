"""Fixtures of the adapters' tests."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True, scope="module")
def _examples_imported_anew():
    """Each test module imports the example agents anew. An example builds its model when it is
    imported, pointed at the reply proxy of the server the first importer gave (OPENAI_BASE_URL); a
    later module of the same worker process serves its own fake server, which the example's model of
    an earlier module would never ask."""
    yield
    for name in [n for n in sys.modules if n.startswith("examples.") or n == "tests.support.langgraph_react"]:
        del sys.modules[name]
