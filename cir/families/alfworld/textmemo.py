"""A faster, byte-identical text generator for one textworld ``PddlEnv`` instance.

Why: most of an engine step is spent in the context-sensitive grammar that writes the
text (``textworld.envs.pddl.textgen``), and most of that is (1) re-parsing the same
template strings and conjunctive queries with TatSu on every call and (2) ``deepcopy`` of
the derivation context (entity infos, mappings) at every symbol. Neither changes the
result: parses are pure functions of the string, and nothing mutates the copied values.

``install_memo(pddl_env)`` swaps the class of that env's grammar object (nothing in
site-packages, no other env, is touched) for ``MemoGrammar``, which derives the same text
with parses cached per string and contexts copied one level deep.

Whole derivations are *not* cached per Fast Downward state: the grammar queries
``not_inreceptacle`` / ``not_istoggled``, Python-side facts that the engine adds from delete
effects, so the text in one planner state depends on the path that reached it.

``tests/test_env_textmemo.py`` checks byte-identical observations, admissible commands and
flags against the unmodified engine on random walks.
"""

from __future__ import annotations

import copy
from typing import Any

from textworld.envs.pddl import textgen
from textworld.envs.pddl.textgen import (
    ConditionalSymbol,
    ContextSensitiveGrammar,
    CSGUnknownSymbolError,
    EvalSymbol,
    ListSymbol,
    NonterminalSymbol,
    Symbol,
    TerminalSymbol,
    display_list,
)
from textworld.logic import Rule

_PARSES: dict[str, list[Symbol]] = {}
_QUERIES: dict[str, Rule] = {}
_NONE = object()


def parsed(start: str) -> list[Symbol]:
    """Fresh symbols for ``start`` (the parse is cached; the symbols are new objects)."""
    syms = _PARSES.get(start)
    if syms is None:
        syms = _PARSES[start] = textgen._parse_and_convert(start, rule_name="symbols")
    return [_clone(s) for s in syms]


def _rule(expr: str) -> Rule:
    rule = _QUERIES.get(expr)
    if rule is None:
        rule = _QUERIES[expr] = Rule.parse_conjunctive_query(expr)
    return rule


def _clone(sym: Symbol) -> Symbol:
    """A copy of a symbol tree that shares only contexts (which are replaced, never mutated)."""
    new = copy.copy(sym)
    if isinstance(sym, ConditionalSymbol):
        new.expression = _clone(sym.expression)
    elif isinstance(sym, ListSymbol):
        new.symbol = _clone(sym.symbol)
    return new


def _copy_context(context: dict[str, Any]) -> dict[str, Any]:
    # textgen.copy_context deep-copies variables and mapping; only their top level is ever
    # updated (query), and their values are compared by value, so one level is enough.
    return {
        "state": context["state"],
        "facts": context["facts"],
        "variables": dict(context["variables"]),
        "mapping": dict(context["mapping"]),
        "entity_infos": context["entity_infos"],
    }


def _query(expression: str, context: dict[str, Any]) -> list[dict[str, Any]]:
    rule = _rule(expression)
    contexts = []
    for mapping in context["state"].all_assignments(rule, context["mapping"]):
        ctx = _copy_context(context)
        ctx["variables"].update(
            {ph.name: ctx["entity_infos"][var.name] for ph, var in mapping.items()}
        )
        ctx["mapping"].update(mapping)
        contexts.append(ctx)
    return contexts


class MemoGrammar(ContextSensitiveGrammar):
    """``ContextSensitiveGrammar`` with the same derivations, computed with fewer parses."""

    def derive(self, start: str, context: dict[str, Any] | None = None) -> str:
        return self._derive(start, context if context is not None else {})

    def _derive(self, start: str, context: dict[str, Any]) -> str:
        derivation = parsed(start)[::-1]
        for symbol in derivation:
            symbol.context = _copy_context(context)
        derived = []
        while derivation:
            symbol = derivation.pop()
            if isinstance(symbol, TerminalSymbol):
                derived.append(symbol)
            elif isinstance(symbol, NonterminalSymbol):
                derivation += self.replace(symbol)[::-1]
            elif isinstance(symbol, (ConditionalSymbol, EvalSymbol, ListSymbol)):
                derivation += self._derive_symbol(symbol)[::-1]
            else:
                raise NotImplementedError(f"Unknown symbol: {type(symbol)}")
        return "".join(map(str, derived))

    def _derive_symbol(self, symbol: Symbol, context: dict[str, Any] | None = None) -> list:
        if isinstance(symbol, ConditionalSymbol):
            if len(symbol.context) == 0:
                raise ValueError("Empty context")
            ctx = _copy_context(symbol.context)
            contexts = _query(symbol.given, ctx) if symbol.given else [ctx]
            out = []
            for c in contexts:
                new = _clone(symbol.expression)
                new.context = _copy_context(c)
                out.append(new)
            return out
        if isinstance(symbol, ListSymbol):
            ctx = context or symbol.context
            symbol.symbol.context = ctx
            return display_list(self._derive_symbol(symbol.symbol), ctx)
        return symbol.derive()  # EvalSymbol (cheap), or the engine's own error

    def replace(self, start: Symbol) -> list[Symbol]:
        rules = self._rules.get(str(start))
        if not rules:
            raise CSGUnknownSymbolError(start)

        def applicable(rule: Any) -> bool:
            if not rule.condition:
                return True
            found = start.context["state"].all_assignments(
                _rule(rule.condition), start.context["mapping"]
            )
            return next(iter(found), _NONE) is not _NONE

        chosen = [r for r in rules if applicable(r)]
        symbols = [_clone(s) for s in chosen[0].rhs]
        for symbol in symbols:
            symbol.context = _copy_context(start.context)
        return symbols


def install_memo(pddl_env: Any) -> None:
    """Make ``pddl_env``'s grammar (created by ``load``) a ``MemoGrammar``."""
    grammar = pddl_env._logic.grammar
    if type(grammar) is ContextSensitiveGrammar:
        grammar.__class__ = MemoGrammar
    elif not isinstance(grammar, MemoGrammar):  # pragma: no cover - engine changed
        raise TypeError(f"unexpected grammar type {type(grammar).__name__}")
