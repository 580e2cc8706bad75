"""The family conformance suite (cir.testing) over every family of this repository, and what it catches."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cir.families.registry import get_family
from cir.testing import CHECKS, ConformanceError, family_checks

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("alfworld", "textworld-cooking", "examples.counter:FAMILY", "tests.support.keydoor:FAMILY",
            "tests.support.shop:FAMILY", "examples.folder_world:FAMILY")


@pytest.fixture(autouse=True)
def _from_the_checkout(monkeypatch):
    monkeypatch.chdir(ROOT)  # `cir run --family examples.counter:FAMILY` finds the module from here


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One scratch folder per family: its checks share the tasks they generate."""
    return {spec: tmp_path_factory.mktemp(get_family(spec).name) for spec in FAMILIES}


@pytest.mark.parametrize("check", [c for spec in FAMILIES for c in family_checks(spec)], ids=str)
def test_every_family_of_this_repository_conforms(check, folders):
    check(folders[check.family])


def test_the_suite_names_its_checks():
    assert [c.name for c in family_checks("alfworld")] == [name for name, _ in CHECKS] == [
        "contract", "tasks", "check_env", "reset", "extractor", "prompt", "run"]


def test_a_restore_that_forgets_fails_check_env(tmp_path):
    check = next(c for c in family_checks("tests.support.keydoor:FORGETFUL") if c.name == "check_env")
    with pytest.raises(ConformanceError, match="family 'keydoor-forgetful', check check_env: check_env: .* failure.*after restore answered"):
        check(tmp_path)


class _PeekingFeatures:
    """keydoor's features plus one that reads the true observation (which a harness does not have)."""

    def __init__(self, inner):
        self.inner, self.name = inner, "peeking"
        self.features = {**inner.features, "f_peek": "the true text's length (not allowed)"}

    def extract(self, transcript, delay, *, max_turns, max_actions):
        out = self.inner.extract(transcript, delay, max_turns=max_turns, max_actions=max_actions)
        return {**out, "f_peek": float(len(transcript.steps[-1].observation or ""))}


PEEKING = dataclasses.replace(get_family("tests.support.keydoor:FAMILY"),
                              extractor=_PeekingFeatures(get_family("tests.support.keydoor:FAMILY").extractor))


def test_an_extractor_that_reads_the_true_text_fails(tmp_path):
    check = next(c for c in family_checks("tests.testing.test_conformance:PEEKING") if c.name == "extractor")
    with pytest.raises(ConformanceError, match="extractor 'peeking' gives other features .* only the shown text"):
        check(tmp_path)


def test_a_spec_that_names_no_family_is_one_error():
    with pytest.raises(Exception, match="no such environment family"):
        family_checks("nope")
