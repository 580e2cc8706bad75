"""Sampling rules of the task generator (no engine: fast)."""

from __future__ import annotations

import re

import pytest

from cir.families.alfworld import scenes
from cir.families.alfworld.draw import VALID_ROOMS, draw_task
from cir.families.alfworld.pddl import problem_text
from cir.families.alfworld.tasks import TASK_TYPES

DRAWS = [(split, i) for split in ("train", "valid_seen", "valid_unseen") for i in range(60)]


@pytest.fixture(scope="module")
def drawn():
    return [draw_task(split, 0, i, TASK_TYPES[i % 6]) for split, i in DRAWS]


def test_draw_is_deterministic():
    a = draw_task("train", 3, 7, "pick_two_obj_and_place")
    b = draw_task("train", 3, 7, "pick_two_obj_and_place")
    assert a == b and a.problem() == b.problem()
    c = draw_task("train", 3, 7, "pick_two_obj_and_place", attempt=1)
    assert c.problem() != a.problem()
    assert draw_task("train", 4, 7, "pick_two_obj_and_place").problem() != a.problem()


def test_layout_depends_only_on_room_scene_and_layout_seed():
    assert scenes.make_layout("kitchen", 5) == scenes.make_layout("kitchen", 5)
    assert scenes.make_layout("kitchen", 5) != scenes.make_layout("kitchen", 6)
    assert scenes.make_layout("kitchen", 5, layout_seed=1) != scenes.make_layout("kitchen", 5)


def test_sizes_and_rooms(drawn):
    for t in drawn:
        assert scenes.MIN_RECEPTACLES <= len(t.layout.receptacles) <= scenes.MAX_RECEPTACLES
        assert scenes.MIN_OBJECTS <= len(t.objects) <= scenes.MAX_OBJECTS, t.task_id
        assert t.layout.room in VALID_ROOMS[t.goal.task_type]


def test_ids_locations_and_start(drawn):
    for t in drawn:
        rids = [r.rid for r in t.layout.receptacles]
        locs = [r.location for r in t.layout.receptacles]
        assert len(set(rids)) == len(rids)
        assert len(set(locs)) == len(locs), "one location per receptacle"
        assert t.layout.start not in locs, "the agent starts where no receptacle is"
        oids = [o.oid for o in t.objects]
        assert len(set(oids)) == len(oids)
        for oid in oids + rids:
            assert re.fullmatch(r"[A-Z][A-Za-z]+(_bar__(plus|minus)_\d\d_dot_\d\d){3}(_bar_(Sink|Bathtub)Basin)?", oid), oid
        for r in t.layout.receptacles:
            if r.rtype == "SinkBasin":
                assert r.rid.startswith("Sink_bar_") and r.rid.endswith("_bar_SinkBasin")


def test_goal_rules(drawn):
    for t in drawn:
        g = t.goal
        rtype_of = {r.rid: r.rtype for r in t.layout.receptacles}
        targets = [o for o in t.objects if o.otype == g.object_target]
        assert targets, t.task_id
        if g.task_type == "pick_two_obj_and_place":
            assert len(targets) >= 2
        for o in targets:
            assert rtype_of[o.receptacle] != g.parent_target, "never solved at reset"
            if g.task_type == "pick_cool_then_place_in_recep":
                assert rtype_of[o.receptacle] != "Fridge"
        for o in t.objects:  # every placement follows ALFWorld's canContain rules
            if o.otype != "DeskLamp":
                assert scenes.can_contain(rtype_of[o.receptacle], o.otype), (o, rtype_of[o.receptacle])
        if g.task_type == "look_at_obj_in_light":
            assert any(o.otype == g.toggle_target for o in t.objects)
        assert "(opened " not in t.problem(), "openable receptacles start closed"


def test_exploration_is_needed(drawn):
    """Targets are often out of sight and there are several receptacles of a type."""
    hidden = 0
    for t in drawn:
        openable = {r.rid for r in t.layout.receptacles if r.openable}
        if any(o.receptacle in openable for o in t.objects if o.otype == t.goal.object_target):
            hidden += 1
        counts = {}
        for r in t.layout.receptacles:
            counts[r.rtype] = counts.get(r.rtype, 0) + 1
        assert max(counts.values()) >= 2
    assert hidden >= len(drawn) // 3


def test_split_layout_pools(drawn):
    seen = {s for room in scenes.ROOMS for s in scenes.scene_pool(room, unseen=False)}
    unseen = {s for room in scenes.ROOMS for s in scenes.scene_pool(room, unseen=True)}
    assert not seen & unseen
    by_split = {}
    for t in drawn:
        by_split.setdefault(t.split, {})[t.index] = t
    for i, t in by_split["train"].items():
        vs = by_split["valid_seen"][i]
        assert vs.layout == t.layout, "valid_seen reuses the train layout of the same index"
        assert vs.problem() != t.problem()
        assert t.layout.scene in seen
    for t in by_split["valid_unseen"].values():
        assert t.layout.scene in unseen


def test_problem_text_is_sorted_and_declares_domain_constants(drawn):
    text = problem_text("p", drawn[0].layout, drawn[0].objects, drawn[0].goal)
    for name in ("SinkBasinType - rtype", "MicrowaveType - rtype", "FridgeType - rtype",
                 "KnifeType - otype", "ButterKnifeType - otype"):
        assert name in text
    assert "#" not in text
    assert text.count("(define") == 1 and text.count("(:goal") == 1
