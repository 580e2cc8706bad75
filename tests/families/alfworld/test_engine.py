"""The engine's savings (cir.families.alfworld.engine): byte-identical text, each saving doing what it says.

The reference is always textworld's own engine (``savings=False`` builds textworld's
``PddlEnv`` itself, not ``Engine`` with switches off). The default tests walk one generated
task of each of the six types; the slow test at the end walks many more, longer.
"""

from __future__ import annotations

import gc
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import textworld
from textworld.envs.pddl import PddlEnv

from cir.families.alfworld import engine as engine_module
from cir.families.alfworld import memory
from cir.families.alfworld.engine import Engine, Savings, load_game
from cir.families.alfworld.env import AlfworldEnv
from cir.families.alfworld.generate import generate_split
from cir.families.alfworld.grammar import parse_logic
from cir.families.alfworld.tasks import TASK_TYPES, TaskRef, load_tasks
from cir.util.errors import CirError

pytest.importorskip("alfworld")


@pytest.fixture(scope="module")
def six(tmp_path_factory: pytest.TempPathFactory) -> list[TaskRef]:
    """One generated task of each type."""
    root = tmp_path_factory.mktemp("six")
    generate_split(root, "train", 6, 0, progress=False)
    refs = load_tasks(root / "train")
    assert sorted(r.task_type for r in refs) == sorted(TASK_TYPES)
    return refs


def engine_view(env: AlfworldEnv) -> tuple:
    """What the engine computed for the current state, in its own order."""
    state = env._pddl_env.state
    return (state["feedback"], state["won"], state["_valid_commands"],
            [a.command_template for a in state["_valid_actions"]], state["admissible_commands"])


def walk_identical(game_file: Path, seed: int, n_steps: int, savings: Savings | bool = True,
                   snapshots: str = "fast") -> None:
    """A random walk (junk, restores, a reset) gives the same text with and without savings."""
    rng = random.Random(seed)
    fast = AlfworldEnv(game_file, snapshots, savings=savings)  # type: ignore[arg-type]
    plain = AlfworldEnv(game_file, "fast", savings=False)
    assert fast.reset() == plain.reset()
    assert engine_view(fast) == engine_view(plain)
    snaps = []
    for i in range(n_steps):
        if i % 7 == 6:  # revisit an earlier state
            j = rng.randrange(len(snaps))
            fast.restore(snaps[j][0])
            plain.restore(snaps[j][1])
        if i == n_steps // 2:  # and start again
            assert fast.reset() == plain.reset()
        if i == n_steps // 3:  # another engine closes: textworld's interned facts are dropped
            memory.forget_facts()
        snaps.append((fast.snapshot(), plain.snapshot()))
        assert fast.admissible_commands() == plain.admissible_commands()
        action = "xyzzy" if rng.random() < 0.05 else rng.choice(plain.admissible_commands())
        assert fast.step(action) == plain.step(action), action
        assert engine_view(fast) == engine_view(plain), action
    assert fast.facts() == plain.facts()
    fast.close()
    plain.close()


def by_type(refs: list[TaskRef], task_type: str) -> TaskRef:
    return next(r for r in refs if r.task_type == task_type)


@pytest.mark.slow  # every task type on the real engine (a minute)
def test_text_identical_on_random_walks_of_all_task_types(six: list[TaskRef]) -> None:
    for i, ref in enumerate(six):
        walk_identical(ref.game_file, seed=i, n_steps=15)
    # Replay snapshots reset the engine on every restore: later resets rebuild the state
    # from the translation made at load.
    walk_identical(six[5].game_file, seed=9, n_steps=8, snapshots="replay")


@pytest.mark.slow  # every task type on the real engine (a minute)
def test_episodes_identical_with_and_without_savings(six: list[TaskRef]) -> None:
    """A paired grid of the built-in agent: the same rows and episodes, byte for byte."""
    from cir.families import make_agent
    from cir.pairs.replay import ReplaySettings, run_task_pairs

    settings = ReplaySettings(conditions=("clean", "stale2"), delays=(0, 2))
    ref = by_type(six, "pick_and_place_simple")
    out = {}
    for savings in (True, False):
        with AlfworldEnv(ref.game_file, savings=savings) as env:
            result = run_task_pairs(ref, make_agent("builtin", seed=0), env, settings)
        out[savings] = json.dumps([result.rows, [e.to_dict() for e in result.episodes]], sort_keys=True)
    assert out[True] == out[False]


def test_translate_once(six: list[TaskRef], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = engine_module.translate
    monkeypatch.setattr(engine_module, "translate", lambda *a, **k: calls.append(1) or real(*a, **k))
    game = six[2].game_file
    env = AlfworldEnv(game, "replay")
    loaded_state = env._pddl_env._pddl_state
    env.reset()
    assert env._pddl_env._pddl_state is loaded_state  # the first reset keeps the load's state
    env.step(env.admissible_commands()[0])
    env.restore(env.snapshot())  # replay mode: a second engine reset
    assert env._pddl_env._pddl_state is not loaded_state
    assert len(calls) == 1
    calls.clear()
    env = AlfworldEnv(game, "replay", savings=replace(Savings(), translate_once=False))
    env.reset()
    env.restore(env.snapshot())
    assert len(calls) == 3  # load, and each engine reset


def test_replanner_only_when_asked(six: list[TaskRef]) -> None:
    ref = by_type(six, "pick_and_place_simple")
    data = json.loads(ref.game_file.read_text())
    plain_infos = textworld.EnvInfos(admissible_commands=True)
    env = AlfworldEnv(ref.game_file)
    state = env._pddl_env._pddl_state
    assert state.sas_replan is None
    with pytest.raises(CirError, match="without the replanner's translation"):
        state.replan(env._pddl_env._entity_infos)
    # Asked for the planner's commands, the engine translates for it, with the same result.
    asked = textworld.EnvInfos(admissible_commands=True, policy_commands=True)
    with_planner = load_game(data, Savings(), asked)
    plain = load_game(data, Savings.none(), asked)
    assert with_planner.unwrapped._pddl_state.sas_replan is not None
    a, b = with_planner.reset(), plain.reset()
    assert a["policy_commands"] == b["policy_commands"] and a["policy_commands"]
    assert a["admissible_commands"] == b["admissible_commands"]
    plain_env = load_game(data, Savings.none(), plain_infos)
    assert isinstance(plain_env.unwrapped, PddlEnv) and not isinstance(plain_env.unwrapped, Engine)


def _with_template(data: dict, old: str, new: str) -> dict:
    assert old in data["grammar"]
    return {**data, "grammar": data["grammar"].replace(old, new)}


GOTO = 'template :: "go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]";'


def test_command_cache_check(six: list[TaskRef], tmp_path: Path) -> None:
    env = AlfworldEnv(six[0].game_file)
    assert env.command_cache_off is None  # ALFWorld's templates read static facts only
    assert AlfworldEnv(six[0].game_file, savings=False).command_cache_off == "the unmodified engine"
    off = AlfworldEnv(six[0].game_file, savings=replace(Savings(), command_cache=False))
    assert "switched off" in (off.command_cache_off or "")

    data = json.loads(six[0].game_file.read_text())
    # A template that asks where the agent is: the text could change with the state.
    dynamic = _with_template(data, GOTO, GOTO.replace(
        "lend:location)}", "lend:location) & atlocation(a:agent, lstart:location)}"))
    game = tmp_path / "dynamic" / "game.tw-pddl"
    game.parent.mkdir()
    game.write_text(json.dumps(dynamic))
    env = AlfworldEnv(game)
    assert env.command_cache_off is not None
    assert "'gotolocation'" in env.command_cache_off and "'atlocation'" in env.command_cache_off
    walk_identical(game, seed=3, n_steps=7)  # derived at every step: still the same text

    infos = textworld.EnvInfos(admissible_commands=True)
    for expression, word in (("context", "may read more"), ("r.__class__", "may read more"),
                             ("r.name(", "not a Python expression")):
        odd = _with_template(data, GOTO, GOTO.replace("{r.name |", "{" + expression + " |"))
        reason = load_game(odd, Savings(), infos).unwrapped.command_cache_off
        assert reason is not None and word in reason, (expression, reason)


def logic_view(logic: Any) -> tuple:
    """Everything a parsed game logic holds, as plain text."""
    rules = {name: [repr(r) for r in rs] for name, rs in logic.grammar._rules.items()}
    actions = {name: vars(a) for name, a in logic.actions.items()}
    return logic.domain, list(rules.items()), actions


def test_grammar_parsed_once_equals_a_full_parse(six: list[TaskRef]) -> None:
    firsts = set()
    for ref in six:
        data = json.loads(ref.game_file.read_text())
        reused = parse_logic(data)
        assert logic_view(reused) == logic_view(parse_logic(data, reuse=False)), ref.task_id
        firsts.add(id(reused.grammar._rules["intro"][0]))
    assert len(firsts) == 1  # one parse for all six games
    # A sentence with characters the grammar or JSON would read differently: a full parse.
    odd = {**data, "grammar": data["grammar"].replace(
        json.loads(six[-1].traj_file.read_text())["turk_annotations"]["anns"][0]["task_desc"],
        'put a "#look.feedback#" in desk 1')}
    assert 'put a "#look.feedback#"' in odd["grammar"]
    with pytest.raises(Exception):  # noqa: B017 - textworld's own parser refuses it
        parse_logic(odd, reuse=False)
    with pytest.raises(Exception):  # noqa: B017 - and so does the reuse (it parses in full)
        parse_logic(odd)
    hashed = {**data, "grammar": data["grammar"].replace("Your task is to: ", "Your task is to: #")}
    assert id(parse_logic(hashed).grammar._rules["intro"][0]) not in firsts


def test_library_copies_are_recycled(six: list[TaskRef]) -> None:
    first = AlfworldEnv(six[1].game_file)
    lib = first._lib
    first.reset()
    first.close()
    first.close()  # idempotent
    with pytest.raises(CirError, match="closed"):
        first.step("look")
    with pytest.raises(CirError, match="closed"):
        first.reset()
    with AlfworldEnv(six[3].game_file) as second:
        assert second._lib is lib  # the copy serves the next game
    walk_identical(six[3].game_file, seed=4, n_steps=5)  # and a reused copy says the same

    loaded, _ = memory.copies()
    for ref in six[:3]:  # dropped without close(): garbage collection gives the copy back
        env = AlfworldEnv(ref.game_file)
        env.reset()
        del env
        gc.collect()
    assert memory.copies()[0] == loaded
    kept = AlfworldEnv(six[0].game_file, savings=replace(Savings(), release_memory=False))
    assert kept._lib is not lib and memory.copies()[0] == loaded


def test_closing_drops_interned_facts(six: list[TaskRef]) -> None:
    import mementos.core
    from textworld.logic import Proposition

    def facts_of(env: AlfworldEnv) -> set:
        ids = {k for k in env._pddl_env._entity_infos if "_bar_" in k}
        return {k for k in list(mementos.core._memento_cache)
                if k[0] is Proposition and any(name in ids for name, _ in k[2])}

    env = AlfworldEnv(six[4].game_file)
    env.reset()
    env.step(env.admissible_commands()[0])
    assert facts_of(env)  # textworld keeps every fact it made
    env.close()
    assert not facts_of(env)


def test_savings_setting_is_checked(six: list[TaskRef]) -> None:
    with pytest.raises(CirError, match=r"savings='yes': expected True, False or"):
        AlfworldEnv(six[0].game_file, savings="yes")  # type: ignore[arg-type]
    assert Savings.of(False) == Savings.none() and not Savings.none().in_engine()
    assert Savings.of(True) == Savings()


@pytest.mark.slow
def test_text_identical_exhaustive(tmp_path: Path) -> None:
    """12 tasks (two of each type) on long walks, both snapshot modes; grids of three."""
    from cir.families import make_agent
    from cir.pairs.replay import ReplaySettings, run_task_pairs

    generate_split(tmp_path, "valid_unseen", 12, 1, progress=False)
    refs = load_tasks(tmp_path / "valid_unseen")
    for i, ref in enumerate(refs):
        walk_identical(ref.game_file, seed=100 + i, n_steps=60,
                       snapshots="replay" if i % 3 == 0 else "fast")
    settings = ReplaySettings(operations=("refresh", "refresh_ablated", "replan", "rewind"))
    for ref in refs[::4]:
        out = {}
        for savings in (True, False):
            with AlfworldEnv(ref.game_file, savings=savings) as env:
                result = run_task_pairs(ref, make_agent("builtin", seed=0), env, settings)
            out[savings] = json.dumps([result.rows, [e.to_dict() for e in result.episodes]], sort_keys=True)
        assert out[True] == out[False], ref.task_id
