"""cir check-env shows where it is on a terminal (a deep check of ALFWorld's three tasks is half a
minute of silence otherwise), and nothing with --quiet or off a terminal; the checks are those of
one call on all the tasks (each task's walks are seeded by its own name)."""

from __future__ import annotations

import pytest

from cir.cli import main


@pytest.fixture()
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cir.util.progress.is_terminal", lambda stream: True)


def test_check_env_draws_a_line_per_task_on_a_terminal(terminal, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-env", "--family", "examples.counter:FAMILY", "--n", "3"]) == 0
    out = capsys.readouterr()
    assert "check-env: generating 3 task(s)" in out.err
    assert "walking the tasks 3/3" in out.err
    assert "family 'counter': check_env: 3 tasks" in out.out


def test_quiet_draws_nothing_and_the_checks_are_the_same(terminal, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-env", "--family", "examples.counter:FAMILY", "--n", "3", "--quiet"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == ""
    assert main(["check-env", "--family", "examples.counter:FAMILY", "--n", "3"]) == 0
    assert capsys.readouterr().out == quiet.out


def test_one_call_on_all_tasks_checks_what_the_command_checks(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    from cir.families.registry import get_family

    family = get_family("examples.counter:FAMILY")
    family.generate(Path(tmp_path), family.splits[0], 3, 0, progress=False)
    tasks = family.load_tasks(Path(tmp_path) / family.splits[0])
    whole = family.check(tasks)
    assert main(["check-env", "--family", "examples.counter:FAMILY", "--tasks", str(tmp_path / family.splits[0]),
                 "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == f"family 'counter': {whole.summary()}"
