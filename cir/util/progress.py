"""Progress on a terminal: the run's bar (tasks done, and what the running tasks have done so
far) and the line of a long computation in steps (:class:`Steps`: an analysis, the planted worlds).

The bar of ``cir run`` advances per task, and with a slow agent (an LLM) one task takes
minutes. So each worker reports its task's counts so far (agent calls, finished
episodes) through a queue, at most every ``every`` seconds (:class:`TaskReporter`), and
a thread of the parent shows their sums beside the bar (:class:`RunProgress`).

Reports only feed the display: none changes a result, and one that cannot be delivered
(the parent is gone) is dropped. Workers on a Dask cluster do not report (another
machine cannot reach the queue); the bar still advances per task.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

#: Seconds between two reports of one worker: the display needs no more.
REPORT_EVERY = 0.5

#: Seconds between two lines of a bar written to a log file or a pipe (not a terminal).
LOG_INTERVAL = 30.0


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (where a bar redraws itself in place)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed or detached stream
        return False


def bar_settings(stream: Any = None) -> dict[str, Any]:
    """tqdm settings for a bar on ``stream`` (default: stderr). In a terminal tqdm redraws in
    place as often as it likes; in a log file or a pipe each redraw is one more line, so
    there at most one every :data:`LOG_INTERVAL` seconds (and the last one on close)."""
    stream = sys.stderr if stream is None else stream
    if is_terminal(stream):
        return {"file": stream, "dynamic_ncols": True}
    return {"file": stream, "mininterval": LOG_INTERVAL}


def _requests_and_tokens(agent: Any) -> tuple[int, int]:
    """An LLM agent's HTTP requests and tokens so far (0, 0 for an agent without counters)."""
    stats = agent.stats() if callable(getattr(agent, "stats", None)) else {}
    tokens = int(stats.get("prompt_tokens", 0) or 0) + int(stats.get("completion_tokens", 0) or 0)
    return int(stats.get("http_requests", 0) or 0), tokens


@dataclass
class TaskReporter:
    """Called in the worker with a task's counts so far; sends them at most every ``every`` s.
    With ``agent`` (the task's), its HTTP requests and tokens so far go too."""

    channel: Any  # a queue (a Manager's proxy across processes)
    task_id: str
    every: float = REPORT_EVERY
    agent: Any = None
    _last: float = field(default=float("-inf"), repr=False)

    def __call__(self, agent_calls: int, episodes: int) -> None:
        now = time.monotonic()
        if now - self._last < self.every:
            return
        self._last = now
        requests, tokens = (0, 0) if self.agent is None else _requests_and_tokens(self.agent)
        try:
            self.channel.put((self.task_id, agent_calls, episodes, requests, tokens))
        except (OSError, EOFError):
            pass  # the parent (and its queue) is gone; the worker ends with it


class RunProgress:
    """The tasks bar of a run, with the agent calls and episodes of this session beside it.

    ``channel`` is the queue workers report to (None when disabled or on Dask). Use as a
    context manager; :meth:`task_done` when a task's result arrives.
    """

    def __init__(self, total: int, done: int, pairs: int, *, enabled: bool = True,
                 backend: str = "loky", jobs: int = 1, channel: Any = None) -> None:
        self.enabled = enabled
        self.pairs = pairs
        self.calls = 0  # of the finished tasks of this session
        self.episodes = 0
        self.requests = 0  # HTTP requests and tokens of the finished tasks of this session
        self.tokens = 0
        self.running: dict[str, tuple[int, int, int, int]] = {}
        self.finished: set[str] = set()
        self._lock = threading.Lock()
        self._manager: Any = None
        self._started = time.monotonic()
        self.channel: Any = channel if enabled else None  # given: the caller's queue
        if enabled and backend != "dask" and channel is None:
            if jobs > 1 and backend == "loky":
                # worker processes: a queue served by a manager process, which ends with
                # this one whatever kills it
                from cir.util.parallel import spawn_manager

                self._manager = spawn_manager()
                self.channel = self._manager.Queue()
            else:  # this process or its threads
                self.channel = queue.Queue()
        self._thread: threading.Thread | None = None
        bar = bar_settings()
        self._live = is_terminal(bar["file"])  # a terminal: running counts are redrawn as they come
        self._bar = tqdm(total=total, initial=done, unit="task", disable=not enabled, desc="tasks", **bar)
        self._show()

    def reporter(self, task_id: str) -> TaskReporter | None:
        return None if self.channel is None else TaskReporter(self.channel, task_id)

    def __enter__(self) -> RunProgress:
        if self.channel is not None:
            self._thread = threading.Thread(target=self._listen, name="cir-progress", daemon=True)
            self._thread.start()
        return self

    def _listen(self) -> None:
        while True:
            try:
                item = self.channel.get(timeout=0.25)
            except queue.Empty:
                continue
            except (OSError, EOFError):
                return
            if item is None:
                return
            task_id, calls, episodes, *rest = item
            requests, tokens = (rest + [0, 0])[:2]
            with self._lock:
                if task_id not in self.finished:  # a late report of a finished task: ignored
                    self.running[task_id] = (calls, episodes, requests, tokens)
                    self._show()

    def task_done(self, task_id: str, pairs: int, agent_calls: int, episodes: int,
                  requests: int = 0, tokens: int = 0) -> None:
        """A task's result arrived: its final counts replace its reports."""
        with self._lock:
            self.finished.add(task_id)
            self.running.pop(task_id, None)
            self.pairs += pairs
            self.calls += agent_calls
            self.episodes += episodes
            self.requests += requests
            self.tokens += tokens
            self._show(refresh=False)
            self._bar.update(1)  # draws the new counts too

    def counts(self) -> dict[str, int]:
        """Pairs so far, and the agent calls, episodes, HTTP requests and tokens of this
        session (running tasks included)."""
        running = list(self.running.values())
        return {"pairs": self.pairs, "episodes": self.episodes + sum(r[1] for r in running),
                "agent_calls": self.calls + sum(r[0] for r in running),
                "requests": self.requests + sum(r[2] for r in running),
                "tokens": self.tokens + sum(r[3] for r in running)}

    def rates(self) -> dict[str, float]:
        """HTTP requests and tokens per second of this session so far."""
        c, elapsed = self.counts(), max(time.monotonic() - self._started, 1e-9)
        return {"requests_per_s": c["requests"] / elapsed, "tokens_per_s": c["tokens"] / elapsed}

    def _show(self, refresh: bool = True) -> None:
        c = self.counts()
        text = f"pairs={c['pairs']}, episodes={c['episodes']}, agent calls={c['agent_calls']}"
        if c["requests"]:  # an LLM agent: how fast its server is being asked
            r = self.rates()
            text += f", {r['requests_per_s']:.1f} requests/s, {r['tokens_per_s']:.0f} tokens/s"
        self._bar.set_postfix_str(text, refresh=refresh and self._live)

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            try:
                self.channel.put(None)
            except (OSError, EOFError):
                pass
            self._thread.join(timeout=5)
        if self._manager is not None:
            self._manager.shutdown()
        self._bar.close()


#: Seconds between two redraws of a :class:`Steps` line while nothing advances (its clock ticks).
TICK = 1.0


class Steps:
    """One terminal line for a long computation done in steps (an analysis: its sections; the
    planted worlds: their replicates): the step it is in, how far the whole has come and an
    estimate of what remains, redrawn every :data:`TICK` seconds so that its clock moves while a
    step computes.

    ``weights``: each step's expected share of the time, by name (a step not named weighs 1);
    the estimate of what remains is the time so far scaled by the weight still to come. On a
    terminal only, and only when ``enabled`` (``--quiet``): in a log file or a pipe it writes
    nothing. It only shows: no result depends on it. Use as a context manager; :meth:`step`
    around each step, :meth:`advance` for the parts of a step (each part ``1 / parts`` of it).
    """

    def __init__(self, what: str, weights: dict[str, float] | None = None, *, enabled: bool = True,
                 stream: Any = None) -> None:
        self.weights = dict(weights or {})
        stream = sys.stderr if stream is None else stream
        self.enabled = enabled and is_terminal(stream)
        self._lock = threading.Lock()
        self._done = 0.0  # weight of the finished steps and parts
        self._current: tuple[str, float, int] | None = None  # (name, weight, parts)
        self._parts_done = 0
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._bar = tqdm(total=max(sum(self.weights.values()), 1e-9), disable=not self.enabled, file=stream,
                         dynamic_ncols=True, desc=what, leave=False,
                         bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}{postfix}")
        self._ticker: threading.Thread | None = None

    @classmethod
    def off(cls) -> Steps:
        """Steps that show nothing (a caller without a terminal, a test)."""
        return cls("", enabled=False)

    def __enter__(self) -> Steps:
        if self.enabled:
            self._ticker = threading.Thread(target=self._tick, name="cir-steps", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        self._bar.close()

    def weight(self, name: str) -> float:
        return float(self.weights.get(name, 1.0))

    @contextmanager
    def step(self, name: str, parts: int = 0, weight: float | None = None) -> Iterator[Steps]:
        """Inside it, the line names ``name``; on leaving, the step's weight is done (``parts``:
        how many :meth:`advance` calls the step makes; ``weight``: its weight, if not the table's)."""
        w = self.weight(name) if weight is None else float(weight)
        if weight is not None or name not in self.weights:  # a step the table did not foresee
            self.weights[name] = w
            self._bar.total = max(sum(self.weights.values()), 1e-9)
        with self._lock:
            self._current, self._parts_done = (name, w, max(int(parts), 0)), 0
            start = self._done
        self._show()
        try:
            yield self
        finally:
            with self._lock:
                self._done, self._current = start + w, None
            self._show()

    def next(self, name: str, parts: int = 0) -> None:
        """End the current step (if any) and begin ``name``: :meth:`step` for code that runs its
        steps one after another without a block each."""
        self.finish()
        w = self.weight(name)
        if name not in self.weights:
            self.weights[name] = w
            self._bar.total = max(sum(self.weights.values()), 1e-9)
        with self._lock:
            self._current, self._parts_done = (name, w, max(int(parts), 0)), 0
        self._show()

    def finish(self) -> None:
        """End the current step (its whole weight done)."""
        with self._lock:
            if self._current is None:
                return
            self._done, self._current = self._done + self._current[1], None
        self._show()

    def advance(self, parts: int = 1) -> None:
        """``parts`` more parts of the current step are done."""
        with self._lock:
            if self._current is None or not self._current[2]:
                return
            name, w, total = self._current
            self._parts_done = min(self._parts_done + parts, total)
        self._show()

    def remaining(self) -> float | None:
        """Seconds still to come, estimated from the weight done so far (None before any)."""
        with self._lock:
            done = self._done
            if self._current is not None and self._current[2]:
                done += self._current[1] * self._parts_done / self._current[2]
        total = sum(self.weights.values())
        if done <= 0:
            return None
        return (time.monotonic() - self._started) * max(total - done, 0.0) / done

    def _text(self) -> str:
        left = self.remaining()
        eta = "time left not known yet" if left is None else f"about {_clock(left)} left"
        with self._lock:
            current = self._current
            parts = f" {self._parts_done}/{current[2]}" if current is not None and current[2] else ""
        return f"{eta}; {current[0]}{parts}" if current is not None else eta

    def _show(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            done = self._done
            if self._current is not None and self._current[2]:
                done += self._current[1] * self._parts_done / self._current[2]
        self._bar.n = min(done, self._bar.total)
        self._bar.set_postfix_str(self._text(), refresh=False)
        self._bar.refresh()

    def _tick(self) -> None:
        while not self._stop.wait(TICK):
            self._show()


def _clock(seconds: float) -> str:
    """``1 min 05 s``, ``42 s``."""
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"
