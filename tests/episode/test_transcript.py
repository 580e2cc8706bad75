"""The transcript: counts, the context the agent sees (rewinds cut it), env paths, prefixes and
their trace, fingerprints, its plain-data form, and a chat list read back into steps."""

from __future__ import annotations

import re

import pytest

from cir.episode.protocol import ABLATED_TEXT, PLACEBO_TEXT, REFRESH_PREFIX, REPLAN_TEXT, THINK_ACK
from cir.episode.recovery import rewind_memory
from cir.episode.transcript import AGENT, HARNESS, Step, TraceEvent, Transcript, context_hash
from cir.util.errors import CirError

TASK = "You are in the middle of a room.\n\nYour task is to: put some mug on desk 1."


def _go(target: str, shown: str | None = None) -> Step:
    text = f"You arrive at {target}."
    return Step(AGENT, f"go to {target}", f"go to {target}", text, shown if shown is not None else text)


def _episode() -> Transcript:
    """Two moves, a thought, a third move shown stale, a refresh, and a win."""
    t = Transcript("t", TASK)
    t.steps += [_go("drawer 1"), _go("shelf 1"),
                Step(AGENT, "think: the mug is not here", None, None, THINK_ACK),
                _go("desk 1", shown="You arrive at shelf 1."),
                Step(HARNESS, "refresh", "look", "You are facing the desk 1.",
                     f"{REFRESH_PREFIX} You are facing the desk 1.", ["recovery:refresh"]),
                Step(AGENT, "move mug 1 to desk 1", "move mug 1 to desk 1", "You move the mug 1 to the desk 1.",
                     "You move the mug 1 to the desk 1.", done=True, won=True)]
    t.trace = [TraceEvent(3, 3, "stale_location", "desk 1"), TraceEvent(5, 5, "refresh_correction", "desk 1")]
    return t


def test_counts_come_from_the_steps() -> None:
    t = _episode()
    assert (t.model_turns, t.env_actions, t.done, t.won) == (5, 5, True, True)  # the refresh is no turn
    assert Transcript("t", TASK).model_turns == 0 and not Transcript("t", TASK).done
    assert t.steps_until_env_action(0) == 0 and t.steps_until_env_action(3) == 4
    assert t.steps_until_env_action(4) == 5  # the refresh's look is the 4th env action
    with pytest.raises(ValueError, match="only 5 env actions, asked for 6"):
        t.steps_until_env_action(6)


def test_the_context_is_the_task_then_each_reply_and_what_was_shown() -> None:
    t = _episode()
    ctx = t.context()
    assert ctx[0] == {"role": "user", "content": TASK}
    assert ctx[1:3] == [{"role": "assistant", "content": "go to drawer 1"},
                        {"role": "user", "content": "You arrive at drawer 1."}]
    assert ctx[5:7] == [{"role": "assistant", "content": "think: the mug is not here"},
                        {"role": "user", "content": THINK_ACK}]
    assert ctx[8] == {"role": "user", "content": "You arrive at shelf 1."}  # the shown text, not the true one
    assert ctx[9] == {"role": "user", "content": f"{REFRESH_PREFIX} You are facing the desk 1."}  # no reply
    assert len(ctx) == 1 + 2 * 5 + 1


def test_a_rewind_cuts_the_context_and_the_env_path_back() -> None:
    t = _episode().prefix(4)
    memory = rewind_memory(t.steps[1:])
    t.steps.append(Step(HARNESS, "rewind", None, None, memory, ["recovery:rewind"], rewind_to=1))
    t.steps.append(_go("cabinet 1"))
    assert [s.reply for s in t.visible_steps()] == ["go to drawer 1", "rewind", "go to cabinet 1"]
    assert [m["content"] for m in t.context()] == [TASK, "go to drawer 1", "You arrive at drawer 1.", memory,
                                                  "go to cabinet 1", "You arrive at cabinet 1."]
    assert t.env_path() == ["go to drawer 1", "go to cabinet 1"]  # the env went back with the context
    assert t.env_path(4) == ["go to drawer 1", "go to shelf 1", "go to desk 1"]
    assert t.env_actions == 4  # the discarded actions were spent all the same


def test_a_prefix_is_a_copy_with_the_trace_of_its_decisions() -> None:
    t = _episode()
    p = t.prefix(4)
    assert p.steps == t.steps[:4] and p.steps[0] is not t.steps[0]
    p.steps[0].events.append("perturb:stale2")
    assert t.steps[0].events == []  # a branch never changes its arm
    assert [e.mechanism for e in p.trace] == ["stale_location"]  # at 3 < 4; the one at 5 is later
    assert [e.mechanism for e in t.prefix(3).trace] == []  # the decision of step 3 is not in 3 steps


def test_the_fingerprint_is_of_the_steps_not_of_the_trace() -> None:
    a, b = _episode(), _episode()
    assert a.fingerprint() == b.fingerprint()
    b.trace = []
    assert a.fingerprint() == b.fingerprint()
    b.steps[2].reply = "think: maybe the shelf"
    assert a.fingerprint() != b.fingerprint()


def test_plain_data_round_trips_without_the_trace() -> None:
    t = _episode()
    data = t.to_dict()
    assert set(data) == {"task_id", "task_text", "steps"} and "trace" not in str(data.keys())
    back = Transcript.from_dict(data)
    assert back == t and back.steps == t.steps and back.trace == []
    assert TraceEvent.from_dict(t.trace[0].to_dict()) == t.trace[0]


def test_a_chat_list_reads_back_into_the_same_steps_a_harness_shows() -> None:
    messages = [{"role": "system", "content": "You are an agent."}, *_episode().context()]
    t = Transcript.from_messages("t", messages)
    assert [(s.actor, s.reply, s.action) for s in t.steps] == [
        (AGENT, "go to drawer 1", "go to drawer 1"), (AGENT, "go to shelf 1", "go to shelf 1"),
        (AGENT, "think: the mug is not here", None), (AGENT, "go to desk 1", "go to desk 1"),
        (HARNESS, "refresh", "look"), (AGENT, "move mug 1 to desk 1", "move mug 1 to desk 1")]
    assert t.steps[4].observation == "You are facing the desk 1."  # a refresh's answer is its true text
    assert t.context() == messages[1:]  # the inverse of context()
    assert all(s.observation is None for s in t.steps if s.actor == AGENT)  # a chat list has no true text


@pytest.mark.parametrize(("shown", "name", "action", "events"), [
    (ABLATED_TEXT, "refresh_ablated", "inventory", ["recovery:refresh_ablated"]),
    (REPLAN_TEXT, "replan", None, ["recovery:replan"]),
    (PLACEBO_TEXT, "placebo", None, ["recovery:placebo"]),
    (rewind_memory([]), "rewind", None, ["recovery:rewind"]),
    ("Please hurry up.", "message", None, []),
])
def test_every_operation_s_text_is_recognised_from_the_one_registry(shown, name, action, events) -> None:
    t = Transcript.from_messages("t", [{"role": "user", "content": TASK}, {"role": "user", "content": shown}],
                                 refresh_query="inventory")
    (step,) = t.steps
    assert (step.actor, step.reply, step.action, step.shown, step.events) == (HARNESS, name, action, shown, events)


@pytest.mark.parametrize(("messages", "needle"), [
    ([], "messages[0]: expected the task as the first user message"),
    ([{"role": "assistant", "content": "hi"}], "expected the task as the first user message"),
    ([{"role": "user", "content": TASK}, {"role": "assistant", "content": "look"}],
     "messages[1]: an assistant reply without the user message that answers it"),
    ([{"role": "user", "content": TASK}, {"role": "robot", "content": "x"}], "messages[1]: role 'robot'"),
    ([{"role": "user", "content": TASK}, {"role": "user", "content": None}], "messages[1]: 'content' must be text"),
    (["not a message"], "messages[0]: expected a dict with a 'role' and a 'content'"),
])
def test_a_chat_list_that_is_no_episode_is_refused_naming_the_message(messages, needle) -> None:
    with pytest.raises(CirError, match=re.escape(needle)):
        Transcript.from_messages("t", messages)


def test_the_reply_cache_key_is_of_context_and_agent_params() -> None:
    ctx = _episode().context()
    assert context_hash(ctx, {"seed": 0}) == context_hash(list(ctx), {"seed": 0})
    assert context_hash(ctx, {"seed": 0}) != context_hash(ctx, {"seed": 1})
    assert context_hash(ctx, {"seed": 0}) != context_hash(ctx[:-1], {"seed": 0})
