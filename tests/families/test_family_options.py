"""A family's own options (Family.options): declared by the family, read as their kind, passed on
to make_env and generate_tasks, refused by name when a family does not declare them."""

from __future__ import annotations

import pytest

from cir.cli import main
from cir.families.family import Family, FamilyOption, check_family
from cir.families.registry import get_family
from cir.pairs.settings import RunSettings
from cir.util.errors import CirError


def test_alfworld_declares_its_engine_savings_and_generator_options():
    alfworld = get_family("alfworld")
    names = {o.name: (o.env, o.generate) for o in alfworld.options}
    assert names == {"engine_savings": (True, True), "types": (False, True), "layout_seed": (False, True),
                     "max_plan_length": (False, True)}
    given = {"engine_savings": "false", "types": "pick_and_place_simple", "max_plan_length": "9"}
    assert alfworld.option_values(given) == {"engine_savings": False}  # what make_env takes
    assert alfworld.option_values(given, generate=True) == {
        "engine_savings": False, "types": ("pick_and_place_simple",), "max_plan_length": 9}


def test_values_are_read_as_their_kind_or_refused_by_name():
    alfworld = get_family("alfworld")
    with pytest.raises(CirError, match="family option engine_savings='maybe': expected true or false"):
        alfworld.option_values({"engine_savings": "maybe"})
    with pytest.raises(CirError, match="family option max_plan_length='nine': expected an integer"):
        alfworld.option_values({"max_plan_length": "nine"}, generate=True)
    with pytest.raises(CirError, match="family option types: unknown task type 'fly'"):
        alfworld.option_values({"types": "fly"}, generate=True)
    with pytest.raises(CirError, match="family 'alfworld': no family option 'savings'; its options: engine_savings"):
        alfworld.option_values({"savings": "false"})
    with pytest.raises(CirError, match="family 'textworld-cooking': no family option 'engine_savings'; its options: none"):
        get_family("textworld-cooking").option_values({"engine_savings": False})


def test_run_settings_check_them_once_and_keep_them_as_sorted_pairs():
    settings = RunSettings(family_options={"engine_savings": False})
    assert settings.family_options == (("engine_savings", False),)
    with pytest.raises(CirError, match="no family option 'engine_savings'"):
        RunSettings(family="textworld-cooking", family_options={"engine_savings": False})
    with pytest.raises(CirError, match="expected true or false"):
        RunSettings(family_options=[("engine_savings", "sometimes")])


def test_a_family_option_reaches_make_env(monkeypatch):
    seen = []

    def make_env(task, *, snapshots="fast", walls=3):
        seen.append((snapshots, walls))
        return object()

    base = get_family("tests.support.keydoor:FAMILY")
    fam = Family(**{**{f: getattr(base, f) for f in ("name", "load_tasks", "extractor", "prompt")},
                    "make_env": make_env, "env_options": ("snapshots",),
                    "options": (FamilyOption("walls", int, "walls of the corridor"),)})
    fam.env("task", {"walls": "5"}, snapshots="replay", backend="loky")  # the core's other options are left out
    fam.env("task")
    assert seen == [("replay", 5), ("fast", 3)]  # an option not given is not passed: its default is make_env's


def test_bad_declarations_are_refused():
    with pytest.raises(CirError, match="not a run option of the core"):
        FamilyOption("snapshots", str, "x")
    with pytest.raises(CirError, match="kind <class 'list'>"):
        FamilyOption("walls", list, "x")
    base = get_family("tests.support.keydoor:FAMILY")
    with pytest.raises(CirError, match="env_options 'engine_savings' is not a run option of the core"):
        check_family(type("F", (), {**{f: getattr(base, f) for f in ("name", "load_tasks", "make_env", "extractor",
                                                                     "prompt", "splits", "mechanisms")},
                                    "env_options": ("engine_savings",)})())


def test_the_command_line_names_the_option(tmp_path, capsys):
    assert main(["tasks", "generate", "--split", "train", "--n", "1", "--out", str(tmp_path / "t"),
                 "--family-option", "savings=no"]) == 2
    err = capsys.readouterr().err
    assert "no family option 'savings'" in err and "engine_savings (" in err and not (tmp_path / "t").exists()
    assert main(["run", "--tasks", str(tmp_path), "--out", str(tmp_path / "r"), "--family-option", "x"]) == 2
    assert "--family-option 'x': expected NAME=VALUE" in capsys.readouterr().err
