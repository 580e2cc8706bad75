"""Your code's errors are yours: a family whose methods raise, a module that raises, has a syntax
error or exits at import, bad files given as inputs, an interrupted run: each ends the command with
one line (and the user's own frames), never a traceback of cir's, never exit 0, and a folder that
resumes. Faults are triggered by content (a task, a step), never by timing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cir.cli import main

ROOT = Path(__file__).resolve().parents[2]
KEYDOOR = ROOT / "tests" / "support" / "keydoor.py"
GRID = ["--conditions", "clean,stale1", "--delays", "0,1", "--operations", "refresh", "--quiet"]
RESTORE = "    def restore(self, snapshot: tuple[int, int, bool, bool]) -> None:\n        self.state = snapshot\n"


def _variant(folder: Path, name: str, old: str, new: str) -> str:
    """A copy of the key-and-door family with one edit (a user's family file); its FILE.py:FAMILY."""
    source = KEYDOOR.read_text()
    assert old in source, old
    (folder / f"{name}.py").write_text(source.replace(old, new, 1))
    return f"{folder / name}.py:FAMILY"


#: ``python -m cir`` with Ctrl-C's handler in place whatever the test runner's shell did: a job a
#: non-interactive shell starts in the background inherits SIGINT ignored, and Python then keeps it
#: ignored, so a SIGINT sent to that cir would do nothing (a user's terminal never starts it so)
_SIGINT_DEFAULT = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                   "sys.argv[0] = 'cir'; runpy.run_module('cir', run_name='__main__', alter_sys=True)")


def _cir(*argv: object, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SIGINT_DEFAULT, *map(str, argv)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600, env={**os.environ, **(env or {})})


def _error_lines(err: str) -> list[str]:
    return [line for line in err.strip().splitlines() if not line.startswith("cir: deprecated:")]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("kd")
    assert main(["tasks", "generate", "--family", f"{KEYDOOR}:FAMILY", "--split", "test", "--n", "4", "--out",
                 str(folder), "--quiet"]) == 0
    return folder / "test"


@pytest.fixture(scope="module")
def pristine(tasks, tmp_path_factory) -> bytes:
    out = tmp_path_factory.mktemp("pristine") / "run"
    assert main(["run", "--family", f"{KEYDOOR}:FAMILY", "--tasks", str(tasks), "--out", str(out), "--jobs", "1",
                 *GRID]) == 0
    return (out / "paired.csv").read_bytes()


# -- a family's method raises --------------------------------------------------------------------
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_restore_that_raises_is_one_line_and_the_users_frames_at_any_jobs(tasks, tmp_path, jobs) -> None:
    spec = _variant(tmp_path, "kd_restore", RESTORE, RESTORE.replace(
        "        self.state", "        if snapshot[1] >= 3:\n            raise ValueError(f'no restore past move {snapshot[1]}')"
        "\n        self.state"))
    done = _cir("run", "--family", spec, "--tasks", tasks, "--out", tmp_path / "run", "--jobs", jobs, *GRID)
    lines = _error_lines(done.stderr)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "_RemoteTraceback" not in done.stderr
    assert lines[0].startswith("cir: error: KeyDoorEnv.restore raised ValueError: no restore past move ")
    assert lines[0].endswith(")") and "(task keydoor-test-" in lines[0] and ", step " in lines[0]
    assert f'File "{tmp_path / "kd_restore.py"}"' in lines[1] and "raise ValueError" in lines[2]
    assert not any("/cir/" in line for line in lines[1:])  # cir's frames only behind --traceback
    full = _cir("run", "--family", spec, "--tasks", tasks, "--out", tmp_path / "run2", "--jobs", jobs, *GRID,
                "--traceback")
    assert full.returncode == 2 and "Traceback" in full.stderr and "/cir/pairs/replay.py" in full.stderr


def test_a_snapshot_that_raises_in_check_env_names_the_task_and_step(tmp_path, capsys) -> None:
    spec = _variant(tmp_path, "kd_snapshot", "    def snapshot(self) -> tuple[int, int, bool, bool]:\n",
                    "    def snapshot(self) -> tuple[int, int, bool, bool]:\n"
                    "        if self.state[1] == 2:\n            raise KeyError('state')\n")
    assert main(["check-env", "--family", spec]) == 2
    lines = _error_lines(capsys.readouterr().err)
    assert lines[0] == "cir: error: KeyDoorEnv.snapshot raised KeyError: 'state' (task keydoor-train-000, step 3)"
    assert "raise KeyError('state')" in lines[2]


def test_a_run_stopped_by_the_users_error_resumes_once_it_is_fixed(tasks, pristine, tmp_path) -> None:
    """The error comes at the third task (by content); the tasks before it are kept, the same
    command after the fix runs the rest, and the table is the uninterrupted run's."""
    spec = _variant(tmp_path, "kd_late", RESTORE, RESTORE.replace(
        "        self.state", "        if self.task.task_id == 'keydoor-test-002' and os.environ.get('KD_BREAK'):\n"
        "            raise RuntimeError('broken for this task')\n        self.state"))
    first = _cir("run", "--family", spec, "--tasks", tasks, "--out", tmp_path / "run", "--jobs", "1", *GRID,
                 env={"KD_BREAK": "1"})
    assert first.returncode == 2
    assert _error_lines(first.stderr)[0].startswith("cir: error: KeyDoorEnv.restore raised RuntimeError: broken "
                                                    "for this task (task keydoor-test-002, step ")
    kept = json.loads((tmp_path / "run" / "run.json").read_text())
    assert kept["counts"]["tasks_done"] == 2 and not kept["complete"]
    again = _cir("run", "--family", spec, "--tasks", tasks, "--out", tmp_path / "run", "--jobs", "2", *GRID)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "run" / "paired.csv").read_bytes() == pristine


# -- a module that raises, has a syntax error or exits at import ---------------------------------------
@pytest.mark.parametrize(("name", "edit", "said"), [
    ("exits0", "import sys\nsys.exit(0)\n", "raised SystemExit: sys.exit(0) was called"),
    ("exits3", "import sys\nsys.exit(3)\n", "raised SystemExit: sys.exit(3) was called"),
    ("raises", "raise RuntimeError('broken at import')\n", "raised RuntimeError: broken at import"),
    ("syntax", "def broken(:\n    pass\n", "raised SyntaxError: invalid syntax (line "),
])
@pytest.mark.parametrize("command", ["run", "check-env", "tasks generate"])
def test_a_family_module_that_fails_at_import_is_an_error_never_exit_0(tasks, tmp_path, name, edit, said,
                                                                        command) -> None:
    spec = _variant(tmp_path, f"kd_{name}", "from cir import ", edit + "from cir import ")
    argv = {"run": ["run", "--family", spec, "--tasks", tasks, "--out", tmp_path / "run", *GRID],
            "check-env": ["check-env", "--family", spec],
            "tasks generate": ["tasks", "generate", "--family", spec, "--split", "test", "--n", "2", "--out",
                               tmp_path / "t"]}[command]
    done = _cir(*argv)
    lines = _error_lines(done.stderr)
    assert done.returncode == 2 and "Traceback" not in done.stderr and not done.stdout
    assert lines[0].startswith(f"cir: error: family '{spec}': importing {tmp_path / f'kd_{name}.py'} {said}"), lines[0]
    assert f"kd_{name}.py" in lines[1]


# -- inputs that are not regular files, records of the wrong type ----------------------------------
@pytest.fixture
def run_copy(tasks, pristine, tmp_path) -> Path:
    out = tmp_path / "run"
    assert main(["run", "--family", f"{KEYDOOR}:FAMILY", "--tasks", str(tasks), "--out", str(out), "--jobs", "1",
                 *GRID]) == 0
    return out


@pytest.mark.parametrize("name", ["paired.csv", "run.json"])
def test_a_fifo_in_a_run_folder_is_refused_before_it_is_read(run_copy, name) -> None:
    (run_copy / name).unlink()
    os.mkfifo(run_copy / name)
    done = _cir("table", run_copy)  # a read of a FIFO with no writer would wait forever
    assert done.returncode == 2 and _error_lines(done.stderr) == [
        f"cir: error: {run_copy / name}: is a FIFO (named pipe); expected a "
        f"{'paired table' if name == 'paired.csv' else 'run record'} in a regular file"]


def test_a_fifo_or_a_device_as_a_router_or_a_table_is_refused(run_copy, tmp_path, capsys) -> None:
    os.mkfifo(tmp_path / "router.json")
    for argv, said in ((["evaluate", tmp_path / "router.json", run_copy], "router file"),
                       (["table", "/dev/zero"], "paired table"), (["evaluate", "/dev/zero", run_copy], "router file")):
        assert main([str(a) for a in argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith(f"expected a {said} in a regular file") and "\n" not in err


@pytest.mark.parametrize(("edit", "said"), [
    (lambda r: r["costs"].update(agent_calls="many"), "field 'costs.agent_calls' holds \"many\", expected an integer"),
    (lambda r: r["counts"].update(pairs=1.5), "field 'counts.pairs' holds 1.5, expected an integer"),
    (lambda r: r.update(complete="yes"), "field 'complete' holds \"yes\", expected true or false"),
    (lambda r: r["settings"].update(seed=None), "field 'settings.seed' holds null, expected an integer"),
])
def test_a_run_record_field_of_the_wrong_type_is_named(run_copy, capsys, edit, said) -> None:
    record = json.loads((run_copy / "run.json").read_text())
    edit(record)
    (run_copy / "run.json").write_text(json.dumps(record))
    assert main(["table", str(run_copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"cir: error: {run_copy / 'run.json'}: {said}") and "\n" not in err


# -- interrupted: one line, a folder that resumes ----------------------------------------------------
@pytest.mark.parametrize(("signal_name", "code", "said"), [("SIGTERM", 143, "terminated (SIGTERM)"),
                                                            ("SIGINT", 130, "interrupted")])
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_ended_by_a_signal_says_so_in_one_line_and_resumes(tasks, pristine, tmp_path, signal_name, code, said,
                                                                 jobs) -> None:
    """The signal is sent by the env itself when the third task starts (content, not time): to
    this process at --jobs 1, to the parent from a worker at --jobs 2."""
    spec = _variant(tmp_path, "kd_signal", "    def reset(self) -> str:\n",
                    "    def reset(self) -> str:\n"
                    "        if self.task.task_id == 'keydoor-test-002' and os.environ.get('KD_SIGNAL'):\n"
                    "            import signal\n"
                    "            target = os.getpid() if os.environ['KD_JOBS'] == '1' else os.getppid()\n"
                    f"            os.kill(target, signal.{signal_name})\n"
                    "            time.sleep(30)  # the signal ends the run long before\n")
    argv = ["run", "--family", spec, "--tasks", tasks, "--out", tmp_path / "run", "--jobs", jobs, *GRID]
    first = _cir(*argv, env={"KD_SIGNAL": "1", "KD_JOBS": str(jobs)})
    lines = _error_lines(first.stderr)
    assert first.returncode == code and "Traceback" not in first.stderr and "Exception ignored" not in first.stderr
    assert lines == [f"cir: {said}; finished work is saved, run the same command again to resume"], lines
    again = _cir(*argv)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "run" / "paired.csv").read_bytes() == pristine


def test_a_resume_with_another_agent_setting_names_the_setting(tmp_path) -> None:
    from support.keydoor import FAMILY, KeyDoorAgent, generate_tasks

    from cir.pairs.run import run_experiment
    from cir.pairs.settings import ReplaySettings, RunSettings
    from cir.util.errors import CirError

    class Warm(KeyDoorAgent):
        def __init__(self, temperature: float) -> None:
            self.temperature = temperature

        def params(self):
            return {"version": 1, "temperature": self.temperature}

    generate_tasks(tmp_path, "test", 2, 0)
    tasks = FAMILY.load_tasks(tmp_path / "test")

    def run(temperature: float) -> None:
        settings = RunSettings(family="tests.support.keydoor:FAMILY", jobs=1, agent_factory=_Factory(temperature),
                               replay=ReplaySettings(conditions=("clean",), delays=(0,)))
        run_experiment(tasks, tmp_path / "run", settings, progress=False, echo=lambda _: None)

    class _Factory:
        def __init__(self, temperature: float) -> None:
            self.temperature = temperature

        def __call__(self, spec: str, seed: int = 0) -> Warm:
            return Warm(self.temperature)

    run(0.5)
    with pytest.raises(CirError, match=r"was written with the agent's temperature=0\.5, this command has "
                                       r"temperature=0\.7; rerun with the same settings"):
        run(0.7)
    shutil.rmtree(tmp_path / "run")


def test_ctrl_c_once_the_command_is_done_says_nothing(tmp_path) -> None:
    """A SIGINT while Python waits for its threads at exit (sent by a thread of the family module
    once the main thread is done: the moment just after the last task is stored) printed
    ``Exception ignored in: <module 'threading'>``; the command is done, so nothing is said."""
    spec = _variant(tmp_path, "kd_exit_interrupt", "from cir import ",
                    "import signal as _signal\nimport threading as _threading\n\n\n"
                    "def _interrupt_at_exit():\n"
                    "    while _threading.main_thread().is_alive():\n"
                    "        time.sleep(0.01)\n"
                    "    os.kill(os.getpid(), _signal.SIGINT)\n"
                    "    time.sleep(0.5)\n\n\n"
                    "_threading.Thread(target=_interrupt_at_exit).start()\n"
                    "from cir import ")
    done = _cir("tasks", "generate", "--family", spec, "--split", "test", "--n", "2", "--out", tmp_path / "t")
    assert done.returncode == 0 and done.stderr == "", done.stderr
