"""The feature-extractor contract: an extractor is checked before it is used, and what it
returns is checked on every call (exactly its features, in order, finite floats)."""

from __future__ import annotations

import math

import pytest

from cir.episode.extractor import extract
from cir.episode.transcript import AGENT, Step, Transcript
from cir.families.registry import builtin_extractors, resolve_extractor
from cir.util.errors import CirError


class Counting:
    """A small extractor of another environment: env actions and thoughts so far."""

    name = "counting"
    features = {"f_actions": "env actions so far", "f_thoughts": "thoughts so far"}

    def __init__(self, result=None) -> None:
        self.result = result

    def extract(self, transcript, delay, *, max_turns, max_actions):
        if self.result is not None:
            return self.result
        return {"f_actions": transcript.env_actions, "f_thoughts": transcript.model_turns - transcript.env_actions}


def _transcript() -> Transcript:
    t = Transcript("t", "Count to three.")
    t.steps += [Step(AGENT, "inc", "inc", "1", "1"), Step(AGENT, "think: again", None, None, "OK."),
                Step(AGENT, "inc", "inc", "2", "2")]
    return t


def test_the_default_is_alfworld_s_and_ships_by_name() -> None:
    default = resolve_extractor(None)
    shipped = builtin_extractors()
    assert default.name == "alfworld" and shipped["alfworld"] is default
    assert set(shipped) == {"alfworld", "textworld-cooking", "service-desk"}  # each built-in family's, by name
    assert all(name.startswith("f_") for name in default.features)


def test_an_extractor_s_values_come_back_as_floats_in_its_order() -> None:
    values = extract(Counting(), _transcript(), 0, max_turns=10, max_actions=10)
    assert list(values) == ["f_actions", "f_thoughts"] and values == {"f_actions": 2.0, "f_thoughts": 1.0}
    assert all(isinstance(v, float) for v in values.values())


class _NoName(Counting):
    name = ""


class _NoFeatures(Counting):
    features = {}


class _BadFeature(Counting):
    features = {"actions": "no f_ prefix"}


class _NoExtract:
    name = "x"
    features = {"f_a": "a"}


@pytest.mark.parametrize(("extractor", "needle"), [
    (_NoName(), "expected a non-empty str attribute 'name'"),
    (_NoFeatures(), "feature extractor 'counting': expected a non-empty dict 'features'"),
    (_BadFeature(), "feature 'actions' must be a name starting with 'f_'"),
    (_NoExtract(), "feature extractor 'x': expected a method extract(transcript, delay, ...)"),
])
def test_a_malformed_extractor_is_refused_before_use(extractor, needle) -> None:
    with pytest.raises(CirError) as err:
        resolve_extractor(extractor)
    assert needle in str(err.value)


@pytest.mark.parametrize(("result", "needle"), [
    ({"f_actions": 1.0}, "extract() returned ['f_actions']; expected the keys of its 'features', in order"),
    ({"f_thoughts": 1.0, "f_actions": 1.0}, "expected the keys of its 'features', in order"),
    ([1.0, 2.0], "extract() returned 'list'"),
    ({"f_actions": math.nan, "f_thoughts": 0.0}, "f_actions = nan; expected a finite number"),
    ({"f_actions": 1.0, "f_thoughts": math.inf}, "f_thoughts = inf; expected a finite number"),
])
def test_what_an_extractor_returns_is_checked_on_every_call(result, needle) -> None:
    with pytest.raises(CirError) as err:
        extract(Counting(result), _transcript(), 0, max_turns=10, max_actions=10)
    assert needle in str(err.value) and "feature extractor 'counting'" in str(err.value)
