"""A folder of files as a tool world: a small Python project with a bug, four tools over it, and
its tests run in the folder as the success check.

The state is a folder (``cir.tools.FolderState``): ``cir`` snapshots it as a manifest of content
digests and modes with the contents in a store beside it, and restores it exactly (contents,
modes, files created since deleted, files deleted since brought back), which ``cir check-env``
checks. The tools are plain functions of the folder's ``Path``:

- ``list_dir(path=".")``, ``read_file(path)``, ``search(pattern, path=".")``: read-only;
- ``edit_file(path, old, new)``: replace one exact piece of text (``old`` must occur once).

A task names a function of ``calc/ops.py`` whose tests fail; the success check runs the
project's tests (``python -m unittest``) in the folder, with a time limit and, where the machine
allows it, without a network (``unshare -rn``; elsewhere, best effort: the tests need none).
World events are a teammate's commits: a few env actions in, ``calc/ops.py`` gains a header
comment and ``NOTES.txt`` is deleted, so a stale read of the file shows text that is no longer there.

The built-in agent believes what it is shown: it reads ``calc/ops.py``, finds the function the
task names in the text it was shown and fixes its ``return`` line with ``edit_file`` (old text
taken from what it read), then reads the file again and finishes when it shows the fix. A stale
or missing read hides the function (it reads again once, then gives up: ``no_function``); a
refresh re-runs the suspect read (``refresh_read``).

    cir check-env --family examples.folder_world:FAMILY
    cir tasks generate --family examples.folder_world:FAMILY --split train --n 12 --out fw-tasks
    cir run --family examples.folder_world:FAMILY --tasks fw-tasks/train --out fw-run \\
        --conditions clean,stale1,missing --delays 0,1 --operations refresh
    python examples/folder_world.py          # one episode, and a restore shown exact
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cir import Family
from cir.agents.modelfree import Fired
from cir.episode.protocol import REFRESH_PREFIX
from cir.tools import Event, FolderState, ToolError, ToolTask, ToolWorld, parse_call, tool

#: How long the project's tests may run (seconds).
CHECK_SECONDS = 30


def _inside(root: Path, path: str) -> Path:
    """``path`` inside the project folder, or a ToolError (the agent asked outside it)."""
    target = (root / path).resolve()
    if target != root.resolve() and root.resolve() not in target.parents:
        raise ToolError(f"{path}: outside the project")
    return target


# -- the tools --------------------------------------------------------------------------------------------
@tool(read_only=True)
def list_dir(root: Path, path: str = ".") -> list:
    """List a folder of the project: each entry's path, and whether it is a folder.

    Args:
        path: the folder, relative to the project (default: the project itself).
    """
    folder = _inside(root, path)
    if not folder.is_dir():
        raise ToolError(f"{path}: no such folder")
    return [{"path": p.relative_to(root).as_posix(), "folder": p.is_dir()} for p in sorted(folder.iterdir())]


@tool(read_only=True)
def read_file(root: Path, path: str) -> dict:
    """Read a file of the project.

    Args:
        path: the file, relative to the project.
    """
    file = _inside(root, path)
    if not file.is_file():
        raise ToolError(f"{path}: no such file")
    return {"path": path, "text": file.read_text(encoding="utf-8")}


@tool(read_only=True)
def search(root: Path, pattern: str, path: str = ".") -> list:
    """Find the lines of the project's files that contain a text.

    Args:
        pattern: the text to find (plain text, not a regular expression).
        path: the folder to search, relative to the project.
    """
    found = []
    for file in sorted(_inside(root, path).rglob("*")):
        if file.is_file():
            for n, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
                if pattern in line:
                    found.append({"path": file.relative_to(root).as_posix(), "line": n, "text": line})
    return found[:50]


@tool(read_only=False)
def edit_file(root: Path, path: str, old: str, new: str) -> dict:
    """Replace one exact piece of a file's text with another.

    Args:
        path: the file, relative to the project.
        old: the text to replace; it must occur exactly once in the file.
        new: the text to put in its place.
    """
    file = _inside(root, path)
    if not file.is_file():
        raise ToolError(f"{path}: no such file")
    text = file.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise ToolError(f"{path}: the text to replace occurs {text.count(old)} times; it must occur once")
    file.write_text(text.replace(old, new), encoding="utf-8")
    return {"path": path, "edited": True}


def refresh_of(call: Any) -> Any:
    """After an edit, re-read the file it changed."""
    return f'read_file(path={json.dumps(call.arguments["path"])})' if call.name == "edit_file" else None


# -- the success check: the project's tests, run in the folder ---------------------------------------------
@functools.cache
def _no_network() -> list[str]:
    """``unshare -rn`` when this machine lets a user make a namespace without a network, else nothing."""
    try:
        ok = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return ["unshare", "-rn"] if ok else []


def tests_pass(root: Path, task: ToolTask, answer: str) -> bool:
    """The project's tests pass (run in the folder, no bytecode written, a time limit)."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    try:
        run = subprocess.run([*_no_network(), sys.executable, "-B", "-m", "unittest", "-q"], cwd=root, env=env,
                             capture_output=True, timeout=CHECK_SECONDS)
    except subprocess.TimeoutExpired:
        return False
    return run.returncode == 0 and b"Ran 0 tests" not in run.stderr


# -- the project and its tasks ---------------------------------------------------------------------------
FUNCTIONS = {  # name: (the right return line, a wrong one, a test line)
    "add": ("return a + b", "return a - b", "self.assertEqual(ops.add(2, 3), 5)"),
    "sub": ("return a - b", "return b - a", "self.assertEqual(ops.sub(5, 3), 2)"),
    "mul": ("return a * b", "return a + b", "self.assertEqual(ops.mul(3, 4), 12)"),
    "div": ("return a / b", "return a // b", "self.assertEqual(ops.div(7, 2), 3.5)"),
    "neg": ("return -a", "return a", "self.assertEqual(ops.neg(4), -4)"),
}


def project(buggy: str) -> dict[str, str]:
    """The project's files, with ``buggy`` wrong."""
    body = "\n\n".join(f"def {name}(a{', b' if name != 'neg' else ''}):\n    "
                       f"{(wrong if name == buggy else right)}\n" for name, (right, wrong, _) in FUNCTIONS.items())
    tests = "\n".join(f"    def test_{name}(self):\n        {check}\n" for name, (_, _, check) in FUNCTIONS.items())
    return {
        "calc/__init__.py": "",
        "calc/ops.py": f'"""Arithmetic."""\n\n\n{body}',
        "tests/__init__.py": "",
        "tests/test_ops.py": f"import unittest\n\nfrom calc import ops\n\n\nclass OpsTest(unittest.TestCase):\n{tests}",
        "NOTES.txt": "Run the tests with: python -m unittest\n",
        "run.sh": "#!/bin/sh\nexec python -m unittest\n",  # made executable (a mode the folder state keeps)
    }


def build_project(root: Path, buggy: str) -> None:
    for rel, text in project(buggy).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    os.chmod(root / "run.sh", 0o755)


SPLIT_OFFSETS = {"train": 0, "test": 1}


def generate(split: str, n: int, seed: int) -> list[ToolTask]:
    """``n`` tasks: each a bug in one function, and a teammate's commit at env action 2, 3 or 4
    (``commit_at``, which :func:`teammate_commit` reads)."""
    names = list(FUNCTIONS)
    tasks = []
    for i in range(n):
        k = i + SPLIT_OFFSETS[split] * 7 + seed
        buggy = names[k % len(names)]
        tasks.append(ToolTask(f"folder-{split}-{i:03d}", f"The tests fail because `{buggy}` in calc/ops.py is "
                              "wrong. Fix it so that `python -m unittest` passes, then finish.",
                              Project(buggy), split, buggy, data={"commit_at": 2 + k % 3}))
    return tasks


class Project:
    """A task's initial folder (a module-level class: tasks travel to the run's worker processes)."""

    def __init__(self, buggy: str) -> None:
        self.buggy = buggy

    def __call__(self, root: Path) -> None:
        build_project(root, self.buggy)


def teammate_commit(task: ToolTask) -> list[Event]:
    """The world's events of a task: a teammate's commit puts a header on calc/ops.py (whatever it
    holds then) and deletes NOTES.txt."""
    return [Event(int(task.data["commit_at"]), _commit, "a teammate's commit: a header, NOTES.txt removed")]


def _commit(root: Path) -> None:
    ops = root / "calc" / "ops.py"
    ops.write_text("# Maintained by the calc team.\n" + ops.read_text(encoding="utf-8"), encoding="utf-8")
    (root / "NOTES.txt").unlink(missing_ok=True)


# -- the built-in agent ----------------------------------------------------------------------------------------
_NAME = re.compile(r"`(\w+)` in calc/ops\.py")


class FixerAgent:
    """Reads calc/ops.py, fixes the named function's return line from what it was shown, checks, finishes."""

    name = "folder-fixer"

    def params(self) -> dict[str, Any]:
        return {"agent": self.name, "version": 1}

    def act(self, context: list[dict[str, str]]) -> str:
        return self.act_traced(context)[0]

    def act_traced(self, context: list[dict[str, str]]) -> tuple[str, tuple[Fired, ...], tuple[Fired, ...]]:
        target = _NAME.search(context[0]["content"]).group(1)
        right, wrong = FUNCTIONS[target][0], FUNCTIONS[target][1]
        reads = edits = 0
        for m in context[1:]:
            if m["role"] == "assistant":
                name = _tool_of(m["content"])
                reads += name == "read_file"
                edits += name == "edit_file"
        last = context[-1]["content"] if len(context) > 1 else ""
        refreshed = last.startswith(REFRESH_PREFIX)
        shown = _json(last[len(REFRESH_PREFIX):] if refreshed else last)
        text = shown.get("text") if isinstance(shown, dict) else None
        read: tuple[Fired, ...] = (Fired("refresh_read", target),) if refreshed and text is not None else ()
        if len(context) == 1:
            return _read(), (), ()
        if text is not None and _returns(text, target) == right and edits:
            return 'finish(answer="")', read, ()
        if text is not None and _returns(text, target) == wrong:
            return (f'edit_file(path="calc/ops.py", old={json.dumps(_block(target, wrong))}, '
                    f'new={json.dumps(_block(target, right))})'), read, ()
        if reads < 3 and (text is None or edits):
            return _read(), read, ()  # nothing readable shown, or an edit to check: read (again)
        return 'finish(answer="")', (*read, Fired("no_function", target)), ()


def _block(name: str, line: str) -> str:
    params = "a" if name == "neg" else "a, b"
    return f"def {name}({params}):\n    {line}"


def _returns(text: str, name: str) -> str | None:
    found = re.search(rf"def {name}\([^)]*\):\n    (return [^\n]*)", text)
    return found.group(1) if found else None


def _read() -> str:
    return 'read_file(path="calc/ops.py")'


def _tool_of(text: str) -> str | None:
    try:
        return parse_call(text.splitlines()[0]).name
    except Exception:
        return None


def _json(text: str) -> Any:
    try:
        return json.loads(text.strip())
    except ValueError:
        return None


def fixer_agent(profile: str = "default", *, seed: int = 0) -> FixerAgent:
    return FixerAgent()


def world(name: str = "folder", state: Any = "folder") -> ToolWorld:
    return ToolWorld(name, tools=[list_dir, read_file, search, edit_file], state=state, check=tests_pass,
                     refresh=refresh_of, generate=generate, events=teammate_commit, builtin_agent=fixer_agent,
                     mechanisms=("refresh_read", "no_function"), splits=("train", "test"),
                     instructions="You fix bugs in a small Python project.",
                     examples=('The tests fail because `add` in calc/ops.py is wrong. Fix it so that `python -m '
                               'unittest` passes, then finish.\n> read_file(path="calc/ops.py")\n'
                               '{"path": "calc/ops.py", "text": "def add(a, b):\\n    return a - b\\n"}\n'
                               '> edit_file(path="calc/ops.py", old="return a - b", new="return a + b")\n'
                               '{"path": "calc/ops.py", "edited": true}\n> finish(answer="")\n{"finished": true}',))


WORLD = world()
FAMILY = Family(**WORLD.parts())


class ForgetsFile(FolderState):
    """A folder restore that forgets one file: calc/ops.py keeps its content of now (the bug
    ``cir check-env`` and the replayer must catch)."""

    def _put(self, snapshot: Any) -> None:
        keep = self.root / "calc" / "ops.py"
        text = keep.read_bytes() if keep.is_file() else None
        super()._put(snapshot)
        if text is not None and keep.is_file():
            keep.write_bytes(text)


FORGETS_FILE = Family(**world("folder-forgets-file", ForgetsFile).parts())


def main() -> None:
    """One episode of the built-in agent, and a restore shown exact (contents, modes, deletions)."""
    from cir.episode.harness import Harness

    task = generate("test", 1, 0)[0]
    env = WORLD.make_env(task)
    transcript = Harness(fixer_agent()).episode(env, task.task_id)
    print(transcript.task_text)
    for step in transcript.steps:
        print(f"> {step.action}\n  {step.shown[:100]}")
    print("won" if transcript.won else "lost")
    env.reset()
    before = env.snapshot()
    root = env.handle
    (root / "calc" / "ops.py").write_text("broken\n")
    (root / "scratch.txt").write_text("new\n")
    (root / "NOTES.txt").unlink()
    os.chmod(root / "run.sh", 0o644)
    env.restore(before)  # raises RestoreError if the folder's content is not the snapshot's
    print("restored:", sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()),
          oct(os.stat(root / "run.sh").st_mode & 0o777))
    with tempfile.TemporaryDirectory() as tmp:
        build_project(Path(tmp), task.task_type)
        print("the project's tests in a copy of the initial folder:",
              "pass" if tests_pass(Path(tmp), task, "") else "fail (the bug is still there)")


if __name__ == "__main__":
    main()
