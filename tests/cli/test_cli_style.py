"""One CLI style: defaults written by the formatter, examples in every help, shared options
with one name and one default, and one task naming in `cir episode` and `cir run`."""

from __future__ import annotations

import argparse
import re

import pytest
from support.commands import all_commands

COMMANDS = all_commands()


def test_every_command_is_listed():
    assert {"tasks", "tasks generate", "tasks list", "tasks play", "episode", "run", "table", "contrast",
            "joint", "figures", "fit", "evaluate", "explain", "reproduce", "repair", "check-env", "check-agent",
            "estimate"} == set(COMMANDS)


def test_every_command_takes_env():
    for name, parser in COMMANDS.items():
        if name == "tasks":
            continue  # a group: its subcommands take it
        assert any("--family" in a.option_strings for a in parser._actions), f"cir {name} has no --family"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_defaults_by_the_formatter_and_examples(name):
    parser = COMMANDS[name]
    text = parser.format_help()
    assert "\nexamples:\n  cir " in text, f"cir {name} --help has no examples"
    assert not re.search(r"\(default [^:]", text), f"cir {name}: a default written by hand"
    from cir.cli.style import typed

    for action in parser._actions:
        if action.option_strings and typed(action.default, action) is not None and action.help:
            shown = parser._get_formatter()._expand_help(action)
            assert f"(default: {typed(action.default, action)})" in shown, f"cir {name} {action.option_strings[0]}"


def _option(name: str, flag: str) -> argparse.Action:
    return next(a for a in COMMANDS[name]._actions if flag in a.option_strings)


def test_run_and_reproduce_share_parallel_options_and_defaults():
    from cir.cli.style import BACKENDS
    from cir.util.parallel import BACKENDS as JOBLIB_BACKENDS

    assert BACKENDS == JOBLIB_BACKENDS
    for flag in ("--jobs", "--backend", "--scheduler", "--quiet"):
        run, reproduce = _option("run", flag), _option("reproduce", flag)
        assert (run.default, run.help) == (reproduce.default, reproduce.help), flag


def test_one_progress_flag_name():
    for name, parser in COMMANDS.items():
        flags = {f for a in parser._actions for f in a.option_strings}
        assert "--no-progress" not in flags, name
    for name in ("run", "reproduce", "episode", "figures", "tasks generate"):
        assert _option(name, "--quiet").default is False


def test_tables_print_compact_columns_with_a_columns_option():
    for name in ("table", "contrast", "joint", "evaluate"):
        assert _option(name, "--columns").default is None  # compact in markdown, all in csv/json


def test_reproduce_refuses_a_scheduler_without_dask(tmp_path, capsys):
    from cir.cli import main

    assert main(["reproduce", "--out", str(tmp_path / "o"), "--scheduler", "tcp://x:1"]) == 2
    assert "--scheduler needs --backend dask" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_episode_names_a_task_as_run_does(pick_place_task):
    from cir.families.alfworld.tasks import load_tasks

    trial = pick_place_task.game_file.parent  # a trial folder is read through its game file
    (alone,) = load_tasks(str(trial))
    assert (alone.task_id, alone.split) == (pick_place_task.task_id, pick_place_task.split)
    assert alone.split == "valid_unseen" and "/" in alone.task_id
