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
from cir.families.service_desk.env import StoreEnv, refresh_query
from cir.families.service_desk.features import SERVICE_DESK_FEATURES
from cir.families.service_desk.generate import SPLITS, generate_task
from cir.families.service_desk.prompts import INSTRUCTIONS, worked_example
from cir.families.service_desk.shown import anomalous
from cir.families.service_desk.tools import TOOLS, refresh_of
from cir.tools.env import Event
from cir.tools.state import build_state
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


WORLD = ToolWorld("service-desk", tools=TOOLS, state="sqlite", check=solved, refresh=refresh_of,
                  refresh_query='get_customer(customer_id="")', generate=generate, splits=SPLITS,
                  instructions=INSTRUCTIONS, examples=(worked_example(),), extractor=SERVICE_DESK_FEATURES,
                  experiments=Path(__file__).resolve().parent / "experiments",
                  tasks_text="generated service-desk tickets on a SQLite store", anomalous=anomalous)


def make_env(task: Any) -> StoreEnv:
    """A fresh env of one task: its store built from its database, its events, its check."""
    state = build_state(WORLD.state_kind, task.initial)
    return StoreEnv(task, tools=WORLD.tools, state=state, check=solved, refresh_query=refresh_query(task),
                    events=tuple(task.events), refresh=refresh_of)


def builtin_agent(profile: str = "default", *, seed: int = 0, temperature: float = 0.0) -> Any:
    """The model-free agent (:class:`.agent.builtin.ServiceDeskAgent`): profiles ``weak``,
    ``default`` (calibrated) and ``strong``; it samples at ``temperature`` above 0."""
    from cir.families.service_desk.agent.builtin import ServiceDeskAgent

    return ServiceDeskAgent(profile, seed=seed, temperature=temperature)


FAMILY = Family(**{**WORLD.parts(), "make_env": make_env, "builtin_agent": builtin_agent,
                   "mechanisms": DIVERGENCE_MECHANISMS})
