"""When the text of admissible commands can be computed once per game: the load-time check.

At every step the engine writes the command of every applicable action by deriving its
template in the game's grammar (``go to [{r.name | receptacleatlocation(r:receptacle,
lend:location)}]`` -> ``go to desk 1``): about 25 derivations a step, for a few hundred
distinct (operator, mapping) pairs in a whole game. A derivation reads the game state only
through the grammar's queries (a conditional symbol's ``given``, a production rule's
``condition``); everything else it reads is the template, the action's mapping and the
entity infos, which do not change after load. So when every query a template can reach
names only *static* predicates (no action changes them, no axiom derives them), the
command's text depends on the operator and its mapping alone, and can be kept per game.

``cache_blocker`` walks every command template through the grammar and says why that does
not hold (a dynamic predicate, a Python expression that could read more than entity
infos), or ``None`` when it holds.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from textworld.envs.pddl.textgen import (
    ConditionalSymbol,
    EvalSymbol,
    ListSymbol,
    NonterminalSymbol,
    TerminalSymbol,
)
from textworld.logic import Rule

from cir.families.alfworld.textmemo import parsed

# Nonterminals that ``textgen.display_list`` adds when it writes a list symbol.
_LIST_SYMBOLS = ("list_empty", "list_separator", "list_last_separator")
# Python that an expression symbol may use: names, attributes, string constants, ``+``, ``or``.
_PLAIN_NODES = (ast.Expression, ast.Name, ast.Attribute, ast.Constant, ast.BinOp, ast.Add,
                ast.BoolOp, ast.Or, ast.Load)


def dynamic_predicates(task: Any) -> frozenset[str]:
    """Predicates whose facts can change: in an action's effects, or derived by an axiom.

    ``task`` is the normalised PDDL task of the Fast Downward translator (``PddlState.task``).
    """
    changed = {effect.literal.predicate for action in task.actions for effect in action.effects}
    return frozenset(changed | {axiom.name for axiom in task.axioms})


def cache_blocker(logic: Any, task: Any) -> str | None:
    """Why the command text of this game cannot be cached, or ``None`` when it can.

    ``logic`` is the game's ``GameLogic`` (command templates and grammar), ``task`` its
    normalised PDDL task.
    """
    dynamic = dynamic_predicates(task)
    # Normalising splits some actions in several of the same name; templates of actions the
    # domain does not define are never derived (no operator carries their name).
    parameters: dict[str, set[str]] = {}
    for action in task.actions:
        parameters.setdefault(action.name, set()).update(p.name.lstrip("?") for p in action.parameters)
    for name in sorted(set(logic.actions) & set(parameters)):
        template = logic.actions[name].template
        reason = _template_blocker(template, logic.grammar, dynamic, parameters[name])
        if reason is not None:
            return f"the command template of {name!r} ({template!r}) {reason}"
    return None


def _template_blocker(template: str, grammar: Any, dynamic: frozenset[str],
                      names: set[str]) -> str | None:
    queries, expressions = _reads(template, grammar)
    names = set(names)
    for query in queries:
        for predicate in Rule.parse_conjunctive_query(query).preconditions:
            base = predicate.name.removeprefix("not_")
            if base in dynamic:
                return f"queries {predicate.name!r}, which actions change"
            names.update(p.name for p in predicate.parameters)
    for expression in expressions:
        reason = _expression_blocker(expression, names)
        if reason is not None:
            return reason
    return None


def _reads(template: str, grammar: Any) -> tuple[list[str], list[str]]:
    """The queries and the Python expressions a derivation of ``template`` can reach."""
    queries: list[str] = []
    expressions: list[str] = []
    seen: set[str] = set()
    stack: list[Any] = parsed(template)

    def expand(tag: str) -> Iterable[Any]:
        if tag in seen:
            return ()
        seen.add(tag)
        symbols = []
        for rule in grammar._rules.get(tag, ()):
            if rule.condition:
                queries.append(rule.condition)
            symbols.extend(rule.rhs)
        return symbols

    while stack:
        symbol = stack.pop()
        if isinstance(symbol, TerminalSymbol):
            continue
        if isinstance(symbol, NonterminalSymbol):
            stack.extend(expand(str(symbol)))
        elif isinstance(symbol, ConditionalSymbol):
            if symbol.given:
                queries.append(symbol.given)
            stack.append(symbol.expression)
        elif isinstance(symbol, ListSymbol):
            stack.append(symbol.symbol)
            for tag in _LIST_SYMBOLS:
                stack.extend(expand(tag))
        elif isinstance(symbol, EvalSymbol):
            expressions.append(symbol.expression)
        else:  # a symbol kind this check does not know: assume it reads anything
            expressions.append(f"<{type(symbol).__name__}>")
    return queries, expressions


def _expression_blocker(expression: str, names: set[str]) -> str | None:
    """Why evaluating ``expression`` could read more than entity infos, or ``None``.

    textgen evaluates it with ``eval`` inside its own method, where names that are not the
    derivation's variables would find that method's locals (the context, with the state)
    or module globals; so only placeholder names, public attributes and string constants.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return f"evaluates {expression!r}, which is not a Python expression"
    for node in ast.walk(tree):
        plain = isinstance(node, _PLAIN_NODES)
        if isinstance(node, ast.Name) and node.id not in names:
            plain = False
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            plain = False
        elif isinstance(node, ast.Constant) and not isinstance(node.value, str):
            plain = False
        if not plain:
            return f"evaluates {expression!r}, which may read more than entity names"
    return None
