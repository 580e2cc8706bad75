"""One live episode of one task, as ``cir episode`` shows it (optionally routed).

Unlike the replayer (:mod:`cir.pairs.replay`), which runs every arm and branch of a task
from snapshots, this runs what a harness in production would: the factual run (to find
the perturbation point), then one episode under the condition, with a router deciding
at its candidate delays whether to recover.
"""

from __future__ import annotations

from typing import Any

from cir.envs.base import Env
from cir.envs.counting import CountingEnv
from cir.episode.fork import ForkPoint
from cir.episode.harness import Harness, harness_for
from cir.episode.perturb import (
    Persistence,
    find_point,
    parse_conditions,
    parse_persistence,
)
from cir.episode.protocol import DEFAULT_FRACTION, DEFAULT_MAX_ACTIONS, DEFAULT_MAX_TURNS
from cir.episode.transcript import Transcript
from cir.router.runtime import Advisor, RouterHook
from cir.util.errors import CirError


def run_episode(
    task_id: str,
    agent: Any,
    env: Env,
    condition: str = "clean",
    *,
    router: Advisor | None = None,
    perturb_fraction: float = DEFAULT_FRACTION,
    perturb_at: int | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_actions: int = DEFAULT_MAX_ACTIONS,
    persistence: Persistence | str | int | None = None,
) -> tuple[Transcript, Transcript, dict[str, Any]]:
    """One episode under ``condition`` (optionally routed), for ``cir episode``.

    Returns ``(factual, episode, info)``; for a clean episode without router they are the
    same run. A perturbed condition needs the factual run first (to find the point). The
    router decides whether and with which operation to recover (the one it was fitted for,
    or the one it chooses among several); ``info["router_decisions"]`` lists each decision.
    ``persistence`` (``once``, ``refresh``, N): how long the perturbed read lasts
    (:class:`~cir.episode.perturb.Persistence`: the same command sent again is shown it again while
    a stale cache would serve it).
    """
    cond = parse_conditions([condition])[0]
    persistence = parse_persistence(persistence)
    harness = harness_for(agent, max_turns=max_turns, max_actions=max_actions,
                          **({} if persistence.once else {"persistence": persistence}))
    env = CountingEnv(env)
    factual, snapshots = harness.episode_with_snapshots(env, task_id)
    n = factual.env_actions
    info: dict[str, Any] = {"factual_env_actions": n, "factual_success": factual.won,
                            "condition": cond.name, "point": None, "feasible": True, "reason": "ok",
                            **({} if persistence.once else {"persistence": persistence.text})}
    if cond.kind == "clean" and router is None:
        info["costs"] = _costs(harness, env)
        return factual, factual, info
    point = find_point(factual, [cond], perturb_fraction, perturb_at, env)
    info["feasible"], info["reason"] = point.feasible, point.reason
    if point.at is None:
        raise CirError(f"task {task_id}: not prefix-feasible under {cond.name}: {point.reason}")
    p = info["point"] = point.at
    start = ForkPoint(factual, snapshots, p)
    episode = start.episode(cond, env)
    env.restore(start.snapshot)
    hook = RouterHook(router, at=p, checkpoints=start.rewind) if router is not None else None
    if hook is not None and 0 in hook.delays:
        hook.after_env_action(harness, env, episode)
    harness.play(env, episode, hooks=[hook] if hook is not None else [])
    if hook is not None:
        info["router_decisions"] = [{"delay": d, "recover": op is not None, "operation": op}
                                    for d, op in hook.decisions]
    info["costs"] = _costs(harness, env)
    return factual, episode, info


def _costs(harness: Harness, env: CountingEnv) -> dict[str, int]:
    """The agent's work and the env calls of the episode."""
    counts = env.counts
    return {**harness.costs.as_dict(), "env_steps": counts.steps, "resets": counts.resets,
            "restores": counts.restores, "snapshots": counts.snapshots}
