"""The run's progress bar: tasks done, and what the running tasks have done so far.

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
