"""The silent failures and the crash of issue 21, each as the careless user met it.

1. A gzip member from another run's store (another agent seed), put first or in place of the
   original, is refused (it is not this run's) and kept aside like damage; the table is never
   a mix of two agents'.
2. ``cir explain`` on a cut store refuses like every other analysis command (``--allow-partial``
   explains the finished tasks and says so).
3. The fast path of a reader verifies what it skips: same-size damage to the store and an edited
   count in ``run.json`` are caught on read, not at the next ``cir run``.
4. A killed worker ends ``cir run`` with one ``cir: error:`` line that names what happened and
   that the same command resumes; a full disk gives its error first, with no library warning.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support.replay import fake_settings, fake_tasks, make_fatal_env

from cir.cli import main
from cir.pairs.paired import read_paired
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.store import EPISODES, scan_store
from cir.util.errors import CirError

N = 5
GRID = ReplaySettings(operations=("refresh", "replan"))


def _run(out: Path, seed: int = 0, **more) -> None:
    run_experiment(fake_tasks(N), out, fake_settings(GRID, "fake", seed=seed, **more), tasks_source="fake",
                   progress=False, echo=lambda s: None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("two-agents")
    out = {"ours": root / "ours", "theirs": root / "theirs"}
    _run(out["ours"], seed=0)
    _run(out["theirs"], seed=1)  # the same tasks and grid, another agent seed
    return out


@pytest.fixture
def ours(runs, tmp_path) -> Path:
    shutil.copytree(runs["ours"], tmp_path / "ours")
    return tmp_path / "ours"


def _member(run: Path, index: int) -> tuple[str, bytes]:
    m = scan_store(run / EPISODES).members[index]
    return m.task_id, (run / EPISODES).read_bytes()[m.start:m.end]


def _differs_from_our_table(run: Path, runs: dict[str, Path]) -> bool:
    theirs = read_paired(runs["theirs"])
    assert not read_paired(runs["ours"]).equals(theirs)  # the seeds give other tables
    return not read_paired(run).equals(read_paired(runs["ours"]))


# -- 1. a member of another run -------------------------------------------------------------------


def test_another_runs_member_put_first_is_refused_and_the_table_is_ours(ours, runs, capsys) -> None:
    task, foreign = _member(runs["theirs"], 2)
    store = ours / EPISODES
    store.write_bytes(foreign + store.read_bytes())  # first, before our copy of the same task
    (ours / "paired.csv").unlink()  # nothing vouches for the table: it is derived from the store
    assert not _differs_from_our_table(ours, runs)
    code = main(["table", str(ours), "--resamples", "20"])
    err = capsys.readouterr().err
    assert code == 0 and f"task {task}" in err and "from another run (agent fake@" in err
    _run(ours)  # a resume sets it aside, never adopts it ("stored twice, kept the first copy")
    assert len(scan_store(store).members) == N and scan_store(store).sound
    assert (ours / "paired.csv").read_bytes() == (runs["ours"] / "paired.csv").read_bytes()
    (kept,) = ours.glob(f"{EPISODES}.set-aside-*")
    assert kept.read_bytes().startswith(foreign)


def test_another_runs_member_in_place_of_ours_is_refused_and_its_task_runs_again(ours, runs, capsys) -> None:
    task, foreign = _member(runs["theirs"], 1)
    _, original = _member(ours, 1)
    data = (ours / EPISODES).read_bytes()
    (ours / EPISODES).write_bytes(data.replace(original, foreign))
    (ours / "paired.csv").unlink()
    with pytest.raises(CirError, match=rf"partial run: 1 of {N} tasks missing \(damaged in episodes.jsonl.gz: "
                                       rf"task {task} \(bytes \d+-\d+: from another run \(agent fake@"):
        read_paired(ours)
    assert main(["table", str(ours)]) == 2 and "from another run" in capsys.readouterr().err
    df = read_paired(ours, allow_partial=True)
    assert task not in set(df["task_id"]) and set(df["agent"]) == set(read_paired(runs["ours"])["agent"])
    _run(ours)
    assert (ours / "paired.csv").read_bytes() == (runs["ours"] / "paired.csv").read_bytes()


# -- 2. cir explain on a cut store ----------------------------------------------------------------------


def test_explain_refuses_a_cut_store_like_every_analysis_command(ours, capsys) -> None:
    store = ours / EPISODES
    members = scan_store(store).members
    store.write_bytes(store.read_bytes()[: members[3].start])  # three of five tasks left
    for argv in (["explain", str(ours)], ["table", str(ours)]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1
        assert err.startswith(f"cir: error: {ours}: partial run: 2 of {N} tasks missing") and "--allow-partial" in err
    assert main(["explain", str(ours), "--allow-partial"]) == 0
    out = capsys.readouterr().out
    assert "partial run: these pairs are those of 3 of 5 tasks" in out


# -- 3. the fast path verifies what it skips ---------------------------------------------------------------


def test_same_size_damage_to_the_store_is_caught_on_read(ours) -> None:
    store = ours / EPISODES
    m = scan_store(store).members[2]
    data = bytearray(store.read_bytes())
    # inside the third member, the size unchanged; near its end, after the task id (the summary
    # line's keys are sorted, so the id comes after its rows: a flip in the middle landed
    # before it in some runs, whose compressed bytes differ by their wall seconds, and the
    # damage was then "task unknown")
    data[m.end - 20] ^= 0x5A
    store.write_bytes(bytes(data))
    # paired.csv and the store's size still match run.json: only the members' digests tell
    with pytest.raises(CirError, match=rf"partial run: 1 of {N} tasks missing \(damaged in episodes.jsonl.gz: "
                                       rf"task {m.task_id}"):
        read_paired(ours)


@pytest.mark.parametrize("at", [0.05, 0.15, 0.25])
def test_damage_before_the_task_id_is_named_from_the_run_record(ours, at) -> None:
    # a flip early in a member cuts the deflate stream before the task id; the run record's
    # member list (sizes in store order) still says which task began at that byte
    store = ours / EPISODES
    m = scan_store(store).members[2]
    data = bytearray(store.read_bytes())
    data[m.start + int(at * (m.end - m.start))] ^= 0x5A
    store.write_bytes(bytes(data))
    assert scan_store(store).damaged[0].task_id is None  # the member's own bytes no longer say
    with pytest.raises(CirError, match=rf"damaged in episodes.jsonl.gz: task {m.task_id} \(bytes {m.start}-"):
        read_paired(ours)


@pytest.mark.parametrize(("edit", "contradiction"), [
    (lambda r: r["counts"].update(tasks=N - 1), f"counts.tasks is {N - 1}, settings.n_tasks {N}"),
    (lambda r: (r["counts"].update(tasks=N + 1), r["settings"].update(n_tasks=N + 1)),
     f"it lists {N} task ids, settings.n_tasks is {N + 1}"),
    (lambda r: r["counts"].update(pairs=1), "counts.pairs is 1"),
    (lambda r: r["counts"].update(tasks_done=N - 1), f"counts.tasks_done is {N - 1}, it has {N} finished tasks"),
])
def test_an_edited_count_in_the_run_record_is_caught_on_read(ours, edit, contradiction, capsys) -> None:
    record = json.loads((ours / "run.json").read_text())
    edit(record)
    (ours / "run.json").write_text(json.dumps(record))
    with pytest.raises(CirError, match="the run record contradicts itself") as err:
        read_paired(ours)
    assert contradiction in str(err.value) and "cir repair" in str(err.value)
    assert main(["repair", str(ours)]) == 0  # rebuilt from the store, the edited one kept
    assert "run.json: rebuilt from the episode store" in capsys.readouterr().out
    assert list(ours.glob("run.json.replaced-*")) and not read_paired(ours).attrs["run"]["partial"]


# -- 4. a killed worker, a full disk -------------------------------------------------------------------------


def test_a_killed_worker_is_one_error_line_and_the_same_run_resumes(tmp_path, runs) -> None:
    out = tmp_path / "run"
    fatal = functools.partial(make_fatal_env, kill="task003")
    with pytest.raises(CirError) as err:
        _run(out, jobs=2, env_factory=fatal)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{out}: a worker process ended in the middle of a task (SIGKILL)")
    assert "run the same command again to resume" in text
    _run(out, jobs=2)  # the same run, the worker healthy again
    assert (out / "paired.csv").read_bytes() == (runs["ours"] / "paired.csv").read_bytes()


FULL_DISK = """
import sys
from dataclasses import replace
sys.path.insert(0, {tests!r})
from support.replay import fake_tasks, make_fake_agent, make_fake_env
from cir.cli import main
from cir.families.alfworld import tasks
from cir.pairs import run as run_module

tasks.load_tasks = lambda folder, split=None: fake_tasks(40)
real = run_module.run_experiment
def run_experiment(tasks, out, settings, **kw):  # the fake agent and env behind `cir run`
    return real(tasks, out, replace(settings, agent="fake", agent_factory=make_fake_agent,
                                    env_factory=make_fake_env), **kw)
run_module.run_experiment = run_experiment
sys.exit(main(["run", "--tasks", {tasks!r}, "--out", {out!r}, "--jobs", "2", "--operations",
               "refresh,replan", "--quiet"]))
"""


def test_a_full_disk_gives_its_error_first_and_no_library_warning(tmp_path) -> None:
    disk = Path("/tmp") / f"cir-full-{tmp_path.name}"
    disk.mkdir(exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(disk)],
                             capture_output=True).returncode == 0
    if not mounted:
        pytest.skip("a full disk is simulated with a 96 KB tmpfs, which only root can mount")
    try:
        tasks = tmp_path / "tasks"
        tasks.mkdir()
        proc = subprocess.run([sys.executable, "-c", FULL_DISK.format(
            tests=str(Path(__file__).resolve().parents[1]), tasks=str(tasks), out=str(disk / "run"))],
            capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run(["umount", str(disk)], check=False)
        disk.rmdir()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and lines, proc.stderr
    assert lines[0].startswith("cir: error: ") and "No space left on device" in lines[0], proc.stderr
    assert "Warning" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_table_of_two_agents_is_not_what_any_read_returns(ours, runs) -> None:
    """Whatever member of theirs lands in our store, no read returns rows of their agent."""
    ours_agent = set(read_paired(runs["ours"])["agent"])
    store = ours / EPISODES
    original = store.read_bytes()
    for i in range(N):
        _, foreign = _member(runs["theirs"], i)
        for placed in (foreign + original, original + foreign):
            store.write_bytes(placed)
            (ours / "paired.csv").unlink(missing_ok=True)
            try:
                df = read_paired(ours, allow_partial=True)
            except CirError:
                continue
            assert set(df["agent"]) == ours_agent
            assert isinstance(df, pd.DataFrame)
