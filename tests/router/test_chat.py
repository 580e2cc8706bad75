"""A chat-style harness: the router's chosen recovery applied to a message list."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from support.replay import FakeEnv

from cir.episode.protocol import PLACEBO_TEXT, REFRESH_PREFIX, REPLAN_TEXT, REWIND_HEADER
from cir.episode.transcript import Transcript
from cir.router.chat import recover_messages
from cir.util.errors import CirError


@dataclass
class Choice:
    recover: bool
    operation: str | None


def _chat() -> tuple[FakeEnv, list[dict], tuple[list[dict], dict]]:
    """A system prompt, the task, three replies; the third one's answer is the suspect text."""
    env = FakeEnv(["drawer 1", "shelf 1", "desk 1"], "shelf 1")
    messages = [{"role": "system", "content": "You are a robot."}, {"role": "user", "content": env.reset()}]
    checkpoint = None
    for i, action in enumerate(["go to drawer 1", "go to shelf 1", "take mug 1 from shelf 1"]):
        if i == 2:
            checkpoint = (list(messages), env.snapshot())
        obs, _, _ = env.step(action)
        messages += [{"role": "assistant", "content": action}, {"role": "user", "content": obs}]
    return env, messages, checkpoint


def test_no_recovery_leaves_the_messages_as_they_are() -> None:
    env, messages, _ = _chat()
    assert recover_messages(Choice(False, None), env, messages) == messages


@pytest.mark.parametrize("operation, text", [("refresh", REFRESH_PREFIX), ("replan", REPLAN_TEXT),
                                             ("placebo", PLACEBO_TEXT)])
def test_each_operation_appends_what_the_replayer_shows(operation: str, text: str) -> None:
    env, messages, _ = _chat()
    steps = env.steps
    after = recover_messages(Choice(True, operation), env, messages)
    assert after[: len(messages)] == messages and len(after) == len(messages) + 1
    assert after[-1]["role"] == "user" and after[-1]["content"].startswith(text)
    assert env.steps == steps + (operation == "refresh")  # only refresh queries the env
    if operation == "refresh":
        assert after[-1]["content"] == f"{REFRESH_PREFIX} You are facing the shelf 1. Next to it, you see nothing."
    # the router sees the recovery as the replayer recorded it: it will not recover again
    assert any(s.actor == "harness" for s in Transcript.from_messages("t", after).steps)


def test_a_rewind_restores_the_context_and_the_env_before_the_suspect_reply() -> None:
    env, messages, checkpoint = _chat()
    assert env.state["holding"]
    after = recover_messages(Choice(True, "rewind"), env, messages, checkpoint=checkpoint)
    before, _ = checkpoint
    assert after[: len(before)] == before
    assert after[-1]["content"].startswith(REWIND_HEADER) and "take mug 1 from shelf 1" in after[-1]["content"]
    assert not env.state["holding"] and env.state["at"] == "shelf 1"
    with pytest.raises(CirError, match="a rewind needs checkpoint"):
        recover_messages(Choice(True, "rewind"), env, messages)
