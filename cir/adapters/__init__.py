"""Framework agents: LangGraph, the OpenAI Agents SDK and Inspect AI agents in paired studies.

:mod:`cir.adapters.protocol` is the fork protocol (what an adapter gives ``cir``; the env tools'
:func:`~cir.adapters.protocol.env_step`), :mod:`cir.adapters.driver` the pairing driver (a
framework's turns as the harness the replayer runs). One module per framework turns its agent
into a :class:`~cir.adapters.protocol.Framework` and gives the router its native hook:
:mod:`cir.adapters.langgraph`, :mod:`cir.adapters.openai_agents`, :mod:`cir.adapters.inspect_ai`,
each an optional extra (``pip install "cir[langgraph]"``) imported only when it is asked for.
"""

from cir.util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "env_step": "cir.adapters.protocol",
    "Framework": "cir.adapters.protocol",
    "ForkRefused": "cir.adapters.protocol",
    "FrameworkAgent": "cir.adapters.driver",
    "FrameworkHarness": "cir.adapters.driver",
})
