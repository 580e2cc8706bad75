"""Help that agrees with itself: every subcommand's help, read as a user reads it, shows no Python
repr, gives one option one default on every command (where it means the same there), names each
positional one way, and says how long something takes only with its measurement
(``cir.study.timings``), which the README quotes too."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

import pytest
from support.commands import all_commands

from cir.study.timings import FULL_STUDY, MEASURED, QUICK_STUDY

ROOT = Path(__file__).resolve().parents[2]


COMMANDS = all_commands()
#: A Python value printed as Python writes it, not as a user types it.
REPR = re.compile(r"\(\s*'[^']*',|\[\s*\]|\[\s*'|\{\s*\}|default: (True|False|None)\b|<\w[\w.]* (object|function) at ")
#: A claim of how long something takes.
TIME_CLAIM = re.compile(r"\b(under|about|around|within|in|takes?|less than)\s+(a|an|one|a few|\d+(\.\d+)?)\s+"
                        r"(seconds?|minutes?|hours?)\b", re.I)
#: Options whose default differs by command because the option's meaning does, with why.
DEFAULT_BY_COMMAND = {
    "--by": "the grouping of each command's own table",
    "--on": "the column that holds the two things a command compares (conditions in contrast, operations in joint)",
    "--cache-dir": "where replies are kept: a run folder's own, memory for one episode, none for a dry run",
    "--family": "said as it applies: the family a run folder (or a router file) names, where the command reads one",
    "--max-turns": "fit reads the harness budgets of the run it is fitted on (49 for a bare table, as elsewhere)",
    "--max-actions": "fit reads the harness budgets of the run it is fitted on (64 for a bare table, as elsewhere)",
}


def _help(parser: argparse.ArgumentParser) -> str:
    return " ".join(parser.format_help().split())


def _default(parser: argparse.ArgumentParser, action: argparse.Action) -> str | None:
    """The default an option's help shows, as shown (None: it shows none)."""
    text = " ".join(parser._get_formatter()._expand_help(action).split())
    found = re.search(r"default: ([^;]*?)(?:\)$|;|\) \(|$)", text)
    return found.group(1).strip() if found else None


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_help_shows_a_python_repr(name: str):
    text = _help(COMMANDS[name])
    found = REPR.search(text)
    assert not found, f"cir {name} --help: {text[max(0, found.start() - 80):found.end() + 40]!r}"


def test_an_option_has_one_default_on_every_command():
    shown: dict[str, dict[str, str]] = defaultdict(dict)
    for name, parser in COMMANDS.items():
        for action in parser._actions:
            if action.option_strings and action.help not in (None, argparse.SUPPRESS):
                default = _default(parser, action)
                if default is not None:
                    shown[action.option_strings[0]][name] = default
    differ = {flag: by for flag, by in shown.items() if len(set(by.values())) > 1 and flag not in DEFAULT_BY_COMMAND}
    assert not differ, f"one option, several defaults: {differ}"
    assert set(shown["--jobs"].values()) == {"2"} and set(shown["--jobs"]) >= {"run", "reproduce", "tasks generate"}


def test_a_positional_has_one_name():
    names = {a.dest: a.metavar or a.dest for p in COMMANDS.values() for a in p._actions
             if not a.option_strings and not isinstance(a, argparse._SubParsersAction)}
    seen: dict[str, set[str]] = defaultdict(set)
    for p in COMMANDS.values():
        for a in p._actions:
            if not a.option_strings and not isinstance(a, argparse._SubParsersAction):
                seen[a.dest].add(a.metavar or a.dest)
    assert all(len(v) == 1 for v in seen.values()), seen
    assert all(str(m).isupper() for m in names.values()), names  # as the usage line writes every other


def test_family_says_its_default_only_where_it_applies():
    for name, parser in COMMANDS.items():
        action = next((a for a in parser._actions if "--family" in a.option_strings), None)
        if action is None:
            continue
        reads_runs = any(a.dest in ("paired", "run") for a in parser._actions)
        says = "the family the run folder's run.json names" in action.help
        assert says == reads_runs, f"cir {name}: --family's default {'names' if says else 'misses'} a run folder"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_time_claim_is_a_measurement(name: str):
    text = _help(COMMANDS[name])
    claims = [m.claim() for m in MEASURED.values()]
    for found in TIME_CLAIM.finditer(text):
        assert any(c in text and text.index(c) <= found.start() < text.index(c) + len(c) for c in claims), (
            f"cir {name} --help claims {found.group(0)!r} without a measurement of cir.study.timings")


def test_the_readme_quotes_the_measured_time_of_the_quick_study():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"`--quick` takes {QUICK_STUDY.claim()}" in readme
    assert f"takes {FULL_STUDY.claim()}" in readme  # the five-replicate study, from the same file
    assert "cir/study/timings.py" in readme


def test_words_say_what_the_options_do():
    reproduce = _help(COMMANDS["reproduce"])
    assert "none changes the table" not in reproduce and "Whichever is chosen, the table is the same" in reproduce
    assert "once per call" not in reproduce and "resumes only with the value it was written with" in reproduce
    fit = COMMANDS["fit"]
    with pytest.warns(DeprecationWarning, match="--candidate-delays"):  # the former name, deprecated
        former = fit.parse_args(["t.csv", "--out", "r.json", "--delays", "1,2"]).delays
    assert former == fit.parse_args(["t.csv", "--out", "r.json", "--candidate-delays", "1,2"]).delays


def test_a_changed_validation_replicates_is_refused_in_words(tmp_path: Path):
    """A study folder written with the default planted-world replicates, resumed with another value:
    the refusal names the default, not a None the user never typed."""
    import json

    from cir.study.reproduce import _check_study
    from cir.util.errors import CirError

    (tmp_path / "study.json").write_text(json.dumps({"settings": {"quick": True, "seed": 0}, "timings": {}}))
    with pytest.raises(CirError, match=r"\(validation_replicates: the default \(1 with --quick\) there, 10 now\)"):
        _check_study(tmp_path, {"quick": True, "seed": 0, "validation_replicates": 10})
