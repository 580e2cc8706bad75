"""Writing ALFRED-domain PDDL problems and ALFWorld ``game.tw-pddl`` files.

ALFWorld's text engine (textworld's ``PddlEnv`` with ALFWorld's ``alfred.pddl`` domain and
``alfred.twl2`` grammar) runs any problem written here; the goal PDDL and goal sentences come
from ALFWorld's ``goal_library``. Output is canonical text (sorted facts, fixed layout) so the
same task always gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from alfworld.gen import goal_library
from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

from cir.families.alfworld import scenes
from cir.families.alfworld.scenes import Layout, PlacedObject

# Types the ALFRED domain's actions name as constants (CleanObject, HeatObject, CoolObject,
# SliceObject): a problem must declare them even when the room has no such thing.
DOMAIN_RTYPES = ("FridgeType", "MicrowaveType", "SinkBasinType")
DOMAIN_OTYPES = ("ButterKnifeType", "KnifeType")

@lru_cache(maxsize=1)
def domain_text() -> str:
    """ALFWorld's ALFRED PDDL domain, as shipped with the installed ``alfworld``."""
    return Path(ALFRED_PDDL_PATH).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def grammar_template() -> str:
    """ALFWorld's text grammar with the ``UNKNOWN GOAL`` placeholder."""
    return Path(ALFRED_TWL2_PATH).read_text(encoding="utf-8")


def grammar_with_goal(sentence: str) -> str:
    """The grammar with the goal sentence put in, as ALFWorld's ``add_task_to_grammar`` does."""
    return grammar_template().replace("UNKNOWN GOAL", sentence)


@dataclass(frozen=True)
class Goal:
    """A goal in ALFWorld's terms (traj_data ``pddl_params``)."""

    task_type: str
    object_target: str
    parent_target: str  # "" for look_at_obj_in_light
    toggle_target: str = ""  # only look_at_obj_in_light
    mrecep_target: str = ""
    object_sliced: bool = False

    def pddl(self) -> str:
        """Goal PDDL from ALFWorld's goal library (it also closes the ``define``)."""
        text = goal_library.gdict[self.task_type]["pddl"]
        text = text.format(obj=self.object_target, recep=self.parent_target,
                           toggle=self.toggle_target, mrecep=self.mrecep_target)
        return text.replace("#", "-")

    def templates(self) -> list[str]:
        return list(goal_library.gdict[self.task_type]["templates"])

    def sentence(self, template_index: int) -> str:
        """Goal sentence from ALFWorld's template (lower-cased names, as ALFWorld does)."""
        template = self.templates()[template_index]
        return template.format(obj=self.object_target.lower(), recep=self.parent_target.lower(),
                               toggle=self.toggle_target.lower(),
                               mrecep=self.mrecep_target.lower())

    def pddl_params(self) -> dict[str, object]:
        return {
            "object_target": self.object_target,
            "parent_target": self.parent_target,
            "toggle_target": self.toggle_target,
            "mrecep_target": self.mrecep_target,
            "object_sliced": self.object_sliced,
        }


def _block(lines: Iterable[str], indent: str = "        ") -> str:
    return "\n".join(indent + line for line in lines)


def problem_text(name: str, layout: Layout, objects: tuple[PlacedObject, ...], goal: Goal) -> str:
    """The PDDL problem of a scene with objects and a goal, in canonical (sorted) form."""
    rec_by_id = {r.rid: r for r in layout.receptacles}
    otypes = sorted({o.otype for o in objects} | {goal.object_target}
                    | ({goal.toggle_target} if goal.toggle_target else set()))
    rtypes = sorted({r.rtype for r in layout.receptacles}
                    | ({goal.parent_target} if goal.parent_target else set()))
    otype_names = sorted({f"{t}Type" for t in otypes} | set(DOMAIN_OTYPES))
    rtype_names = sorted({f"{t}Type" for t in rtypes} | set(DOMAIN_RTYPES))
    locations = sorted({r.location for r in layout.receptacles} | {layout.start})

    decl = ["agent1 - agent"]
    decl += [f"{t} - otype" for t in otype_names]
    decl += [f"{t} - rtype" for t in rtype_names]
    decl += [f"{o.oid} - object" for o in sorted(objects, key=lambda o: o.oid)]
    decl += [f"{r.rid} - receptacle" for r in layout.receptacles]
    decl += [f"{loc} - location" for loc in locations]

    facts: list[str] = []
    facts += [f"(receptacleType {r.rid} {r.rtype}Type)" for r in layout.receptacles]
    facts += [f"(objectType {o.oid} {o.otype}Type)" for o in objects]
    facts += [f"(canContain {rt}Type {ot}Type)" for rt in rtypes for ot in otypes
              if scenes.can_contain(rt, ot)]
    for o in sorted(objects, key=lambda o: o.oid):
        if o.otype not in scenes.NOT_PICKUPABLE:
            facts.append(f"(pickupable {o.oid})")
        if o.otype in scenes.MOVABLE_RECEPTACLES:
            facts.append(f"(isReceptacleObject {o.oid})")
        for prop, pred in (("Cleanable", "cleanable"), ("Heatable", "heatable"),
                           ("Coolable", "coolable"), ("Sliceable", "sliceable"),
                           ("Toggleable", "toggleable")):
            if scenes.action_class(o.otype, prop):
                facts.append(f"({pred} {o.oid})")
    facts += [f"(openable {r.rid})" for r in layout.receptacles if r.openable]
    facts += [f"(receptacleAtLocation {r.rid} {r.location})" for r in layout.receptacles]
    for o in sorted(objects, key=lambda o: o.oid):
        facts.append(f"(inReceptacle {o.oid} {o.receptacle})")
        facts.append(f"(objectAtLocation {o.oid} {rec_by_id[o.receptacle].location})")
    facts.append(f"(atLocation agent1 {layout.start})")

    return (
        f"(define (problem {name})\n"
        "    (:domain alfred)\n"
        "    (:objects\n"
        f"{_block(decl)}\n"
        "    )\n"
        "    (:init\n"
        f"{_block(facts)}\n"
        "    )\n"
        f"{goal.pddl().rstrip()}\n"
    )


def game_json(problem: str, sentence: str, walkthrough: list[str]) -> str:
    """Canonical text of a ``game.tw-pddl`` file (the JSON ALFWorld's loader reads)."""
    data = {
        "pddl_domain": domain_text(),
        "grammar": grammar_with_goal(sentence),
        "pddl_problem": problem,
        "solvable": True,
        "walkthrough": list(walkthrough),
    }
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
