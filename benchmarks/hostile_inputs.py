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
- ``traceback``: a Python traceback, another exit code, or a library warning before the
  error (must be 0).

Reads must never write: every analysis case also checks that the folder's files are
unchanged, and a change counts as silently wrong. Prints one line per case and the table
of counts; exits 1 if any case is silently wrong or a traceback.

    python benchmarks/hostile_inputs.py [--work DIR] [--kills N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
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

CIR = str(Path(sys.executable).with_name("cir"))
GRID = ["--conditions", "clean,stale2", "--delays", "0,1", "--operations", "refresh,replan", "--quiet"]
CLASSES = ("clear error", "healed", "silently wrong", "traceback")


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
    return subprocess.run([CIR, *argv], capture_output=True, text=True, timeout=timeout)


def files(folder: Path) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def classify(proc: subprocess.CompletedProcess, right: bool, interrupted: bool = False) -> str:
    err = proc.stderr
    if "Traceback" in err or "Warning:" in err:
        return "traceback"
    if proc.returncode == 0:
        return "healed" if right else "silently wrong"
    if proc.returncode in (2, 130):
        last = err.strip().splitlines()[-1] if err.strip() else ""
        ok = last.startswith("cir: error: ") or " error: " in last or (
            interrupted and last.startswith("cir: interrupted"))
        return "clear error" if ok else "traceback"
    return "traceback"


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
    proc = subprocess.Popen([CIR, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
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
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=None, help="working folder (default: a temporary one)")
    ap.add_argument("--kills", type=int, default=4, help="kill -9 trials of the cir process")
    ap.add_argument("--only", default=None, metavar="GROUPS",
                    help="comma list of the classes to try (e.g. 'full disk,kills during a run')")
    args = ap.parse_args(argv)
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
    return 1 if total["silently wrong"] or total["traceback"] else 0


if __name__ == "__main__":
    sys.exit(main())
