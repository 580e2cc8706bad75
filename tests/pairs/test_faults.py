"""Fault injection: kills at random points, damage to the store at random offsets, and an
LLM server that answers 500/429/null/garbage/slow.

What every trial asserts: nothing silently wrong (a read of the run either refuses or
gives rows of the uninterrupted table, and a read that does not ask for partial results
gives that table whole), nothing lost (members intact before a resume are in the store
after it, and only the missing or damaged tasks run again), and the resumed table is
byte-identical to an uninterrupted run. The default run does a few trials of each loop;
``pytest -m slow`` runs the long loops (the counts are printed with ``-s``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fake_openai import FAULTS, FakeOpenAI, Reply
from support.replay import fake_settings, fake_tasks, make_fake_env
from support.replies import cached_lines

from cir.agents.cache import valid_record
from cir.agents.llm import LLMAgent
from cir.families.alfworld.prompts import PROMPT as ALFWORLD_PROMPT  # noqa: E402
from cir.pairs.episode_record import EpisodeRecord
from cir.pairs.paired import read_paired, run_table
from cir.pairs.replay import ReplaySettings
from cir.pairs.run import run_experiment
from cir.pairs.settings import RunSettings
from cir.pairs.store import EPISODES, RunStore, scan_store
from cir.util.errors import CirError

HERE = Path(__file__).resolve().parents[1]  # the tests folder
N_TASKS = 6
AGENT = "fake:0.001"  # a little slow, so that kills land mid-run
SETTINGS = ReplaySettings(operations=("refresh", "replan"))

SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from support.replay import fake_settings, fake_tasks
from cir.pairs.run import run_experiment
from cir.pairs.settings import ReplaySettings
run_experiment(fake_tasks({n}), {out!r}, fake_settings(ReplaySettings(operations=("refresh", "replan")), {agent!r}),
               tasks_source="fake", progress=False, echo=lambda s: None)
"""


def _run_inline(out: Path):
    return run_experiment(fake_tasks(N_TASKS), out, fake_settings(SETTINGS, AGENT),
                          tasks_source="fake", progress=False, echo=lambda s: None)


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    """An uninterrupted run."""
    out = tmp_path_factory.mktemp("reference") / "run"
    _run_inline(out)
    return out


@pytest.fixture(scope="module")
def reference(straight) -> str:
    """paired.csv of an uninterrupted run."""
    return (straight / "paired.csv").read_text()


def _payloads(path: Path) -> dict[str, bytes]:
    """task_id -> decompressed member, for the intact members of a store."""
    if not path.exists():
        return {}
    data = path.read_bytes()
    return {m.task_id: gzip.decompress(data[m.start:m.end]) for m in scan_store(path).members}


def _sessions(run_dir: Path) -> int:
    try:
        return len(json.loads((run_dir / "run.json").read_text())["timings"]["sessions"])
    except (FileNotFoundError, ValueError, KeyError):
        return 0


# -- reads between faults ----------------------------------------------------------------------


def _files(run_dir: Path) -> dict[str, bytes]:
    if not run_dir.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir()) if p.is_file()}


def check_reads(run_dir: Path, reference: str) -> None:
    """Nothing silently wrong: a checked read gives the whole reference table or refuses;
    a partial read gives reference rows only, and says how partial; no read writes a file."""
    lines = reference.splitlines()
    header, rows = lines[0], set(lines[1:])
    before = _files(run_dir)
    try:
        df = read_paired(run_dir)
    except CirError:
        pass
    else:
        text, status = run_table(run_dir)
        assert text == reference and not status["partial"]
        assert not df.attrs["run"]["partial"] and len(df) == len(rows)
    try:
        text, status = run_table(run_dir, allow_partial=True)
    except CirError:
        assert _files(run_dir) == before
        return  # nothing to read yet (no run record, say)
    assert _files(run_dir) == before  # reading repairs nothing: only a writer does
    got = text.splitlines()
    if not status["partial"]:
        assert text == reference  # (the store may be damaged since: the table is derived whole)
        return
    if len(got) > 1:
        assert got[0] == header and set(got[1:]) <= rows
    tasks_with_rows = {line.split(",", 1)[0] for line in got[1:]}
    assert len(tasks_with_rows) <= status["tasks_done"] <= N_TASKS


# -- damage --------------------------------------------------------------------------------------


def corrupt(run_dir: Path, rng: random.Random) -> str:
    """One random fault to the folder's files; what was done."""
    store, paired = run_dir / EPISODES, run_dir / "paired.csv"
    kinds = ["flip", "truncate", "insert", "cut_table", "delete_table", "stale_lock"]
    kind = rng.choice(kinds)
    if kind in ("flip", "truncate", "insert") and (not store.exists() or store.stat().st_size < 2):
        kind = "stale_lock"
    if kind in ("cut_table", "delete_table") and not paired.exists():
        kind = "stale_lock"
    if kind == "flip":
        data = bytearray(store.read_bytes())
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= rng.randrange(1, 256)
        store.write_bytes(bytes(data))
    elif kind == "truncate":
        data = store.read_bytes()
        store.write_bytes(data[: rng.randrange(len(data))])
    elif kind == "insert":
        data = store.read_bytes()
        at = rng.randrange(len(data) + 1)
        store.write_bytes(data[:at] + rng.randbytes(rng.randint(1, 40)) + data[at:])
    elif kind == "cut_table":
        text = paired.read_text()
        paired.write_text(text[: rng.randrange(len(text) + 1)])
    elif kind == "delete_table":
        paired.unlink()
    else:  # a lock file left by a dead process
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "run.lock").write_text(json.dumps({"pid": 999999, "host": socket.gethostname(),
                                                      "started": "then"}))
    return kind


# -- kill at random points ----------------------------------------------------------------------


def kill_trial(tmp_path: Path, seed: int, reference: str) -> dict[str, int]:
    """Start, SIGKILL at a random moment (1-3 times), damage the files now and then, check
    every read in between, then resume: the table must be the uninterrupted one."""
    rng = random.Random(seed)
    out = tmp_path / f"trial{seed}"
    kills = corruptions = 0
    for _ in range(rng.randint(1, 3)):
        proc = subprocess.Popen(
            [sys.executable, "-c", SCRIPT.format(tests=str(HERE), n=N_TASKS, out=str(out), agent=AGENT)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + rng.uniform(0.5, 5.0)
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        _, err = proc.communicate()
        assert proc.returncode in (0, -signal.SIGKILL), err.decode()[-2000:]
        if rng.random() < 0.5:
            corrupt(out, rng)
            corruptions += 1
        check_reads(out, reference)
    intact = _payloads(out / EPISODES)
    before = _sessions(out)
    record = _run_inline(out)
    final = _payloads(out / EPISODES)
    assert all(final.get(task) == payload for task, payload in intact.items())  # nothing lost
    if len(record.sessions) > before:  # this resume ran tasks: only the missing ones
        assert record.sessions[-1].tasks_run == N_TASKS - len(intact)
    else:
        assert len(intact) == N_TASKS
    assert len(final) == N_TASKS and scan_store(out / EPISODES).sound
    check_reads(out, reference)
    differed = int((out / "paired.csv").read_text() != reference)
    return {"trials": 1, "kills": kills, "corruptions": corruptions, "differed": differed}


def _kill_loop(tmp_path: Path, reference: str, trials: int) -> dict[str, int]:
    totals = {"trials": 0, "kills": 0, "corruptions": 0, "differed": 0}
    for seed in range(trials):
        for key, value in kill_trial(tmp_path, seed, reference).items():
            totals[key] += value
    print(f"\nkill loop: {totals}")
    assert totals["differed"] == 0
    return totals


def test_kills_at_random_points_resume_to_the_same_table(tmp_path, reference):
    totals = _kill_loop(tmp_path, reference, trials=2)
    assert totals["trials"] == 2


@pytest.mark.slow
def test_kill_loop_of_twenty_trials(tmp_path, reference):
    totals = _kill_loop(tmp_path, reference, trials=24)
    assert totals["kills"] >= 20 and totals["corruptions"] >= 5


@pytest.mark.slow
def test_kill_loop_on_the_real_engine_through_the_cli(tmp_path):
    """`cir run` with the built-in agent on generated tasks, killed at random, resumed."""
    from cir.families.alfworld.generate import generate_split

    generate_split(tmp_path / "tasks", "valid_unseen", 3, 0, progress=False, max_plan_length=9)
    argv = [sys.executable, "-m", "cir", "run", "--tasks", str(tmp_path / "tasks" / "valid_unseen"),
            "--conditions", "clean,stale2", "--delays", "0,1", "--operations", "refresh", "--quiet"]
    started = time.monotonic()
    subprocess.run([*argv, "--out", str(tmp_path / "straight")], check=True, capture_output=True)
    whole = time.monotonic() - started  # kills land inside a run however fast the engine is
    reference = (tmp_path / "straight" / "paired.csv").read_text()
    rng = random.Random(0)
    kills = 0
    for trial in range(3):
        out = tmp_path / f"killed{trial}"
        for _ in range(2):
            proc = subprocess.Popen([*argv, "--out", str(out)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.2, 0.8) * whole)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait()
        subprocess.run([*argv, "--out", str(out)], check=True, capture_output=True)
        assert (out / "paired.csv").read_text() == reference
    assert kills >= 3


# -- damage to the store at random offsets ----------------------------------------------------------


def _store_with_tasks(path: Path, n: int = 8) -> dict[str, bytes]:
    store = RunStore(path)
    store.open()
    for i in range(n):
        rows = [{"task_id": f"t{i}", "delay": d, "y0": i % 2} for d in range(3)]
        episode = EpisodeRecord(f"t{i}", "factual", "x" * (50 * i))  # members of different sizes
        store.append_task({"task_id": f"t{i}", "rows": rows}, [episode] * 3)
    return _payloads(store.episodes_path)


def damage_trial(tmp_path: Path, seed: int) -> dict[str, int]:
    """Damage a store at random offsets; every member untouched by the damage must come back
    intact and unchanged, none may come back changed; open() keeps exactly those."""
    rng = random.Random(seed)
    run_dir = tmp_path / f"store{seed}"
    original = _store_with_tasks(run_dir)
    path = run_dir / EPISODES
    data = bytearray(path.read_bytes())
    bounds = [(m.start, m.end, m.task_id) for m in scan_store(path).members]
    kind = rng.choice(["flip", "truncate", "insert", "zeros"])
    hit: set[str] = set()
    if kind == "flip":
        for at in rng.sample(range(len(data)), rng.randint(1, 4)):
            data[at] ^= rng.randrange(1, 256)
            hit |= {t for s, e, t in bounds if s <= at < e}
    elif kind == "zeros":
        at = rng.randrange(len(data))
        width = rng.randint(1, 64)
        data[at:at + width] = bytes(len(data[at:at + width]))
        hit |= {t for s, e, t in bounds if s < at + width and at < e}
    elif kind == "truncate":
        at = rng.randrange(len(data))
        del data[at:]
        hit |= {t for s, e, t in bounds if e > at}
    else:
        at = rng.randrange(len(data) + 1)
        data[at:at] = rng.randbytes(rng.randint(1, 64))
        hit |= {t for s, e, t in bounds if s < at < e}
    path.write_bytes(bytes(data))
    scan = scan_store(path)
    found = _payloads(path)
    assert all(found[t] == original[t] for t in found)  # nothing comes back changed
    assert set(original) - hit <= set(found)  # nothing untouched is lost
    done = RunStore(run_dir).open().summaries()
    assert sorted(done) == sorted(found) and _payloads(path) == found
    assert scan_store(path).sound and scan_store(path).torn is None
    return {"trials": 1, "damaged": len(scan.damaged), "tasks_to_rerun": len(set(original) - set(found)),
            kind: 1}


def _damage_loop(tmp_path: Path, trials: int) -> dict[str, int]:
    totals = {"trials": 0, "damaged": 0, "tasks_to_rerun": 0, "flip": 0, "truncate": 0, "insert": 0, "zeros": 0}
    for seed in range(trials):
        for key, value in damage_trial(tmp_path, seed).items():
            totals[key] += value
    print(f"\nstore damage loop: {totals}")
    assert all(totals[kind] > 0 for kind in ("flip", "truncate", "insert", "zeros"))  # every kind tried
    # every trial ran its checks (damage_trial asserts them), and the loop met the damage it
    # is for: most trials damage a member, and some damage costs tasks (and some costs none)
    assert totals["trials"] == trials
    assert totals["damaged"] >= trials // 2
    assert 0 < totals["tasks_to_rerun"] < trials * 8
    return totals


def test_store_damage_at_random_offsets(tmp_path):
    _damage_loop(tmp_path, trials=40)


@pytest.mark.slow
def test_store_damage_loop_long(tmp_path):
    totals = _damage_loop(tmp_path, trials=1000)  # asserts every trial and the loop's totals
    assert min(totals[kind] for kind in ("flip", "truncate", "insert", "zeros")) >= 150  # each kind often


def test_damaged_run_resumes_only_the_damaged_tasks(tmp_path, reference):
    out = tmp_path / "run"
    _run_inline(out)
    path = out / EPISODES
    members = scan_store(path).members
    data = bytearray(path.read_bytes())
    second = members[1]
    data[(second.start + second.end) // 2] ^= 0xFF  # inside the second of six members
    path.write_bytes(bytes(data))
    assert len(_payloads(path)) == N_TASKS - 1
    record = _run_inline(out)
    assert record.sessions[-1].tasks_run == 1 and record.sessions[-1].resumed_tasks == N_TASKS - 1
    assert (out / "paired.csv").read_text() == reference
    assert list(out.glob(f"{EPISODES}.set-aside-*"))


# -- an LLM server that fails -----------------------------------------------------------------------

ACTIONS = ["go to drawer 1", "go to shelf 1", "go to desk 1", "take mug 1 from drawer 1",
           "move mug 1 to desk 1", "look", "think: where is the mug?", "I do not know"]
KINDS = sorted(FAULTS)
INVALID = {"null", "empty", "garbage", "no_choices", "huge"}


def _digest(body: dict) -> int:
    return int(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest(), 16)


def faulty_server(faults: bool, log: list[str]):
    """The server's answer is a pure function of the request; with ``faults``, the first
    0-3 attempts of some requests fail in one of the FAULTS ways (logged by kind)."""

    def answer(path: str, body: dict, attempt: int) -> Reply:
        h = _digest(body)
        n_faults = [0, 0, 0, 0, 0, 1, 2, 3][h % 8] if faults else 0
        if attempt < n_faults:
            kind = KINDS[(h >> (8 + 4 * attempt)) % len(KINDS)]
            log.append(kind)
            return FAULTS[kind]
        return Reply(text=ACTIONS[(h >> 40) % len(ACTIONS)])

    return answer


class LLMFactory:
    """Agents for run_experiment: the LLM agent on the fake server, its cache in ``cache``."""

    def __init__(self, base_url: str, cache: Path) -> None:
        self.base_url, self.cache = base_url, cache

    def __call__(self, spec: str, seed: int = 0) -> LLMAgent:
        return LLMAgent("fake", self.base_url, cache_dir=self.cache, seed=seed, mode="completion",
                        timeout=0.3, max_retries=4, backoff=0.0, prompt=ALFWORLD_PROMPT)


LLM_SETTINGS = ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1), operations=("refresh",),
                              max_turns=8, max_actions=8)


def _llm_run(out: Path, base_url: str, cache: Path):
    return run_experiment(fake_tasks(3), out,
                          RunSettings(replay=LLM_SETTINGS, agent="openai-completion:fake",
                                      agent_factory=LLMFactory(base_url, cache), env_factory=make_fake_env),
                          tasks_source="fake", progress=False, echo=lambda s: None)


def test_llm_faults_give_the_table_of_a_healthy_server(tmp_path):
    healthy_log: list[str] = []
    with FakeOpenAI(answer=faulty_server(False, healthy_log)) as server:
        _llm_run(tmp_path / "healthy", server.base_url, tmp_path / "cache_h")
    faults: list[str] = []
    with FakeOpenAI(answer=faulty_server(True, faults)) as server:
        record = _llm_run(tmp_path / "faulty", server.base_url, tmp_path / "cache_f")
        requests = len(server.requests)
    assert (tmp_path / "faulty" / "paired.csv").read_bytes() == \
        (tmp_path / "healthy" / "paired.csv").read_bytes()
    print(f"\nLLM faults: {requests} requests, {len(faults)} faults "
          f"{ {k: faults.count(k) for k in sorted(set(faults))} }")
    assert {"500", "429", "null", "garbage", "slow"} <= set(faults), faults
    llm = record.sessions[-1].llm
    assert llm["http_requests"] == requests and llm["retries"] == len(faults)
    assert llm["invalid_answers"] == sum(f in INVALID for f in faults)
    assert llm["unparsable"] > 0  # "I do not know" is passed on, and counted
    cached = cached_lines(tmp_path / "cache_f")
    assert len(cached) == llm["model_calls"] and all(valid_record(line["record"]) for line in cached)
    # the same run from the cache alone: no HTTP request, every answer from disk
    with FakeOpenAI([Reply(status=500)]) as server:
        again = _llm_run(tmp_path / "cached", server.base_url, tmp_path / "cache_f")
        assert server.requests == []
    assert again.sessions[-1].llm["http_requests"] == 0
    assert again.sessions[-1].llm["cache_hits_disk"] == llm["model_calls"]
    assert (tmp_path / "cached" / "paired.csv").read_bytes() == \
        (tmp_path / "faulty" / "paired.csv").read_bytes()
    saved = json.loads((tmp_path / "cached" / "run.json").read_text())
    assert saved["timings"]["sessions"][-1]["llm"]["http_requests"] == 0


def test_llm_server_that_stays_broken_stops_the_run_resumably(tmp_path):
    """A server that only answers null: an error naming the server after retries; nothing
    cached, no task recorded; the same run resumes once the server is fixed."""
    with FakeOpenAI([Reply(text=None)]) as server:
        with pytest.raises(CirError, match=r"answer has no reply \(content null\).*5 attempt"):
            _llm_run(tmp_path / "run", server.base_url, tmp_path / "cache")
    assert cached_lines(tmp_path / "cache") == []
    assert not (tmp_path / "run" / EPISODES).exists() or not scan_store(tmp_path / "run" / EPISODES).members
    log: list[str] = []
    with FakeOpenAI(answer=faulty_server(False, log)) as server:
        record = _llm_run(tmp_path / "run", server.base_url, tmp_path / "cache")
    assert record.complete and len(record.sessions) == 2


def test_a_copied_run_folder_reads_and_resumes_like_the_original(tmp_path, straight):
    """cp -r of a run folder: no absolute path or lock travels with it."""
    shutil.copytree(straight, tmp_path / "copy")
    assert read_paired(tmp_path / "copy").equals(read_paired(straight))
    assert len(_run_inline(tmp_path / "copy").sessions) == 1
