"""A TextWorld cooking game on the Z-machine (Jericho) behind the ``Env`` contract, with exact snapshots.

TextWorld compiles a cooking game to a Z-machine story file (``.z8``, with a ``.json`` of
its metadata beside it); Jericho's ``FrotzEnv`` plays it offline. Jericho's
``get_state``/``set_state`` capture the whole machine (memory, stack, program counter,
random number generator and the pending text), so a snapshot is

* ``fast``: that machine state plus the episode's own few fields (actions so far, the last
  answer, done, won, score). Restoring is a memory copy; it holds in any process that has
  the same story file (a pickled snapshot carries the machine state as bytes).
* ``replay``: the actions since ``reset``; restoring resets the machine and replays them.

Both give exactly the observations the uninterrupted run gives
(``tests/families/textworld_cooking/test_cooking_env.py`` checks it at every step of a walk, and
``benchmarks/textworld_cooking_bench.py`` measures the cost of each).

The agent sees the game's words only (:func:`cir.families.textworld_cooking.text.clean`): the
first observation is the objective and the starting room, as ALFWorld's is its room and goal.
An episode ends when the game prints its end marker: won after eating the prepared meal,
lost after burning an ingredient or eating the wrong thing. Jericho does not know these
games (its score and end detection are off for them), so the end and the score are read
from the text and the status bar.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cir.envs.game import GameFileEnv, SnapshotMode
from cir.families.textworld_cooking.text import GAME_OVER_TEXT, LOST_MARKER, WON_MARKER, clean
from cir.util.errors import CirError

#: The Z-machine's random seed (0 would make Jericho use the clock: never exact).
MACHINE_SEED = 20
#: What a refresh sends: the room's description, as ALFWorld's look.
REFRESH_QUERY = "look"

_STATUS = re.compile(r"=-\s*(\d+)/\d+\s*$")  # the status bar: -= Kitchen =-SCORE/MOVES
_FINAL = re.compile(r"You scored (\d+) out of a possible")


@dataclass(frozen=True)
class CookingSnapshot:
    """An immutable handle on a :class:`CookingEnv` state (see the module docstring)."""

    game_file: str
    actions: tuple[str, ...]
    last_obs: str
    done: bool
    won: bool
    score: int
    machine: tuple[Any, ...] | None = None

    def __copy__(self) -> CookingSnapshot:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> CookingSnapshot:
        return self  # immutable: restoring copies the machine state out of it


def _frotz(path: Path) -> Any:
    import jericho  # loaded with the first game: finding tasks needs none of it

    warnings.filterwarnings("ignore", category=jericho.UnsupportedGameWarning)
    warnings.filterwarnings("ignore", category=jericho.TruncatedInputActionWarning)
    return jericho.FrotzEnv(str(path), seed=MACHINE_SEED)


class CookingEnv(GameFileEnv):
    """One cooking game: ``reset``, ``step``, ``snapshot``, ``restore`` (see the module docstring).

    ``game_file`` is the ``.z8`` story file (or anything with a ``game_file``, such as a
    :class:`~cir.families.textworld_cooking.tasks.CookingTask`). ``snapshots``: ``fast``
    (machine state) or ``replay`` (reset and replay the actions).
    """

    refresh_query = REFRESH_QUERY

    def __init__(self, game_file: str | Path | Any, snapshots: SnapshotMode = "fast") -> None:
        super().__init__(game_file, snapshots)
        path = self.game_file
        if path.suffix != ".z8" or not path.is_file():
            raise CirError(f"{path}: not a cooking game (expected an existing .z8 story file from tw-make)")
        self._key = str(path.resolve())
        self._frotz = _frotz(path)
        self._actions: list[str] = []
        self._last_obs, self._done, self._won, self._score = "", False, False, 0
        self._intro = ""

    # -- the Env contract ------------------------------------------------------------------
    def reset(self) -> str:
        """Start the game; the objective and the first room (banner and prompt removed)."""
        self._require_open()
        raw, _info = self._frotz.reset()
        self._intro = clean(raw)
        self._actions = []
        self._last_obs, self._done, self._won, self._score = self._intro, False, False, 0
        self._started = True
        return self._intro

    def step(self, action: str) -> tuple[str, bool, bool]:
        """Send one command; ``(observation, done, won)``. After the end: the game-over text."""
        self._check_action(action)
        self._actions.append(action)
        if self._done:
            self._last_obs = GAME_OVER_TEXT
            return GAME_OVER_TEXT, True, self._won
        raw, _reward, _done, _info = self._frotz.step(action.replace("\n", " "))
        status = _STATUS.search(raw.rstrip().splitlines()[-1]) if raw.strip() else None
        final = _FINAL.search(raw)
        if final or status:  # the status bar is not redrawn after the end marker
            self._score = int((final or status).group(1))
        won, lost = WON_MARKER in raw, LOST_MARKER in raw
        self._last_obs, self._done, self._won = clean(raw), won or lost, won
        return self._last_obs, self._done, self._won

    def snapshot(self) -> CookingSnapshot:
        """An immutable handle on the current state."""
        self._ready("snapshot")
        machine = self._frotz.get_state() if self.snapshots == "fast" else None
        return CookingSnapshot(self._key, tuple(self._actions), self._last_obs, self._done,
                               self._won, self._score, machine)

    def restore(self, snapshot: CookingSnapshot) -> None:
        """Return to ``snapshot``: later steps give exactly what the original run gave."""
        self._check_snapshot(snapshot, CookingSnapshot, self._key)
        if snapshot.machine is not None:
            if not self._started:
                self.reset()  # the machine must be set up before its state is written
            self._frotz.set_state(snapshot.machine)
        else:
            self.reset()
            for action in snapshot.actions:
                self.step(action)
        self._actions = list(snapshot.actions)
        self._last_obs, self._done, self._won, self._score = (snapshot.last_obs, snapshot.done,
                                                               snapshot.won, snapshot.score)
        self._started = True

    # -- for tests and tools (never shown to the agent) --------------------------------------
    @property
    def actions(self) -> tuple[str, ...]:
        """Commands sent since the last reset."""
        return tuple(self._actions)

    @property
    def score(self) -> int:
        """The game's score now (from its status bar)."""
        return self._score

    def _release(self) -> None:
        self._frotz = None  # Jericho shuts its interpreter down and unloads its library copy on collection
