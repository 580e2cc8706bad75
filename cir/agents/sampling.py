"""Agents that sample: K continuations of one state, each its own draw (``--samples K``).

An agent that samples (an LLM at a temperature above 0, a server that is not deterministic
even at 0, a built-in agent at a temperature) is still a pure function of its context *and a
sample index*: ``agent.sample(i)`` is the same agent drawing its ``i``-th sample, whose
params say which (``"sample": i``), so a reply cache keyed by context and params keys on
both, and the same context and index give the same reply in any process, on any day. Sample
0 is the agent itself, so one sample per arm is exactly the agent without sampling.

The built-in agents sample the way a language model does, with a softmax at a temperature:
their decided reply is :data:`MARGIN` nats ahead of each of a few plausible alternatives (a
look, the inventory, the next-likeliest place), and :func:`softmax_choice` draws among them
with one content-keyed uniform number (their ``sampled_choice`` mechanism; the draw is the
shared :class:`cir.agents.modelfree.ModelFreeAgent`'s). At temperature 0 the decided reply is
the only one: the agent is unchanged.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

from cir.util.deprecation import former_function
from cir.util.errors import CirError

#: How far (in nats) a built-in agent's decided reply is ahead of each plausible alternative:
#: at temperature T an alternative is chosen with odds exp(-MARGIN / T) against it (fixed once,
#: like an LLM's confidence in a ReAct command; never tuned to a study).
MARGIN = 3.0
#: Most sample indices (``--samples``) a run may ask for.
MAX_SAMPLES = 1024


def check_samples(samples: Any, what: str = "samples") -> int:
    """``samples`` as an int from 1 to :data:`MAX_SAMPLES`, else a CirError naming it."""
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise CirError(f"{what} {samples!r}: expected an integer from 1 to {MAX_SAMPLES} "
                       "(continuations per arm and branch; 1 is one draw, as without sampling)")
    return samples


def samples_agent(agent: Any) -> bool:
    """Whether ``agent`` can draw other samples than its own (it has ``sample(index)``)."""
    return callable(getattr(agent, "sample", None))


def sample_agent(agent: Any, index: int) -> Any:
    """The agent drawing its ``index``-th sample: the agent itself for 0, else ``agent.sample(index)``;
    a CirError for an agent that cannot sample."""
    if index == 0:
        return agent
    if not samples_agent(agent):
        raise CirError(f"agent {getattr(agent, 'name', agent)!r} does not sample (it has no "
                       "sample(index)): --samples above 1 needs an agent whose replies are draws, "
                       "an LLM agent or a built-in agent at a --temperature")
    return agent.sample(index)


def twin(agent: Any, index: int) -> Any:
    """``agent`` drawing sample ``index``: a copy that shares every part of it (caches, memo,
    counters, pools; one agent's work, counted once) but its ``sample_index``."""
    other = object.__new__(type(agent))
    other.__dict__.update(agent.__dict__)
    other.sample_index = int(index)
    return other


def sample_seed(seed: int, index: int) -> int:
    """The sampling seed of sample ``index`` of an agent of ``seed``: ``seed`` itself for 0, else a
    31-bit number derived from both (never another seed's sample: replicates' seeds are near)."""
    if index == 0:
        return int(seed)
    digest = hashlib.blake2b(f"cir-sample\x1f{int(seed)}\x1f{int(index)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (2**31 - 1)


def softmax_choice(decided: str, alternatives: Sequence[str], temperature: float, u: float) -> str:
    """The reply a softmax at ``temperature`` draws with the uniform number ``u`` in [0, 1):
    ``decided`` has logit :data:`MARGIN`, each distinct alternative 0. At temperature 0 (or
    without alternatives) it is ``decided``."""
    alts = [a for a in dict.fromkeys(alternatives) if a and a != decided]
    if temperature <= 0 or not alts:
        return decided
    odds = math.exp(-MARGIN / temperature)
    total = 1.0 + len(alts) * odds
    if u < 1.0 / total:
        return decided
    return alts[min(int((u - 1.0 / total) / (odds / total)), len(alts) - 1)]


def sampling_params(temperature: float, index: int) -> dict[str, Any]:
    """What a built-in agent's params add when it samples: its temperature (above 0) and its
    sample index (above 0); nothing at temperature 0, so the agent's label is unchanged."""
    return {**({"temperature": temperature} if temperature > 0 else {}),
            **({"sample": index} if index else {})}


def check_temperature(temperature: Any, who: str = "agent temperature") -> float:
    """A temperature >= 0 (a finite number), else a CirError naming it."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not math.isfinite(temperature) or temperature < 0:
        raise CirError(f"{who} {temperature!r}: expected a number >= 0 (0: no sampling)")
    return float(temperature)


def __getattr__(name: str) -> Any:
    """The module's former name (cir 0.1): ``sampling_settings`` (:func:`sampling_params`)."""
    if name == "sampling_settings":
        return former_function("cir.agents.sampling.sampling_settings()", sampling_params)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
