"""Proving a task solvable on the engine: the planner's plan, replayed on the full game.

Task generation plans on a small problem (``DrawnTask.planning_problem``: only the goal's
object classes) and replays the plan on the full game, where every command must be
admissible and the goal must hold exactly at the end. ``Verifier`` does both for one goal
sentence; with the engine's savings (default, ``cir.families.alfworld.engine``) both loads share one
grammar (itself a copy of a parse made once per process), only the planning load makes the
replanner's translation, and each engine releases its memory when done. ``savings=False``
runs textworld's engine unmodified (a grammar parse, two translations and a new library
copy per load). Both give the same plans and verdicts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import textworld

from cir.families.alfworld.engine import Engine, Savings, load_game
from cir.families.alfworld.grammar import parse_logic
from cir.families.alfworld.pddl import domain_text, grammar_with_goal
from cir.util.errors import CirError

# First word of a command -> the ALFRED domain operators that print it (alfred.twl2).
_VERB_OPERATORS = {
    "go": ("gotolocation",), "open": ("openobject",), "close": ("closeobject",),
    "take": ("pickupobject",), "move": ("putobject",), "heat": ("heatobject",),
    "cool": ("coolobject",), "clean": ("cleanobject",), "use": ("toggleobject",),
    "slice": ("sliceobject",), "examine": ("examinereceptacle", "examineobject"),
    "look": ("look",), "inventory": ("inventory",), "help": ("help",),
}


class Verifier:
    """Plans and replays problems that share one goal sentence (one task's two problems)."""

    def __init__(self, sentence: str, savings: Savings | bool = True) -> None:
        self.sentence = sentence
        self.savings = Savings.of(savings)
        self._logic: Any = None  # the grammar, parsed at the first load (with savings)

    @contextmanager
    def _engine(self, problem: str, *, planner: bool) -> Iterator[Any]:
        """The problem loaded on the engine (names like ``apple 1``), closed after use."""
        data = {"pddl_domain": domain_text(), "grammar": grammar_with_goal(self.sentence),
                "pddl_problem": problem}
        if self.savings.in_engine() and self._logic is None:
            self._logic = parse_logic(data, reuse=self.savings.parse_once)
        try:
            env = load_game(data, self.savings, textworld.EnvInfos(admissible_commands=False),
                            replanner=planner, logic=self._logic)
        except Exception as err:  # the translator fails with KeyError('val1') on bad problems
            raise CirError(f"the problem does not load on the ALFWorld engine "
                           f"({type(err).__name__}: {err}); a goal receptacle, location or "
                           f"canContain fact is missing or the goal is unreachable") from None
        try:
            yield env.unwrapped
        finally:
            env.unwrapped.close()

    def plan(self, problem: str) -> list[str]:
        """The engine planner's plan for ``problem``; ``CirError`` if there is none.

        Asks the planner that backs ``policy_commands`` (Fast Downward) on the state just
        loaded, which saves the translations a ``reset`` would repeat.
        """
        with self._engine(problem, planner=True) as engine:
            state = engine._pddl_state
            if state.check_goal():
                raise CirError("the problem is already solved at reset")
            plan = list(state.replan(engine._entity_infos) or [])
        if not plan:
            raise CirError("the ALFWorld planner found no plan: the problem is unsolvable")
        return plan

    def replay(self, problem: str, plan: Sequence[str]) -> None:
        """Play ``plan`` on ``problem`` from its initial state; ``CirError`` unless it wins.

        Each command must be one of the engine's admissible commands at that point (derived
        from the grammar as ``PddlEnv.step`` does) and the goal must hold exactly at the end.
        """
        with self._engine(problem, planner=False) as engine:
            state = engine._pddl_state
            names = {k: info.name for k, info in engine._entity_infos.items()}
            command_of = engine.command if isinstance(engine, Engine) else _Deriver(engine, names)
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
                    needed = [names[var.name] for ph, var in action.mapping.items()
                              if "{" + ph.name in template]
                    if not all(f" {n}" in f" {command}" for n in needed):
                        continue
                    if command_of(action) == command:
                        chosen = action
                        break
                if chosen is None:
                    raise CirError(f"plan step {i + 1} {command!r} is not admissible in the game")
                state.apply(chosen)
            if not state.check_goal():
                raise CirError("the plan does not win the game")


class _Deriver:
    """The unmodified engine's derivation of a command (``PddlEnv._gather_infos``)."""

    def __init__(self, engine: Any, names: dict[str, str]) -> None:
        self.engine = engine
        self.names = names

    def __call__(self, action: Any) -> str:
        engine = self.engine
        state = engine._pddl_state
        context = {"state": state, "facts": list(state.facts),
                   "variables": {ph.name: engine._entity_infos[var.name]
                                 for ph, var in action.mapping.items()},
                   "mapping": action.mapping, "entity_infos": engine._entity_infos}
        action.command_template = engine._logic.grammar.derive(action.command_template, context)
        return action.format_command(self.names)


def plan_problem(problem: str, sentence: str, *, replay: bool = False) -> list[str]:
    """The engine planner's plan for a problem (``Verifier.plan``); with ``replay``, also
    played on the same problem (``Verifier.replay``)."""
    verifier = Verifier(sentence)
    plan = verifier.plan(problem)
    if replay:
        verifier.replay(problem, plan)
    return plan


def replay_on_game(problem: str, sentence: str, plan: Sequence[str]) -> None:
    """``Verifier.replay``: ``plan`` must be admissible step by step and win the game."""
    Verifier(sentence).replay(problem, plan)


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
