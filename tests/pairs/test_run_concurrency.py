"""A run's results never depend on its schedule (cir.pairs.run through cir.pairs.farm): the
same paired.csv, episode records and HTTP requests at any --jobs, --backend and
--concurrency with a deterministic server; resume; usage and the request settings in
run.json; one queue for several runs (a study's cohorts)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from support.fake_openai import FakeOpenAI, Reply, digest, prompt_text
from support.replay import fake_settings, fake_tasks, make_fake_env

from cir.agents.limits import RequestLimits
from cir.pairs.record import RunRecord
from cir.pairs.run import RunSpec, run_experiment, run_experiments
from cir.pairs.settings import ReplaySettings, RunSettings
from cir.pairs.store import RunStore
from cir.util.errors import CirError

GRID = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1, 2),
                      operations=("refresh", "replan"), max_turns=12, max_actions=12)
ACTIONS = ["go to drawer 1", "go to shelf 1", "go to shelf 2", "go to desk 1", "take mug 1 from drawer 1",
           "take mug 1 from shelf 1", "move mug 1 to desk 1", "look", "think: where is the mug?"]
TASKS = fake_tasks(6)


def answer(path, body, attempt):
    """The server as a pure function of the request."""
    return Reply(text=ACTIONS[digest(prompt_text(body)) % len(ACTIONS)])


def llm_settings(server: FakeOpenAI, **more) -> RunSettings:
    return RunSettings(replay=GRID, agent="openai-completion:fake", base_url=server.base_url,
                       env_factory=make_fake_env, **more)


def episodes(out: Path) -> list[str]:
    """Every line of the episode store, in a fixed order (members are appended as tasks end):
    the episode records byte for byte; of each task's summary line all but its wall
    ``seconds`` and ``env_restores`` (a cursor that another thread moved is restored: engine
    work, not a result), which differ between any two runs."""
    with gzip.open(out / "episodes.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = list(f)
    return sorted(_timeless(line) for line in lines)


def _timeless(line: str) -> str:
    data = json.loads(line)
    if data.get("kind") != "task":
        return line
    data.pop("seconds", None)
    data["costs"].pop("env_restores", None)
    return json.dumps(data, sort_keys=True)


def costs(record: RunRecord) -> dict:
    return {k: v for k, v in vars(record.costs).items() if k != "env_restores"}


def run(out: Path, settings: RunSettings, tasks=TASKS) -> RunRecord:
    return run_experiment(tasks, out, settings, tasks_source="fake", progress=False, echo=lambda _: None)


@pytest.fixture(scope="module")
def sequential(tmp_path_factory):
    out = tmp_path_factory.mktemp("seq") / "run"
    with FakeOpenAI(answer=answer) as server:
        record = run(out, llm_settings(server, jobs=1))
        requests = server.count
    return out, record, requests


@pytest.mark.parametrize("jobs,backend,concurrency", [(1, "loky", 8), (2, "loky", 16),
                                                       (2, "threading", 6), (2, "loky", 1)])
def test_any_jobs_and_concurrency_give_the_sequential_table_episodes_and_requests(
        sequential, tmp_path, jobs, backend, concurrency):
    seq_out, seq_record, seq_requests = sequential
    with FakeOpenAI(answer=answer, latency=0.005) as server:
        record = run(tmp_path / "run", llm_settings(server, jobs=jobs, backend=backend,
                                                    requests=RequestLimits(concurrency=concurrency)))
        stats = server.stats()
    assert (tmp_path / "run" / "paired.csv").read_bytes() == (seq_out / "paired.csv").read_bytes()
    assert episodes(tmp_path / "run") == episodes(seq_out)
    assert stats["requests"] == seq_requests  # every distinct context asked once, whoever asked first
    assert costs(record) == costs(seq_record)
    session = record.sessions[-1]
    assert session.llm["http_requests"] == seq_requests and session.llm["retries"] == 0
    assert session.requests["concurrency"] == concurrency
    if concurrency > jobs:
        assert stats["peak_in_flight"] > jobs, stats  # requests overlapped within a process
    if jobs > 1 and concurrency > 8 and backend == "loky":  # both processes had tasks at once
        assert stats["peak_in_flight"] > concurrency // jobs, stats


def test_usage_and_request_settings_are_in_run_json(sequential):
    out, record, requests = sequential
    data = json.loads((out / "run.json").read_text())
    session = data["timings"]["sessions"][-1]
    # the fake server counts the words of the prompt and of the reply as tokens
    assert session["llm"]["prompt_tokens"] > 50 * requests
    assert requests <= session["llm"]["completion_tokens"] <= 6 * requests
    assert session["llm"]["replies_with_usage"] == requests
    assert session["requests"] == {"concurrency": 1, "rpm": None, "tpm": None, "timeout": 120.0,
                                   "retries": 4, "patience": 600.0}
    assert session["limiter"]["requests"] == requests and session["limiter"]["refusals"] == 0
    assert RunRecord.read(RunStore(out)).sessions[-1].llm == session["llm"]  # read back as written


def test_a_run_stopped_by_an_error_resumes_at_another_concurrency_with_the_same_table(sequential, tmp_path):
    seq_out, _, seq_requests = sequential
    broken = {"on": True}

    def fails_for_one_task(path, body, attempt):
        if broken["on"] and "shelf 3" in prompt_text(body):  # task003's world only
            return Reply(status=400, raw='{"error": "bad request"}')
        return answer(path, body, attempt)

    world = [t for t in TASKS if "shelf 3" in make_fake_env(t).reset()]
    assert world, "a task of the cohort must have a shelf 3"
    out = tmp_path / "run"
    with FakeOpenAI(answer=fails_for_one_task) as server:
        with pytest.raises(CirError, match="HTTP 400"):
            run(out, llm_settings(server, jobs=1, requests=RequestLimits(concurrency=4)))
        first = server.count
        broken["on"] = False
        record = run(out, llm_settings(server, jobs=2, requests=RequestLimits(concurrency=12)))
        total = server.count
    assert record.complete and len(record.sessions) == 2
    assert (out / "paired.csv").read_bytes() == (seq_out / "paired.csv").read_bytes()
    assert episodes(out) == episodes(seq_out)
    # the replies of the first session are kept: together no more than one run's requests
    # (plus the refused ones, which cached nothing)
    assert total - first <= seq_requests and first > 0


def test_an_extension_at_concurrency_reads_the_old_replies(sequential, tmp_path):
    small = ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1), operations=("refresh",),
                           max_turns=12, max_actions=12)
    with FakeOpenAI(answer=answer) as server:
        run(tmp_path / "old", RunSettings(replay=small, agent="openai-completion:fake",
                                          base_url=server.base_url, env_factory=make_fake_env))
        before = server.count
        record = run(tmp_path / "new", llm_settings(server, jobs=2, requests=RequestLimits(concurrency=8),
                                                    extend=str(tmp_path / "old")))
        added = server.count - before
    seq_out, _, seq_requests = sequential
    assert (tmp_path / "new" / "paired.csv").read_bytes() == (seq_out / "paired.csv").read_bytes()
    assert record.sessions[-1].llm["http_requests"] == added == seq_requests - before


def test_the_builtin_like_agent_gives_the_same_table_through_the_scheduler(tmp_path):
    one = run(tmp_path / "one", fake_settings(GRID, jobs=1))
    many = run(tmp_path / "many", fake_settings(GRID, jobs=2, requests=RequestLimits(concurrency=8)))
    assert (tmp_path / "one" / "paired.csv").read_bytes() == (tmp_path / "many" / "paired.csv").read_bytes()
    assert episodes(tmp_path / "one") == episodes(tmp_path / "many")
    assert costs(one) == costs(many)


def test_several_runs_share_one_queue_and_each_folder_is_its_own_run(tmp_path):
    small = ReplaySettings(conditions=("clean", "stale1"), delays=(0,), operations=("refresh",))
    alone = [run(tmp_path / "a", fake_settings(GRID), TASKS[:3]),
             run(tmp_path / "b", fake_settings(small), TASKS[3:])]
    specs = [RunSpec(TASKS[:3], tmp_path / "A", fake_settings(GRID, jobs=2, requests=RequestLimits(concurrency=4)), "fake"),
             RunSpec(TASKS[3:], tmp_path / "B", fake_settings(small, jobs=2, requests=RequestLimits(concurrency=4)), "fake")]
    together = run_experiments(specs, progress=False, echo=lambda _: None)
    for one, both, a, b in zip(alone, together, "ab", "AB", strict=True):
        assert both.complete and both.counts == one.counts
        assert (tmp_path / b / "paired.csv").read_bytes() == (tmp_path / a / "paired.csv").read_bytes()
        assert episodes(tmp_path / b) == episodes(tmp_path / a)
    again = run_experiments(specs, progress=False, echo=lambda _: None)  # complete: nothing runs
    assert [r.sessions for r in again] == [r.sessions for r in together]


def test_several_base_urls_spread_the_requests(sequential, tmp_path):
    seq_out, _, seq_requests = sequential
    with FakeOpenAI(answer=answer, latency=0.01) as one, FakeOpenAI(answer=answer, latency=0.01) as two:
        settings = RunSettings(replay=GRID, agent="openai-completion:fake",
                               base_url=f"{one.base_url},{two.base_url}", env_factory=make_fake_env,
                               requests=RequestLimits(concurrency=8))
        record = run(tmp_path / "run", settings)
        counts = one.count, two.count
    assert (tmp_path / "run" / "paired.csv").read_bytes() == (seq_out / "paired.csv").read_bytes()
    assert sum(counts) == seq_requests and min(counts) > seq_requests / 4, counts
    assert record.complete and record.sessions[-1].llm["http_requests"] == seq_requests
    with pytest.raises(CirError, match="base_url"):
        RunSettings(base_url="http://a:1/v1,ftp://b")


def test_the_queue_puts_the_largest_grids_first_in_the_runs_order_within_a_size(tmp_path):
    from cir.pairs.run import _longest_first, _Pending

    class Run:
        def __init__(self, todo):
            self.todo = todo

    small = ReplaySettings(conditions=("clean",), delays=(0,), operations=("refresh",))
    pending = [_Pending(Run(["a1", "a2"]), None, fake_settings(small), ()),
               _Pending(Run(["b1", "b2"]), None, fake_settings(GRID), ()),
               _Pending(Run(["c1"]), None, fake_settings(GRID), ())]
    assert [(j.run, j.task) for j in _longest_first(pending)] == [
        (1, "b1"), (1, "b2"), (2, "c1"), (0, "a1"), (0, "a2")]
