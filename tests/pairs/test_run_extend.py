"""LLM runs that grow: a shared reply cache across runs, a run that extends another (more
delays, conditions, operations or tasks) without asking the model again for what is known,
and a folder that holds only a cache. The server is a fake whose answer is a pure function
of the request (the fake agent's reply to the chat messages), on the fake env."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.fake_openai import FakeOpenAI, Reply  # noqa: E402
from support.replay import FakeAgent, fake_tasks, make_fake_env  # noqa: E402
from support.replies import cached_lines

from cir.agents.factory import LLMConfig  # noqa: E402
from cir.cli import main  # noqa: E402
from cir.families import make_agent  # noqa: E402
from cir.pairs.paired import read_paired  # noqa: E402
from cir.pairs.replay import ReplaySettings  # noqa: E402
from cir.pairs.run import run_experiment  # noqa: E402
from cir.pairs.settings import RunSettings  # noqa: E402
from cir.pairs.store import AGENT_CACHE, read_episodes  # noqa: E402
from cir.util.errors import CirError  # noqa: E402

GRID = dict(conditions=("clean", "stale1"), operations=("refresh",), max_turns=10, max_actions=10)
SETTINGS = ReplaySettings(delays=(0, 1), **GRID)
LLM = LLMConfig(temperature=0.5, options={"top_p": 0.9})


def fake_model(path: str, body: dict, attempt: int) -> Reply:
    """What the fake agent would reply to the conversation (the system message aside)."""
    return Reply(text=FakeAgent().act(body["messages"][1:]))


@pytest.fixture()
def server():
    with FakeOpenAI(answer=fake_model) as srv:
        yield srv


def run(out: Path, server: FakeOpenAI, settings: ReplaySettings = SETTINGS, n: int = 3, **kw):
    kw.setdefault("llm", LLM)
    kw.setdefault("agent", "openai:fake")
    return run_experiment(fake_tasks(n), out, RunSettings(replay=settings, base_url=server.base_url,
                                                          env_factory=make_fake_env, **kw),
                          tasks_source="fake", progress=False, echo=lambda s: None)


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_extending_a_run_by_a_delay_asks_only_for_the_new_replies(tmp_path: Path, server) -> None:
    old = tmp_path / "old"
    first = run(old, server)
    asked_first = len(server.requests)
    assert first.sessions[-1].llm["http_requests"] == asked_first > 0
    before = files(old)

    new = tmp_path / "new"
    record = run(new, server, ReplaySettings(delays=(0, 1, 2), **GRID), extend=old)
    asked_new = len(server.requests) - asked_first
    session = record.sessions[-1]
    print(f"\nHTTP requests: first run {asked_first}, extension by delay 2: {asked_new} "
          f"(replies reused from the first run's cache: {session.llm['cache_hits_disk']})")
    assert 0 < asked_new < asked_first
    assert session.llm["http_requests"] == asked_new and session.extends == str(old)
    assert session.llm["cache_hits_disk"] > 0
    assert record.agent_params["temperature"] == 0.5 and record.agent_params["options"] == {"top_p": 0.9}
    # nothing of the earlier run changed, and its rows are the extension's rows at its delays
    assert files(old) == before
    was, now = read_paired(old), read_paired(new)
    assert set(now["delay"]) == {0, 1, 2}
    keys = ["task_id", "condition", "delay", "operation"]
    kept = now[now["delay"].isin([0, 1])].sort_values(keys).reset_index(drop=True)
    assert kept.equals(was.sort_values(keys).reset_index(drop=True))
    # the new folder's cache holds every reply it used: another copy costs no request at all
    with FakeOpenAI([Reply(status=500)]) as down:
        again = run(tmp_path / "again", down, ReplaySettings(delays=(0, 1, 2), **GRID),
                    cache_dir=new / AGENT_CACHE)
        assert down.requests == []
    assert again.sessions[-1].llm["http_requests"] == 0
    assert (tmp_path / "again" / "paired.csv").read_bytes() == (new / "paired.csv").read_bytes()


def test_an_extension_may_add_tasks_conditions_and_operations(tmp_path: Path, server) -> None:
    run(tmp_path / "old", server, n=2)
    asked = len(server.requests)
    bigger = ReplaySettings(delays=(0, 1), conditions=("clean", "stale1", "missing"),
                            operations=("refresh", "placebo"), max_turns=10, max_actions=10)
    record = run(tmp_path / "new", server, bigger, n=3, extend=tmp_path / "old")
    assert record.complete and record.counts.tasks == 3
    assert 0 < record.sessions[-1].llm["http_requests"] == len(server.requests) - asked


@pytest.mark.parametrize(("change", "needle"), [
    (dict(llm=LLMConfig(temperature=0.7, options={"top_p": 0.9})), "temperature 0.5 there, 0.7 here"),
    (dict(settings=ReplaySettings(delays=(0,), **GRID)), "drops its delays 1"),
    (dict(settings=ReplaySettings(delays=(0, 1), **{**GRID, "max_actions": 9})), "max_actions=10"),
    (dict(n=2), "lacks 1 of its 3 tasks (first: task002)"),
    (dict(seed=1), "seed 0 there, 1 here"),
])
def test_a_run_that_would_not_extend_the_other_is_refused(tmp_path: Path, server, change, needle) -> None:
    run(tmp_path / "old", server)
    with pytest.raises(CirError, match="--extend") as err:
        run(tmp_path / "new", server, extend=tmp_path / "old", **change)
    assert needle in str(err.value)
    assert not (tmp_path / "new").exists()


def test_extend_names_a_run_folder_other_than_its_own(tmp_path: Path, server) -> None:
    run(tmp_path / "old", server)
    with pytest.raises(CirError, match="own folder"):
        run(tmp_path / "old", server, extend=tmp_path / "old")
    with pytest.raises(CirError, match="not a run folder"):
        run(tmp_path / "new", server, extend=tmp_path / "nothing")
    # a run that kept its replies elsewhere: say which cache to pass
    run(tmp_path / "shared_run", server, cache_dir=tmp_path / "shared")
    with pytest.raises(CirError, match="pass the cache folder it used as --cache-dir"):
        run(tmp_path / "new", server, extend=tmp_path / "shared_run")
    record = run(tmp_path / "new", server, extend=tmp_path / "shared_run", cache_dir=tmp_path / "shared")
    assert record.sessions[-1].llm["http_requests"] == 0


def test_a_shared_cache_dir_serves_another_run_and_a_folder_holding_only_a_cache(tmp_path: Path, server) -> None:
    shared = tmp_path / "cache"
    run(tmp_path / "a", server, cache_dir=shared)
    asked = len(server.requests)
    assert not (tmp_path / "a" / AGENT_CACHE).exists() and cached_lines(shared)
    record = run(tmp_path / "b", server, cache_dir=shared)
    assert len(server.requests) == asked and record.sessions[-1].llm["http_requests"] == 0
    assert record.sessions[-1].cache_dir == str(shared)
    # a folder holding only a cache (the rest deleted, or prepared by hand) starts a run
    only = tmp_path / "only"
    shutil.copytree(shared, only / AGENT_CACHE)
    record = run(only, server)
    assert len(server.requests) == asked and record.complete
    assert (only / "paired.csv").read_bytes() == (tmp_path / "a" / "paired.csv").read_bytes()
    # anything else in a folder without run.json is still refused
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(CirError, match="not empty"):
        run(tmp_path / "other", server)


def test_a_refused_resume_says_how_to_extend(tmp_path: Path, server) -> None:
    run(tmp_path / "old", server)
    with pytest.raises(CirError, match="delays=.*--extend"):
        run(tmp_path / "old", server, ReplaySettings(delays=(0, 1, 2), **GRID))


def test_logprobs_of_every_agent_step_are_read_back_from_the_store_and_cache(tmp_path: Path) -> None:
    logprobs = {"content": [{"token": "go", "logprob": -0.25, "top_logprobs": []}]}

    def with_logprobs(path: str, body: dict, attempt: int) -> Reply:
        return Reply(text=FakeAgent().act(body["messages"][1:]), logprobs=logprobs)

    llm = LLMConfig(logprobs=0)
    with FakeOpenAI(answer=with_logprobs) as srv:
        run(tmp_path / "run", srv, llm=llm)
        asked = len(srv.requests)
    agent = make_agent("openai:fake", base_url="http://127.0.0.1:9/v1", llm=llm,
                       cache_dir=tmp_path / "run" / AGENT_CACHE)
    steps = 0
    for episode in read_episodes(tmp_path / "run"):
        if episode.transcript is not None:
            transcript = episode.transcript
            for i, record in agent.step_records(transcript):
                assert record is not None and record["logprobs"] == logprobs
                assert record["text"] == transcript.steps[i].reply
                steps += 1
    assert steps > asked and agent.http_requests == 0  # branches share their prefix's answers


def test_cli_options_reach_the_request_and_the_run_record(tmp_path: Path, server, capsys) -> None:
    """``cir run`` on real generated tasks: each LLM option lands in the request body."""
    pytest.importorskip("alfworld")
    from cir.families.alfworld.generate import generate_split

    generate_split(tmp_path / "tasks", "valid_unseen", 1, 0, types=["pick_and_place_simple"],
                   progress=False)
    argv = ["run", "--tasks", str(tmp_path / "tasks" / "valid_unseen"), "--out", str(tmp_path / "run"),
            "--agent", "openai:fake", "--base-url", server.base_url, "--conditions", "clean",
            "--delays", "0", "--max-turns", "3", "--max-actions", "3", "--quiet",
            "--temperature", "0.3", "--max-tokens", "40", "--logprobs", "1",
            "--llm-option", "top_k=5", "--llm-option",
            'chat_template_kwargs={"enable_thinking": false}', "--cache-dir", str(tmp_path / "c")]
    assert main(argv) == 0
    body = server.requests[0][2]
    assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0.3, 40, 5)
    assert (body["logprobs"], body["top_logprobs"]) == (True, 1)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["agent_params"]["options"] == {"chat_template_kwargs": {"enable_thinking": False},
                                                   "top_k": 5}
    assert record["timings"]["sessions"][-1]["cache_dir"] == str(tmp_path / "c")
    assert cached_lines(tmp_path / "c")
    # cir episode reads the same cache: the factual run costs no request
    asked = len(server.requests)
    trial = next((tmp_path / "tasks" / "valid_unseen").rglob("game.tw-pddl")).parent
    argv = ["episode", str(trial), "--agent", "openai:fake", "--base-url", server.base_url,
            "--max-turns", "3", "--max-actions", "3", "--temperature", "0.3", "--max-tokens", "40",
            "--logprobs", "1", "--llm-option", "top_k=5", "--llm-option",
            'chat_template_kwargs={"enable_thinking": false}', "--cache-dir", str(tmp_path / "c")]
    assert main(argv) == 0
    assert len(server.requests) == asked
    assert "LLM: 0 HTTP requests" in capsys.readouterr().err
    # a builtin agent with an LLM-only option (it takes --temperature): one line, before anything runs
    assert main(["run", "--tasks", str(tmp_path / "tasks"), "--out", str(tmp_path / "b"),
                 "--max-tokens", "20"]) == 2
    assert "--max-tokens" in capsys.readouterr().err and not (tmp_path / "b").exists()
