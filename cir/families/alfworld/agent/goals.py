"""The goal the built-in agent pursues: :mod:`cir.families.alfworld.goals`, the family's one
goal parser (the features read the same), under the names the agent's modules import."""

from cir.families.alfworld.goals import (
    CLEAN,
    COOL,
    HEAT,
    LOOK,
    SIMPLE,
    TRANSFORMS,
    TWO,
    Goal,
    goal_sentence,
    parse_goal,
)

__all__ = ["CLEAN", "COOL", "HEAT", "LOOK", "SIMPLE", "TRANSFORMS", "TWO", "Goal", "goal_sentence",
           "parse_goal"]
