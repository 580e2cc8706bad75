"""The conformance suite of an environment family: what every family must do before a study
relies on it, checked the way scikit-learn's ``check_estimator`` or gymnasium's ``check_env``
checks theirs. It runs over every built-in family in this repository's tests, and a user runs
it over their own from pytest (``docs/own-environment.md``)::

    import pytest
    from cir.testing import family_checks

    @pytest.mark.parametrize("check", family_checks("mypackage.family:FAMILY"), ids=str)
    def test_my_family(check, tmp_path):
        check(tmp_path)

The checks, each a :class:`FamilyCheck` (a name and a function of a scratch folder):

- ``contract``: every part of the contract (``cir.families.family.check_family``), and the
  family found again by its spec (the run's worker processes find it by name, never pickled);
- ``tasks``: ``generate_tasks`` writes tasks that ``load_tasks`` reads back, sorted by unique
  ids, each of a declared split; the same call again leaves every file as it was;
- ``check_env``: :func:`cir.envs.check.check_env` on them (restores, resets, the refresh query);
- ``reset``: two new envs of a task, reset, show the same first observation;
- ``extractor``: the features of an episode under a ``stale1`` perturbation are exactly the
  extractor's, finite, and the same when every true observation, event and trace entry is
  replaced: the extractor reads only what the agent was shown;
- ``prompt``: the family's parser reads every command of its own worked examples as that
  command, and every ``think:`` line as a thought;
- ``run``: a tiny ``cir run`` (three tasks, the built-in agent, a small grid) and ``cir table``
  on it, as separate processes, as a user runs them.

A failed check raises :class:`ConformanceError` naming the family, the check and what differed.
The checks share one generated task folder per family and scratch folder.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cir.episode.extractor import extract
from cir.episode.harness import Harness
from cir.episode.perturb import Perturbation, parse_condition
from cir.episode.protocol import THINK_PREFIX
from cir.episode.transcript import Transcript
from cir.families.family import Family, check_family
from cir.families.registry import BUILTIN, get_family, make_agent
from cir.util.errors import CirError

#: tasks each check generates (one split, the family's first) and walks
N_TASKS = 3
#: the tiny run's grid
RUN_GRID = ("--conditions", "clean,stale1,missing", "--delays", "0,1", "--operations", "refresh")


class ConformanceError(CirError):
    """A family that fails a conformance check: the message names the family, the check and what differed."""


@dataclass(frozen=True)
class FamilyCheck:
    """One check of one family; call it with a scratch folder (pytest's ``tmp_path``)."""

    family: str
    name: str
    run: Callable[[Family, str, Path], None]

    def __call__(self, folder: str | Path) -> None:
        family = get_family(self.family)
        try:
            self.run(family, self.family, Path(folder))
        except ConformanceError:
            raise
        except CirError as err:
            raise ConformanceError(f"family {family.name!r}, check {self.name}: {err}") from None

    def __str__(self) -> str:
        return f"{get_family(self.family).name}-{self.name}"


def _fail(family: Family, check: str, what: str) -> ConformanceError:
    return ConformanceError(f"family {family.name!r}, check {check}: {what}")


def _tasks(family: Family, folder: Path) -> list[Any]:
    """The family's generated tasks in ``folder`` (made once: the checks share them)."""
    split = family.splits[0]
    if not (folder / "tasks" / split).exists():
        if family.generate_tasks is None:
            raise _fail(family, "tasks", "the family cannot generate tasks (no generate_tasks), so the suite "
                                         "has none to check; give it generate_tasks")
        family.generate(folder / "tasks", split, N_TASKS, 0, progress=False)
    return list(family.load_tasks(folder / "tasks" / split))[:N_TASKS]


def check_contract(family: Family, spec: str, folder: Path) -> None:
    check_family(family)
    if get_family(spec) is not family:
        raise _fail(family, "contract", f"{spec!r} resolves to another object on a second lookup")
    if spec in BUILTIN or ":" in spec:
        return
    raise _fail(family, "contract", f"{spec!r} is not a spec a worker process can resolve (NAME or MODULE:ATTR)")


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def check_tasks(family: Family, spec: str, folder: Path) -> None:
    tasks = _tasks(family, folder)
    if not tasks:
        raise _fail(family, "tasks", f"generate_tasks wrote nothing load_tasks reads in {folder / 'tasks'}")
    ids = [str(t.task_id) for t in family.load_tasks(folder / "tasks" / family.splits[0])]
    if ids != sorted(ids) or len(set(ids)) != len(ids):
        raise _fail(family, "tasks", f"load_tasks must give unique task ids sorted by id, got {ids[:6]}")
    bad = [t.task_id for t in tasks if getattr(t, "split", family.splits[0]) not in family.splits]
    if bad:
        raise _fail(family, "tasks", f"task {bad[0]!r} is of split {getattr(tasks[0], 'split', None)!r}, not one "
                                     f"of {', '.join(family.splits)}")
    before = _files(folder / "tasks")
    family.generate(folder / "tasks", family.splits[0], N_TASKS, 0, progress=False)
    if _files(folder / "tasks") != before:
        raise _fail(family, "tasks", "generating the same tasks again changed the folder; the same call must "
                                     "leave the tasks as they are")


def check_restores(family: Family, spec: str, folder: Path) -> None:
    report = family.check(_tasks(family, folder), steps=12, seed=0)
    if not report.ok:
        raise _fail(family, "check_env", f"{report.summary()}; first: {report.failures[0]}")


def check_reset(family: Family, spec: str, folder: Path) -> None:
    for task in _tasks(family, folder):
        first, second = family.env(task).reset(), family.env(task).reset()
        if first != second:
            raise _fail(family, "reset", f"task {task.task_id}: two new envs reset to {first!r:.80} and "
                                         f"{second!r:.80}; a reset must be deterministic")


def _agent(family: Family, env: Any) -> Any:
    """The family's built-in agent, or (without one) a walker of its walk actions."""
    if family.builtin_agent is not None:
        return make_agent("builtin", family=family, seed=0)
    return _Walker(family, env)


class _Walker:
    """An agent for families without a built-in one: the first walk action of the shown text."""

    name = "conformance-walker"

    def __init__(self, family: Family, env: Any) -> None:
        self.family, self.env = family, env

    def params(self) -> dict[str, Any]:
        return {"agent": self.name}

    def act(self, context: list[dict[str, str]]) -> str:
        actions = (self.family.walk_actions(self.env, context[-1]["content"]) if self.family.walk_actions
                   else self.env.admissible_commands())
        return str(list(actions)[len(context) % len(actions)])


def _blind(transcript: Transcript) -> Transcript:
    """The transcript with everything the agent was not shown replaced."""
    steps = [dataclasses.replace(s, observation=None if s.observation is None else "(true text withheld)",
                                 events=["(event withheld)"]) for s in transcript.steps]
    return dataclasses.replace(transcript, steps=steps, trace=[])


def check_extractor_reads_shown_text(family: Family, spec: str, folder: Path) -> None:
    extractor, budgets = family.extractor, {"max_turns": 30, "max_actions": 30}
    checked = 0
    for task in _tasks(family, folder):
        env = family.env(task)
        harness = Harness(_agent(family, env), **budgets)
        transcript = harness.episode(env, str(task.task_id), perturbation=Perturbation(parse_condition("stale1"), 2))
        for d in range(0, 3):
            j = 2 + d
            if transcript.env_actions < j:
                break
            prefix = transcript.prefix(transcript.steps_until_env_action(j))
            seen = extract(extractor, prefix, d, **budgets)  # its features, in order, finite
            if extract(extractor, _blind(prefix), d, **budgets) != seen:
                raise _fail(family, "extractor", f"task {task.task_id}, delay {d}: extractor {extractor.name!r} "
                                                 "gives other features when the true observations, events or trace "
                                                 "change; it may read only the shown text")
            checked += 1
    if not checked:
        raise _fail(family, "extractor", "no episode reached two env actions; nothing was checked")


def check_prompt_parses_its_examples(family: Family, spec: str, folder: Path) -> None:
    tasks = _tasks(family, folder)
    task_text = family.env(tasks[0]).reset()
    lines = [line[2:] for example in family.prompt.examples_for(task_text) for line in example.splitlines()
             if line.startswith("> ")]
    if not lines:
        return  # a prompt without worked examples has nothing to parse
    for line in lines:
        parsed = family.prompt.parse(line)
        thought = line.startswith(THINK_PREFIX)
        if not parsed.ok or (not parsed.action.startswith(THINK_PREFIX) if thought else parsed.action != line):
            raise _fail(family, "prompt", f"its parser reads its own example's {line!r} as {parsed.action!r} "
                                          f"(ok={parsed.ok}); an example must show commands the parser keeps")


def _cir(args: list[str]) -> str:
    run = subprocess.run([sys.executable, "-m", "cir", *args], cwd=os.getcwd(), capture_output=True, text=True)
    if run.returncode != 0:
        raise CirError(f"`cir {' '.join(args[:2])}` exited {run.returncode}: {run.stderr.strip()[-400:]}")
    return run.stdout


def check_tiny_run(family: Family, spec: str, folder: Path) -> None:
    if family.builtin_agent is None:
        raise _fail(family, "run", "the family has no built-in agent, so a run needs an LLM; give it "
                                   "builtin_agent or run this check with a server")
    _tasks(family, folder)
    out = folder / "run"
    _cir(["run", "--family", spec, "--tasks", str(folder / "tasks" / family.splits[0]), "--out", str(out), *RUN_GRID,
          "--max-turns", "30", "--max-actions", "30", "--jobs", "1", "--quiet"])
    table = _cir(["table", str(out), "--format", "csv"])
    if "condition" not in table.splitlines()[0]:
        raise _fail(family, "run", f"`cir table` printed no table: {table[:200]!r}")


#: every check, in the order it runs
CHECKS: tuple[tuple[str, Callable[[Family, str, Path], None]], ...] = (
    ("contract", check_contract),
    ("tasks", check_tasks),
    ("check_env", check_restores),
    ("reset", check_reset),
    ("extractor", check_extractor_reads_shown_text),
    ("prompt", check_prompt_parses_its_examples),
    ("run", check_tiny_run),
)


def family_checks(spec: str) -> list[FamilyCheck]:
    """The checks of the family ``spec`` names (``NAME`` or ``MODULE:ATTR``), for pytest's
    ``parametrize`` (``ids=str``)."""
    get_family(spec)  # a spec that names no family: one CirError now, not one per check
    return [FamilyCheck(spec, name, run) for name, run in CHECKS]


def check_family_conformance(spec: str, folder: str | Path) -> list[str]:
    """Every check of the family ``spec`` names, in ``folder``; the names of those passed (a
    :class:`ConformanceError` at the first failure)."""
    passed = []
    for check in family_checks(spec):
        check(folder)
        passed.append(check.name)
    return passed
