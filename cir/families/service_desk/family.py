"""The service desk as an environment family: ``--family service-desk``.

A tool world (:mod:`cir.tools`) on SQLite: per task a generated store database, a customer's
ticket of one to three requests in the style of tau-bench's retail domain, the store's world
events (a busy store: orders move on, other customers buy, a customer saves a new address), the
store's tools (:mod:`.tools`) and the policy its success check enforces (:mod:`.check`); the
family's features (:mod:`.features`), its LLM prompt with a worked example (:mod:`.prompts`) and a
model-free agent calibrated as an instrument (:mod:`.agent`). ``docs/service-desk.md`` says
what each part is and why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cir.families.family import Family
from cir.families.service_desk.agent.mechanisms import DIVERGENCE_MECHANISMS
from cir.families.service_desk.check import solved
from cir.families.service_desk.features import SERVICE_DESK_FEATURES
from cir.families.service_desk.generate import SPLITS, generate_task
from cir.families.service_desk.prompts import INSTRUCTIONS, worked_example
from cir.families.service_desk.shown import anomalous
from cir.families.service_desk.store import set_clock
from cir.families.service_desk.tools import TOOLS, refresh_of, refresh_query
from cir.tools.env import Event
from cir.tools.state import State
from cir.tools.tasks import ToolTask
from cir.tools.world import ToolWorld


def generate(split: str, n: int, seed: int) -> list[ToolTask]:
    """``n`` tasks of ``split`` at generator ``seed`` (:func:`.generate.generate_task`)."""
    out = []
    for i in range(n):
        draft = generate_task(split, seed, i)
        out.append(ToolTask(draft.task_id, draft.instruction, draft.sql, split, draft.task_type,
                            tuple(Event(e["at"], e["sql"], e["note"]) for e in draft.events), draft.data))
    return out


def builtin_agent(profile: str = "default", *, seed: int = 0, temperature: float = 0.0) -> Any:
    """The model-free agent (:class:`.agent.builtin.ServiceDeskAgent`): profiles ``weak``,
    ``default`` (calibrated) and ``strong``; it samples at ``temperature`` above 0."""
    from cir.families.service_desk.agent.builtin import ServiceDeskAgent

    return ServiceDeskAgent(profile, seed=seed, temperature=temperature)


def world(state: str | type[State] = "sqlite") -> ToolWorld:
    """The store as a tool world: its tools, the policy's check, a refresh's read after a change
    (the order it changed) and, without one, the ticket's customer's profile; the store's clock
    written before each env action (:func:`.store.set_clock`: a change is stamped with the time it
    happens at, and a restore brings the time back with every row); the family's rule of what a
    shown result is. ``state``: a variant of the SQLite state (the tests' forgetful restores)."""
    return ToolWorld("service-desk", tools=TOOLS, state=state, check=solved, refresh=refresh_of,
                     refresh_query=refresh_query, on_clock=set_clock, generate=generate, splits=SPLITS,
                     instructions=INSTRUCTIONS, examples=(worked_example(),), extractor=SERVICE_DESK_FEATURES,
                     experiments=Path(__file__).resolve().parent / "experiments",
                     tasks_text="generated service-desk tickets on a SQLite store", anomalous=anomalous,
                     builtin_agent=builtin_agent, mechanisms=DIVERGENCE_MECHANISMS)


WORLD = world()
FAMILY = Family(**WORLD.parts())
