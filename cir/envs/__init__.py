"""Environments in general: the Env contract and the wrappers the replayer puts around any env.

- ``base``: the ``Env`` protocol the harness needs (``reset``, ``step``, exact
  ``snapshot``/``restore``, the refresh query).
- ``branching``: each distinct transition is computed once (``BranchingEnv``).
- ``counting``: counts what the harness and the operations asked for (``CountingEnv``).

ALFWorld's engine adapter, task generation and loading live in :mod:`cir.families.alfworld`.
"""

from cir.envs.base import Env

__all__ = ["Env"]
