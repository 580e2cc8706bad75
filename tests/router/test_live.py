"""The Router used live through the harness hook on the real engine (slow): every live
decision equals the offline policy's decision on the same transcript prefix."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cir.families.alfworld.features import extract_features
from cir.pairs.synthetic import simulate
from cir.router.policy import CIRPolicy
from cir.router.runtime import Router

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("condition", ["clean", "stale2"])
def test_live_router_decisions_match_offline(tmp_path: Path, condition: str) -> None:
    from cir.families import make_agent
    from cir.families.alfworld.env import AlfworldEnv
    from cir.families.alfworld.generate import generate_split
    from cir.families.alfworld.tasks import load_tasks
    from cir.router.live import run_episode

    # A permissive router (epsilon=1) so that some decisions are refreshes.
    policy = CIRPolicy(threshold_steps=7, epsilon=1.0, lam=0.5).fit(simulate(80, seed=3))
    router = Router.load(policy.to_router().save(tmp_path / "router.json"))
    generate_split(tmp_path / "tasks", "valid_seen", 1, seed=5, progress=False)
    task = load_tasks(tmp_path / "tasks")[0]
    agent = make_agent("builtin", seed=0)
    factual, episode, info = run_episode(task.task_id, agent, AlfworldEnv(task.game_file), condition,
                                         router=router)
    decisions = info["router_decisions"]
    assert decisions, "the episode reached no candidate delay"
    p = info["point"]
    rows = []
    for d in [x["delay"] for x in decisions]:
        # the decision prefix: up to env action p + d of the live transcript, before any recovery
        k = episode.steps_until_env_action(p + d)
        prefix = episode.prefix(k)
        rows.append({"task_id": task.task_id, "condition": condition, "delay": d, "operation": "refresh",
                     "y0": 0, "y1": 0, "executed": 1, "factual_success": 1, "prefix_match": 1,
                     **extract_features(prefix, d)})
    offline = policy.decide(pd.DataFrame(rows))
    assert [x["recover"] for x in decisions] == offline["recover"].tolist()
    assert [x["operation"] for x in decisions] == offline["operation"].tolist()
    # recover at most once, and nothing is asked after a recovery
    assert sum(x["recover"] for x in decisions) <= 1
    if any(x["recover"] for x in decisions):
        assert decisions[-1]["recover"] and decisions[-1]["operation"] == "refresh"
        assert any(s.actor == "harness" for s in episode.steps)
