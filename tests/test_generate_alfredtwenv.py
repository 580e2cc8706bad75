"""ALFWorld's own loader reads generated splits unchanged, and its planner expert wins them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cir.envs.generate import TASK_TYPES, generate_split


def alfred_config(data_path: Path, expert_type: str = "planner") -> dict:
    """The parts of ALFWorld's base_config.yaml that AlfredTWEnv reads."""
    return {
        "dataset": {"data_path": str(data_path), "eval_id_data_path": str(data_path),
                    "eval_ood_data_path": str(data_path), "num_train_games": -1,
                    "num_eval_games": -1},
        "env": {"goal_desc_human_anns_prob": 0.0, "task_types": [1, 2, 3, 4, 5, 6],
                "domain_randomization": False, "expert_type": expert_type},
        "general": {"training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": 50}},
    }


def play_with_planner_expert(data_path: Path) -> tuple[int, int, list[int], set[str]]:
    """Load ``data_path`` with AlfredTWEnv; follow the planner expert in each game.

    Returns (games found, games won, steps per game, game files played).
    """
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    tw = AlfredTWEnv(alfred_config(data_path), train_eval="train")
    n_games = tw.num_games
    env = tw.init_env(batch_size=1)
    won, steps, played = 0, [], set()
    try:
        for _ in range(n_games):
            _, infos = env.reset()
            played.add(infos["extra.gamefile"][0])
            n_steps = 0
            while n_steps < 50:
                plan = infos["extra.expert_plan"][0]
                if not plan:
                    break
                _, _, dones, infos = env.step([plan[0]])
                n_steps += 1
                if dones[0]:
                    break
            steps.append(n_steps)
            won += int(bool(infos["won"][0]))
    finally:
        env.close()
    return n_games, won, steps, played


@pytest.mark.slow
def test_alfredtwenv_loads_and_planner_expert_wins(tmp_path):
    generate_split(tmp_path, "valid_unseen", 2 * len(TASK_TYPES), 0, progress=False)
    n_games, won, steps, played = play_with_planner_expert(tmp_path / "valid_unseen")
    assert n_games == 2 * len(TASK_TYPES) == len(played)
    assert won == n_games, steps
