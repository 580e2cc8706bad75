"""The SAS cache (cir.families.alfworld.sascache): a kept translation gives the game the
translator gives, is keyed by everything the translation depends on, and a damaged entry or
an unwritable folder costs time, never a wrong game."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import logging
from pathlib import Path

import fast_downward
import pytest

from cir.families.alfworld import engine as engine_module
from cir.families.alfworld.engine import translate
from cir.families.alfworld.sascache import SasCache, cache_dir, translation_key

pytest.importorskip("alfworld")


def task_view(task) -> str:
    """Everything the engine reads of the normalised PDDL task, as text."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        task.dump()
    return out.getvalue() + repr((sorted(map(str, task.init)), [a.name for a in task.actions],
                                  [str(o) for o in task.objects], [str(t) for t in task.types]))


@pytest.fixture
def game(pick_place_task) -> dict:
    return json.loads(Path(pick_place_task.game_file).read_text())


@pytest.fixture
def grounded(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The translator's full runs (grounding), by their optimise flag."""
    calls: list[bool] = []
    real = fast_downward.pddl2sas

    def counting(domain, problem, verbose=False, optimize=False):
        calls.append(optimize)
        return real(domain, problem, verbose=verbose, optimize=optimize)

    monkeypatch.setattr(fast_downward, "pddl2sas", counting)
    return calls


def test_a_kept_translation_is_the_translators(game: dict, tmp_path: Path, grounded: list[bool]) -> None:
    cache = SasCache(tmp_path)
    plain = translate(game["pddl_domain"], game["pddl_problem"], replanner=True)
    cold = translate(game["pddl_domain"], game["pddl_problem"], replanner=True, cache=cache)
    assert grounded == [False, True, False, True]  # no cache, then an empty one: both translated
    assert len(list(tmp_path.rglob("*.json.gz"))) == 2  # the plain and the replanner's
    warm = translate(game["pddl_domain"], game["pddl_problem"], replanner=True, cache=cache)
    assert grounded == [False, True, False, True]  # kept: nothing grounded again
    for t in (cold, warm):
        assert (t.sas, t.sas_replan) == (plain.sas, plain.sas_replan)
        assert task_view(t.task) == task_view(plain.task)


def test_the_engine_on_a_kept_translation_says_what_textworld_says(pick_place_task, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    grounded: list[bool]) -> None:
    from test_engine import walk_identical

    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path / "sas"
    from cir.families.alfworld.env import AlfworldEnv

    AlfworldEnv(pick_place_task.game_file).close()  # cold: translated and kept
    assert grounded == [False] and list((tmp_path / "sas").rglob("*.json.gz"))
    grounded.clear()
    with AlfworldEnv(pick_place_task.game_file) as warm:
        warm.reset()
        warm.step(warm.admissible_commands()[0])
    assert grounded == []  # the kept translation: nothing grounded
    walk_identical(pick_place_task.game_file, seed=5, n_steps=12)  # warm, against textworld's own


def test_the_key_is_everything_a_translation_depends_on(game: dict) -> None:
    d, p = game["pddl_domain"], game["pddl_problem"]
    keys = {translation_key(d, p, False), translation_key(d, p, True),
            translation_key(d + " ", p, False), translation_key(d, p + " ", False)}
    assert len(keys) == 4
    assert translation_key(d, p, False) == translation_key(d, p, False)


@pytest.mark.parametrize("damage", ["garbage", "edited", "torn"])
def test_a_damaged_entry_is_translated_again_and_rewritten(game: dict, tmp_path: Path, damage: str,
                                                           grounded: list[bool],
                                                           caplog: pytest.LogCaptureFixture) -> None:
    cache = SasCache(tmp_path)
    good = translate(game["pddl_domain"], game["pddl_problem"], replanner=False, cache=cache)
    (path,) = tmp_path.rglob("*.json.gz")
    intact = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not gzip")
    elif damage == "edited":  # valid JSON whose text is not what its digest says
        entry = json.loads(gzip.decompress(intact))
        entry["sas"] = entry["sas"].replace("begin_operator", "begin_operatorX", 1)
        path.write_bytes(gzip.compress(json.dumps(entry).encode()))
    else:
        path.write_bytes(intact[: len(intact) // 2])
    grounded.clear()
    with caplog.at_level(logging.WARNING, logger="cir.families.alfworld.sascache"):
        again = translate(game["pddl_domain"], game["pddl_problem"], replanner=False, cache=cache)
    assert again.sas == good.sas and grounded == [False]
    assert f"{path}: not an intact translation of its game; translating it again" in caplog.text
    assert cache.get(game["pddl_domain"], game["pddl_problem"], optimize=False) == good.sas  # rewritten


def test_an_unwritable_folder_is_one_warning(game: dict, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cache = SasCache(blocker / "sas")
    with caplog.at_level(logging.WARNING, logger="cir.families.alfworld.sascache"):
        for _ in range(2):
            t = translate(game["pddl_domain"], game["pddl_problem"], replanner=False, cache=cache)
            assert t.sas.startswith("begin_version")
    warnings = [r for r in caplog.records if "games are translated without it" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].getMessage().startswith(f"the SAS cache in {blocker / 'sas'}: ")


def test_the_process_keeps_one_cache_per_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "a"))
    first = engine_module._sas_cache()
    assert engine_module._sas_cache() is first and first.folder == tmp_path / "a" / "sas"
    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "b"))
    assert engine_module._sas_cache().folder == tmp_path / "b" / "sas"
    monkeypatch.delenv("CIR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "cir" / "sas"
