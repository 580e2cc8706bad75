"""The ALFWorld engine for one game, with switchable savings that leave every text unchanged.

The engine is textworld's ``PddlEnv`` (Fast Downward for the PDDL state, a context-sensitive
grammar for the text) wrapped in ALFWorld's ``AlfredDemangler`` (names like ``desk 1``).
Profiled on ``cir run``, most of its time is work it repeats for nothing; ``Savings`` names
what is skipped, each switchable, each checked byte-identical against the unmodified engine:

* ``translate_once``: ``load`` translates the PDDL problem to SAS (about 0.25 s for an
  ALFWorld game) and builds the state, then textworld's ``reset`` translates the same
  problem again and rebuilds the same state. Here the first ``reset`` keeps the state built
  at load, and later resets rebuild it from the load's translation (the translator is a
  pure function of domain and problem).
* ``skip_replanner``: each textworld translation is made twice, the second time optimised
  for the replanner, which only ``policy_commands`` and the walkthrough extra use. Here that
  one is made only when the engine is asked for a planner.
* ``command_cache``: the text of admissible commands is kept per operator when the game's
  command templates read only static facts (``cir.families.alfworld.commands``; checked at load,
  ``Engine.command_cache_off`` says why it is off).
* ``release_memory``: ``close`` gives the engine's library copy to the next game and drops
  textworld's interned facts (``cir.families.alfworld.memory``), and so does garbage collection
  (textworld's ``Environment.__del__`` calls ``close``).
* ``parse_once``: ALFWorld's grammar is parsed once per process, and a game gets a copy
  with its goal sentence in (``cir.families.alfworld.grammar``); textworld parses it for every game.
* ``memo_text``: the grammar's parses cached (``cir.families.alfworld.textmemo``); it applies to any engine.
* ``sas_cache``: a game's translation is kept on disk by the digest of its domain, problem,
  options and translator version (``cir.families.alfworld.sascache``), so a game loaded
  again (another worker, ``cir estimate`` then ``cir run``, a resume) is not grounded again;
  the normalised PDDL task, cheap, is parsed afresh.

With none of the first five nor ``sas_cache`` on, ``load_game`` builds textworld's own ``PddlEnv`` (with the
text memo if asked): "unmodified" means the engine's own code, not this module with its
switches off.

Threads. Engine work is serialised per process (:data:`ENGINE_LOCK`): textworld parses its
text templates with one module-level TatSu parser (two threads parsing at once corrupt its
stack: ``IndexError: pop from empty list``, at load and at steps that meet a new template)
and keeps every fact in one memo. So ``load_game`` returns the game wrapped in
:class:`Serialised`, whose ``reset`` and ``step`` take the lock, an ``Engine`` loads under
it and ``close`` gives its library copy back under it. Fast Downward's translator (most of a
load: about 1 s a game) keeps its options in module state and swaps ``sys.argv`` and
``sys.stdout`` while it runs: translations take :data:`TRANSLATE_LOCK` instead, so one game's
translation does not stop the other games' steps, and its capture of ``sys.stdout`` takes
only the translating thread's output (:class:`_ThreadCapture`), not what other threads print
meanwhile (the two are taken in that order: the
translator's first). Threads that wait for an LLM's reply hold neither, so requests overlap.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

import fast_downward
import fast_downward.interface
import textworld
from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
from fast_downward.translate.pddl import conditions, f_expression
from textworld.core import GameState
from textworld.envs.pddl import PddlEnv
from textworld.envs.pddl.logic import Atom, GameLogic, PddlState
from textworld.logic import Placeholder, Proposition, Variable
from textworld.utils import check_flag

from cir.families.alfworld import memory
from cir.families.alfworld.commands import cache_blocker
from cir.families.alfworld.grammar import parse_logic
from cir.families.alfworld.sascache import SasCache, cache_dir
from cir.families.alfworld.textmemo import install_memo
from cir.util.errors import CirError

#: Held by every engine call of this process (module docstring, "Threads"). Reentrant:
#: garbage collection may close an engine inside a thread that holds it.
ENGINE_LOCK = threading.RLock()
#: Held by every translation of this process, and wherever ``sys.argv`` is saved to be put
#: back (:func:`keep_argv`). Taken before ENGINE_LOCK when both are held, never after it.
TRANSLATE_LOCK = threading.RLock()


@dataclass(frozen=True)
class Savings:
    """Which savings an engine uses (all by default; see the module docstring)."""

    translate_once: bool = True
    skip_replanner: bool = True
    command_cache: bool = True
    release_memory: bool = True
    parse_once: bool = True
    memo_text: bool = True
    sas_cache: bool = True

    @classmethod
    def none(cls) -> Savings:
        """The unmodified engine."""
        return cls(**{f.name: False for f in fields(cls)})

    @classmethod
    def of(cls, value: Savings | bool) -> Savings:
        """``True`` means all savings, ``False`` none."""
        if isinstance(value, Savings):
            return value
        if isinstance(value, bool):
            return cls() if value else cls.none()
        raise CirError(f"savings={value!r}: expected True, False or a cir.families.alfworld.engine.Savings")

    def in_engine(self) -> bool:
        """Whether any saving needs ``Engine`` (the text memo works on textworld's own)."""
        return (self.translate_once or self.skip_replanner or self.command_cache
                or self.release_memory or self.parse_once or self.sas_cache)


@contextmanager
def keep_argv() -> Iterator[None]:
    """fast_downward overwrites ``sys.argv`` while translating; put it back. Holds
    :data:`TRANSLATE_LOCK`: no other thread translates (and changes it) meanwhile."""
    with TRANSLATE_LOCK:
        saved = list(sys.argv)
        try:
            yield
        finally:
            sys.argv[:] = saved


class _Routed(io.TextIOBase):
    """``sys.stdout`` while a translation runs: the translating thread's writes go to the
    capture, every other thread's to the stream that was there before."""

    def __init__(self, other: Any, capture: io.StringIO) -> None:
        self._other, self._capture, self._owner = other, capture, threading.get_ident()

    def _target(self) -> Any:
        return self._capture if threading.get_ident() == self._owner else self._other

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._other, name)


class _ThreadCapture(list):
    """fast_downward's ``CapturingStdout`` (the lines the translator prints), for one thread."""

    def __enter__(self) -> _ThreadCapture:
        self._stdout = sys.stdout
        self._stringio = io.StringIO()
        sys.stdout = _Routed(self._stdout, self._stringio)
        return self

    def __exit__(self, *exc: object) -> None:
        self.extend(self._stringio.getvalue().splitlines())
        del self._stringio
        sys.stdout = self._stdout


fast_downward.interface.CapturingStdout = _ThreadCapture  # what pddl2sas captures with


@dataclass(frozen=True)
class Translation:
    """The translator's output for one problem (the task is only ever read)."""

    task: Any  # fast_downward's normalised PDDL task
    sas: str
    sas_replan: str | None  # the replanner's optimised translation, when one was asked for
    # operator id -> what an applicable action of that operator is made of (EngineState)
    operators: dict[int, tuple] = field(default_factory=dict, compare=False, repr=False)


_SAS_CACHES: dict[str, SasCache] = {}


def _sas_cache() -> SasCache:
    """The process's cache of the folder ``CIR_CACHE_DIR`` names now (one warning each)."""
    folder = cache_dir()
    if str(folder) not in _SAS_CACHES:
        _SAS_CACHES[str(folder)] = SasCache(folder)
    return _SAS_CACHES[str(folder)]


def translate(domain: str, problem: str, *, replanner: bool, cache: SasCache | None = None) -> Translation:
    """Translate a PDDL problem as ``PddlState`` does (the replanner's part only if asked),
    the SAS texts from ``cache`` where it has them (and into it where not)."""
    verbose = check_flag("TW_PDDL_DEBUG")
    with keep_argv():
        task, sas = _sas(domain, problem, False, verbose, cache)
        replan = _sas(domain, problem, True, verbose, cache)[1] if replanner else None
        if task is None:
            task = _normalised_task(domain, problem, verbose)
    return Translation(task, sas, replan)


def _sas(domain: str, problem: str, optimize: bool, verbose: bool,
         cache: SasCache | None) -> tuple[Any, str]:
    """``(task, SAS text)`` of one translation: the text kept in ``cache`` (task None), else
    the translator's (and kept). Under :func:`keep_argv`."""
    sas = cache.get(domain, problem, optimize) if cache is not None else None
    if sas is not None:
        return None, sas
    task, sas = fast_downward.pddl2sas(domain, problem, verbose=verbose, optimize=optimize)
    if cache is not None:
        cache.put(domain, problem, optimize, sas)
    return task, sas


def _normalised_task(domain: str, problem: str, verbose: bool) -> Any:
    """The task ``pddl2sas`` returns, without its SAS (parsing and normalising: its first
    steps, which the rest leaves as they were). Under :func:`keep_argv`."""
    sys.argv = ["translate.py", "domain", "task"]  # the translator's options parse argv at import
    from fast_downward.translate import normalize
    from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions

    with _ThreadCapture() as printed:
        task = parsing_functions.parse_task(lisp_parser.parse_nested_list(domain.split("\n")),
                                            lisp_parser.parse_nested_list(problem.split("\n")))
        normalize.normalize(task)
    if verbose:
        print("\n".join(printed))
    return task


class EngineState(PddlState):
    """textworld's ``PddlState``, built from a ``Translation`` instead of translating.

    The constructor takes ``PddlState.__init__``'s steps in its order (so facts enter their
    sets in the same order), with the translation given. ``all_applicable_actions`` works
    out each operator's action (name, mapping, templates) once per translation.
    """

    def __init__(self, lib: Any, problem: str, logic: GameLogic, translation: Translation) -> None:
        self._facts = defaultdict(set)
        self._vars_by_name = {}
        self._vars_by_type = defaultdict(set)
        self._var_counts = Counter()
        self._logic = logic
        self.downward_lib = lib
        self.pddl_problem = problem
        self.task, self.sas = translation.task, translation.sas
        self.sas_replan = translation.sas_replan
        self._operator_actions = translation.operators
        self._actions = {a.name: a for a in self.task.actions}
        for type_ in self.task.types:
            try:
                logic.types.add(textworld.logic.Type(type_.name, type_.supertype_names))
            except ValueError:  # already known: every state of a game adds the same types
                pass
        lib.load_sas(self.sas.encode("utf-8"))
        if self.sas_replan is not None:
            lib.load_sas_replan(self.sas_replan.encode("utf-8"))
        self.name2type = {o.name: o.type_name for o in self.task.objects}
        self.add_facts([f for f in map(self._init_fact, self.task.init) if f is not None])
        atoms = (Atom * lib.get_state_size())()
        lib.get_state(atoms)
        facts = [atom.get_fact(self.name2type) for atom in atoms]
        self.add_facts([f for f in facts if not f.is_negation])

    def _init_fact(self, atom: Any) -> Proposition | None:
        """A fact of the problem's ``:init`` (equality, costs and distances left out)."""
        if isinstance(atom, conditions.Atom):
            if atom.predicate == "=":
                return None
            return Proposition(atom.predicate, [Variable(a, self.name2type[a]) for a in atom.args])
        if isinstance(atom, f_expression.Assign):
            name = f"{atom.expression.value}"
            if atom.fluent.symbol == "total-cost" or name.isdigit():
                return None
            return Proposition(name, [Variable(a, self.name2type[a]) for a in atom.fluent.args])
        return None

    def all_applicable_actions(self) -> list[Any]:
        """As ``PddlState.all_applicable_actions`` (same actions, same order, new objects).

        In one translation an operator id names one operator, so what its action is made of
        is read from the operator's name once, not at every step.
        """
        lib = self.downward_lib
        operators = (fast_downward.Operator * lib.get_applicable_operators_count())()
        lib.get_applicable_operators(operators)
        self._operators = {op.id: op for op in operators}
        actions = []
        seen = set()
        for op in operators:
            made_of = self._operator_actions.get(op.id)
            if made_of is None:
                made_of = self._operator_actions[op.id] = self._made_of(op.name)
            op_name, name, mapping, template, feedback = made_of
            if op_name in seen:  # the engine keeps the first operator of each name
                continue
            seen.add(op_name)
            action = textworld.logic.Action(name=name, preconditions=[], postconditions=[])
            action.id = op.id
            action.mapping = dict(mapping)
            action.command_template = template
            action.feedback_rule = feedback
            actions.append(action)
        return actions

    def _made_of(self, op_name: str) -> tuple:
        name, *arguments = op_name.split()
        mapping = {Placeholder(p.name.strip("?"), p.type_name): Variable(arg, p.type_name)
                   for p, arg in zip(self._actions[name].parameters, arguments, strict=False)}
        logic_action = self._logic.actions[name]
        return op_name, name, mapping, logic_action.template, logic_action.feedback_rule

    def replan(self, infos: Any) -> list[str]:
        if self.sas_replan is None:
            raise CirError("this engine was built without the replanner's translation; build it "
                           "with replanner=True (or Savings(skip_replanner=False)) to plan")
        return super().replan(infos)


class Engine(PddlEnv):
    """textworld's ``PddlEnv`` with ``Savings`` (give it the data of a game, not a path).

    ``replanner=True`` makes the replanner's translation whatever the savings (the planner
    is then available through the state's ``replan``); it is made anyway when ``infos`` ask
    for ``policy_commands`` or the walkthrough extra. ``logic``: the game's grammar, parsed
    already (task generation loads two problems with one grammar); else ``load`` parses it.
    """

    def __init__(self, infos: textworld.EnvInfos | None = None, savings: Savings = Savings(), *,
                 replanner: bool = False, logic: GameLogic | None = None) -> None:
        # Not PddlEnv.__init__: it would load a library copy of its own.
        textworld.Environment.__init__(self, infos)
        self.savings = savings
        self._given_logic = logic
        self.replanner = replanner or not savings.skip_replanner \
            or bool(self.request_infos.policy_commands) or "walkthrough" in self.request_infos.extras
        self.downward_lib = memory.borrow() if savings.release_memory else fast_downward.load_lib()
        self._closed = False
        self._translation: Translation | None = None
        self._fresh_state = False
        self._commands: dict[int, tuple[str, str]] | None = None
        self._names: dict[str, str] | None = None
        self.command_cache_off: str | None = "no game loaded"

    def load(self, data: Mapping[str, Any]) -> None:
        """Load a game from its data (``pddl_domain``, ``grammar``, ``pddl_problem``)."""
        with ENGINE_LOCK:
            self._check_open()
            self._game_file = None
            self._game_data = data
            self.walkthrough = data.get("walkthrough", None)
            logic, self._given_logic = self._given_logic, None
            self._logic = logic if logic is not None else parse_logic(data, reuse=self.savings.parse_once)
        self._translation = self._translate()  # under TRANSLATE_LOCK only
        with ENGINE_LOCK:
            self._build(data)

    def _build(self, data: Mapping[str, Any]) -> None:
        """The loaded game's state, names and command cache (under ENGINE_LOCK)."""
        self._pddl_state = EngineState(self.downward_lib, data["pddl_problem"], self._logic,
                                       self._translation)
        self._fresh_state = True
        self._entity_infos = self._get_entity_infos()
        self._names = None
        self._commands = None
        if not self.savings.command_cache:
            self.command_cache_off = "switched off (Savings.command_cache=False)"
        else:
            self.command_cache_off = cache_blocker(self._logic, self._translation.task)
            if self.command_cache_off is None:
                self._commands = {}

    def _translate(self) -> Translation:
        data = self._game_data
        return translate(data["pddl_domain"], data["pddl_problem"], replanner=self.replanner,
                         cache=_sas_cache() if self.savings.sas_cache else None)

    def reset(self) -> GameState:
        """As ``PddlEnv.reset``, without translating the problem again (``translate_once``)."""
        self._check_open()
        if self._fresh_state and self.savings.translate_once:
            self._fresh_state = False  # the state built at load, untouched since
        else:
            self._fresh_state = False
            if not self.savings.translate_once:
                self._translation = self._translate()
                if self._commands is not None:
                    self._commands.clear()  # keyed by operator ids of one translation
            self._pddl_state = EngineState(self.downward_lib, self._game_data["pddl_problem"],
                                           self._logic, self._translation)
        self.prev_state = None
        self.state = GameState()
        self._last_action = None
        self._moves = 0
        self.state.feedback = self._logic.grammar.derive("#intro#", self._context({}, {}))
        self.state.raw = self.state.feedback
        self._gather_infos()
        if "walkthrough" in self.request_infos.extras:
            self.state["extra.walkthrough"] = \
                self.walkthrough or self._pddl_state.replan(self._entity_infos)
        return self.state

    def step(self, command: str) -> tuple[GameState, float, bool]:
        self._check_open()
        return super().step(command)

    def _context(self, variables: dict[str, Any], mapping: dict) -> dict[str, Any]:
        """A derivation context, as the engine builds it."""
        return {"state": self._pddl_state, "facts": list(self._pddl_state.facts),
                "variables": variables, "mapping": mapping, "entity_infos": self._entity_infos}

    def command(self, action: Any) -> str:
        """The admissible command of an applicable action, derived (and kept, when safe).

        Like the engine, it sets ``action.command_template`` to the derived template. Kept
        per operator id: in one translation an id names one operator (name and arguments),
        which fixes the action's mapping.
        """
        cache = self._commands
        hit = cache.get(action.id) if cache is not None else None
        if hit is None:
            variables = {ph.name: self._entity_infos[var.name] for ph, var in action.mapping.items()}
            action.command_template = self._logic.grammar.derive(
                action.command_template, self._context(variables, action.mapping))
            if self._names is None:  # entity names are final once the demangler has loaded
                self._names = {k: info.name for k, info in self._entity_infos.items()}
            hit = (action.command_template, action.format_command(self._names))
            if cache is not None:
                cache[action.id] = hit
        action.command_template = hit[0]
        return hit[1]

    def _gather_infos(self) -> None:
        """``PddlEnv._gather_infos`` with the command text from ``command`` (same state keys)."""
        if self._commands is None:
            return super()._gather_infos()
        ps, state = self._pddl_state, self.state
        state["command_templates"] = sorted({a.template for a in self._logic.actions.values()})
        state["won"] = ps.check_goal()
        state["lost"] = False
        state["_entity_infos"] = dict(self._entity_infos)
        state["_facts"] = list(ps.facts)
        if self.request_infos.facts:
            state["facts"] = list(map(self._get_human_readable_fact, state["_facts"]))
        state["last_action"] = None
        state["_last_action"] = self._last_action
        state["_valid_actions"] = list(ps.all_applicable_actions())
        commands = [self.command(action) for action in state["_valid_actions"]]
        state["_valid_commands"] = commands
        state["admissible_commands"] = sorted(set(commands))
        if self.request_infos.moves:
            state["moves"] = self._moves
        if self.request_infos.policy_commands:
            state["policy_commands"] = ps.replan(self._entity_infos)

    def _check_open(self) -> None:
        if self._closed:
            raise CirError("this ALFWorld engine is closed (its library copy serves another game)")

    def close(self) -> None:
        """Release the engine's memory (``release_memory``); the engine is unusable after."""
        if getattr(self, "_closed", True) or sys.is_finalizing():
            return  # never built, already closed, or the interpreter is exiting
        with ENGINE_LOCK:
            self._closed = True
            if self.savings.release_memory:
                memory.give_back(self.downward_lib)
                memory.forget_facts()


class Serialised(textworld.core.Wrapper):
    """A loaded game whose ``reset`` and ``step`` hold :data:`ENGINE_LOCK` (one engine at a
    time per process); everything else passes through to the wrapped game."""

    def load(self, path: Any) -> None:
        with ENGINE_LOCK:
            self._wrapped_env.load(path)

    def reset(self) -> GameState:
        with TRANSLATE_LOCK, ENGINE_LOCK:  # a reset may translate again (translate_once off)
            return self._wrapped_env.reset()

    def step(self, command: str) -> tuple[GameState, float, bool]:
        with ENGINE_LOCK:
            return self._wrapped_env.step(command)


def load_game(data: Mapping[str, Any], savings: Savings, infos: textworld.EnvInfos, *,
              replanner: bool = False, logic: GameLogic | None = None) -> Any:
    """A loaded ``AlfredDemangler`` over an ``Engine`` (or textworld's ``PddlEnv``, no savings),
    :class:`Serialised` (safe to use from several threads of one process).

    ``replanner`` and ``logic`` are as for ``Engine``; the unmodified engine always makes
    the replanner's translation and parses the grammar itself. Exceptions of the engine
    pass through (the caller knows what was being loaded); the engine is closed first.
    """
    # textworld's own engine parses and translates inside its load: it holds both locks
    whole = contextlib.nullcontext() if savings.in_engine() else _both_locks()
    with whole:
        if savings.in_engine():
            engine: PddlEnv = Engine(infos, savings, replanner=replanner, logic=logic)
        else:
            engine = PddlEnv(infos)
        env = AlfredDemangler(shuffle=False)(engine)  # shuffle uses the global random: keep it off
        try:
            env.load(dict(data))  # the demangler names this engine's entities: its own data
        except BaseException:
            engine.close()
            raise
    if savings.memo_text:
        with ENGINE_LOCK:
            install_memo(engine)
    return Serialised(env)


@contextmanager
def _both_locks() -> Iterator[None]:
    with keep_argv(), ENGINE_LOCK:  # keep_argv holds TRANSLATE_LOCK
        yield
