"""AlfworldEnv on the real engine: text, arbitrary actions, exact snapshots, bad input.

The default tests use two small hand-written ALFRED problems (no generator, no planner);
the slow test at the end uses verified generated tasks of all six types.
"""

from __future__ import annotations

import json
import random
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cir.envs.base import Env
from cir.families.alfworld.engine import Savings
from cir.families.alfworld.env import BANNER, NOTHING_HAPPENS, AlfworldEnv, AlfworldSnapshot
from cir.families.alfworld.tasks import TASK_TYPES
from cir.util.errors import CirError

pytest.importorskip("alfworld")


def _aid(kind: str, i: int, suffix: str = "") -> str:
    """An ALFRED-style id (``Mug_bar__plus_01_dot_20_bar_...``) so names print as ``mug 1``."""
    x = f"_plus_0{i}_dot_{10 + i}"
    return f"{kind}_bar__{x}_bar__plus_00_dot_90_bar__minus_01_dot_{20 + i}" + suffix


# A small kitchen: (receptacle type, openable), objects (type, receptacle index).
_RECEPTACLES = [
    ("Cabinet", True),
    ("Cabinet", True),
    ("CounterTop", False),
    ("Fridge", True),
    ("Microwave", True),
    ("SinkBasin", False),
    ("DiningTable", False),
    ("Drawer", True),
]
_OBJECTS = [
    ("Mug", 2),
    ("Mug", 1),
    ("Apple", 3),
    ("Apple", 6),
    ("Plate", 0),
    ("Knife", 7),
    ("Bread", 6),
    ("Apple", 5),
]
_FITS = {
    "Mug": "Cabinet CounterTop Fridge Microwave SinkBasin DiningTable",
    "Apple": "CounterTop Fridge Microwave SinkBasin DiningTable",
    "Plate": "Cabinet CounterTop Fridge Microwave SinkBasin DiningTable",
    "Knife": "CounterTop SinkBasin DiningTable Drawer",
    "Bread": "CounterTop Fridge Microwave DiningTable",
}
_PROPS = {
    "Mug": ["isReceptacleObject", "cleanable", "heatable", "coolable"],
    "Apple": ["heatable", "coolable", "sliceable"],
    "Plate": ["cleanable", "coolable"],
    "Knife": ["cleanable"],
    "Bread": ["heatable", "coolable", "sliceable"],
}
_GOALS = {
    "heat": (
        "heat some mug and put it in cabinet",
        "(exists (?r - receptacle) (exists (?o - object) (and (heatable ?o) "
        "(objectType ?o MugType) (receptacleType ?r CabinetType) (isHot ?o) "
        "(inReceptacle ?o ?r))))",
    ),
    "two": (
        "put two apple in diningtable",
        "(exists (?r - receptacle) (exists (?o1 - object) (exists (?o2 - object) (and "
        "(not (= ?o1 ?o2)) (objectType ?o1 AppleType) (objectType ?o2 AppleType) "
        "(receptacleType ?r DiningTableType) (inReceptacle ?o1 ?r) (inReceptacle ?o2 ?r)))))",
    ),
}


def tiny_problem(goal: str) -> tuple[str, str]:
    """A hand-written ALFRED problem (no generator involved) and its goal sentence."""
    rids, objs, init = [], [], ["(atLocation agent1 loc_bar_0_bar_0_bar_0_bar_0)"]
    for i, (kind, openable) in enumerate(_RECEPTACLES):
        rid = _aid("Sink", i, "_bar_SinkBasin") if kind == "SinkBasin" else _aid(kind, i)
        rids.append(rid)
        init += [
            f"(receptacleType {rid} {kind}Type)",
            f"(receptacleAtLocation {rid} loc_bar_{i + 1}_bar_2_bar_0_bar_30)",
        ]
        if openable:
            init.append(f"(openable {rid})")
    for j, (kind, where) in enumerate(_OBJECTS):
        oid = _aid(kind, j)
        objs.append(oid)
        init += [
            f"(objectType {oid} {kind}Type)",
            f"(pickupable {oid})",
            f"(inReceptacle {oid} {rids[where]})",
            f"(objectAtLocation {oid} loc_bar_{where + 1}_bar_2_bar_0_bar_30)",
        ]
        init += [f"({prop} {oid})" for prop in _PROPS[kind]]
    for kind, fits in _FITS.items():
        init += [f"(canContain {r}Type {kind}Type)" for r in fits.split()]
    otypes = sorted({k for k, _ in _OBJECTS})
    rtypes = sorted({k for k, _ in _RECEPTACLES})
    locs = ["loc_bar_0_bar_0_bar_0_bar_0"] + [
        f"loc_bar_{i + 1}_bar_2_bar_0_bar_30" for i in range(len(rids))
    ]
    sentence, goal_pddl = _GOALS[goal]
    objects = (
        ["agent1 - agent"]
        + [f"{t}Type - otype" for t in otypes]
        + [f"{t}Type - rtype" for t in rtypes]
        + [f"{o} - object" for o in objs]
        + [f"{r} - receptacle" for r in rids]
        + [f"{loc} - location" for loc in locs]
    )
    problem = (
        "(define (problem tiny)\n(:domain alfred)\n(:objects\n  "
        + "\n  ".join(objects)
        + "\n)\n(:init\n  "
        + "\n  ".join(init)
        + f"\n)\n(:goal (and {goal_pddl}))\n)\n"
    )
    return problem, sentence


def write_game(folder: Path, goal: str) -> Path:
    """``game.tw-pddl`` for a tiny problem, with ALFWorld's own domain and grammar."""
    import alfworld.info

    problem, sentence = tiny_problem(goal)
    grammar = Path(alfworld.info.ALFRED_TWL2_PATH).read_text().replace("UNKNOWN GOAL", sentence)
    data = {
        "pddl_domain": Path(alfworld.info.ALFRED_PDDL_PATH).read_text(),
        "grammar": grammar,
        "pddl_problem": problem,
        "solvable": True,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "game.tw-pddl"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def game(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_game(tmp_path_factory.mktemp("game"), "heat")


@pytest.fixture(scope="module")
def game2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_game(tmp_path_factory.mktemp("game2"), "two")


def random_walk(env: AlfworldEnv, n: int, rng: random.Random) -> list[str]:
    """``n`` actions drawn from the admissible commands (plus some junk), not yet sent."""
    actions = []
    for _ in range(n):
        if rng.random() < 0.1:
            actions.append("xyzzy")
        else:
            actions.append(rng.choice(env.admissible_commands()))
        env.step(actions[-1])
    return actions


def check_snapshots_equal_replay(
    game_file: Path, seed: int, n_steps: int, n_restores: int, horizon: int
) -> None:
    """Fast and replay snapshots give the same obs/done/won as the original walk."""
    rng = random.Random(seed)
    fast, replay = AlfworldEnv(game_file, "fast"), AlfworldEnv(game_file, "replay")
    assert fast.reset() == replay.reset()
    snaps_f: list[AlfworldSnapshot] = []
    snaps_r: list[AlfworldSnapshot] = []
    record: list[tuple[str, tuple[str, bool, bool], list[str]]] = []
    for _ in range(n_steps):
        snaps_f.append(fast.snapshot())
        snaps_r.append(replay.snapshot())
        cmds = fast.admissible_commands()
        assert cmds == replay.admissible_commands()
        facts = fast.facts()
        assert facts == replay.facts()
        a = "look around" if rng.random() < 0.1 else rng.choice(cmds)
        out = fast.step(a)
        assert out == replay.step(a), a
        record.append((a, out, facts))
    for _ in range(n_restores):
        j = rng.randrange(n_steps)
        fast.restore(snaps_f[j])
        replay.restore(snaps_r[j])
        assert fast.fast_valid(snaps_f[j])
        assert fast.actions == replay.actions == tuple(a for a, _, _ in record[:j])
        for a, out, facts in record[j : j + horizon]:
            assert fast.facts() == replay.facts() == facts
            assert fast.step(a) == out == replay.step(a), a


def test_env_protocol_and_reset_text(game: Path) -> None:
    env = AlfworldEnv(game)
    assert isinstance(env, Env)
    obs = env.reset()
    assert BANNER not in obs
    assert obs.startswith("You are in the middle of a room.")
    goal = json.loads(game.read_text())["grammar"]
    assert re.search(r"Your task is to: [^\n]+\.$", obs)
    assert obs.split("Your task is to: ")[1] in goal
    # Nothing but the engine's text: no admissible commands, no facts.
    assert "admissible" not in obs.lower() and "inreceptacle" not in obs.lower()
    assert env.reset() == obs  # reset is repeatable


HEAT_SOLUTION = [
    "go to countertop 1",
    "take mug 2 from countertop 1",
    "go to microwave 1",
    "heat mug 2 with microwave 1",
    "go to cabinet 1",
    "open cabinet 1",
    "move mug 2 to cabinet 1",
]


@pytest.mark.parametrize("mode", ["fast", "replay"])
def test_win_and_restore_across_the_win(game: Path, mode: str) -> None:
    env = AlfworldEnv(game, mode)  # type: ignore[arg-type]
    env.reset()
    outs = [env.step(a) for a in HEAT_SOLUTION[:-1]]
    assert not any(done or won for _, done, won in outs)
    assert outs[3][0] == "You heat the mug 2 using the microwave 1."
    before = env.snapshot()
    assert env.step(HEAT_SOLUTION[-1]) == ("You move the mug 2 to the cabinet 1.", True, True)
    after = env.snapshot()
    assert (after.done, after.won) == (True, True) and env.won()
    env.restore(before)
    assert not env.won()
    assert env.step("close cabinet 1")[1:] == (False, False)
    env.restore(after)
    assert env.won() and env.step("look")[1:] == (True, True)


def test_arbitrary_text_never_crashes(game: Path) -> None:
    env = AlfworldEnv(game)
    env.reset()
    for junk in [
        "",
        "   ",
        "xyzzy",
        "go to nowhere 99",
        "ünïcödé ✓",
        "a" * 5000,
        "look\nlook",
        "take {r} from {o}",
        "go to %s",
        "\x00",
    ]:
        assert env.step(junk) == (NOTHING_HAPPENS, False, False)
    # Surrounding whitespace is the engine's business: it strips commands.
    cmd = env.admissible_commands()[0]
    assert env.step(f"  {cmd}  ")[0] != NOTHING_HAPPENS
    with pytest.raises(CirError, match="expected a string"):
        env.step(3)  # type: ignore[arg-type]


def test_step_or_snapshot_before_reset(game: Path) -> None:
    env = AlfworldEnv(game)
    with pytest.raises(CirError, match="reset"):
        env.step("look")
    with pytest.raises(CirError, match="reset"):
        env.snapshot()


def test_sorted_views_and_determinism(game: Path) -> None:
    a, b = AlfworldEnv(game), AlfworldEnv(game, "replay")
    assert a.reset() == b.reset()
    rng = random.Random(3)
    for _ in range(5):
        cmds = a.admissible_commands()
        assert cmds == sorted(cmds) == b.admissible_commands()
        assert a.facts() == sorted(a.facts()) == b.facts()
        act = rng.choice(cmds)
        assert a.step(act) == b.step(act)


def test_fast_snapshots_equal_replay(game: Path, game2: Path) -> None:
    check_snapshots_equal_replay(game, seed=0, n_steps=12, n_restores=5, horizon=3)
    check_snapshots_equal_replay(game2, seed=1, n_steps=10, n_restores=4, horizon=3)


def test_fast_path_is_used_and_survives_reset(game: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = AlfworldEnv(game, "fast")
    calls = []
    real = env._engine_reset
    monkeypatch.setattr(env, "_engine_reset", lambda: calls.append(1) or real())
    env.reset()
    rng = random.Random(7)
    random_walk(env, 4, rng)
    snap = env.snapshot()
    cont = [env.step(a) for a in (rng.choice(env.admissible_commands()),)]
    act = env.actions[-1]
    for _ in range(3):
        env.restore(snap)
        assert env.step(act) == cont[0]
    env.reset()  # later resets restore the initial state: snapshots stay valid
    env.restore(snap)
    assert env.step(act) == cont[0]
    assert len(calls) == 1  # only the first reset touched the engine

    rep = AlfworldEnv(game, "replay")
    calls_r = []
    real_r = rep._engine_reset
    monkeypatch.setattr(rep, "_engine_reset", lambda: calls_r.append(1) or real_r())
    rep.reset()
    for a in snap.actions:
        rep.step(a)
    s = rep.snapshot()
    assert s.fast is None
    rep.step("look")
    rep.restore(s)
    assert len(calls_r) == 2
    assert rep.step(act) == cont[0]


def test_snapshot_across_instances_and_games(game: Path, game2: Path) -> None:
    a, b = AlfworldEnv(game), AlfworldEnv(game)
    a.reset()
    b.reset()
    rng = random.Random(11)
    random_walk(a, 3, rng)
    snap = a.snapshot()
    nxt = rng.choice(a.admissible_commands())
    expected = a.step(nxt)
    assert not b.fast_valid(snap)  # another engine: falls back to replay
    b.restore(snap)
    assert b.step(nxt) == expected
    c = AlfworldEnv(game2)
    c.reset()
    with pytest.raises(CirError, match="cannot restore a snapshot of"):
        c.restore(snap)
    with pytest.raises(CirError, match="expected an AlfworldSnapshot"):
        c.restore("not a snapshot")


def test_snapshot_pickles_to_a_replay_snapshot(game: Path) -> None:
    import copy
    import pickle

    env = AlfworldEnv(game)
    env.reset()
    rng = random.Random(2)
    random_walk(env, 3, rng)
    snap = env.snapshot()
    assert copy.deepcopy(snap) is snap and copy.copy(snap) is snap
    moved = pickle.loads(pickle.dumps(snap))
    assert moved.fast is None and moved.actions == snap.actions
    nxt = rng.choice(env.admissible_commands())
    expected = env.step(nxt)
    env.restore(moved)  # replay path
    assert env.step(nxt) == expected


def test_restore_keeps_done_and_won_flags(game: Path) -> None:
    env = AlfworldEnv(game)
    env.reset()
    snap0 = env.snapshot()
    assert (snap0.done, snap0.won, snap0.last_obs) == (False, False, env.reset())
    env.step("look")
    env.restore(snap0)
    assert env.actions == ()


def test_sys_argv_kept(game: Path) -> None:
    before = list(sys.argv)
    env = AlfworldEnv(game)
    env.reset()
    env.restore(env.snapshot())
    assert sys.argv == before


def check_memo_identical(game_file: Path, seed: int, n_steps: int) -> None:
    """The memoised text generator writes exactly what the unmodified engine writes."""
    rng = random.Random(seed)
    plain = AlfworldEnv(game_file, "fast", savings=False)
    memo = AlfworldEnv(game_file, "fast", savings=replace(Savings.none(), memo_text=True))
    assert type(plain._pddl_env._logic.grammar).__name__ == "ContextSensitiveGrammar"
    assert type(memo._pddl_env._logic.grammar).__name__ == "MemoGrammar"
    assert plain.reset() == memo.reset()
    snaps = []
    for i in range(n_steps):
        if i % 7 == 6:  # revisit earlier states too
            j = rng.randrange(len(snaps))
            plain.restore(snaps[j][0])
            memo.restore(snaps[j][1])
        snaps.append((plain.snapshot(), memo.snapshot()))
        p_state, m_state = plain._pddl_env.state, memo._pddl_env.state
        assert p_state["admissible_commands"] == m_state["admissible_commands"]
        assert p_state["_valid_commands"] == m_state["_valid_commands"]
        a = "inventory please" if rng.random() < 0.05 else rng.choice(plain.admissible_commands())
        assert plain.step(a) == memo.step(a), a
    assert plain.facts() == memo.facts()


def test_memo_text_byte_identical(game: Path, game2: Path) -> None:
    check_memo_identical(game, seed=5, n_steps=15)
    check_memo_identical(game2, seed=6, n_steps=15)


# -- bad input ----------------------------------------------------------------------------


def test_bad_mode(game: Path) -> None:
    with pytest.raises(CirError, match="snapshots='quick': expected 'fast' or 'replay'"):
        AlfworldEnv(game, "quick")  # type: ignore[arg-type]


def test_missing_game_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "game.tw-pddl"
    with pytest.raises(CirError, match=f"{re.escape(str(missing))}: game file not found"):
        AlfworldEnv(missing)


def test_corrupt_and_truncated_game_files(game: Path, tmp_path: Path) -> None:
    text = game.read_text()
    bad = tmp_path / "game.tw-pddl"
    bad.write_text(text[: len(text) // 2])
    with pytest.raises(CirError, match=rf"{re.escape(str(bad))}: invalid JSON \(.* at line \d+ column \d+\)"):
        AlfworldEnv(bad)
    bad.write_text("not json at all")
    with pytest.raises(CirError, match="invalid JSON"):
        AlfworldEnv(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(CirError, match="expected a JSON object"):
        AlfworldEnv(bad)
    data = json.loads(text)
    del data["pddl_problem"]
    bad.write_text(json.dumps(data))
    with pytest.raises(CirError, match=r"missing key\(s\) pddl_problem"):
        AlfworldEnv(bad)
    data = json.loads(text)
    data["grammar"] = 5
    bad.write_text(json.dumps(data))
    with pytest.raises(CirError, match="'grammar' must be a non-empty string"):
        AlfworldEnv(bad)


def test_problem_the_engine_cannot_load(game: Path, tmp_path: Path) -> None:
    data = json.loads(game.read_text())
    # No start location for the agent: the translator raises KeyError('val1').
    data["pddl_problem"] = re.sub(r"\(atLocation agent1 [^)]*\)", "", data["pddl_problem"])
    bad = tmp_path / "game.tw-pddl"
    bad.write_text(json.dumps(data))
    with pytest.raises(
        CirError,
        match=rf"{re.escape(str(bad))}: failed to load: .*goal is unreachable or a needed fact is missing",
    ):
        AlfworldEnv(bad)
    data = json.loads(game.read_text())
    data["pddl_problem"] = data["pddl_problem"].replace("(:init", "(:init (", 1)
    bad.write_text(json.dumps(data))
    with pytest.raises(
        CirError, match=rf"{re.escape(str(bad))}: failed to load: the engine failed"
    ):
        AlfworldEnv(bad)


# -- exhaustive --------------------------------------------------------------------------


@pytest.mark.slow
def test_random_walks_all_task_types_fast_equals_replay(tmp_path: Path) -> None:
    """Verified generated tasks of all six types: walkthrough wins; fast == replay."""
    from cir.families.alfworld.generate import generate_split
    from cir.families.alfworld.tasks import load_tasks

    generate_split(tmp_path, "train", 6, seed=0, progress=False)
    refs = load_tasks(tmp_path / "train")
    assert sorted(r.task_type for r in refs) == sorted(TASK_TYPES)
    for i, ref in enumerate(refs):
        env = AlfworldEnv(ref.game_file)
        env.reset()
        assert env.walkthrough and len(env.walkthrough) == ref.plan_length
        outs = [env.step(a) for a in env.walkthrough]
        assert outs[-1][1:] == (True, True), ref.task_id
        assert not any(won for _, _, won in outs[:-1])
        check_snapshots_equal_replay(
            ref.game_file, seed=100 + i, n_steps=30, n_restores=10, horizon=6
        )
        check_memo_identical(ref.game_file, seed=200 + i, n_steps=40)
