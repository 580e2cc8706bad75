"""``check_agent``: how often an agent gives the same action to the same context, before a study.

The paired design with one continuation per arm assumes the agent is a pure function of its
context. A sampling LLM is not, and neither, even at temperature 0, is a batched or hosted
server that does not return the same reply every time. :func:`check_agent` asks the agent the
same context ``n`` times, each as its own sample (:mod:`cir.agents.sampling`: for the LLM agent
its own request, with the sample's seed; never answered from a cache), and reports the
*action-match rate*: the chance that two of the answers to one context are the same action
(the share of ordered pairs of distinct answers that agree), per context and averaged. At 1,
one sample per arm is the whole truth; below it, a study needs ``--samples K`` above 1 and its
noise floor (:mod:`cir.stats.noise`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cir.agents.sampling import sample_agent
from cir.util.errors import CirError


@dataclass
class AgentCheck:
    """What :func:`check_agent` found: per context its answers' distinct actions, the share of
    the most common one and the pairwise match rate; their mean; the requests it took."""

    n: int
    per_context: list[dict[str, Any]] = field(default_factory=list)
    requests: int | None = None

    @property
    def match_rate(self) -> float:
        """The mean over contexts of the chance that two answers to one context agree."""
        rates = [c["match_rate"] for c in self.per_context]
        return sum(rates) / len(rates) if rates else float("nan")

    @property
    def deterministic(self) -> bool:
        return self.match_rate == 1.0

    def summary(self) -> str:
        head = (f"action-match rate {self.match_rate:.3f} over {len(self.per_context)} contexts x {self.n} "
                f"answers" + (f" ({self.requests} requests)" if self.requests is not None else ""))
        if self.deterministic:
            return head + ": every context got one action; one sample per arm is the whole truth"
        return (head + ": two answers to one context differ in "
                f"{100 * (1 - self.match_rate):.1f}% of pairs; one sample per arm is partly the draw: "
                "run the study with --samples K (K >= 2) and read each effect beside its noise floor")


def match_rate(actions: Sequence[str]) -> float:
    """The share of ordered pairs of distinct answers that are the same action (1 for one answer)."""
    n = len(actions)
    if n < 2:
        return 1.0
    return sum(c * (c - 1) for c in Counter(actions).values()) / (n * (n - 1))


def check_agent(agent: Any, contexts: Sequence[list[dict[str, str]]], n: int) -> AgentCheck:
    """Ask ``agent`` each context ``n`` times, as samples 0 to ``n - 1`` (module docstring)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise CirError(f"--n {n!r}: expected an integer >= 2 (answers to compare per context)")
    if not contexts:
        raise CirError("check-agent: no contexts to ask")
    stats = getattr(agent, "stats", None)
    before = stats()["http_requests"] if callable(stats) else None
    out = AgentCheck(n=n)
    for i, context in enumerate(contexts):
        actions = [str(sample_agent(agent, s).act(context)).strip() for s in range(n)]
        counts = Counter(actions)
        top, top_n = counts.most_common(1)[0]
        out.per_context.append({"context": i, "messages": len(context), "distinct": len(counts),
                                "modal_action": top, "modal_share": top_n / n, "match_rate": match_rate(actions)})
    if before is not None:
        out.requests = stats()["http_requests"] - before  # type: ignore[misc]
    return out
