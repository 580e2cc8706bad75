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
    subprocess.run([sys.executable, "-m", "cir", "tasks", "generate", "--env", ENV, "--split", "train", "--n", "40",
                    "--out", str(folder)], cwd=ROOT, check=True, capture_output=True)
    return folder / "train"


@pytest.mark.parametrize("after, quiet", [(1.0, True), (5.0, True), (5.0, False)])
def test_kill_9_of_the_parent_leaves_no_process(tasks, tmp_path, after, quiet):
    # the progress bar's reports go through the manager's queue too (quiet: only the farm's)
    cmd = [sys.executable, "-m", "cir", "run", "--env", ENV, "--tasks", str(tasks), "--out", str(tmp_path / "run"),
           "--jobs", "2", *(["--quiet"] if quiet else [])]
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "orphans.py"), "--after", str(after),
                          "--wait", "10", "--", *cmd], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "KEYDOOR_STEP_SECONDS": "0.02"})
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert not found["finished_before_kill"]
    assert found["left"] == 0, found["left_processes"]
    if after >= 5:  # killed mid-run: the helpers were there, and all went within seconds
        assert found["helpers_before_kill"] >= 3 and found["all_gone_after_s"] < 5
