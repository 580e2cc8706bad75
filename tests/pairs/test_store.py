"""The episode store: torn tails, atomic table, resume after kill -9 (fake env/agent)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.replay import fake_settings, fake_tasks, make_fake_agent, make_fake_env

from cir.pairs.episode_record import EpisodeRecord
from cir.pairs.record import RunIdentity, RunRecord
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.settings import RunSettings
from cir.pairs.store import RunStore, read_episodes, read_records, read_task_summaries
from cir.util.errors import CirError

HERE = Path(__file__).resolve().parents[1]  # the tests folder


def test_append_and_torn_tail(tmp_path):
    store = RunStore(tmp_path / "run")
    store.open()
    for i in range(3):
        store.append_task({"task_id": f"t{i}", "rows": [{"a": i}]}, [EpisodeRecord(f"t{i}", "factual", "clean")])
    path = store.episodes_path
    good = path.read_bytes()
    # a torn last member (killed mid-write) is dropped by readers and cut by open()
    extra = gzip.compress(b'{"kind": "task", "task_id": "t3"}\n' * 50, mtime=0)
    path.write_bytes(good + extra[: len(extra) // 2])
    assert sorted(read_task_summaries(path)) == ["t0", "t1", "t2"]
    assert len(list(read_episodes(tmp_path / "run"))) == 3
    done = RunStore(tmp_path / "run").open().summaries()
    assert sorted(done) == ["t0", "t1", "t2"] and path.read_bytes() == good
    (torn,) = path.parent.glob("episodes.jsonl.gz.torn-*")  # the cut bytes are kept
    assert torn.read_bytes() == extra[: len(extra) // 2]
    # garbage (not gzip) at the end is damage, not a write in progress: readers say so,
    # and open() keeps the damaged file aside and the intact members in the store
    path.write_bytes(good + b"\x00garbage")
    with pytest.raises(CirError, match=r"damaged: task unknown \(bytes \d+-\d+: not a valid gzip"):
        list(read_records(path))
    assert sorted(RunStore(tmp_path / "run").open().summaries()) == ["t0", "t1", "t2"]
    assert path.read_bytes() == good and len(list(read_records(path))) == 6
    (backup,) = path.parent.glob("episodes.jsonl.gz.set-aside-*")
    assert backup.read_bytes() == good + b"\x00garbage"


def test_settings_refusal_and_foreign_folder(tmp_path):
    identity = RunIdentity(tasks="t", task_set="x", n_tasks=1, limit=None, agent="a", agent_label="a@1",
                           seed=0, replay=ReplaySettings())
    store = RunStore(tmp_path / "run")
    store.dir.mkdir()
    store.write_run_json({"settings": {**identity.to_dict(), "seed": 1}})
    with pytest.raises(CirError, match=r"was written with seed=1, this command has seed=0"):
        RunRecord.resume(store, identity)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(CirError, match="not empty and has no run.json"):
        RunRecord.resume(RunStore(other), identity)
    (other / "notes.txt").unlink()
    (other / "agent_cache").mkdir()  # replies kept from an earlier run may start one
    assert RunRecord.resume(RunStore(other), identity) is None
    (tmp_path / "file").write_text("x")
    with pytest.raises(CirError, match="not a folder"):
        RunStore(tmp_path / "file").check_unused()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text("{")
    with pytest.raises(CirError, match="not valid JSON"):
        RunRecord.resume(RunStore(tmp_path / "bad"), identity)


SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from support.replay import fake_settings, fake_tasks
from cir.pairs.settings import ReplaySettings
from cir.pairs.run import run_experiment
run_experiment(fake_tasks({n}), {out!r}, fake_settings(ReplaySettings(operations=("refresh", "replan")), {agent!r}),
               tasks_source="fake", progress=False)
"""


def _run_inline(out: Path, n: int, agent: str) -> RunRecord:
    return run_experiment(fake_tasks(n), out,
                          fake_settings(ReplaySettings(operations=("refresh", "replan")), agent),
                          tasks_source="fake", progress=False, echo=lambda s: None)


class _Interrupting:
    """An agent factory whose agents raise KeyboardInterrupt after a number of calls."""

    def __init__(self, after: int) -> None:
        self.left = after

    def __call__(self, spec, seed=0):
        agent = make_fake_agent(spec, seed=seed)
        act = agent.act
        outer = self

        def interrupting(context):
            outer.left -= 1
            if outer.left < 0:
                raise KeyboardInterrupt
            return act(context)

        agent.act = interrupting
        return agent


def test_ctrl_c_then_resume_in_process(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(fake_tasks(6), out,
                       RunSettings(replay=ReplaySettings(operations=("refresh", "replan")), agent="fake",
                                   agent_factory=_Interrupting(700), env_factory=make_fake_env),
                       tasks_source="fake", progress=False, echo=lambda s: None)
    partial = read_task_summaries(out / "episodes.jsonl.gz")
    assert 1 <= len(partial) < 6
    assert not json.loads((out / "run.json").read_text())["complete"]
    rec = _run_inline(out, 6, "fake")
    assert rec.sessions[-1].tasks_run == 6 - len(partial)
    _run_inline(tmp_path / "straight", 6, "fake")
    assert (out / "paired.csv").read_bytes() == (tmp_path / "straight" / "paired.csv").read_bytes()


@pytest.mark.slow
def test_kill_and_resume_gives_the_uninterrupted_table(tmp_path):
    n, agent = 8, "fake:0.002"  # a slow agent so the kill lands mid-run
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT.format(tests=str(HERE), n=n, out=str(out), agent=agent)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    episodes = out / "episodes.jsonl.gz"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if episodes.exists() and len(read_task_summaries(episodes)) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = read_task_summaries(episodes)
    assert 2 <= len(partial) < n
    rec = json.loads((out / "run.json").read_text())
    assert not rec["complete"]
    # resume: only the missing tasks run, table identical to an uninterrupted run
    rec = _run_inline(out, n, agent)
    assert rec.complete and rec.sessions[-1].resumed_tasks == len(partial)
    assert rec.sessions[-1].tasks_run == n - len(partial)
    _run_inline(tmp_path / "straight", n, agent)
    assert (out / "paired.csv").read_bytes() == (tmp_path / "straight" / "paired.csv").read_bytes()
    assert len(read_task_summaries(episodes)) == n
