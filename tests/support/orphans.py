"""What a command leaves running after ``kill -9`` of it: its helper processes, counted exactly.

Run as a script, this process becomes a *child subreaper* (Linux ``prctl``), starts the command,
waits ``--after`` seconds, kills it with SIGKILL and then watches for ``--wait`` seconds at most (until
nothing it started is left: nothing is left to start another): every
process the command started (workers, a manager, resource trackers), re-parented to this one
once the command is gone, is seen here however deep it was. It prints one JSON line: how many
processes the command had just before the kill, how many are left at the end of the wait,
their command lines, and how long the last one took to end. Whatever is left is then killed
(by its pid: only descendants of the command) so that nothing outlives the check.

    python tests/support/orphans.py --after 3 --wait 10 -- cir run ... --jobs 2
    python tests/support/orphans.py --run-dir RUN --after 0.5 -- cir run ... --out RUN --jobs 2
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

PR_SET_CHILD_SUBREAPER = 36


def _reap() -> None:
    """Collect every ended child (adopted ones too), so none stays a zombie."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _alive() -> list[psutil.Process]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _tasks_done(run_dir: Path) -> int:
    """Tasks in the run's store (written after every task; run.json only now and then)."""
    from cir.pairs.store import EPISODES, scan_store

    return len(scan_store(run_dir / EPISODES).summaries())


def kill_and_count(cmd: list[str], after: float, wait: float, env: dict[str, str] | None = None,
                   run_dir: Path | None = None) -> dict[str, Any]:
    """Start ``cmd``, SIGKILL it after ``after`` seconds (counted from when ``run_dir`` records a
    finished task, when given: the workers are then surely running), and count what it left
    ``wait`` seconds later."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 300
    while run_dir is not None and _tasks_done(run_dir) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(after)
    finished = proc.poll() is not None
    before = len(_alive()) - (0 if finished else 1)  # the command's helpers, not the command
    if not finished:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    t0, gone_after = time.monotonic(), None
    while time.monotonic() - t0 < wait:
        _reap()
        if not _alive():  # none left, so none can start another: the watch is over
            gone_after = round(time.monotonic() - t0, 2)
            break
        time.sleep(0.1)
    _reap()
    left = _alive()
    described = [[p.pid, " ".join(p.cmdline())[:200]] for p in left]
    for p in left:  # nothing outlives the check: each by its pid, all descendants of the command
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    time.sleep(0.2)
    _reap()
    return {"finished_before_kill": finished, "helpers_before_kill": before, "left": len(left),
            "left_processes": described, "all_gone_after_s": gone_after}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--after", type=float, required=True, help="seconds before the kill")
    ap.add_argument("--wait", type=float, default=10.0, help="seconds to watch after it at most")
    ap.add_argument("--run-dir", type=Path, default=None,
                    help="count --after from when this run folder records its first finished task")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    print(json.dumps(kill_and_count(cmd, args.after, args.wait, run_dir=args.run_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
