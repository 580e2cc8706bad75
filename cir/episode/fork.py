"""Where a perturbed episode starts: the one home of the perturbed prefix and its rewind
checkpoints, for the replayer's no-recovery arms (:mod:`cir.pairs.replay`) and a live routed
episode (:mod:`cir.router.live`) alike.

From a factual run and its env snapshot after every step, the perturbation point ``p`` (an
env action number) fixes: ``k_at``, the steps up to and including env action ``p``; the
episode under a condition, the factual run's first ``k_at`` steps with the observation of
env action ``p`` modified (:class:`~cir.episode.perturb.Perturbation`), whose env state is
the factual one after those steps (:attr:`ForkPoint.snapshot`); and what a ``rewind``
returns to (:attr:`ForkPoint.rewind`): the env snapshot before env action ``p`` and the index
of the perturbed step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cir.episode.perturb import Condition, perturbed_step
from cir.episode.recovery import Checkpoints
from cir.episode.transcript import Transcript
from cir.util.errors import CirError


@dataclass
class ForkPoint:
    """The state every perturbed episode of a task starts from (see the module docstring)."""

    factual: Transcript
    snapshots: dict[int, Any]
    point: int
    k_at: int = field(init=False)
    rewind: Checkpoints = field(init=False)

    def __post_init__(self) -> None:
        self.k_at = self.factual.steps_until_env_action(self.point)
        k_before = self.factual.steps_until_env_action(self.point - 1)
        # a rewind returns to the factual state before the perturbed env action
        self.rewind = Checkpoints(snapshots={k_before: self.snapshots[k_before]}, anchor=self.k_at - 1)

    @property
    def snapshot(self) -> Any:
        """The env's state after the first ``k_at`` factual steps (the perturbed step's)."""
        return self.snapshots[self.k_at]

    def episode(self, condition: Condition, env: Any = None) -> Transcript:
        """The factual run's first ``k_at`` steps, the last one's observation shown as ``condition`` says.

        A ``lagK`` condition's text is env work (:func:`~cir.episode.perturb.lagged_answer`): it is
        computed on ``env`` from the snapshots, which leaves the env in the state of
        :attr:`snapshot`; the other conditions do not touch the env."""
        if condition.kind == "lag" and env is None:
            raise CirError(f"task {self.factual.task_id}: {condition.name} is computed on the env; pass it")
        episode = self.factual.prefix(self.k_at)
        episode.steps[-1] = perturbed_step(condition, self.point, self.factual, self.snapshots, env)
        return episode
