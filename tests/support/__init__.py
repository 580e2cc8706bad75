"""Helpers the tests share: fake agents and envs, a fake OpenAI-compatible server, a real one."""
