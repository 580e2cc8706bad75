"""The episode record: typed inside, plain JSON at the store's border, the same JSON as before."""

from __future__ import annotations

import pytest
from support.replay import FakeAgent, fake_tasks, make_fake_env

from cir.episode.transcript import Step, TraceEvent, Transcript
from cir.pairs.episode_record import ARM, BRANCH, FACTUAL, EpisodeRecord
from cir.pairs.replay import ReplaySettings, run_task_pairs
from cir.util.errors import CirError


def _transcript() -> Transcript:
    t = Transcript("t1", "Your task is to: put some mug on desk 1.",
                   [Step("agent", "go to desk 1", "go to desk 1", "You arrive at desk 1.", "You arrive at desk 1.",
                         done=True, won=True)])
    t.trace = [TraceEvent(0, 0, "overlook", "mug 1")]
    return t


def test_a_record_carries_its_transcript_outcome_and_counts() -> None:
    record = EpisodeRecord.of("t1", BRANCH, "stale2", _transcript(), delay=1, operation="refresh", branch_step=4)
    assert (record.won, record.env_actions, record.model_turns) == (True, 1, 1)
    assert record.is_branch and not record.is_arm
    none = EpisodeRecord.of("t1", ARM, "clean", None, same_as=FACTUAL, won=True)
    assert none.transcript is None and none.env_actions is None and none.won and none.is_arm


def test_json_round_trip_keeps_the_trace_beside_the_transcript() -> None:
    record = EpisodeRecord.of("t1", BRANCH, "stale2", _transcript(), delay=1, operation="refresh", branch_step=4)
    data = record.to_dict()
    assert data["transcript"] == _transcript().to_dict()  # the transcript's own JSON, no trace in it
    assert data["trace"] == [{"step": 0, "at": 0, "mechanism": "overlook", "about": "mug 1"}]
    back = EpisodeRecord.from_dict(data)
    assert back == record and back.transcript.trace == record.transcript.trace


def test_the_replayer_s_records_have_the_store_s_fields_of_before() -> None:
    """The keys the store has always written, so older stores read and digests stay."""
    task = fake_tasks(1)[0]
    result = run_task_pairs(task, FakeAgent(), make_fake_env(task), ReplaySettings(operations=("refresh",)))
    keys = {"task_id", "role", "condition", "delay", "operation", "executed", "branch_step", "same_as", "won",
            "env_actions", "model_turns", "transcript", "trace"}
    assert all(set(r.to_dict()) == keys for r in result.episodes)
    assert [r.role for r in result.episodes[:2]] == [FACTUAL, ARM]
    assert all(EpisodeRecord.from_dict(r.to_dict()) == r for r in result.episodes)


@pytest.mark.parametrize("data", [{"role": "factual"}, {"task_id": "t", "role": "hero", "condition": "clean"},
                                  {"task_id": "t", "role": "factual", "condition": "clean", "transcript": {}}])
def test_a_line_that_is_no_episode_names_the_source(data) -> None:
    with pytest.raises(CirError, match="run1/episodes.jsonl.gz: an episode record that is not one of this cir"):
        EpisodeRecord.from_dict(data, "run1/episodes.jsonl.gz")
