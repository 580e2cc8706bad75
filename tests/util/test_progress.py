"""Progress inside the tasks of a run: the bar shows agent calls and episodes of the running
tasks before any task finishes, in this process and from worker processes, and no result
depends on it."""

from __future__ import annotations

import io
import queue
import re
import sys
import time
from pathlib import Path

import pytest
from support.replay import fake_settings, fake_tasks  # noqa: E402

from cir.pairs.replay import ReplaySettings  # noqa: E402
from cir.pairs.run import run_experiment  # noqa: E402
from cir.util.progress import LOG_INTERVAL, RunProgress, TaskReporter, bar_settings, is_terminal  # noqa: E402

SETTINGS = ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1), operations=("refresh",))


class Dead:
    def put(self, item: object) -> None:
        raise EOFError  # a manager that is gone


def test_reporter_sends_at_most_every_interval_and_survives_a_dead_channel() -> None:
    channel: queue.Queue = queue.Queue()
    slow = TaskReporter(channel, "t1", every=3600)
    for n in range(1, 6):
        slow(n, 0)
    assert channel.qsize() == 1 and channel.get() == ("t1", 1, 0, 0, 0)  # the first call is shown at once
    eager = TaskReporter(channel, "t2", every=0)
    for n in range(1, 4):
        eager(n, n // 2)
    assert [channel.get() for _ in range(3)] == [("t2", 1, 0, 0, 0), ("t2", 2, 1, 0, 0), ("t2", 3, 1, 0, 0)]
    TaskReporter(Dead(), "t3")(1, 0)  # no error: progress is display only


def test_running_tasks_count_until_their_result_replaces_them() -> None:
    with RunProgress(3, 0, 0, enabled=True, backend="threading", jobs=2) as bar:
        bar.channel.put(("a", 5, 1))
        bar.channel.put(("b", 2, 0))
        _wait(lambda: bar.counts()["agent_calls"] == 7)
        assert bar.counts() == {"pairs": 0, "episodes": 1, "agent_calls": 7, "requests": 0, "tokens": 0}
        bar.task_done("a", 4, 9, 3)
        bar.channel.put(("a", 8, 2))  # a late report of a finished task: ignored
        bar.channel.put(("b", 3, 1))
        _wait(lambda: bar.counts()["agent_calls"] == 12)
        assert bar.counts() == {"pairs": 4, "episodes": 4, "agent_calls": 12, "requests": 0, "tokens": 0}
        bar.channel.put(("b", 4, 1, 10, 500))  # an LLM agent's task: its requests and tokens
        _wait(lambda: bar.counts()["requests"] == 10)
        bar.task_done("c", 1, 2, 1, 5, 100)
        assert bar.counts()["requests"] == 15 and bar.counts()["tokens"] == 600
        rates = bar.rates()
        assert rates["requests_per_s"] > 0 and rates["tokens_per_s"] == pytest.approx(
            rates["requests_per_s"] * 40, rel=0.05)
        assert "requests/s" in bar._bar.postfix and "tokens/s" in bar._bar.postfix
    with RunProgress(3, 0, 0, enabled=False) as disabled:
        assert disabled.channel is None and disabled.reporter("a") is None
    with RunProgress(3, 0, 0, backend="dask") as on_dask:
        assert on_dask.channel is None  # a worker on another machine cannot reach it


def _wait(done, timeout: float = 300.0) -> None:
    """Until ``done()``: the bar's thread reads its channel when the machine lets it (the timeout
    only bounds a hang)."""
    end = time.monotonic() + timeout
    while not done() and time.monotonic() < end:
        time.sleep(0.01)


def _run(out: Path, progress: bool, jobs: int = 1, backend: str = "loky"):
    return run_experiment(fake_tasks(3), out, fake_settings(SETTINGS, "fake:0.002", jobs=jobs, backend=backend),
                          tasks_source="fake", progress=progress, echo=lambda s: None)


@pytest.mark.parametrize(("jobs", "backend"), [(1, "loky"), (2, "loky"), (2, "threading")])
def test_the_bar_moves_inside_a_task_and_changes_no_result(tmp_path: Path, capsys, monkeypatch, jobs,
                                                           backend) -> None:
    _run(tmp_path / "quiet", progress=False)
    capsys.readouterr()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: every report is drawn
    _run(tmp_path / "shown", progress=True, jobs=jobs, backend=backend)
    err = capsys.readouterr().err
    frames = [f for f in re.split(r"[\r\n]", err) if f.startswith("tasks")]
    inside = [int(m.group(1)) for f in frames if " 0/3 " in f
              for m in [re.search(r"agent calls=(\d+)", f)] if m]
    print(f"\n{len(frames)} frames of the bar; agent calls shown before the first task ended: {inside}")
    assert inside and max(inside) > 0, frames[:5]
    assert re.search(r"3/3 .*pairs=\d+, episodes=\d+, agent calls=\d+", frames[-1]), frames[-1]
    assert (tmp_path / "shown" / "paired.csv").read_bytes() == \
        (tmp_path / "quiet" / "paired.csv").read_bytes()


def test_in_a_log_the_bar_writes_a_line_at_most_every_interval(capsys) -> None:
    """Not a terminal (a log file, a pipe): no redraw per report, one line per LOG_INTERVAL."""
    assert not is_terminal(sys.stderr) and bar_settings()["mininterval"] == LOG_INTERVAL
    started = time.monotonic()
    with RunProgress(200, 0, 0, enabled=True, backend="threading", jobs=2) as bar:
        for i in range(200):
            bar.channel.put((f"t{i}", i, 0))
            bar.task_done(f"t{i}", 1, i + 1, 1)
        _wait(lambda: bar.channel.empty())
    intervals = int((time.monotonic() - started) // LOG_INTERVAL)  # 0 but on a machine stalled that long
    frames = [f for f in re.split(r"[\r\n]", capsys.readouterr().err) if f.startswith("tasks")]
    # the first frame, perhaps one more within the interval, and the last on close
    assert 2 <= len(frames) <= 3 + intervals, frames
    assert re.search(r"200/200 .*pairs=200, episodes=200, agent calls=20100", frames[-1]), frames[-1]


class _Terminal(io.StringIO):
    """A stream that says it is a terminal (what the progress lines draw on)."""

    def isatty(self) -> bool:
        return True


def test_steps_draw_on_a_terminal_only_and_name_each_step_and_part() -> None:
    from cir.util.progress import Steps

    silent = io.StringIO()  # a log file or a pipe: nothing at all
    with Steps("analysis", {"fit": 2, "worlds": 1}, stream=silent) as steps:
        steps.next("fit")
        steps.next("worlds", parts=2)
        steps.advance()
    assert silent.getvalue() == ""
    quiet = _Terminal()  # --quiet: nothing either
    with Steps("analysis", enabled=False, stream=quiet) as steps:
        steps.next("fit")
    assert quiet.getvalue() == ""
    shown = _Terminal()
    with Steps("analysis", {"fit": 2, "worlds": 1}, stream=shown) as steps:
        steps.next("fit")
        steps.next("worlds", parts=2)
        steps.advance()
        steps.finish()
    text = shown.getvalue()
    assert "analysis:" in text and "fit" in text and "worlds 1/2" in text and "left" in text


def test_what_remains_is_the_time_so_far_scaled_by_the_weight_to_come(monkeypatch) -> None:
    import cir.util.progress as progress

    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    steps = progress.Steps("analysis", {"a": 1, "b": 3}, enabled=False)
    assert steps.remaining() is None  # nothing done: no estimate
    steps.next("a")
    now[0] += 10
    steps.next("b", parts=3)  # a done: 1 of 4 in 10 s
    assert steps.remaining() == pytest.approx(30)
    now[0] += 10
    steps.advance(2)  # 3 of 4 in 20 s
    assert steps.remaining() == pytest.approx(20 / 3)
