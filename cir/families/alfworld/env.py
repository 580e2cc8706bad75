"""The real ALFWorld text engine behind the ``Env`` contract, with exact snapshots.

The engine is textworld's ``PddlEnv`` (Fast Downward for the PDDL state, a context-sensitive
grammar for the text) wrapped in ALFWorld's ``AlfredDemangler`` (names like ``desk 1``).
The engine cannot be copied (deepcopy/pickle fail), so a snapshot is either

* ``replay``: the actions taken since ``reset``; restoring resets the engine and replays
  them. Portable and obviously exact, but costs a reset plus one engine step per action.
* ``fast``: the Fast Downward state id (the library exports ``get_state_id`` /
  ``set_state_id``, not wrapped by its Python interface) plus a copy of the Python-side
  state of ``PddlState`` and of the env. Restores in well under a millisecond. It is only
  valid for the engine state registry it came from, so each snapshot also carries its
  action list and falls back to replay when the registry has changed.

In ``fast`` mode only the first ``reset`` reaches the engine; later resets restore the
initial snapshot, so snapshots stay valid across resets of the same env.

The agent only ever sees the engine's text; admissible commands and facts are offered as
separate methods for tests and tools, sorted (the engine yields facts in hash order).

The engine runs with the savings of ``cir.families.alfworld.engine`` (``savings=False``: textworld's own
code, unmodified). ``close()`` (or dropping the env) hands its engine library to the next game.
"""

from __future__ import annotations

import ctypes
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any, Protocol

import textworld
from textworld.envs.pddl import PddlEnv

from cir.envs.game import GameFileEnv, SnapshotMode
from cir.episode.protocol import NOTHING_HAPPENS
from cir.families.alfworld.engine import Savings, keep_argv, load_game
from cir.families.alfworld.gamefile import read_game_file
from cir.util.errors import CirError

BANNER = "-= Welcome to TextWorld, ALFRED! =-"

_ENV_IDS = count(1)


def strip_banner(text: str) -> str:
    """The intro without the welcome banner (room description and goal sentence kept)."""
    stripped = text.lstrip()
    if stripped.startswith(BANNER):
        stripped = stripped[len(BANNER) :]
    return stripped.strip()


class HasGameFile(Protocol):
    """Anything that names a game file (a ``cir.families.alfworld.tasks.TaskRef``)."""

    game_file: Path


def _explain_engine_error(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args == ("val1",):
        return (
            "the PDDL translator failed (KeyError 'val1'): the goal is unreachable or a needed "
            "fact is missing (the agent's atLocation, a receptacleAtLocation for every "
            "receptacle incl. the goal's, canContain/objectType facts)"
        )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"the engine failed ({type(exc).__name__}{': ' + first[:200] if first else ''})"


@dataclass(frozen=True)
class _FastState:
    """Everything a step reads or writes, outside the Fast Downward search state."""

    pddl_state: Any  # the PddlState object the state id belongs to
    state_id: int
    facts: dict[str, set]
    vars_by_name: dict
    vars_by_type: dict[str, set]
    var_counts: Counter
    operators: dict
    game_state: Any
    prev_state: Any
    last_action: Any
    moves: int


@dataclass(frozen=True)
class AlfworldSnapshot:
    """An opaque, immutable handle on an ``AlfworldEnv`` state (see the module docstring)."""

    env_id: int
    game_file: str
    actions: tuple[str, ...]
    last_obs: str
    done: bool
    won: bool
    fast: _FastState | None = None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The engine part cannot leave this process: a pickled snapshot keeps its actions
        # and restores by replay (in any process that has the same game file).
        return (
            AlfworldSnapshot,
            (-1, self.game_file, self.actions, self.last_obs, self.done, self.won, None),
        )

    def __copy__(self) -> AlfworldSnapshot:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> AlfworldSnapshot:
        return self  # immutable: restoring never changes a snapshot


class AlfworldEnv(GameFileEnv):
    """One ALFWorld game on the real engine: ``reset``, ``step``, ``snapshot``, ``restore``.

    ``game_file`` is a ``game.tw-pddl`` path (or a ``TaskRef``). ``snapshots="fast"`` uses
    engine state ids where they hold (and falls back to replay where they do not);
    ``"replay"`` always resets and replays. ``savings`` (``cir.families.alfworld.engine.Savings``, or
    ``True`` for all, ``False`` for the unmodified engine) only changes how fast the same
    text comes. Use it as a context manager, or ``close()`` it, to free its engine at once.
    """

    #: what a refresh sends (``cir.envs.base.refresh_query``): ALFWorld's look
    refresh_query = "look"

    def __init__(
        self,
        game_file: str | Path | HasGameFile,
        snapshots: SnapshotMode = "fast",
        *,
        savings: Savings | bool = True,
    ) -> None:
        super().__init__(game_file, snapshots)
        self._game_key = str(self.game_file.resolve())
        self.savings = Savings.of(savings)
        self._id = next(_ENV_IDS)
        self._data = read_game_file(self.game_file)
        self.walkthrough: list[str] | None = self._data.get("walkthrough")
        self._env = self._load()
        self._pddl_env = self._find_pddl_env(self._env)
        self._lib = self._pddl_env.downward_lib
        self._fast_ok = snapshots == "fast" and self._bind_state_id_functions()
        self._initial: AlfworldSnapshot | None = None
        self._actions: list[str] = []
        self._last_obs = ""
        self._done = False
        self._won = False

    # -- engine plumbing -------------------------------------------------------------

    def _fail(self, what: str, exc: BaseException) -> CirError:
        return CirError(f"{self.game_file}: {what}: {_explain_engine_error(exc)}")

    def _load(self) -> Any:
        # No facts in the game state: the engine would convert all of them on every step.
        infos = textworld.EnvInfos(admissible_commands=True, won=True)
        data = {k: self._data[k] for k in ("pddl_domain", "grammar", "pddl_problem")}
        try:
            return load_game(data, self.savings, infos)
        except Exception as exc:  # the engine raises anything from tatsu to KeyError
            raise self._fail("failed to load", exc) from None

    @staticmethod
    def _find_pddl_env(env: Any) -> Any:
        # Not hasattr(): textworld's Wrapper forwards attribute reads to the wrapped env,
        # and attributes set on the wrapper would shadow the engine's own.
        inner = getattr(env, "unwrapped", env)
        if not isinstance(inner, PddlEnv) or "downward_lib" not in vars(inner):
            raise CirError(  # pragma: no cover - engine layout changed
                f"cannot find textworld's PddlEnv inside the ALFWorld wrapper (got {inner!r})"
            )
        return inner

    def _bind_state_id_functions(self) -> bool:
        lib = self._lib
        try:
            get_id, set_id = lib.get_state_id, lib.set_state_id
        except AttributeError:
            return False
        get_id.restype = ctypes.c_int
        get_id.argtypes = []
        set_id.restype = None
        set_id.argtypes = [ctypes.c_int]
        return True

    def _engine_reset(self) -> str:
        try:
            with keep_argv():
                state = self._env.reset()
        except Exception as exc:
            raise self._fail("failed to reset", exc) from None
        return strip_banner(state.feedback)

    # -- the Env contract ------------------------------------------------------------

    def reset(self) -> str:
        """Start the episode; the intro without the welcome banner, goal sentence kept."""
        self._require_open()
        if self._fast_ok and self._initial is not None and self._initial.fast is not None:
            self._restore_fast(self._initial)
            return self._initial.last_obs
        obs = self._engine_reset()
        self._actions = []
        self._last_obs, self._done, self._won = obs, False, bool(self._pddl_env.state["won"])
        self._started = True
        if self._fast_ok:
            self._initial = self.snapshot()
        return obs

    def step(self, action: str) -> tuple[str, bool, bool]:
        """Send one action; ``(observation, done, won)``. Unknown text gives ``Nothing happens.``"""
        self._check_action(action)
        try:
            state, _score, done = self._env.step(action)
        except Exception as exc:
            raise self._fail(f"failed on action {action!r}", exc) from None
        obs = state.feedback
        won = bool(state["won"])
        self._actions.append(action)
        self._last_obs, self._done, self._won = obs, bool(done), won
        return obs, bool(done), won

    def snapshot(self) -> AlfworldSnapshot:
        """An immutable handle on the current state (fast part only in ``fast`` mode)."""
        self._ready("snapshot")
        fast = self._capture_fast() if self._fast_ok else None
        return AlfworldSnapshot(
            env_id=self._id,
            game_file=self._game_key,
            actions=tuple(self._actions),
            last_obs=self._last_obs,
            done=self._done,
            won=self._won,
            fast=fast,
        )

    def restore(self, snapshot: AlfworldSnapshot) -> None:
        """Return to ``snapshot``: later steps give exactly what the original run gave."""
        self._check_snapshot(snapshot, AlfworldSnapshot, self._game_key)
        if self._fast_ok and self.fast_valid(snapshot):
            self._restore_fast(snapshot)
        else:
            self._restore_replay(snapshot)

    # -- snapshots -------------------------------------------------------------------

    def fast_valid(self, snapshot: AlfworldSnapshot) -> bool:
        """Whether ``snapshot`` can be restored through the engine's state id here."""
        return (
            snapshot.fast is not None
            and snapshot.env_id == self._id
            and snapshot.fast.pddl_state is self._pddl_env._pddl_state
        )

    def _capture_fast(self) -> _FastState:
        env, ps = self._pddl_env, self._pddl_env._pddl_state
        return _FastState(
            pddl_state=ps,
            state_id=int(self._lib.get_state_id()),
            facts={k: set(v) for k, v in ps._facts.items()},
            vars_by_name=dict(ps._vars_by_name),
            vars_by_type={k: set(v) for k, v in ps._vars_by_type.items()},
            var_counts=Counter(ps._var_counts),
            operators=ps._operators,
            game_state=env.state,
            prev_state=env.prev_state,
            last_action=env._last_action,
            moves=env._moves,
        )

    def _restore_fast(self, snap: AlfworldSnapshot) -> None:
        fs = snap.fast
        assert fs is not None
        env, ps = self._pddl_env, fs.pddl_state
        self._lib.set_state_id(fs.state_id)
        ps._facts = defaultdict(set, {k: set(v) for k, v in fs.facts.items()})
        ps._vars_by_name = dict(fs.vars_by_name)
        ps._vars_by_type = defaultdict(set, {k: set(v) for k, v in fs.vars_by_type.items()})
        ps._var_counts = Counter(fs.var_counts)
        ps._operators = fs.operators
        env.state = fs.game_state
        env.prev_state = fs.prev_state
        env._last_action = fs.last_action
        env._moves = fs.moves
        self._set_episode(snap)

    def _restore_replay(self, snap: AlfworldSnapshot) -> None:
        obs = self._engine_reset()
        self._actions = []
        self._last_obs, self._done, self._won = obs, False, bool(self._pddl_env.state["won"])
        self._started = True
        if self._fast_ok:
            # The engine rebuilt its state registry: later resets start from the new one.
            self._initial = self.snapshot()
        for action in snap.actions:
            self.step(action)
        self._set_episode(snap)

    def _set_episode(self, snap: AlfworldSnapshot) -> None:
        self._actions = list(snap.actions)
        self._last_obs, self._done, self._won = snap.last_obs, snap.done, snap.won
        self._started = True

    # -- for tests and tools (never shown to the agent) --------------------------------

    @property
    def actions(self) -> tuple[str, ...]:
        """Actions sent since the last reset."""
        return tuple(self._actions)

    def admissible_commands(self) -> list[str]:
        """The engine's admissible commands in the current state, sorted."""
        self._require_started()
        return sorted(self._pddl_env.state["admissible_commands"])

    def facts(self) -> list[str]:
        """The true facts of the current state as sorted strings (``inReceptacle(apple 1, ...)``)."""
        self._require_started()
        env = self._pddl_env
        return sorted(str(env._get_human_readable_fact(f)) for f in env._pddl_state.facts)

    def won(self) -> bool:
        """Whether the goal holds now."""
        self._require_started()
        return bool(self._pddl_env._pddl_state.check_goal())

    def _require_started(self) -> None:
        self._require_open()
        if not self._started:
            raise CirError(f"{self.game_file}: call reset() first")

    @property
    def command_cache_off(self) -> str | None:
        """Why admissible commands are derived at every step in this game (``None``: cached)."""
        return getattr(self._pddl_env, "command_cache_off", "the unmodified engine")

    # -- the engine's lifetime -------------------------------------------------------

    def _release(self) -> None:
        """Free the engine (its library copy goes to the next game)."""
        self._pddl_env.close()


def run_actions(env: AlfworldEnv, actions: list[str]) -> list[tuple[str, bool, bool]]:
    """Step through ``actions``; the list of ``(obs, done, won)`` (a helper for tests)."""
    return [env.step(a) for a in actions]


__all__ = [
    "AlfworldEnv",
    "AlfworldSnapshot",
    "BANNER",
    "NOTHING_HAPPENS",
    "strip_banner",
    "run_actions",
]
