"""Agents: the Agent contract, the built-in agent and the OpenAI-compatible LLM agent."""

from cir.agents.base import Agent

__all__ = ["Agent"]
