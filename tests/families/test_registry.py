"""Families by name: the registry, the Family contract's checks, a family's agent and prompt."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest
from support import keydoor

from cir.agents.prompt import LLMPrompt
from cir.families.family import Family
from cir.families.registry import (
    builtin_extractors,
    family_names,
    get_family,
    make_agent,
    resolve_extractor,
)
from cir.util.errors import CirError
from cir.util.importing import file_module_name


def test_alfworld_is_the_default_family_and_textworld_cooking_is_registered():
    alfworld = get_family()
    assert alfworld is get_family("alfworld") and alfworld.name == "alfworld"
    assert alfworld.splits == ("train", "valid_seen", "valid_unseen") and "over_correct" in alfworld.mechanisms
    assert {"alfworld", "textworld-cooking"} <= set(family_names())
    assert resolve_extractor().name == "alfworld" and "alfworld" in builtin_extractors()


def test_a_missing_builtin_module_and_unknown_names_are_one_line_errors(monkeypatch):
    monkeypatch.setitem(sys.modules, "cir.families.textworld_cooking.family", None)  # as if absent
    from cir.families import registry

    registry._resolve.cache_clear()
    with pytest.raises(CirError, match="family 'textworld-cooking': the family's module "
                                       "cir.families.textworld_cooking.family is not part of this installation"):
        get_family("textworld-cooking")
    registry._resolve.cache_clear()
    with pytest.raises(CirError, match="family 'nope': no such environment family; expected one of alfworld"):
        get_family("nope")
    with pytest.raises(CirError, match="cannot import no_such_module_xyz"):
        get_family("no_such_module_xyz:FAMILY")
    with pytest.raises(CirError, match="support.keydoor has no attribute 'NOPE'"):
        get_family("support.keydoor:NOPE")


def test_module_attr_a_file_and_the_current_folder(tmp_path, monkeypatch):
    assert get_family("support.keydoor:FAMILY") is keydoor.FAMILY
    source = textwrap.dedent("""
        from support.keydoor import FAMILY as BASE
        import dataclasses
        FAMILY = dataclasses.replace(BASE, name="keydoor-file")
    """)
    (tmp_path / "mykd.py").write_text(source)
    assert get_family(f"{tmp_path / 'mykd.py'}:FAMILY").name == "keydoor-file"
    # a console script does not put the current folder on sys.path; the registry looks there too
    (tmp_path / "herekd.py").write_text(source.replace("keydoor-file", "keydoor-here"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert get_family("herekd:FAMILY").name == "keydoor-here"


def _unpickle_in_a_new_process(data: bytes) -> str:
    import pickle

    return pickle.loads(data).task_id


def test_a_file_family_imports_by_its_path_in_any_process(tmp_path):
    # a task of the file's own class, pickled here, is unpickled in a spawned process (as a
    # worker or the queues' manager does) that never imported the file: its module name says where
    import multiprocessing
    import pickle

    (tmp_path / "filekd.py").write_text((Path(keydoor.__file__)).read_text())
    family = get_family(f"{tmp_path / 'filekd.py'}:FAMILY")
    module = sys.modules[family.make_env.__module__]
    assert module.__name__ == file_module_name(tmp_path / "filekd.py")
    assert module.__name__ == file_module_name(str(tmp_path) + "/./filekd.py")  # one name per file
    module.generate_tasks(tmp_path, "train", 1, 0)
    task = family.load_tasks(tmp_path / "train")[0]
    assert type(task).__module__ == module.__name__
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_unpickle_in_a_new_process, (pickle.dumps(task),)) == task.task_id


@pytest.mark.parametrize("change, needle", [
    ({"name": "a:b"}, "without ':'"),
    ({"make_env": None}, "make_env must be a function"),
    ({"extractor": object()}, "extractor: feature extractor"),
    ({"prompt": "You are a robot"}, "prompt must be a cir.agents.prompt.LLMPrompt"),
    ({"splits": ()}, "splits must be a non-empty tuple"),
    ({"env_options": ("colour",)}, "env_options 'colour'"),
])
def test_a_family_names_the_part_that_is_wrong(change, needle):
    with pytest.raises(CirError, match=needle):
        dataclasses.replace(keydoor.FAMILY, **change)


def test_a_familys_agents(tmp_path):
    agent = make_agent("builtin", family=keydoor.FAMILY)
    assert isinstance(agent, keydoor.KeyDoorAgent)
    no_builtin = dataclasses.replace(keydoor.FAMILY, builtin_agent=None)
    with pytest.raises(CirError, match="family 'keydoor' has no built-in agent"):
        make_agent("builtin", family=no_builtin)
    llm = make_agent("openai:m", family=keydoor.FAMILY, base_url="http://127.0.0.1:9/v1")
    assert llm.prompt is keydoor.PROMPT and llm.params()["prompt"] == "keydoor-1"
    assert llm.prompt.parse("> take key\nmore").action == "take key"  # the family's parsing, not ALFWorld's
    prompt = tmp_path / "p.toml"
    prompt.write_text('instructions = "Walk."\nexamples = ["> right\\nYou are in cell 1 of 2."]\n')
    from_file = make_agent("openai:m", family=keydoor.FAMILY, base_url="http://127.0.0.1:9/v1", prompt_file=prompt)
    assert from_file.prompt.instructions == "Walk." and from_file.prompt.version.startswith("file-")
    assert from_file.prompt.parse is keydoor.PROMPT.parse and from_file.name == llm.name
    assert from_file.params() != llm.params()  # another prompt is another agent


def test_family_check_catches_its_env(tmp_path):
    keydoor.generate_tasks(tmp_path, "test", 2, 0)
    assert isinstance(keydoor.FAMILY, Family) and isinstance(keydoor.FAMILY.prompt, LLMPrompt)
    assert keydoor.FORGETFUL.check(keydoor.load_tasks(tmp_path)).failures
