"""The service desk's features: the kit's generic ones and the family's own, from shown text only."""

from __future__ import annotations

from support.service_desk_example import CANCEL, FIND, READ1, VERIFY1, answers

from cir.episode.perturb import Perturbation, parse_condition
from cir.episode.transcript import Step, Transcript
from cir.families.service_desk.features import FEATURES, SERVICE_DESK_FEATURES
from cir.families.service_desk.prompts import EXAMPLE_CALLS, EXAMPLE_TICKET
from cir.tools.features import FEATURES as KIT_FEATURES


def transcript(calls, shown):
    steps = [Step("agent", c, c, true, text) for c, true, text in zip(calls, answers(calls), shown, strict=True)]
    return Transcript(task_id="t", task_text=EXAMPLE_TICKET, steps=steps)


def extract(t, delay=0):
    return SERVICE_DESK_FEATURES.extract(t, delay, max_turns=49, max_actions=64)


def test_the_features_are_the_kits_then_the_familys_each_with_a_meaning():
    assert list(SERVICE_DESK_FEATURES.features) == [*KIT_FEATURES, *FEATURES]
    assert all(isinstance(v, str) and v for v in SERVICE_DESK_FEATURES.features.values())


def test_a_read_after_its_own_change_that_does_not_show_it_is_seen():
    calls = [FIND, READ1, CANCEL, VERIFY1]
    true = answers(calls)
    fresh = extract(transcript(calls, true))
    stale = extract(transcript(calls, [*true[:3], true[1]]))  # the verify read shows the order before the cancel
    assert (fresh["f_change_not_shown"], stale["f_change_not_shown"]) == (0.0, 1.0)
    assert stale["f_suspect_older"] == 1.0 and fresh["f_suspect_older"] == 0.0
    assert fresh["f_suspect_status_rank"] == 5.0 and stale["f_suspect_status_rank"] == 1.0
    assert fresh["f_changes"] == 1.0 and fresh["f_requests"] == 2.0 and fresh["f_requests_changed"] == 1.0


def test_a_stale_record_of_the_same_call_looks_like_a_fresh_one():
    """lagK on a first read: nothing here reads the truth, so a record shown for its own call, older
    than the truth but never shown fresher, has the features of a true one."""
    calls = list(EXAMPLE_CALLS[:6])
    true = answers(calls)
    t = transcript(calls, true)
    lagged = Perturbation(parse_condition("lag1"), 6, lagged=true[5]).apply(t.prefix(5), t.steps[5])
    same = extract(Transcript(task_id="t", task_text=EXAMPLE_TICKET, steps=[*t.steps[:5], lagged]))
    assert same == extract(t)
