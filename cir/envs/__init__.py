"""Environments: the Env contract, the ALFWorld engine adapter, task generation and loading.

- ``base``: the ``Env`` protocol the harness needs.
- ``alfworld``: ``AlfworldEnv``, one ALFWorld game behind ``Env``, with exact snapshots.
- ``engine``: the engine under it (textworld's ``PddlEnv``) with switchable ``Savings``;
  ``commands`` (when command text can be cached), ``memory`` (what a closed engine gives
  back) and ``textmemo`` (faster grammar derivations) serve it.
- ``gamefile``: the ``game.tw-pddl`` format; ``tasks``: finding tasks on disk (``TaskRef``).
- Task generation: ``scenes`` (room layouts) and ``draw`` (a task's goal and objects),
  ``pddl`` (its problem and game file text), ``verify`` (solvable on the engine) and
  ``generate`` (a split on disk, with its manifest).
"""

from cir.envs.base import Env

__all__ = ["Env"]
