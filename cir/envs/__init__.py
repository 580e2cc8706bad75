"""Environments: the Env contract, the ALFWorld engine adapter, task generation and loading."""

from cir.envs.base import Env

__all__ = ["Env"]
