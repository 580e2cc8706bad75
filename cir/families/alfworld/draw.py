"""Drawing ALFWorld tasks: a scene layout, a goal, and objects placed in receptacles.

``draw_task(split, seed, index, task_type)`` samples one task without the engine; task
generation (``cir.families.alfworld.generate``) then verifies it on the engine and writes it.

Determinism: task ``i`` of a split depends only on ``(split, seed, i, types, layout_seed)``,
drawn with private ``random.Random`` instances seeded by SHA-256; output bytes do not depend
on the machine, the process or ``PYTHONHASHSEED``.

Splits, as in ALFWorld: ``valid_unseen`` uses scene layouts from a pool disjoint from the
one train uses; ``valid_seen`` task ``i`` uses the layout of train task ``i`` (same seed and
types) with new objects, placements and goal, so any ``valid_seen`` set of size ``<= n_train``
only uses layouts that train uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cir.families.alfworld import scenes
from cir.families.alfworld.pddl import Goal, problem_text
from cir.families.alfworld.scenes import Layout, PlacedObject
from cir.families.alfworld.text import SPLITS, TASK_TYPES
from cir.util.errors import CirError

SPLIT_CODE = {"train": 1, "valid_seen": 2, "valid_unseen": 3}
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
        own planner problems keep only goal-relevant objects. Task generation replays it
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
        raise Redraw("no room for the target objects")

    lamp_room = layout.room in ("livingroom", "bedroom")
    if task_type == "look_at_obj_in_light" or (lamp_room and rng.random() < 0.7):
        placer.place(goal.toggle_target or "DeskLamp", among=scenes.LAMP_RECEPTACLES)
    if task_type == "look_at_obj_in_light" and not any(o.otype == goal.toggle_target for o in placer.placed):
        raise Redraw("no room for the lamp")

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


class Redraw(Exception):
    """A draw that cannot be posed; draw again."""
