"""A key-and-door corridor as an environment family, written from docs/own-environment.md alone.

A corridor of cells 0..N-1; a key lies in one cell; the door is the last. ``right``/``left``
walk, ``take key`` picks the key up where it lies, ``open door`` at the door with the key wins.
The door locks after a few moves. The agent walks right reading what it is shown: a stale or
missing observation at the key's cell hides the key, so it reaches the door without it and
must walk back (too far, most times); a refresh (``look``) says where the key lies, so the
agent turns back at once, and costs a move. ``FORGETFUL`` is the same family whose restore forgets the move counter;
``FORGETS_KEY`` the same whose restore drops the key in hand, which matters only at the end of a task
(``open door``): a random walk rarely holds the key at the door, the agent always does.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cir import Family, LLMPrompt, Transcript

_CELL = re.compile(r"You are in cell (\d+) of (\d+)\.")
_GOAL = re.compile(r"The door locks after (\d+) moves\.")
_LIES = re.compile(r"A key lies in cell (\d+)\.")


@dataclass(frozen=True)
class Task:
    task_id: str
    split: str
    cells: int
    key: int
    moves: int
    task_type: str = "keydoor"


# -- tasks ------------------------------------------------------------------------------------
def generate_tasks(folder: str | Path, split: str, n: int, seed: int, *, progress: bool = True,
                   jobs: int = 1) -> None:
    """``n`` tasks of ``split`` into ``folder/split/tasks.json`` (the same call leaves them)."""
    offset = {"train": 0, "valid": 1000, "test": 2000}[split] + seed
    tasks = []
    for i in range(n):
        cells = 5 + (i + offset) % 4
        key = 1 + (i * 3 + offset) % (cells - 2)
        spare = (i * 7 + offset) % 5
        tasks.append(Task(f"keydoor-{split}-{i:03d}", split, cells, key, cells + 1 + spare))
    out = Path(folder) / split
    out.mkdir(parents=True, exist_ok=True)
    (out / "tasks.json").write_text(json.dumps([asdict(t) for t in tasks], indent=1) + "\n")


def load_tasks(path: str | Path, split: str | None = None) -> list[Task]:
    """The tasks of a split folder (``tasks.json``) or of a folder of split folders."""
    path = Path(path)
    files = [path / "tasks.json"] if (path / "tasks.json").is_file() else sorted(path.glob("*/tasks.json"))
    tasks = [Task(**t) for f in files for t in json.loads(f.read_text())]
    return sorted((t for t in tasks if split is None or t.split == split), key=lambda t: t.task_id)


# -- the environment -------------------------------------------------------------------------
class KeyDoorEnv:
    refresh_query = "look"

    def __init__(self, task: Task) -> None:
        self.task = task
        self.state = (0, 0, False, False)  # cell, moves, holding the key, done

    def _here(self) -> str:
        cell, _, holding, _ = self.state
        seen = " You see a key." if cell == self.task.key and not holding else ""
        door = " You see the door." if cell == self.task.cells - 1 else ""
        return f"You are in cell {cell} of {self.task.cells}.{seen}{door}"

    def reset(self) -> str:
        self.state = (0, 0, False, False)
        return (f"{self._here()}\nYour task is to: open the door at the end of the corridor. "
                f"The door locks after {self.task.moves} moves.")

    def step(self, action: str) -> tuple[str, bool, bool]:
        time.sleep(float(os.environ.get("KEYDOOR_STEP_SECONDS", "0")))  # tests slow it to kill a run
        cell, moves, holding, done = self.state
        if done:
            return "The door is locked.", True, False
        moves, won, text = moves + 1, False, None
        if action == "right" and cell < self.task.cells - 1:
            cell += 1
        elif action == "left" and cell > 0:
            cell -= 1
        elif action == "take key" and cell == self.task.key and not holding:
            holding, text = True, "You take the key."
        elif action == "open door" and cell == self.task.cells - 1 and holding:
            won, done, text = True, True, "The door opens. You win."
        elif action == self.refresh_query:  # a look down the corridor
            text = self._here() + ("" if holding else f" A key lies in cell {self.task.key}.")
        else:
            text = "Nothing happens."
        if moves >= self.task.moves and not done:
            done = True
        self.state = (cell, moves, holding, done)
        text = text or self._here()
        return (text + (" The door locks." if done and not won else ""), done, won)

    def snapshot(self) -> tuple[int, int, bool, bool]:
        return self.state

    def restore(self, snapshot: tuple[int, int, bool, bool]) -> None:
        self.state = snapshot


class ForgetfulKeyDoorEnv(KeyDoorEnv):
    """The same env whose restore forgets the move counter (the bug check_env must catch)."""

    def restore(self, snapshot: tuple[int, int, bool, bool]) -> None:
        cell, _, holding, done = snapshot
        self.state = (cell, self.state[1], holding, done)


class KeyDroppingEnv(KeyDoorEnv):
    """The same env whose restore forgets the key in hand (rebuilt from the cell and the counter):
    after a restore past ``take key``, ``open door`` at the door does nothing."""

    def restore(self, snapshot: tuple[int, int, bool, bool]) -> None:
        cell, moves, _, done = snapshot
        self.state = (cell, moves, False, done)


def make_env(task: Task) -> KeyDoorEnv:
    return KeyDoorEnv(task)


def make_forgetful_env(task: Task) -> KeyDoorEnv:
    return ForgetfulKeyDoorEnv(task)


def make_key_dropping_env(task: Task) -> KeyDoorEnv:
    return KeyDroppingEnv(task)


def walk_actions(env: Any, observation: str) -> dict[str, float]:
    """Every command, weighted toward those that change the state where they can: taking a key
    that is shown, opening a door that is shown (a uniform walk rarely does both in a task)."""
    return {"right": 2.0, "left": 1.0, "look": 1.0,
            "take key": 4.0 if "You see a key." in observation else 0.25,
            "open door": 4.0 if "You see the door." in observation else 0.25}


# -- the agent -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fired:
    mechanism: str
    about: str


def _believed(messages: list[dict[str, str]]) -> tuple[int, int, bool, set[int]]:
    """Where the shown text says the agent is, the corridor's length, the key in hand, and the
    cells where it saw the key."""
    cell, cells, holding, seen = 0, 2, False, set()
    for m in messages:
        if m["role"] != "user":
            continue
        found = _CELL.search(m["content"])
        if found:
            cell, cells = int(found.group(1)), int(found.group(2))
            if "You see a key." in m["content"]:
                seen.add(cell)
        seen.update(int(k) for k in _LIES.findall(m["content"]))
        holding = holding or "You take the key." in m["content"]
    return cell, cells, holding, seen


class KeyDoorAgent:
    """Walks right, takes the key where it was shown, opens the door; walks back for a key it
    never saw. A pure function of the messages."""

    name = "keydoor-agent"

    def act_traced(self, context: list[dict[str, str]]) -> tuple[str, tuple[Fired, ...], tuple[Fired, ...]]:
        cell, cells, holding, seen = _believed(context)
        read: tuple[Fired, ...] = ()
        if context[-1]["role"] == "user" and "refresh" in context[-1]["content"].lower() \
                and _LIES.search(context[-1]["content"]):
            read = (Fired("refresh_shows_key", str(cell)),)
        if holding:
            return ("open door" if cell == cells - 1 else "right"), read, ()
        if cell in seen:
            return "take key", read, ()
        if seen:  # it was told where the key lies: go there
            return ("left" if cell > min(seen) else "right"), read, ()
        if cell == cells - 1:  # at the door without the key: it was not shown, walk back
            return "left", read, (Fired("walk_back", str(cell)),)
        walked_back = any(m["role"] == "assistant" and m["content"] == "left" for m in context)
        return ("left" if walked_back else "right"), read, ()

    def act(self, context: list[dict[str, str]]) -> str:
        return self.act_traced(context)[0]

    def params(self) -> dict[str, Any]:
        return {"version": 1}


def builtin_agent(profile: str = "default", *, seed: int = 0) -> KeyDoorAgent:
    return KeyDoorAgent()


# -- the features ----------------------------------------------------------------------------
class KeyDoorFeatures:
    name = "keydoor"
    features = {
        "f_delay": "env actions since the suspect observation",
        "f_moves_left": "moves left before the door locks",
        "f_holding": "1 if the shown text says the key was taken",
        "f_suspect_has_cell": "1 if the suspect observation names a cell",
    }

    def extract(self, transcript: Transcript, delay: int, *, max_turns: int, max_actions: int) -> dict[str, float]:
        moves = int(_GOAL.search(transcript.task_text).group(1))
        acted = [s for s in transcript.steps if s.action is not None]
        _, _, holding, _ = _believed(transcript.context())
        suspect = acted[len(acted) - delay - 1] if len(acted) > delay else None
        return {"f_delay": float(delay), "f_moves_left": float(moves - len(acted)),
                "f_holding": float(holding),
                "f_suspect_has_cell": float(bool(suspect and _CELL.search(suspect.shown)))}


def anomalous(action: str | None, shown: str) -> bool:
    """Whether a harness sees that ``shown`` is wrong for ``action``: ``Nothing happens.`` to a move, or
    a text that is not the answer's kind (a cell after a move or a look, the key after ``take key``)."""
    if action in ("right", "left", "look"):
        return not shown.startswith("You are in cell")
    if action == "take key":
        return "key" not in shown
    return False


# -- the family ------------------------------------------------------------------------------
PROMPT = LLMPrompt(
    version="keydoor-1",
    instructions="You walk a corridor. Commands: right, left, take key, open door, look.",
    examples=("You are in cell 0 of 3.\nYour task is to: open the door at the end of the corridor.\n"
              "> right\nYou are in cell 1 of 3. You see a key.\n> take key\nYou take the key.\n"
              "> right\nYou are in cell 2 of 3. You see the door.\n> open door\nThe door opens. You win.",),
)

FAMILY = Family(
    name="keydoor", load_tasks=load_tasks, make_env=make_env, extractor=KeyDoorFeatures(), prompt=PROMPT,
    splits=("train", "valid", "test"), generate_tasks=generate_tasks, builtin_agent=builtin_agent,
    mechanisms=frozenset({"refresh_shows_key", "walk_back"}), walk_actions=walk_actions, anomalous=anomalous,
)
FORGETFUL = Family(
    name="keydoor-forgetful", load_tasks=load_tasks, make_env=make_forgetful_env, extractor=KeyDoorFeatures(),
    prompt=PROMPT, generate_tasks=generate_tasks, builtin_agent=builtin_agent, walk_actions=walk_actions,
)
FORGETS_KEY = Family(
    name="keydoor-forgets-key", load_tasks=load_tasks, make_env=make_key_dropping_env,
    extractor=KeyDoorFeatures(), prompt=PROMPT, generate_tasks=generate_tasks, builtin_agent=builtin_agent,
    mechanisms=frozenset({"refresh_shows_key", "walk_back"}), walk_actions=walk_actions,
)
