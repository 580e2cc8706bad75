"""A game's command templates and text grammar (textworld's ``GameLogic``), parsed once.

Every ALFWorld game carries ALFWorld's grammar (``alfred.twl2``) with its goal sentence put
in place of ``UNKNOWN GOAL``, and parsing it (TatSu) costs about 0.1 s a game. With
``reuse=True``, ``parse_logic`` parses the grammar with the placeholder once per process; a
game whose grammar is exactly that text with a plain sentence (letters, digits, spaces and
``,.'-``) in place of the placeholder gets a copy of that parse with its own task rule,
the only rule the placeholder is in. Any other grammar is parsed in full. The copy shares
the parsed rules and action templates, which the engine only reads (derivations copy
symbols before they set a context); its type hierarchy is its own (the state adds to it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import textworld
from textworld.envs.pddl import textgen
from textworld.envs.pddl.logic import GameLogic
from textworld.envs.pddl.textgen import ContextSensitiveGrammar, ProductionRule, TerminalSymbol

from cir.families.alfworld.pddl import grammar_template

PLACEHOLDER = "UNKNOWN GOAL"
_PLAIN_SENTENCE = re.compile(r"[A-Za-z0-9 ,.'-]*")


def parse_logic(data: Mapping[str, Any], *, reuse: bool = True) -> GameLogic:
    """The ``GameLogic`` of a game's data (``pddl_domain``, ``grammar``)."""
    template = _template()
    sentence = _sentence_in(data["grammar"]) if reuse and template is not None else None
    if sentence is None:
        return GameLogic(domain=data["pddl_domain"], grammar=data["grammar"])
    base, task = template  # type: ignore[misc]
    logic = GameLogic.__new__(GameLogic)
    logic.domain = data["pddl_domain"]
    logic.types = textworld.logic.TypeHierarchy()
    logic.actions = dict(base.actions)
    logic.grammar = ContextSensitiveGrammar()
    for name, rules in base.grammar._rules.items():
        logic.grammar._rules[name] = list(rules)
    text = task.rhs[0].symbol.replace(PLACEHOLDER, sentence)
    logic.grammar._rules[task.lhs] = [ProductionRule(
        lhs=task.lhs, rhs=textgen._parse_and_convert(text, rule_name="symbols"),
        weight=task.weight, condition=task.condition)]
    return logic


@lru_cache(maxsize=1)
def _template() -> tuple[GameLogic, ProductionRule] | None:
    """ALFWorld's grammar parsed, and its task rule; ``None`` if it is not shaped as expected."""
    text = grammar_template()
    if text.count(PLACEHOLDER) != 1:
        return None
    base = GameLogic(domain="", grammar=text)
    holders = [(rule, sym) for rules in base.grammar._rules.values() for rule in rules
               for sym in rule.rhs if PLACEHOLDER in str(sym)]
    if len(holders) != 1:
        return None
    rule, _ = holders[0]
    if len(base.grammar._rules[rule.lhs]) != 1 or len(rule.rhs) != 1 \
            or not isinstance(rule.rhs[0], TerminalSymbol):
        return None
    return base, rule


def _sentence_in(grammar: str) -> str | None:
    """The plain sentence that ``grammar`` has in place of the placeholder, if that is all."""
    text = grammar_template()
    i = text.index(PLACEHOLDER)
    head, tail = text[:i], text[i + len(PLACEHOLDER):]
    if len(grammar) < len(head) + len(tail) or not grammar.startswith(head) \
            or not grammar.endswith(tail):
        return None
    sentence = grammar[len(head): len(grammar) - len(tail)]
    return sentence if _PLAIN_SENTENCE.fullmatch(sentence) else None
