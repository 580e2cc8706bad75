"""Procedural ALFWorld tasks, verified solvable on the real engine, in ALFWorld's layout.

``generate_split(out, split, n, seed)`` writes ``out/<split>/<task folder>/trial_<id>/``
with ``traj_data.json`` and ``game.tw-pddl`` (what ALFWorld's own ``AlfredTWEnv`` reads) and
``out/<split>/manifest.json``. Why procedural: the ALFWorld data set cannot be downloaded
here, but its engine, domain, grammar, goal library and constants can (see scenes.py).

Determinism: task ``i`` of a split depends only on ``(split, seed, i, types, layout_seed)``,
drawn with private ``random.Random`` instances seeded by SHA-256; output bytes do not depend
on the machine, the process or ``PYTHONHASHSEED``. A prefix property holds: the first ``k``
tasks of ``n > k`` are the tasks of ``n = k``.

Splits, as in ALFWorld: ``valid_unseen`` uses scene layouts from a pool disjoint from the
one train uses; ``valid_seen`` task ``i`` uses the layout of train task ``i`` (same seed and
types) with new objects, placements and goal, so any ``valid_seen`` set of size ``<= n_train``
only uses layouts that train uses.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cir import __version__
from cir.envs import scenes
from cir.envs.pddl import TASK_TYPES, Goal, game_json, problem_text, sha256_text
from cir.envs.scenes import Layout, PlacedObject
from cir.errors import CirError
from cir.parallel import parallel_map

SPLITS: tuple[str, ...] = ("train", "valid_seen", "valid_unseen")
SPLIT_CODE = {"train": 1, "valid_seen": 2, "valid_unseen": 3}
GENERATOR_VERSION = 1
MAX_ATTEMPTS = 25  # redraws of one task before giving up with a clear error
MAX_SCENE_TRIES = 50

# Rooms where ALFWorld poses each task type (alfworld.gen.constants.GOALS_VALID).
VALID_ROOMS: dict[str, tuple[str, ...]] = {
    "pick_and_place_simple": ("kitchen", "livingroom", "bedroom", "bathroom"),
    "look_at_obj_in_light": ("livingroom", "bedroom"),
    "pick_clean_then_place_in_recep": ("kitchen", "bathroom"),
    "pick_heat_then_place_in_recep": ("kitchen",),
    "pick_cool_then_place_in_recep": ("kitchen",),
    "pick_two_obj_and_place": ("kitchen", "livingroom", "bedroom", "bathroom"),
}
# Object property a task type needs (VAL_ACTION_OBJECTS key) and the receptacle types that
# cannot be its final receptacle (the appliance that does the treatment).
NEEDS_PROPERTY = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}
EXCLUDED_PARENTS = {
    "pick_clean_then_place_in_recep": frozenset({"SinkBasin", "BathtubBasin"}),
    "pick_heat_then_place_in_recep": frozenset({"Microwave"}),
    "pick_cool_then_place_in_recep": frozenset({"Fridge"}),
}
TARGET_COUNTS = {  # (min, max) instances of the target class
    "pick_and_place_simple": (1, 3),
    "look_at_obj_in_light": (1, 2),
    "pick_clean_then_place_in_recep": (1, 3),
    "pick_heat_then_place_in_recep": (1, 3),
    "pick_cool_then_place_in_recep": (1, 3),
    "pick_two_obj_and_place": (2, 4),
}
HIDDEN_PROBABILITY = 0.6  # chance that a target instance goes into a closed receptacle


@dataclass(frozen=True)
class DrawnTask:
    """One sampled task before verification."""

    split: str
    index: int
    trial: str
    layout: Layout
    objects: tuple[PlacedObject, ...]
    goal: Goal
    template_index: int

    @property
    def sentence(self) -> str:
        return self.goal.sentence(self.template_index)

    @property
    def folder(self) -> str:
        """ALFWorld's task folder name ``<type>-<Obj>-<Mrecep>-<Parent>-<scene>``."""
        g = self.goal
        parent = g.toggle_target if g.task_type == "look_at_obj_in_light" else g.parent_target
        return f"{g.task_type}-{g.object_target}-{g.mrecep_target or 'None'}-{parent}-{self.layout.scene}"

    @property
    def task_id(self) -> str:
        return f"{self.folder}/{self.trial}"

    def problem(self) -> str:
        """The game's PDDL problem (every object of the scene)."""
        return problem_text(f"plan_{self.trial}", self.layout, self.objects, self.goal)

    def planning_problem(self) -> str:
        """The same problem with only the goal's object classes (targets and lamps).

        Why: the engine's planner (Fast Downward's lazy search ordered by plan cost alone,
        as textworld calls it) explores every way of moving every object, which explodes
        in realistic rooms (minutes for some two-object tasks). Objects of other classes
        never enable or block the goal in the ALFRED domain (no capacities; the plan never
        holds them), and instance numbers are counted per class, so a plan for this problem
        is, command for command, a plan of the same length for the full game, as ALFRED's
        own planner problems keep only goal-relevant objects. ``generate_task`` replays it
        on the full game to check.
        """
        keep = {self.goal.object_target, self.goal.toggle_target} - {""}
        objects = tuple(o for o in self.objects if o.otype in keep)
        return problem_text(f"plan_{self.trial}", self.layout, objects, self.goal)


# ---------------------------------------------------------------------------------------
# Input checks


def check_types(types: Sequence[str] | None) -> tuple[str, ...]:
    """Validate a task-type restriction; ``None`` means all six, in ALFWorld's order."""
    if types is None:
        return TASK_TYPES
    out = []
    for t in types:
        t = t.strip()
        if t not in TASK_TYPES:
            raise CirError(f"unknown task type {t!r}; expected one of {', '.join(TASK_TYPES)}")
        if t not in out:
            out.append(t)
    if not out:
        raise CirError(f"no task types given; expected some of {', '.join(TASK_TYPES)}")
    return tuple(out)


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise CirError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    return split


# ---------------------------------------------------------------------------------------
# Sampling


def _goal_candidates(task_type: str, layout: Layout) -> list[tuple[str, str]]:
    """(object class, parent class) pairs posable in ``layout``; parent '' for look-at."""
    rtypes = layout.rtypes
    if task_type == "look_at_obj_in_light":
        if not any(rt in scenes.LAMP_RECEPTACLES for rt in rtypes):
            return []
        objs = [o for o in scenes.ROOM_OBJECTS[layout.room] if o not in scenes.NOT_PICKUPABLE
                and any(scenes.can_contain(rt, o) for rt in rtypes)]
        return [(o, "") for o in sorted(objs)]
    prop = NEEDS_PROPERTY.get(task_type)
    excluded = EXCLUDED_PARENTS.get(task_type, frozenset())
    if task_type == "pick_clean_then_place_in_recep" and "SinkBasin" not in rtypes:
        return []
    if task_type == "pick_heat_then_place_in_recep" and "Microwave" not in rtypes:
        return []
    if task_type == "pick_cool_then_place_in_recep" and "Fridge" not in rtypes:
        return []
    out = []
    for obj in sorted(scenes.ROOM_OBJECTS[layout.room]):
        if obj in scenes.NOT_PICKUPABLE or (prop and not scenes.action_class(obj, prop)):
            continue
        for parent in rtypes:
            if parent in excluded or not scenes.can_contain(parent, obj):
                continue
            sources = [r for r in layout.receptacles if _may_start_in(task_type, obj, parent, obj, r.rtype)]
            if sources:
                out.append((obj, parent))
    return out


def _may_start_in(task_type: str, target: str, parent: str, otype: str, rtype: str) -> bool:
    """Whether an object of class ``otype`` may start in a receptacle of class ``rtype``."""
    if otype in scenes.TOGGLE_TARGETS:  # lamps stand on tables (no canContain rule for them)
        return rtype in scenes.LAMP_RECEPTACLES
    if not scenes.can_contain(rtype, otype):
        return False
    if otype == target:
        if rtype == parent:  # never solved (or half-solved) at reset
            return False
        if task_type == "pick_cool_then_place_in_recep" and rtype == "Fridge":
            return False
    return True


def _scene_for(task_type: str, room_pool: Sequence[str], unseen: bool, seed: int, index: int,
               layout_seed: int) -> Layout:
    """The layout of task ``index``; shared by train and valid_seen (same seed)."""
    pool_name = "unseen" if unseen else "seen"
    rng = scenes.rng_for("scene", pool_name, seed, index, task_type)
    for _ in range(MAX_SCENE_TRIES):
        room = rng.choice(list(room_pool))
        scene = rng.choice(scenes.scene_pool(room, unseen))
        layout = scenes.make_layout(room, scene, layout_seed)
        if _goal_candidates(task_type, layout):
            return layout
    raise CirError(f"no scene fits task type {task_type!r} after {MAX_SCENE_TRIES} tries")


def _choose_goal(task_type: str, layout: Layout, rng: Any, avoid: tuple[str, str] | None) -> Goal:
    cands = _goal_candidates(task_type, layout)
    if avoid is not None and len(cands) > 1:
        cands = [c for c in cands if c != avoid] or cands
    # Uniform over object classes first, then over parents: rooms with many parents for one
    # class would otherwise dominate.
    obj = rng.choice(sorted({o for o, _ in cands}))
    parent = rng.choice(sorted(p for o, p in cands if o == obj))
    toggle = rng.choice(scenes.TOGGLE_TARGETS) if task_type == "look_at_obj_in_light" else ""
    return Goal(task_type, obj, parent, toggle_target=toggle)


class _Placer:
    """Puts objects into receptacles with capacities, recording the placements."""

    def __init__(self, layout: Layout, goal: Goal, rng: Any) -> None:
        self.layout = layout
        self.goal = goal
        self.rng = rng
        self.coords = scenes._Coords(rng)
        self.free = {r.rid: (1 if r.rtype in scenes.SINGLE_SLOT else scenes.MAX_PER_RECEPTACLE)
                     for r in layout.receptacles}
        self.placed: list[PlacedObject] = []

    def candidates(self, otype: str, among: Sequence[str] | None = None) -> list[scenes.Receptacle]:
        g = self.goal
        return [r for r in self.layout.receptacles
                if self.free[r.rid] > 0
                and (among is None or r.rtype in among)
                and _may_start_in(g.task_type, g.object_target, g.parent_target, otype, r.rtype)]

    def place(self, otype: str, hidden: float = 0.0, among: Sequence[str] | None = None) -> bool:
        cands = self.candidates(otype, among)
        if not cands:
            return False
        closed = [r for r in cands if r.openable]
        if closed and self.rng.random() < hidden:
            cands = closed
        r = self.rng.choice(cands)
        self.free[r.rid] -= 1
        self.placed.append(PlacedObject(otype, scenes.alfred_object_id(otype, self.coords.xyz()), r.rid))
        return True


def draw_task(split: str, seed: int, index: int, task_type: str, *, attempt: int = 0,
              layout_seed: int = 0) -> DrawnTask:
    """Sample task ``index`` of ``split`` (no engine involved). ``attempt`` redraws it."""
    check_split(split)
    unseen = split == "valid_unseen"
    layout = _scene_for(task_type, VALID_ROOMS[task_type], unseen, seed, index, layout_seed)
    rng = scenes.rng_for("task", split, seed, index, task_type, attempt, layout_seed)
    avoid = None
    if split == "valid_seen":  # a new goal in the train task's layout
        train_rng = scenes.rng_for("task", "train", seed, index, task_type, 0, layout_seed)
        tg = _choose_goal(task_type, layout, train_rng, None)
        avoid = (tg.object_target, tg.parent_target)
    goal = _choose_goal(task_type, layout, rng, avoid)
    template_index = rng.randrange(len(goal.templates()))

    placer = _Placer(layout, goal, rng)
    lo, hi = TARGET_COUNTS[task_type]
    n_target = rng.randint(lo, hi)
    for _ in range(n_target):
        placer.place(goal.object_target, hidden=HIDDEN_PROBABILITY)
    n_ok = sum(1 for o in placer.placed if o.otype == goal.object_target)
    if n_ok < (2 if task_type == "pick_two_obj_and_place" else 1):
        raise _Redraw("no room for the target objects")

    lamp_room = layout.room in ("livingroom", "bedroom")
    if task_type == "look_at_obj_in_light" or (lamp_room and rng.random() < 0.7):
        placer.place(goal.toggle_target or "DeskLamp", among=scenes.LAMP_RECEPTACLES)
    if task_type == "look_at_obj_in_light" and not any(o.otype == goal.toggle_target for o in placer.placed):
        raise _Redraw("no room for the lamp")

    # Distractors of similar classes (an agent must tell a knife from a butterknife).
    room_objs = set(scenes.ROOM_OBJECTS[layout.room])
    similar = [t for t in scenes.similar_types(goal.object_target) if t in room_objs]
    rng.shuffle(similar)
    for otype in similar[: rng.randint(1, 3)]:
        for _ in range(rng.randint(1, 2)):
            placer.place(otype, hidden=0.4)

    # Filler objects up to the scene's size.
    n_rec = len(layout.receptacles)
    n_total = rng.randint(max(scenes.MIN_OBJECTS, n_rec), min(scenes.MAX_OBJECTS, 2 * n_rec + 6))
    fillers = sorted(room_objs - {goal.object_target})
    tries = 0
    while len(placer.placed) < n_total and tries < 4 * scenes.MAX_OBJECTS:
        tries += 1
        placer.place(rng.choice(fillers), hidden=0.3)

    objects = tuple(sorted(placer.placed, key=lambda o: o.oid))
    trial = f"trial_T{seed:08d}_{SPLIT_CODE[split]}_{index:06d}"
    return DrawnTask(split, index, trial, layout, objects, goal, template_index)


class _Redraw(Exception):
    """A draw that cannot be posed; draw again."""


# ---------------------------------------------------------------------------------------
# Verification on the engine


def _load_engine(problem: str, sentence: str) -> Any:
    """A loaded ``AlfredDemangler(PddlEnv)`` for the problem (names like ``apple 1``)."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
    from textworld.envs.pddl import PddlEnv

    from cir.envs.pddl import domain_text, grammar_with_goal

    data = {"pddl_domain": domain_text(), "grammar": grammar_with_goal(sentence),
            "pddl_problem": problem}
    env = AlfredDemangler(PddlEnv(textworld.EnvInfos(admissible_commands=False)))
    try:
        env.load(data)
    except Exception as err:  # the translator fails with KeyError('val1') on bad problems
        raise CirError(f"the problem does not load on the ALFWorld engine "
                       f"({type(err).__name__}: {err}); a goal receptacle, location or "
                       f"canContain fact is missing or the goal is unreachable") from None
    return env


def plan_problem(problem: str, sentence: str, *, replay: bool = False) -> list[str]:
    """The engine planner's plan for a problem; ``CirError`` if there is none.

    Loads the problem in textworld's ``PddlEnv`` through ALFWorld's ``AlfredDemangler`` and
    asks the planner that backs ``policy_commands`` (Fast Downward, on the state just loaded:
    this saves the second pair of PDDL translations a ``reset`` would do). With ``replay``,
    the plan is also played on the game (``replay_on_game``) and must win.
    """
    env = _load_engine(problem, sentence)
    engine = env.unwrapped
    state = engine._pddl_state
    if state.check_goal():
        raise CirError("the problem is already solved at reset")
    plan = list(state.replan(engine._entity_infos) or [])
    if not plan:
        raise CirError("the ALFWorld planner found no plan: the problem is unsolvable")
    if replay:
        replay_on_game(problem, sentence, plan)
    return plan


# First word of a command -> the ALFRED domain operators that print it (alfred.twl2).
_VERB_OPERATORS = {
    "go": ("gotolocation",), "open": ("openobject",), "close": ("closeobject",),
    "take": ("pickupobject",), "move": ("putobject",), "heat": ("heatobject",),
    "cool": ("coolobject",), "clean": ("cleanobject",), "use": ("toggleobject",),
    "slice": ("sliceobject",), "examine": ("examinereceptacle", "examineobject"),
    "look": ("look",), "inventory": ("inventory",), "help": ("help",),
}


def replay_on_game(problem: str, sentence: str, plan: Sequence[str]) -> None:
    """Play ``plan`` on the full game from its initial state; ``CirError`` unless it wins.

    Each command must be one of the engine's admissible commands at that point (derived from
    the grammar as ``PddlEnv.step`` does) and the goal must hold exactly at the end.
    """
    env = _load_engine(problem, sentence)
    engine = env.unwrapped
    state = engine._pddl_state
    mapping = {k: info.name for k, info in engine._entity_infos.items()}
    for i, command in enumerate(plan):
        if state.check_goal():
            raise CirError(f"the game is won before plan step {i + 1} of {len(plan)}")
        chosen = None
        verb_ops = _VERB_OPERATORS.get(command.split(" ", 1)[0], ())
        for action in state.all_applicable_actions():
            # Deriving a command's text is the slow part: only derive plausible candidates.
            if action.name not in verb_ops:
                continue
            template = engine._logic.actions[action.name].template
            names = [mapping[var.name] for ph, var in action.mapping.items()
                     if "{" + ph.name in template]
            if not all(f" {n}" in f" {command}" for n in names):
                continue
            context = {"state": state, "facts": list(state.facts),
                       "variables": {ph.name: engine._entity_infos[var.name]
                                     for ph, var in action.mapping.items()},
                       "mapping": action.mapping, "entity_infos": engine._entity_infos}
            action.command_template = engine._logic.grammar.derive(action.command_template, context)
            if action.format_command(mapping) == command:
                chosen = action
                break
        if chosen is None:
            raise CirError(f"plan step {i + 1} {command!r} is not admissible in the game")
        state.apply(chosen)
    if not state.check_goal():
        raise CirError("the plan does not win the game")


def verify_game_file(path: str | os.PathLike[str]) -> list[str]:
    """Verify a ``game.tw-pddl`` (or a folder holding one) is solvable; return the plan.

    API hook for checking hand-written or edited games: a stored walkthrough must win when
    replayed on the game; without one, the engine's planner must find a plan (which can take
    long on big two-object games, see ``DrawnTask.planning_problem``).
    """
    p = Path(path)
    if p.is_dir():
        p = p / "game.tw-pddl"
    if not p.is_file():
        raise CirError(f"{p}: no such game file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CirError(f"{p}: not a readable game.tw-pddl JSON file ({err})") from None
    for key in ("pddl_problem", "grammar"):
        if not isinstance(data, dict) or not isinstance(data.get(key), str):
            raise CirError(f"{p}: field {key!r} missing or not text")
    sentence = _goal_sentence_of(data["grammar"])
    walkthrough = data.get("walkthrough")
    try:
        if isinstance(walkthrough, list) and walkthrough:
            replay_on_game(data["pddl_problem"], sentence, [str(c) for c in walkthrough])
            return [str(c) for c in walkthrough]
        return plan_problem(data["pddl_problem"], sentence, replay=True)
    except CirError as err:
        raise CirError(f"{p}: {err}") from None


def _goal_sentence_of(grammar: str) -> str:
    marker = '"rhs": "Your task is to: '
    start = grammar.find(marker)
    if start < 0:
        return "UNKNOWN GOAL"
    start += len(marker)
    return grammar[start: grammar.find('."', start)]


# ---------------------------------------------------------------------------------------
# Writing a split


@dataclass(frozen=True)
class GeneratedTask:
    """A verified task ready to be written (and its manifest row)."""

    drawn: DrawnTask
    walkthrough: tuple[str, ...]
    game_text: str
    attempts: int

    def traj_data(self) -> dict[str, Any]:
        d = self.drawn
        return {
            "task_id": d.trial,
            "task_type": d.goal.task_type,
            "pddl_params": d.goal.pddl_params(),
            "scene": {"floor_plan": f"FloorPlan{d.layout.scene}", "scene_num": d.layout.scene,
                      "room": d.layout.room},
            "turk_annotations": {"anns": [{"task_desc": d.sentence, "high_descs": [],
                                           "votes": []}]},
            "split": d.split,
            "generator": {"name": "cir", "version": __version__,
                          "generator_version": GENERATOR_VERSION, "index": d.index},
        }

    def manifest_row(self) -> dict[str, Any]:
        d = self.drawn
        return {
            "task_id": d.task_id,
            "task_type": d.goal.task_type,
            "room": d.layout.room,
            "scene": d.layout.scene,
            "goal": d.sentence,
            "object_target": d.goal.object_target,
            "parent_target": d.goal.parent_target,
            "toggle_target": d.goal.toggle_target,
            "n_receptacles": len(d.layout.receptacles),
            "n_objects": len(d.objects),
            "plan_length": len(self.walkthrough),
            "sha256": sha256_text(self.game_text),
        }


def generate_task(split: str, seed: int, index: int, task_type: str, *, layout_seed: int = 0,
                  max_attempts: int = MAX_ATTEMPTS,
                  planner: Callable[[str, str], list[str]] = plan_problem,
                  replay: bool = True, max_plan_length: int | None = None) -> GeneratedTask:
    """Draw task ``index`` and verify it on the engine, redrawing unsolvable draws.

    The engine's planner plans on ``planning_problem()``; with ``replay`` (default) the plan
    is then played on the full game and must win there. Unsolvable draws are redrawn, and so
    are draws whose plan is longer than ``max_plan_length``: ALFWorld's planner expert
    (``policy_commands``) searches the *full* game by plan cost alone, and on two-object tasks
    with plans of 10+ steps in big rooms it can take many minutes per step.
    """
    reasons: list[str] = []
    for attempt in range(max_attempts):
        try:
            drawn = draw_task(split, seed, index, task_type, attempt=attempt, layout_seed=layout_seed)
        except _Redraw as err:
            reasons.append(str(err))
            continue
        problem = drawn.problem()
        try:
            plan = planner(drawn.planning_problem(), drawn.sentence)
            if max_plan_length is not None and len(plan) > max_plan_length:
                raise CirError(f"plan of {len(plan)} steps is longer than {max_plan_length}")
            if replay:
                replay_on_game(problem, drawn.sentence, plan)
        except CirError as err:
            reasons.append(str(err))
            continue
        text = game_json(problem, drawn.sentence, plan)
        return GeneratedTask(drawn, tuple(plan), text, attempt + 1)
    last = reasons[-1] if reasons else "no draw"
    raise CirError(f"task {index} of split {split!r} (type {task_type}, seed {seed}) is "
                   f"unsolvable after {max_attempts} draws; last reason: {last}")


def _settings(split: str, n: int, seed: int, types: tuple[str, ...], layout_seed: int,
              max_plan_length: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"split": split, "n": n, "seed": seed, "types": list(types),
                           "layout_seed": layout_seed, "generator_version": GENERATOR_VERSION}
    if max_plan_length is not None:  # only when set, so older manifests stay comparable
        out["max_plan_length"] = max_plan_length
    return out


def _versions() -> dict[str, str]:
    import alfworld.info
    import textworld

    return {"cir": __version__, "alfworld": alfworld.info.__version__,
            "textworld": textworld.__version__}


def _generate_indexed(item: tuple[int, str], split: str, seed: int, layout_seed: int,
                      max_plan_length: int | None) -> GeneratedTask:
    index, task_type = item
    return generate_task(split, seed, index, task_type, layout_seed=layout_seed,
                         max_plan_length=max_plan_length)


def generate_split(out: str | os.PathLike[str], split: str, n: int, seed: int, *,
                   types: Sequence[str] | None = None, layout_seed: int = 0,
                   progress: bool = True, jobs: int = 1,
                   max_plan_length: int | None = None) -> dict[str, Any]:
    """Generate ``n`` verified tasks of ``split`` into ``out/<split>``; return the manifest.

    Task types cycle in the given order (``n = 6k`` gives ``k`` of each). An existing
    ``out/<split>`` with the same settings is left as it is; one with different tasks is an
    error. The split is written to a temporary folder and moved into place at the end, so an
    interrupted run leaves no half-written split. ``jobs > 1`` verifies tasks in that many
    worker processes (joblib); the output is the same bytes as with ``jobs=1``.
    ``max_plan_length`` redraws tasks with longer plans (see ``generate_task``).
    """
    check_split(split)
    types_t = check_types(types)
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise CirError(f"n must be a positive number of tasks, got {n!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise CirError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(jobs, int) or jobs < 1:
        raise CirError(f"jobs must be a positive integer, got {jobs!r}")
    if max_plan_length is not None and (not isinstance(max_plan_length, int) or max_plan_length < 1):
        raise CirError(f"max_plan_length must be a positive integer, got {max_plan_length!r}")
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise CirError(f"{out_dir}: output path exists and is not a folder")
    split_dir = out_dir / split
    settings = _settings(split, n, seed, types_t, layout_seed, max_plan_length)
    existing = _existing_manifest(split_dir, settings)
    if existing is not None:
        return existing

    tmp_dir = out_dir / f".{split}.partial"
    if tmp_dir.exists():
        shutil.rmtree(tmp_dir)
    tmp_dir.mkdir(parents=True)
    rows: list[dict[str, Any]] = []
    attempts = 0
    t0 = time.perf_counter()
    from tqdm import tqdm

    # a generator, not a list: nothing is built for tasks that are not drawn yet
    kinds = ((i, types_t[i % len(types_t)]) for i in range(n))
    tasks = parallel_map(_generate_indexed, kinds, split, seed, layout_seed, max_plan_length,
                         jobs=jobs)
    try:
        bar = tqdm(tasks, total=n, desc=f"generate {split}", unit="task", disable=not progress)
        for task in bar:
            attempts += task.attempts
            trial_dir = tmp_dir / task.drawn.folder / task.drawn.trial
            trial_dir.mkdir(parents=True)
            (trial_dir / "game.tw-pddl").write_text(task.game_text, encoding="utf-8")
            (trial_dir / "traj_data.json").write_text(
                json.dumps(task.traj_data(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
            rows.append(task.manifest_row())
        bar.close()
    except BaseException as err:
        shutil.rmtree(tmp_dir, ignore_errors=True)  # never leave a half-written split
        if isinstance(err, OSError):
            raise CirError(f"{err.filename or tmp_dir}: cannot write the tasks "
                           f"({err.strerror or err})") from None
        raise
    elapsed = time.perf_counter() - t0
    rows.sort(key=lambda r: r["task_id"])
    manifest = {"settings": settings, "versions": _versions(), "n_tasks": len(rows),
                "tasks": rows}
    (tmp_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n",
                                           encoding="utf-8")
    os.replace(tmp_dir, split_dir)
    # Timing is reported, not written: files must not depend on the machine.
    manifest = dict(manifest)
    manifest["_stats"] = {"seconds": elapsed, "draws": attempts}
    return manifest


def _existing_manifest(split_dir: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest of an existing, identical split; ``None`` if there is nothing there."""
    if not split_dir.exists():
        return None
    if not split_dir.is_dir():
        raise CirError(f"{split_dir}: exists and is not a folder")
    manifest_path = split_dir / "manifest.json"
    if not manifest_path.is_file():
        if any(split_dir.iterdir()):
            raise CirError(f"{split_dir}: folder already holds files but no manifest.json; "
                           f"choose another --out or remove it")
        split_dir.rmdir()
        return None
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        old = manifest["settings"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CirError(f"{manifest_path}: unreadable manifest ({err}); choose another --out "
                       f"or remove the folder") from None
    if old != settings or manifest.get("versions", {}).get("cir") != __version__:
        diff = ", ".join(f"{k}={old.get(k)!r} (asked {v!r})" for k, v in settings.items()
                         if old.get(k) != v) or "cir version"
        raise CirError(f"{split_dir}: already holds different tasks ({diff}); choose another "
                       f"--out or remove the folder")
    for row in manifest.get("tasks", []):
        game = split_dir / row["task_id"] / "game.tw-pddl"
        if not game.is_file() or sha256_text(game.read_text(encoding="utf-8")) != row["sha256"]:
            raise CirError(f"{game}: missing or changed since generation; remove {split_dir} "
                           f"and generate again")
    return manifest


def read_manifest(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Manifests under ``path`` (a split folder or a folder of splits), split order."""
    p = Path(path)
    if not p.exists():
        raise CirError(f"{p}: no such folder")
    files = [p / "manifest.json"] if (p / "manifest.json").is_file() else \
        [p / s / "manifest.json" for s in SPLITS if (p / s / "manifest.json").is_file()]
    if p.is_file() and p.name == "manifest.json":
        files = [p]
    if not files:
        raise CirError(f"{p}: no manifest.json here or in {', '.join(SPLITS)} subfolders; "
                       f"expected the output of `cir tasks generate`")
    out = []
    for f in files:
        try:
            m = json.loads(f.read_text(encoding="utf-8"))
            m["tasks"]  # noqa: B018 - presence check
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CirError(f"{f}: not a cir task manifest ({err})") from None
        _check_manifest_rows(m["tasks"], f)
        m["_path"] = str(f)
        out.append(m)
    return out


#: What each manifest row holds (``cir tasks list`` prints these).
_ROW_TYPES = {"task_id": str, "task_type": str, "room": str, "n_receptacles": int,
              "n_objects": int, "plan_length": int}


def _check_manifest_rows(rows: Any, path: Path) -> None:
    """Every row of a manifest with its fields and types, or a CirError naming the first bad one."""
    if not isinstance(rows, list):
        raise CirError(f"{path}: 'tasks' must be a list of task rows, got {type(rows).__name__}")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise CirError(f"{path}: task #{i} must be an object, got {type(row).__name__}")
        for key, kind in _ROW_TYPES.items():
            value = row.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise CirError(f"{path}: task #{i} field {key!r} must be a {kind.__name__}, "
                               f"got {value!r}")
