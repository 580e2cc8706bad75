"""The longest time a command leaves a user's terminal without a word: it is run under a
pseudo-terminal (as a user's shell runs it, so progress lines draw as they do there), every
chunk of output is stamped as it arrives, and the gaps between chunks are reported, the longest
first, each with the last line shown before it.

    python benchmarks/output_gaps.py --out gaps.json -- cir reproduce --quick --out /tmp/q
    python benchmarks/output_gaps.py --cir 'python -m cir' --pythonpath OLD_CHECKOUT -- ...

``--pythonpath`` runs another checkout's code (an earlier commit, for a before/after); the
command's own output is kept in the JSON's ``tail``. A gap is wall time, so the host's load
average (``os.getloadavg``) is recorded beside it.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import shlex
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _last_line(text: bytes) -> str:
    lines = [ln for ln in re.split(rb"[\r\n]", ANSI.sub(b"", text)) if ln.strip()]
    return lines[-1].decode("utf-8", "replace").strip()[:160] if lines else ""


def watch(argv: list[str], env: dict[str, str]) -> dict:
    """Run ``argv`` on a pseudo-terminal; the stamped gaps between its chunks of output."""
    leader, follower = pty.openpty()
    # a terminal's size, as a user's window has one (tqdm reads it; 0 x 0 draws nothing)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    stamps: list[tuple[float, bytes]] = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        stamps.append((time.monotonic() - start, chunk))
    code = proc.wait()
    end = time.monotonic() - start
    os.close(leader)
    gaps, seen, last = [], b"", 0.0
    for t, chunk in stamps:
        gaps.append({"seconds": round(t - last, 2), "at": round(last, 1), "after": _last_line(seen)})
        seen, last = (seen + chunk)[-4000:], t
    gaps.append({"seconds": round(end - last, 2), "at": round(last, 1), "after": _last_line(seen)})
    gaps.sort(key=lambda g: -g["seconds"])
    return {"argv": argv, "exit": code, "wall_seconds": round(end, 1), "chunks": len(stamps),
            "longest_gaps": gaps[:5], "load_average": os.getloadavg(), "tail": _last_line(seen)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON to write")
    parser.add_argument("--pythonpath", default=None, help="a checkout whose cir the command runs")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        parser.error("give the command after --")
    env = dict(os.environ, COLUMNS="100", LINES="40", TERM=os.environ.get("TERM", "xterm"))
    env.pop("NO_COLOR", None)
    if args.pythonpath:
        env["PYTHONPATH"] = str(Path(args.pythonpath).resolve())
    result = watch(argv, env)
    result["pythonpath"] = args.pythonpath
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    top = result["longest_gaps"][0]
    print(f"{shlex.join(argv)}: exit {result['exit']}, {result['wall_seconds']} s, longest silence "
          f"{top['seconds']} s at {top['at']} s after {top['after']!r}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
