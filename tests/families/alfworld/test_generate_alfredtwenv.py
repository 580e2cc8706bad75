"""ALFWorld's own loader reads generated splits unchanged, and its planner expert wins them.

Note on alfworld 0.4.2: ``AlfredTWEnv.init_env`` builds ``AlfredExpert(expert_type)``, which
binds the type to the wrapper's ``env`` argument, so the config's ``expert_type: planner`` is
silently ignored and the hand-coded expert always runs. ``init_env_with_expert`` builds the
same environment (same wrappers, infos and game list) with the expert type really applied.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cir.families.alfworld.generate import generate_split


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


def init_env_with_expert(tw, expert_type: str, max_steps: int = 50):
    """AlfredTWEnv.init_env(batch_size=1), with ``expert_type`` honoured."""
    import textworld
    import textworld.gym
    from alfworld.agents.environment.alfred_tw_env import (
        AlfredDemangler,
        AlfredExpert,
        AlfredInfos,
    )

    wrappers = [AlfredDemangler(shuffle=False), AlfredInfos,
                AlfredExpert(expert_type=expert_type)]
    infos = textworld.EnvInfos(won=True, admissible_commands=True,
                               extras=["gamefile", "expert_plan"])
    env_id = textworld.gym.register_games(tw.game_files, infos, batch_size=1, asynchronous=True,
                                          max_episode_steps=max_steps, wrappers=wrappers)
    return textworld.gym.make(env_id)


def play_with_expert(data_path: Path, expert_type: str = "planner",
                     max_steps: int = 50) -> dict:
    """Load ``data_path`` with AlfredTWEnv and follow ``expert_type``'s plan in every game.

    Returns ``{"games": n, "won": k, "steps": {game file: steps}}``.
    """
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    argv = list(sys.argv)  # fast_downward overwrites sys.argv when it translates
    tw = AlfredTWEnv(alfred_config(data_path, expert_type), train_eval="train")
    env = init_env_with_expert(tw, expert_type, max_steps)
    won, steps = 0, {}
    try:
        for _ in range(tw.num_games):
            _, infos = env.reset()
            game = infos["extra.gamefile"][0]
            n = 0
            while n < max_steps:
                plan = infos["extra.expert_plan"][0]
                if not plan:
                    break
                _, _, dones, infos = env.step([plan[0]])
                n += 1
                if dones[0]:
                    break
            steps[game] = n
            won += int(bool(infos["won"][0]))
    finally:
        env.close()
        sys.argv[:] = argv
    return {"games": tw.num_games, "won": won, "steps": steps}


@pytest.mark.slow
def test_alfredtwenv_loads_and_planner_expert_wins(tmp_path):
    types = ["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
             "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
             "pick_two_obj_and_place"]
    m = generate_split(tmp_path, "valid_unseen", len(types), 0, types=types, progress=False)
    plan_len = {str(tmp_path / "valid_unseen" / r["task_id"] / "game.tw-pddl"): r["plan_length"]
                for r in m["tasks"]}
    result = play_with_expert(tmp_path / "valid_unseen", "planner")
    assert result["games"] == len(types) == len(result["steps"])
    assert result["won"] == result["games"], result
    # The planner expert follows optimal plans: as long as the stored walkthroughs.
    assert {g: plan_len[g] for g in result["steps"]} == result["steps"]
