"""A careless user against the command line: every class of bad input, counted by what cir did.

Each case runs ``cir`` as a user would (a subprocess of this venv's ``cir``) on a prepared
folder: bad flags and values, missing, corrupt and foreign files, cut and damaged stores,
edited ``run.json`` and ``paired.csv``, kills during a run (of the ``cir`` process and of one
worker), Ctrl-C, a full disk (a small tmpfs, when this process may mount one) and wrong
folders. What happened is put in one of four classes:

- ``clear error``: exit code 2 (130 for Ctrl-C), no traceback, no library warning, and the
  last line on stderr is one error line (``cir: error: ...``, or argparse's ``... error: ...``
  for a malformed command line; ``cir: interrupted; ...`` for Ctrl-C);
- ``healed``: exit code 0 and the result the user wanted: the table of the pristine run (the
  same text a pristine folder gives), or, after a resume, the pristine ``paired.csv``, or a
  partial result that says it is partial;
- ``silently wrong``: exit code 0 and anything else (must be 0);
- ``traceback``: a Python traceback (``Exception ignored``, ``Exception in thread`` too), or a
  library warning before the error (must be 0);
- ``hang``: still running after its time (a read of a FIFO; must be 0);
- ``unclear``: another exit code or a signal's, with no line that says what happened, or an
  error line that does not name what it must (the setting that differs, the user's method).

An error of the user's own code (issue 44's family whose ``restore`` raises) is clear when its
error line names the method (``... raised ...``), followed by the user's frames only. Issue 44's
cases (``--only "issue 44"``): outputs pointed into a run folder, a resume after a task's file
was replaced, modules that exit or raise at import, a family's methods that raise (at ``--jobs 1``
and 2, in ``check-env``, on resume), ``check-env`` of a family whose restore forgets the moves
beyond the third, a wrong type in ``run.json``, ``/dev/zero`` and FIFOs as inputs, Ctrl-C just
after the last task is stored, SIGTERM, a killed queues' manager, a resume with another ``--seed``
or ``--temperature``, store members not the run's own. ``--cir 'python -m cir'`` with
``PYTHONPATH`` at an earlier checkout says what that one did.

Reads must never write: every analysis case also checks that the folder's files are
unchanged, and a change counts as silently wrong. Prints one line per case and the table
of counts; exits 1 if any case is silently wrong, a traceback, a hang or unclear.

    python benchmarks/hostile_inputs.py [--work DIR] [--kills N] [--only GROUPS] [--cir COMMAND]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CIR = [str(Path(sys.executable).with_name("cir"))]  # --cir replaces it (e.g. an earlier checkout's)
GRID = ["--conditions", "clean,stale2", "--delays", "0,1", "--operations", "refresh,replan", "--quiet"]
CLASSES = ("clear error", "healed", "silently wrong", "traceback", "hang", "unclear")
HANG = -1000  # the return code of a command that did not end within its time


@dataclass
class Case:
    """One hostile input: what the user typed, in what folder state, and what counts as right."""

    group: str
    name: str
    argv: list[str]
    prepare: Callable[[Path], None] = lambda folder: None
    expect: str = "table"  # table: stdout is the pristine table's; resume: paired.csv is pristine; any: only errors
    partial_ok: bool = False  # an allowed-partial read may differ, if it says so
    signal_after: float | None = None  # send SIGKILL (or sig) to cir this many seconds in, then resume
    sig: int = signal.SIGKILL
    extra: dict = field(default_factory=dict)


def cir(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """``cir ARGV`` as a user runs it; a command still running after ``timeout`` s is ended and
    returned with :data:`HANG`."""
    try:
        return subprocess.run([*CIR, *map(str, argv)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        said = err.stderr.decode() if isinstance(err.stderr, bytes) else (err.stderr or "")
        return subprocess.CompletedProcess(argv, HANG, out, said + f"\n(still running after {timeout:.0f} s)")


def files(folder: Path) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _said_lines(err: str) -> list[str]:
    """stderr without the deprecation lines of former names (each is one line of its own) and
    without the user's own frames that follow a user code's error line."""
    lines = [line for line in err.strip().splitlines() if line.strip() and not line.startswith("cir: deprecated:")]
    if any(line.startswith("cir: error: ") and " raised " in line for line in lines):
        lines = [line for line in lines if not line.startswith("  ")]  # the user's frames, indented
    return lines


def classify(proc: subprocess.CompletedProcess, right: bool, interrupted: bool = False, must_say: str = "") -> str:
    """The class of what a command did (module docstring); ``must_say``: text the error line must
    hold to be clear (the setting that differs, say)."""
    err = proc.stderr
    if proc.returncode == HANG:
        return "hang"
    if any(word in err for word in ("Traceback", "Warning:", "Exception ignored", "Exception in thread")):
        return "traceback"
    if proc.returncode == 0:
        return "healed" if right else "silently wrong"
    if proc.returncode in (2, 130, 143):
        lines = _said_lines(err)
        last = lines[-1] if lines else ""
        ok = last.startswith("cir: error: ") or " error: " in last or (
            interrupted and last.startswith(("cir: interrupted", "cir: terminated")))
        if ok and must_say and must_say not in last:
            return "unclear"
        return "clear error" if ok else "unclear"
    return "unclear" if "Traceback" not in err and proc.returncode < 0 or not _said_lines(err) else "traceback"


# -- folder states -----------------------------------------------------------------------------
class Lab:
    """The pristine run folder, its reference outputs, and copies of it to damage."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.tasks = work / "tasks" / "valid_unseen"
        self.pristine = work / "pristine"
        self.n = 0

    def setup(self, reuse: bool = False) -> None:
        if reuse and (self.pristine / "run.json").exists() and (self.work / "other-seed" / "run.json").exists():
            self._references()  # a --work folder of an earlier call: its runs are reused
            return
        gen = cir(["tasks", "generate", "--split", "valid_unseen", "--n", "4", "--seed", "3",
                   "--out", str(self.work / "tasks"), "--family-option", "max_plan_length=9", "--quiet"])
        assert gen.returncode == 0, gen.stderr
        done = cir(["run", "--tasks", str(self.tasks), "--out", str(self.pristine), "--jobs", "2", *GRID])
        assert done.returncode == 0, done.stderr
        other = cir(["run", "--tasks", str(self.tasks), "--out", str(self.work / "other-seed"), "--seed", "1",
                     "--jobs", "2", *GRID])
        assert other.returncode == 0, other.stderr
        self._references()

    def _references(self) -> None:
        self.paired = (self.pristine / "paired.csv").read_bytes()
        self.table = cir(["table", str(self.pristine), "--resamples", "200"]).stdout
        self.explain = cir(["explain", str(self.pristine)]).stdout

    def copy(self) -> Path:
        self.n += 1
        folder = self.work / f"case{self.n:03d}"
        shutil.rmtree(folder, ignore_errors=True)  # a --work folder of an earlier call
        shutil.copytree(self.pristine, folder)
        return folder

    def run_argv(self, out: Path, *more: str) -> list[str]:
        return ["run", "--tasks", str(self.tasks), "--out", str(out), "--jobs", "2", *GRID, *more]

    def member(self, folder: Path, index: int) -> tuple[int, int]:
        from cir.pairs.store import scan_store

        m = scan_store(folder / "episodes.jsonl.gz").members[index]
        return m.start, m.end


# -- the cases ----------------------------------------------------------------------------------
def _edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _flip(lab: Lab, index: int) -> Callable[[Path], None]:
    def prepare(folder: Path) -> None:
        start, end = lab.member(folder, index)
        data = bytearray((folder / "episodes.jsonl.gz").read_bytes())
        data[(start + end) // 2] ^= 0x5A
        (folder / "episodes.jsonl.gz").write_bytes(bytes(data))
    return prepare


def _cut_store(fraction: float) -> Callable[[Path], None]:
    def prepare(folder: Path) -> None:
        data = (folder / "episodes.jsonl.gz").read_bytes()
        (folder / "episodes.jsonl.gz").write_bytes(data[: int(len(data) * fraction)])
    return prepare


def _foreign(lab: Lab, index: int, first: bool) -> Callable[[Path], None]:
    def prepare(folder: Path) -> None:
        other = lab.work / "other-seed"
        start, end = lab.member(other, index)
        theirs = (other / "episodes.jsonl.gz").read_bytes()[start:end]
        ours = (folder / "episodes.jsonl.gz").read_bytes()
        if first:
            (folder / "episodes.jsonl.gz").write_bytes(theirs + ours)
        else:
            s, e = lab.member(folder, index)
            (folder / "episodes.jsonl.gz").write_bytes(ours[:s] + theirs + ours[e:])
        (folder / "paired.csv").unlink()
    return prepare


def bad_values(lab: Lab) -> list[Case]:
    """Bad flags and values: every one refused before any folder is touched."""
    out = lambda: str(lab.work / f"never-{lab.n}")  # noqa: E731
    run = ["run", "--tasks", str(lab.tasks), "--quiet"]
    values = [
        ("--jobs 0", ["--jobs", "0"]), ("--jobs 1000", ["--jobs", "1000"]), ("--jobs x", ["--jobs", "x"]),
        ("--delays 0,-1", ["--delays", "0,-1"]), ("--delays x", ["--delays", "0,x"]),
        ("--delays huge", ["--delays", "99999999999999999999"]), ("--delays empty", ["--delays", ","]),
        ("--delays twice", ["--delays", "1,1"]), ("--conditions stale0", ["--conditions", "stale0"]),
        ("--conditions foo", ["--conditions", "clean,foo"]), ("--operations nap", ["--operations", "nap"]),
        ("--operations twice", ["--operations", "refresh,refresh"]), ("--max-turns 0", ["--max-turns", "0"]),
        ("--max-actions huge", ["--max-actions", "10000000000"]),
        ("--perturb-fraction 1.5", ["--perturb-fraction", "1.5"]), ("--seed -1", ["--seed", "-1"]),
        ("--backend spark", ["--backend", "spark"]), ("--scheduler without dask", ["--scheduler", "tcp://x:1"]),
        ("--limit 0", ["--limit", "0"]), ("--agent nonsense", ["--agent", "nonsense"]),
        ("--agent openai without url", ["--agent", "openai:m"]),
        ("--temperature with builtin", ["--temperature", "0.5"]),
        ("--llm-option without =", ["--llm-option", "top_p"]),
    ]
    cases = [Case("bad flags and values", f"cir run {name}", [*run, "--out", out(), *argv], expect="any")
             for name, argv in values]
    table = ["table", str(lab.pristine)]
    for name, argv in [("--resamples 0", ["--resamples", "0"]), ("--seed -1", ["--seed", "-1"]),
                       ("--by nothing", ["--by", "colour"]), ("--operation nap", ["--operation", "nap"]),
                       ("--columns bogus", ["--columns", "bogus"]), ("--level 2", ["--level", "2"]),
                       ("--format xml", ["--format", "xml"])]:
        cases.append(Case("bad flags and values", f"cir table {name}", [*table, *argv], expect="any"))
    cases += [
        Case("bad flags and values", "cir contrast --a stale2 --b stale2",
             ["contrast", str(lab.pristine), "--a", "stale2", "--b", "stale2"], expect="any"),
        Case("bad flags and values", "cir joint --a nap", ["joint", str(lab.pristine), "--a", "nap"], expect="any"),
        Case("bad flags and values", "cir explain --task only", ["explain", str(lab.pristine), "--task", "x"],
             expect="any"),
        Case("bad flags and values", "cir reproduce --resamples 0", ["reproduce", "--out", out(), "--resamples", "0"],
             expect="any"),
    ]
    return cases


def damaged_folders(lab: Lab) -> list[Case]:
    """Missing, corrupt, foreign, cut, damaged and edited files: every analysis reads the same or refuses,
    and the same `cir run` brings the pristine table back."""
    states: list[tuple[str, str, Callable[[Path], None]]] = [
        ("missing/corrupt/foreign files", "paired.csv deleted", lambda d: (d / "paired.csv").unlink()),
        ("missing/corrupt/foreign files", "run.json deleted", lambda d: (d / "run.json").unlink()),
        ("missing/corrupt/foreign files", "run.json not JSON", lambda d: (d / "run.json").write_text("{half")),
        ("missing/corrupt/foreign files", "run.json without counts",
         lambda d: _edit_json(d / "run.json", lambda r: r.pop("counts"))),
        ("missing/corrupt/foreign files", "store deleted", lambda d: (d / "episodes.jsonl.gz").unlink()),
        ("missing/corrupt/foreign files", "store of the other seed copied in",
         lambda d: shutil.copyfile(lab.work / "other-seed" / "episodes.jsonl.gz", d / "episodes.jsonl.gz")),
        ("missing/corrupt/foreign files", "another run's task put first", _foreign(lab, 1, first=True)),
        ("missing/corrupt/foreign files", "another run's task in place of ours", _foreign(lab, 2, first=False)),
        ("cut and damaged stores", "store cut at 30%", _cut_store(0.3)),
        ("cut and damaged stores", "store cut at 75%", _cut_store(0.75)),
        ("cut and damaged stores", "store cut by one byte", _cut_store(0.9999)),
        ("cut and damaged stores", "same-size flip in task 1", _flip(lab, 1)),
        ("cut and damaged stores", "same-size flip in the last task", _flip(lab, -1)),
        ("cut and damaged stores", "garbage appended",
         lambda d: (d / "episodes.jsonl.gz").write_bytes((d / "episodes.jsonl.gz").read_bytes() + b"\x00junk")),
        ("cut and damaged stores", "a task stored twice", lambda d: _twice(lab, d)),
        ("cut and damaged stores", "a broken JSON line", lambda d: _broken_line(lab, d)),
        ("edited run.json/paired.csv", "paired.csv cut", lambda d: (d / "paired.csv").write_text(
            (d / "paired.csv").read_text()[:400])),
        ("edited run.json/paired.csv", "paired.csv: a y1 flipped", lambda d: _flip_cell(d)),
        ("edited run.json/paired.csv", "paired.csv emptied", lambda d: (d / "paired.csv").write_text("")),
        ("edited run.json/paired.csv", "run.json counts.tasks edited",
         lambda d: _edit_json(d / "run.json", lambda r: r["counts"].update(tasks=r["counts"]["tasks"] + 2))),
        ("edited run.json/paired.csv", "run.json n_tasks and counts edited together", lambda d: _edit_json(
            d / "run.json", lambda r: (r["counts"].update(tasks=9), r["settings"].update(n_tasks=9)))),
        ("edited run.json/paired.csv", "run.json complete=false",
         lambda d: _edit_json(d / "run.json", lambda r: r.update(complete=False))),
        ("edited run.json/paired.csv", "run.json delays edited",
         lambda d: _edit_json(d / "run.json", lambda r: r["settings"].update(delays=[0, 1, 2]))),
    ]
    cases = []
    for group, name, prepare in states:
        cases.append(Case(group, f"{name}: cir table", ["table", "{folder}", "--resamples", "200"], prepare))
        cases.append(Case(group, f"{name}: cir table --allow-partial",
                          ["table", "{folder}", "--resamples", "200", "--allow-partial"], prepare, partial_ok=True))
        cases.append(Case(group, f"{name}: cir explain", ["explain", "{folder}"], prepare, expect="explain"))
        cases.append(Case(group, f"{name}: cir run (resume)", ["{run}"], prepare, expect="resume"))
        cases.append(Case(group, f"{name}: cir repair, then cir run", ["repair", "{folder}"], prepare,
                          expect="repair"))
    return cases


def _twice(lab: Lab, folder: Path) -> None:
    data = (folder / "episodes.jsonl.gz").read_bytes()
    start, end = lab.member(folder, 0)
    (folder / "episodes.jsonl.gz").write_bytes(data + data[start:end])  # what two writers used to leave


def _broken_line(lab: Lab, folder: Path) -> None:
    start, end = lab.member(folder, 1)
    data = (folder / "episodes.jsonl.gz").read_bytes()
    lines = gzip.decompress(data[start:end]).decode().splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]
    member = gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=6, mtime=0)
    (folder / "episodes.jsonl.gz").write_bytes(data[:start] + member + data[end:])


def _flip_cell(folder: Path) -> None:
    lines = (folder / "paired.csv").read_text().splitlines()
    header = lines[0].split(",")
    row = lines[1].split(",")
    i = header.index("y1")
    row[i] = "1" if row[i] == "0" else "0"
    row[header.index("executed")] = "True"
    lines[1] = ",".join(row)
    (folder / "paired.csv").write_text("\n".join(lines) + "\n")


def wrong_folders(lab: Lab) -> list[Case]:
    notes = lab.work / "notes"
    notes.mkdir(exist_ok=True)
    (notes / "todo.txt").write_text("buy milk")
    (lab.work / "a-file").write_text("x")
    return [
        Case("wrong folders", "cir run --out a folder of other files", lab.run_argv(notes), expect="any"),
        Case("wrong folders", "cir run --out a file", lab.run_argv(lab.work / "a-file"), expect="any"),
        Case("wrong folders", "cir run --tasks a missing folder",
             ["run", "--tasks", str(lab.work / "nope"), "--out", str(lab.work / "never"), *GRID], expect="any"),
        Case("wrong folders", "cir run --tasks a folder without tasks",
             ["run", "--tasks", str(notes), "--out", str(lab.work / "never2"), *GRID], expect="any"),
        Case("wrong folders", "cir run other settings into a run folder",
             ["run", "--tasks", str(lab.tasks), "--out", "{folder}", "--conditions", "clean", "--quiet"],
             expect="any"),
        Case("wrong folders", "cir run --extend itself", [*lab.run_argv(Path("{folder}")), "--extend", "{folder}"],
             expect="any"),
        Case("wrong folders", "cir table the tasks folder", ["table", str(lab.tasks)], expect="any"),
        Case("wrong folders", "cir table a missing path", ["table", str(lab.work / "nope")], expect="any"),
        Case("wrong folders", "cir table a text file", ["table", str(notes / "todo.txt")], expect="any"),
        Case("wrong folders", "cir explain a folder of other files", ["explain", str(notes)], expect="any"),
        Case("wrong folders", "cir repair a folder of other files", ["repair", str(notes)], expect="any"),
        Case("wrong folders", "cir table a sound run folder", ["table", "{folder}", "--resamples", "200"]),
        Case("wrong folders", "cir repair a sound run folder", ["repair", "{folder}"], expect="repair"),
    ]


def kills(lab: Lab, n: int) -> list[Case]:
    rng = random.Random(0)
    cases = [Case("kills during a run", f"kill -9 of cir at {t:.1f} s, then the same command",
                  ["{fresh_run}"], expect="resume", signal_after=t)
             for t in sorted(rng.uniform(1.5, 9.0) for _ in range(n))]
    cases.append(Case("kills during a run", "Ctrl-C at 3 s, then the same command", ["{fresh_run}"],
                      expect="resume", signal_after=3.0, sig=signal.SIGINT))
    cases.append(Case("kills during a run", "kill -9 of one worker, then the same command", ["{fresh_run}"],
                      expect="resume", extra={"kill_worker": True}))
    return cases


# -- running a case -----------------------------------------------------------------------------
def run_case(lab: Lab, case: Case) -> tuple[str, str]:
    """(class, what happened) of one case."""
    if case.group in ("bad flags and values",) or (case.expect == "any" and "{folder}" not in case.argv
                                                    and not any("{folder}" in a for a in case.argv)):
        proc = cir(case.argv)
        return classify(proc, right=False), _said(proc)
    folder = lab.copy()
    if any("fresh" in a for a in case.argv):
        shutil.rmtree(folder)
        return _interrupted(lab, case, folder)
    case.prepare(folder)
    argv = [a.replace("{folder}", str(folder)) for a in case.argv]
    if argv == ["{run}"]:
        argv = lab.run_argv(folder)
    before = files(folder)
    proc = cir(argv)
    if case.expect in ("resume", "repair"):
        return _healed_by_writer(lab, case, folder, proc)
    right = _read_right(lab, case, proc) and files(folder) == before  # a read never writes
    return classify(proc, right), _said(proc)


def _read_right(lab: Lab, case: Case, proc: subprocess.CompletedProcess) -> bool:
    if case.expect == "explain":
        return proc.stdout == lab.explain
    if case.expect == "any":
        return False
    if case.partial_ok and "partial_run=" in proc.stdout:
        return True
    return proc.stdout == lab.table


def _healed_by_writer(lab: Lab, case: Case, folder: Path, proc: subprocess.CompletedProcess) -> tuple[str, str]:
    """A writer (cir run, cir repair) either refuses clearly or, with the same cir run after it,
    gives the pristine table."""
    if proc.returncode != 0 or case.expect == "repair":
        then = cir(lab.run_argv(folder))
        if proc.returncode != 0:
            return classify(proc, right=False), _said(proc)
        right = then.returncode == 0 and (folder / "paired.csv").read_bytes() == lab.paired
        return classify(proc, right), _said(proc) + " / then cir run: " + _said(then)
    return classify(proc, (folder / "paired.csv").read_bytes() == lab.paired), _said(proc)


def _interrupted(lab: Lab, case: Case, folder: Path) -> tuple[str, str]:
    """A run interrupted (kill -9 of cir or of a worker, Ctrl-C), then the same command: the
    interruption says so in one line (a kill -9 of cir cannot), and the resume is pristine.

    The run gets a session of its own, as a command typed in a terminal has: Ctrl-C is a
    SIGINT to its whole process group, and whatever of it outlives the case is ended."""
    argv = lab.run_argv(folder)
    proc = subprocess.Popen([*CIR, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    try:
        if case.extra.get("kill_worker"):
            worker = _a_worker(proc.pid, deadline=time.monotonic() + 60)
            time.sleep(1.0)
            if worker is not None:
                os.kill(worker, signal.SIGKILL)
        else:
            time.sleep(case.signal_after or 0)
            if proc.poll() is None:
                if case.sig == signal.SIGINT:
                    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the group
                else:
                    proc.send_signal(case.sig)
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        out, err = "", "a process of the run outlived it for 180 s (workers left behind)"
        proc.returncode = -999
    finally:
        _end_group(proc.pid)
    first = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    if first.returncode == -999:
        return "traceback", err
    then = cir(argv)
    right = then.returncode == 0 and (folder / "paired.csv").read_bytes() == lab.paired
    said = f"exit {first.returncode}" if first.returncode < 0 else _said(first)
    said += " / then: " + _said(then)
    if not right:
        return classify(then, right), said  # the resume is what must be right
    if first.returncode in (0, -signal.SIGKILL):  # finished first, or killed outright (nothing could print)
        return classify(then, right), said
    return classify(first, right, interrupted=case.sig == signal.SIGINT), said


def _default_sigint() -> None:
    """A command started from a terminal handles Ctrl-C (a background shell would ignore it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _end_group(pgid: int) -> None:
    """End what is left of a case's own process group (the run's workers, if any outlived it)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _a_worker(parent: int, deadline: float) -> int | None:
    """The pid of a worker process of ``parent`` running a task (a grandchild: loky's)."""
    import psutil

    while time.monotonic() < deadline:
        try:
            kids = psutil.Process(parent).children(recursive=True)
        except psutil.NoSuchProcess:
            return None
        workers = [k for k in kids if "popen_loky" in " ".join(k.cmdline())]  # not loky's resource tracker
        if workers:
            return workers[-1].pid
        time.sleep(0.1)
    return None


def _said(proc: subprocess.CompletedProcess) -> str:
    lines = _said_lines(proc.stderr) or [line for line in proc.stderr.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return f"exit {proc.returncode}: {last[:150]}"


def full_disk(lab: Lab) -> list[tuple[str, str, str, str]]:
    """`cir run` onto a full disk: a clear error; moved to a disk with room, the same command heals."""
    disk = lab.work / "small-disk"
    disk.mkdir(exist_ok=True)
    shutil.rmtree(lab.work / "moved", ignore_errors=True)
    need = sum((lab.pristine / name).stat().st_size for name in ("episodes.jsonl.gz", "paired.csv", "run.json"))
    size = max(8, need // 3 // 1024)  # a third of what the run writes, in KiB: full before the end
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}k", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        return [("full disk", "cir run onto a full disk", "skipped", "cannot mount a tmpfs here")]
    saved = lab.work / "moved"
    try:
        proc = cir(lab.run_argv(disk / "run"))
        written = disk / "run" / "paired.csv"
        first = classify(proc, right=written.exists() and written.read_bytes() == lab.paired)
        if (disk / "run").exists():
            shutil.copytree(disk / "run", saved)
    finally:
        subprocess.run(["umount", str(disk)], check=False)
    rows = [("full disk", "cir run onto a full disk", first, _said(proc))]
    if saved.exists():
        then = cir(lab.run_argv(saved))
        right = then.returncode == 0 and (saved / "paired.csv").read_bytes() == lab.paired
        rows.append(("full disk", "the same run on a disk with room", classify(then, right), _said(then)))
    return rows


# -- issue 44: runs destroyed by their own command, changed tasks, the user's code's errors -------
KEYDOOR = Path(__file__).resolve().parents[1] / "tests" / "support" / "keydoor.py"
KD_GRID = ["--conditions", "clean,stale1", "--delays", "0,1", "--operations", "refresh", "--quiet"]
_RESTORE = "    def restore(self, snapshot: tuple[int, int, bool, bool]) -> None:\n        self.state = snapshot\n"
_SNAPSHOT = "    def snapshot(self) -> tuple[int, int, bool, bool]:\n"


def _keydoor_variant(lab: Lab, name: str, old: str, new: str) -> str:
    """A user's family file: the key-and-door family with one edit; its FILE.py:FAMILY."""
    source = KEYDOOR.read_text()
    assert old in source, old
    path = lab.work / "families" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source.replace(old, new, 1))
    return f"{path}:FAMILY"


def _refused_and_kept(proc: subprocess.CompletedProcess, folder: Path, before: dict[str, bytes], lab: Lab) -> str:
    """A command pointed at a run folder's files: refused with the folder as it was, or not."""
    kept = files(folder) == before and cir(["table", str(folder), "--resamples", "200"]).stdout == lab.table
    if proc.returncode == 0:
        return "silently wrong"  # it wrote where it must not, or said nothing of it
    return classify(proc, False) if kept else "silently wrong"


def issue44(lab: Lab, ctrl_c: int = 4) -> list[tuple[str, str, Callable[[], tuple[str, str]]]]:
    """The cases of issue 44's list, each ``(group, name, run)``; ``run()`` gives (class, what it said)."""
    cases: list[tuple[str, str, Callable[[], tuple[str, str]]]] = []
    router = lab.work / "router.json"

    def out_into_run(argv: list[str]) -> Callable[[], tuple[str, str]]:
        def run() -> tuple[str, str]:
            if not router.exists():  # a router fitted on other tasks: the reference study's
                shutil.copy(Path(__file__).resolve().parents[1] / "data" / "replicates" / "seed-0" / "router.json",
                            router)
            folder = lab.copy()
            before = files(folder)
            proc = cir([a.replace("{folder}", str(folder)).replace("{router}", str(router)) for a in argv])
            return _refused_and_kept(proc, folder, before, lab), _said(proc)
        return run

    for argv in (["table", "{folder}", "--out", "{folder}/episodes.jsonl.gz"],
                 ["fit", "{folder}", "--out", "{folder}/run.json", "--candidate-delays", "1", "--folds", "2"],
                 ["evaluate", "{router}", "{folder}", "--out", "{folder}/run.json"]):
        cases.append(("44: output over a run", "cir " + " ".join(argv).replace("{folder}", "RUN").replace(
            "{router}", "R"), out_into_run(argv)))
    cases.append(("44: resume of changed tasks", "a partial run resumed after a task's game.tw-pddl was replaced",
                  lambda: _resume_changed_task(lab)))
    # a module that exits at import
    for code in (0, 3):
        spec = _keydoor_variant(lab, f"exits{code}", "from cir import ", f"import sys\nsys.exit({code})\nfrom cir import ")
        for name, argv in (("run", ["run", "--family", spec, "--tasks", str(lab.work / "kd" / "test"), "--out",
                                    str(lab.work / f"never-exit{code}"), *KD_GRID]),
                           ("check-env", ["check-env", "--family", spec]),
                           ("tasks generate", ["tasks", "generate", "--family", spec, "--split", "test", "--n", "2",
                                               "--out", str(lab.work / f"never-gen{code}")])):
            cases.append(("44: exit at import", f"sys.exit({code}) in the family module: cir {name}",
                          _expect_error(argv)))
    agent = lab.work / "families" / "exiting_agent.py"
    agent.parent.mkdir(exist_ok=True)
    agent.write_text("import sys\nsys.exit(0)\nagent = None\n")
    cases.append(("44: exit at import", "sys.exit(0) in a framework agent module: cir run --agent langgraph:...",
                  _expect_error(["run", "--family", f"{KEYDOOR}:FAMILY", "--tasks", str(lab.work / "kd" / "test"),
                                 "--out", str(lab.work / "never-agent"), "--agent", f"langgraph:{agent}:agent",
                                 "--base-url", "http://127.0.0.1:9/v1", *KD_GRID])))
    # the user's own code raises
    restore = _keydoor_variant(lab, "restore_raises", _RESTORE, _RESTORE.replace(
        "        self.state", "        if snapshot[1] >= 3 and Path(__file__).with_suffix('.break').exists():\n"
        "            raise ValueError(f'no restore past move {snapshot[1]}')\n        self.state"))
    (lab.work / "families" / "restore_raises.break").touch()  # it raises (a partial run is made without)
    snapshot = _keydoor_variant(lab, "snapshot_raises", _SNAPSHOT, _SNAPSHOT + "        if self.state[1] == 2:\n"
                                "            raise KeyError('state')\n")
    raises = _keydoor_variant(lab, "raises_at_import", "from cir import ", "raise RuntimeError('broken')\nfrom cir import ")
    syntax = _keydoor_variant(lab, "syntax_error", "class KeyDoorEnv:", "class KeyDoorEnv(:")
    kd = str(lab.work / "kd" / "test")
    for name, argv in (
            ("restore raises: cir run --jobs 1", ["run", "--family", restore, "--tasks", kd, "--out", "{new}", "--jobs", "1"]),
            ("restore raises: cir run --jobs 2", ["run", "--family", restore, "--tasks", kd, "--out", "{new}", "--jobs", "2"]),
            ("restore raises: cir check-env", ["check-env", "--family", restore]),
            ("restore raises: on resume", ["run", "--family", restore, "--tasks", kd, "--out", "{partial}", "--jobs", "2"]),
            ("snapshot raises: cir run --jobs 2", ["run", "--family", snapshot, "--tasks", kd, "--out", "{new}", "--jobs", "2"]),
            ("snapshot raises: cir check-env", ["check-env", "--family", snapshot]),
            ("the family module raises at import: cir run", ["run", "--family", raises, "--tasks", kd, "--out", "{new}"]),
            ("a syntax error in the family module: cir run", ["run", "--family", syntax, "--tasks", kd, "--out", "{new}"])):
        cases.append(("44: the user's code raises", name, _user_error(lab, argv)))
    cases.append(("44: check-env", "check-env (defaults) of a family whose restore forgets the moves beyond the third",
                  lambda: _check_env_catches(f"{KEYDOOR}:FORGETS_LATE")))
    # bad records and files
    cases.append(("44: bad records and files", "run.json with a wrong type in a cost field: cir table",
                  lambda: _edited_record(lab)))
    cases.append(("44: bad records and files", "cir table /dev/zero", _expect_error(["table", "/dev/zero"])))
    cases.append(("44: bad records and files", "cir evaluate /dev/zero RUN",
                  _expect_error(["evaluate", "/dev/zero", str(lab.pristine)])))
    for name in ("paired.csv", "run.json"):
        cases.append(("44: bad records and files", f"a FIFO as {name}: cir table", lambda name=name: _fifo_in_run(lab, name)))
    cases.append(("44: bad records and files", "a FIFO as the router file: cir evaluate", lambda: _fifo_router(lab)))
    # signals
    for i in range(ctrl_c):
        cases.append(("44: signals", f"Ctrl-C just after the last task is stored ({i + 1})", lambda: _ctrl_c_at_the_end(lab)))
    late = _keydoor_variant(lab, "interrupt_at_exit", "from cir import ", _INTERRUPT_AT_EXIT + "from cir import ")
    cases.append(("44: signals", "Ctrl-C once the command is done, while Python waits for its threads",
                  _expect_quiet_exit(["run", "--family", late, "--tasks", kd, "--out", "{new}", "--jobs", "1", *KD_GRID],
                                     lab)))
    cases.append(("44: signals", "SIGTERM during a run, then the same command", lambda: _signalled(lab, signal.SIGTERM)))
    cases.append(("44: signals", "the queues' manager killed during a run, then the same command",
                  lambda: _manager_killed(lab)))
    # a resume with another setting
    for flag, value, said in (("--seed", "5", "seed"), ("--temperature", "0.5", "temperature")):
        cases.append(("44: resume with another setting", f"cir run {flag} {value} on the run",
                      lambda flag=flag, value=value, said=said: _resume_other(lab, flag, value, said)))
    # a store member that is not the one the run wrote
    cases.append(("44: store members", "a task replaced by the same task of a run with other settings: cir table",
                  lambda: _member_swapped(lab)))
    cases.append(("44: store members", "a task re-encoded with y1 flipped: cir table", lambda: _member_flipped(lab)))
    return cases


#: A family module whose thread sends Ctrl-C (SIGINT) to the command once its main thread is done,
#: while Python waits for the threads at exit: the moment "just after the last task" hits.
_INTERRUPT_AT_EXIT = (
    "import os as _os, signal as _signal, threading as _threading, time as _time\n"
    "def _interrupt_at_exit():\n"
    "    while _threading.main_thread().is_alive():\n"
    "        _time.sleep(0.01)\n"
    "    _os.kill(_os.getpid(), _signal.SIGINT)\n"
    "    _time.sleep(0.5)\n"
    "_threading.Thread(target=_interrupt_at_exit).start()\n")


def _expect_quiet_exit(argv: list[str], lab: Lab) -> Callable[[], tuple[str, str]]:
    """A command that finished its work: exit 0 and nothing on stderr, whatever comes after."""
    def run() -> tuple[str, str]:
        lab.n += 1
        shutil.rmtree(lab.work / f"quiet{lab.n:03d}", ignore_errors=True)
        proc = cir([a.replace("{new}", str(lab.work / f"quiet{lab.n:03d}")) for a in argv], timeout=300)
        quiet = not [line for line in proc.stderr.splitlines() if not line.startswith("cir: deprecated:")]
        return classify(proc, right=proc.returncode == 0 and quiet), _said(proc)
    return run


def _expect_error(argv: list[str]) -> Callable[[], tuple[str, str]]:
    def run() -> tuple[str, str]:
        proc = cir(argv, timeout=120)
        return classify(proc, right=False), _said(proc)
    return run


def _user_error(lab: Lab, argv: list[str]) -> Callable[[], tuple[str, str]]:
    """A user's family that raises: one line naming the method, then the user's frames, never a
    traceback of cir's (or loky's _RemoteTraceback)."""
    def run() -> tuple[str, str]:
        lab.n += 1
        folder = lab.work / f"user{lab.n:03d}"
        shutil.rmtree(folder, ignore_errors=True)  # a --work folder of an earlier call
        args = [a.replace("{new}", str(folder)) for a in argv]
        if "{partial}" in argv:  # a partial run of the family while it does not raise, cut after its second task
            args = [a.replace("{partial}", str(folder)) for a in argv]
            marker = lab.work / "families" / "restore_raises.break"
            marker.unlink()
            try:
                assert cir([*args[:-2], "--jobs", "1", *KD_GRID]).returncode == 0
            finally:
                marker.touch()
            start, _ = lab.member(folder, 2)
            data = (folder / "episodes.jsonl.gz").read_bytes()
            (folder / "episodes.jsonl.gz").write_bytes(data[:start])
        if args[0] == "run":
            args += KD_GRID
        proc = cir(args)
        cls = classify(proc, right=False)
        first = next((line for line in _said_lines(proc.stderr) if line.startswith("cir: error: ")), "")
        if cls == "clear error" and " raised " not in first:
            cls = "unclear"  # an error, but not one that says it is the user's code and where
        return cls, f"exit {proc.returncode}: {first[:170] or _said(proc)}"
    return run


def _check_env_catches(spec: str) -> tuple[str, str]:
    proc = cir(["check-env", "--family", spec])
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode == 1 and "failure(s)" in last:
        return "clear error", f"exit 1: {last[:170]}"
    return classify(proc, right=False), f"exit {proc.returncode}: {last[:170]}"


def _edited_record(lab: Lab) -> tuple[str, str]:
    folder = lab.copy()
    _edit_json(folder / "run.json", lambda r: r["costs"].update(agent_calls="many"))
    proc = cir(["table", str(folder)])
    return classify(proc, right=False), _said(proc)


def _fifo_in_run(lab: Lab, name: str) -> tuple[str, str]:
    folder = lab.copy()
    (folder / name).unlink()
    os.mkfifo(folder / name)
    proc = cir(["table", str(folder)], timeout=30)
    return classify(proc, right=False), _said(proc)


def _fifo_router(lab: Lab) -> tuple[str, str]:
    fifo = lab.work / f"router-fifo-{lab.n}.json"
    lab.n += 1
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    proc = cir(["evaluate", str(fifo), str(lab.pristine)], timeout=30)
    return classify(proc, right=False), _said(proc)


def _resume_changed_task(lab: Lab) -> tuple[str, str]:
    """A run cut after its second task, one of the others' game file replaced by another task's
    (same ids), resumed: refused naming the task, or a table that mixes two tasks."""
    folder = lab.copy()
    start, _ = lab.member(folder, 2)
    data = (folder / "episodes.jsonl.gz").read_bytes()
    (folder / "episodes.jsonl.gz").write_bytes(data[:start])
    games = sorted(lab.tasks.rglob("game.tw-pddl"))
    target, other = games[3], games[2]
    saved = target.read_bytes()
    try:
        target.write_bytes(other.read_bytes())
        proc = cir(lab.run_argv(folder))
        right = proc.returncode == 0 and (folder / "paired.csv").read_bytes() == lab.paired
    finally:
        target.write_bytes(saved)
    return classify(proc, right), _said(proc)


def _ctrl_c_at_the_end(lab: Lab) -> tuple[str, str]:
    """Ctrl-C (SIGINT to the command's group) as soon as the store holds every task."""
    from cir.pairs.store import scan_store

    lab.n += 1
    folder = lab.work / f"ctrlc{lab.n:03d}"
    shutil.rmtree(folder, ignore_errors=True)
    argv = lab.run_argv(folder)
    proc = subprocess.Popen([*CIR, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    n = len(list(lab.tasks.iterdir()))
    try:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            store = folder / "episodes.jsonl.gz"
            if store.exists() and len(scan_store(store).members) >= n:
                os.killpg(proc.pid, signal.SIGINT)
                break
            time.sleep(0.01)
        out, err = proc.communicate(timeout=180)
    finally:
        _end_group(proc.pid)
    first = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    then = cir(argv)
    right = then.returncode == 0 and (folder / "paired.csv").read_bytes() == lab.paired
    said = _said(first) + " / then: " + _said(then)
    if not right:
        return classify(then, right), said
    return classify(first, right, interrupted=True), said


def _signalled(lab: Lab, sig: int, after: float = 3.0) -> tuple[str, str]:
    lab.n += 1
    folder = lab.work / f"signal{lab.n:03d}"
    shutil.rmtree(folder, ignore_errors=True)
    argv = lab.run_argv(folder)
    proc = subprocess.Popen([*CIR, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        time.sleep(after)
        if proc.poll() is None:
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=180)
    finally:
        _end_group(proc.pid)
    first = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    then = cir(argv)
    right = then.returncode == 0 and (folder / "paired.csv").read_bytes() == lab.paired
    said = (f"exit {first.returncode} (no word)" if first.returncode < 0 and not first.stderr.strip()
            else _said(first)) + " / then: " + _said(then)
    if not right:
        return classify(then, right), said
    if first.returncode == 0:
        return "healed", said  # finished before the signal
    return classify(first, right, interrupted=True), said


def _manager_killed(lab: Lab) -> tuple[str, str]:
    """kill -9 of the manager process that serves the workers' queues, once the workers run."""
    import psutil

    lab.n += 1
    folder = lab.work / f"manager{lab.n:03d}"
    shutil.rmtree(folder, ignore_errors=True)
    argv = lab.run_argv(folder)
    proc = subprocess.Popen([*CIR, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _a_worker(proc.pid, deadline=time.monotonic() + 60)
        time.sleep(1.0)
        for kid in psutil.Process(proc.pid).children():
            line = " ".join(kid.cmdline())
            if "spawn_main" in line and "resource_tracker" not in line and "loky" not in line:
                kid.kill()
        out, err = proc.communicate(timeout=180)
    finally:
        _end_group(proc.pid)
    first = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    then = cir(argv)
    right = then.returncode == 0 and (folder / "paired.csv").read_bytes() == lab.paired
    said = _said(first) + " / then: " + _said(then)
    if not right:
        return classify(then, right), said
    return ("healed", said) if first.returncode == 0 else (classify(first, right), said)


def _resume_other(lab: Lab, flag: str, value: str, must_say: str) -> tuple[str, str]:
    folder = lab.copy()
    proc = cir(lab.run_argv(folder, flag, value))
    return classify(proc, right=False, must_say=f"{must_say}="), _said(proc)


def _member_swapped(lab: Lab) -> tuple[str, str]:
    """Task 1's member replaced by task 1 of a run with another --max-turns (the same agent and
    grid): refused, or read as this run's."""
    other = lab.work / "other-turns"
    if not (other / "run.json").exists():
        assert cir(["run", "--tasks", str(lab.tasks), "--out", str(other), "--max-turns", "12",
                    "--jobs", "2", *GRID]).returncode == 0
    folder = lab.copy()
    s, e = lab.member(folder, 1)
    os_, oe = lab.member(other, 1)
    ours = (folder / "episodes.jsonl.gz").read_bytes()
    theirs = (other / "episodes.jsonl.gz").read_bytes()[os_:oe]
    (folder / "episodes.jsonl.gz").write_bytes(ours[:s] + theirs + ours[e:])
    proc = cir(["table", str(folder), "--resamples", "200"])
    return classify(proc, proc.stdout == lab.table), _said(proc)


def _member_flipped(lab: Lab) -> tuple[str, str]:
    folder = lab.copy()
    s, e = lab.member(folder, 1)
    data = (folder / "episodes.jsonl.gz").read_bytes()
    lines = gzip.decompress(data[s:e]).decode().splitlines()
    task = json.loads(lines[0])
    row = task["rows"][0]
    row["y1"], row["executed"] = 1 - row["y1"], True
    row["outcome"] = {(0, 0): "stable_failure", (0, 1): "rescue", (1, 0): "harm", (1, 1): "stable_success"}[
        (row["y0"], row["y1"])]
    lines[0] = json.dumps(task, sort_keys=True, ensure_ascii=False)
    member = gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=6, mtime=0)
    (folder / "episodes.jsonl.gz").write_bytes(data[:s] + member + data[e:])
    proc = cir(["table", str(folder), "--resamples", "200"])
    return classify(proc, proc.stdout == lab.table), _said(proc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=None, help="working folder (default: a temporary one)")
    ap.add_argument("--kills", type=int, default=4, help="kill -9 trials of the cir process")
    ap.add_argument("--only", default=None, metavar="GROUPS",
                    help="comma list of the classes to try (e.g. 'full disk,kills during a run'; 'issue 44' for "
                         "all of issue 44's)")
    ap.add_argument("--cir", default=None, metavar="COMMAND",
                    help="the command to try (default: this venv's cir; e.g. 'python -m cir' with PYTHONPATH "
                         "at an earlier checkout, to see what it did)")
    ap.add_argument("--ctrl-c", type=int, default=4, help="trials of Ctrl-C just after the last task is stored")
    args = ap.parse_args(argv)
    if args.cir:
        CIR[:] = shlex.split(args.cir)
    only = None if args.only is None else {g.strip() for g in args.only.split(",")}
    work = Path(args.work or tempfile.mkdtemp(prefix="cir-hostile-"))
    work.mkdir(parents=True, exist_ok=True)
    lab = Lab(work)
    lab.setup(reuse=args.work is not None)
    rows = []
    for case in [*bad_values(lab), *damaged_folders(lab), *wrong_folders(lab), *kills(lab, args.kills)]:
        if only is not None and case.group not in only:
            continue
        outcome, said = run_case(lab, case)
        rows.append((case.group, case.name, outcome, said))
        print(f"{outcome:15} {case.group:30} {case.name}: {said}", flush=True)
    if only is None or "issue 44" in only or any(g.startswith("44:") for g in only):
        if not (work / "kd" / "test").exists():
            assert cir(["tasks", "generate", "--family", f"{KEYDOOR}:FAMILY", "--split", "test", "--n", "4",
                        "--out", str(work / "kd"), "--quiet"]).returncode == 0
        for group, name, run in issue44(lab, args.ctrl_c):
            if only is not None and "issue 44" not in only and group not in only:
                continue
            outcome, said = run()
            rows.append((group, name, outcome, said))
            print(f"{outcome:15} {group:30} {name}: {said}", flush=True)
    for row in full_disk(lab) if only is None or "full disk" in only else []:
        rows.append(row)
        print(f"{row[2]:15} {row[0]:30} {row[1]}: {row[3]}", flush=True)
    counts = Counter((group, outcome) for group, _, outcome, _ in rows)
    groups = list(dict.fromkeys(group for group, *_ in rows))
    print(f"\n| class of input | cases | {' | '.join(CLASSES)} |")
    print("|---|" + "---|" * (len(CLASSES) + 1))
    for group in groups:
        n = sum(counts[(group, c)] for c in (*CLASSES, "skipped"))
        print(f"| {group} | {n} | " + " | ".join(str(counts[(group, c)]) for c in CLASSES) + " |")
    total = Counter(outcome for *_, outcome, _ in rows)
    print(f"| all | {len(rows)} | " + " | ".join(str(total[c]) for c in CLASSES) + " |")
    return 1 if total["silently wrong"] or total["traceback"] or total["hang"] or total["unclear"] else 0


if __name__ == "__main__":
    sys.exit(main())
