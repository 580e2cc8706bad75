"""Nothing outlives its run: after ``kill -9`` of ``cir run --jobs 2`` every helper process it
started (the workers, the queues' manager, the resource trackers) ends within seconds.

Counted exactly by tests/support/orphans.py, a child subreaper: whatever the command started is
re-parented to it once the command dies, however deep it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = "tests.support.keydoor:FAMILY"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kd-kill")
    subprocess.run([sys.executable, "-m", "cir", "tasks", "generate", "--family", ENV, "--split", "train", "--n", "40",
                    "--out", str(folder)], cwd=ROOT, check=True, capture_output=True)
    return folder / "train"


@pytest.mark.parametrize("mid_run, quiet", [(False, True), (True, True), (True, False)])
def test_kill_9_of_the_parent_leaves_no_process(tasks, tmp_path, mid_run, quiet):
    # at start-up (1 s in), or mid-run (0.5 s after the first task is written: the workers and
    # the manager are up); the progress bar's reports go through the manager's queue too
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "cir", "run", "--family", ENV, "--tasks", str(tasks), "--out", str(run),
           "--jobs", "2", *(["--quiet"] if quiet else [])]
    when = ["--run-dir", str(run), "--after", "0.5"] if mid_run else ["--after", "1"]
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "orphans.py"), *when,
                          "--wait", "120", "--", *cmd], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "KEYDOOR_STEP_SECONDS": "0.02"})
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert not found["finished_before_kill"]
    assert found["left"] == 0, found["left_processes"]
    if mid_run:  # the helpers were there (2 workers, the manager, resource trackers), and all went
        assert found["helpers_before_kill"] >= 3 and found["all_gone_after_s"] is not None
