"""``cir estimate`` (cir.pairs.estimate): the dry run's requests and tokens are those of a real
run whose LLM plays as the built-in agent does, on a fake server that answers each prompt
with the built-in agent's reply and counts tokens by the same rule."""

from __future__ import annotations

import pytest
from support.fake_openai import FakeOpenAI, recorded_answers
from support.replay import fake_tasks, make_fake_env

from cir.agents.limits import RequestLimits
from cir.cli import main
from cir.pairs.estimate import Estimate, approx_tokens, estimate_run
from cir.pairs.run import run_experiment
from cir.pairs.settings import ReplaySettings, RunSettings

GRID = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1, 2),
                      operations=("refresh", "replan", "placebo"), max_turns=12, max_actions=12)


def settings(**more) -> RunSettings:
    return RunSettings(replay=GRID, agent="openai-completion:fake", env_factory=make_fake_env, **more)


@pytest.mark.parametrize("jobs,concurrency", [(1, 1), (2, 8)])
def test_the_estimate_is_the_real_runs_requests_and_tokens(tmp_path, jobs, concurrency):
    tasks = fake_tasks(6)
    prompts: list[tuple[str, str]] = []
    estimate = estimate_run(tasks, settings(jobs=jobs), keep=prompts)
    answer = recorded_answers(prompts)
    with FakeOpenAI(answer=answer) as server:
        record = run_experiment(tasks, tmp_path / "run", settings(base_url=server.base_url, jobs=jobs,
                                                                  requests=RequestLimits(concurrency=concurrency)),
                                progress=False, echo=lambda _: None)
        sent = server.count
    llm = record.sessions[-1].llm
    assert answer.unrecorded == 0  # every prompt the run sent is one the estimate rendered
    assert estimate.requests == sent == llm["http_requests"] > 100
    # within 10% is the bar; with the same token rule they agree to a few tokens
    assert llm["prompt_tokens"] == pytest.approx(estimate.prompt_tokens, rel=0.01)
    assert llm["completion_tokens"] == pytest.approx(estimate.completion_tokens, rel=0.01)
    assert estimate.new_prompt_tokens < estimate.prompt_tokens / 5  # prompts share long prefixes
    assert estimate.requests <= estimate.budget_requests
    assert 0 < estimate.ended_early <= estimate.episodes


def test_wall_time_at_a_throughput_and_token_counting():
    e = Estimate(name="x", requests=1000, prompt_tokens=900_000, new_prompt_tokens=90_000,
                 completion_tokens=10_000)
    assert e.wall_seconds(in_flight=10, latency=0.5) == 50.0
    assert e.wall_seconds(tokens_per_s=1000) == 100.0
    assert e.wall_seconds(tokens_per_s=1000, prefix_cache=False) == 910.0
    assert e.wall_seconds() is None
    assert (approx_tokens(""), approx_tokens("go"), approx_tokens("go to desk 1")) == (0, 1, 3)


def test_a_study_estimate_sums_its_runs():
    total = Estimate(name="study")
    total.add(Estimate(name="a", tasks=2, requests=10, prompt_tokens=100))
    total.add(Estimate(name="b", tasks=3, requests=5, prompt_tokens=50))
    assert (total.tasks, total.requests, total.prompt_tokens) == (5, 15, 150)
    assert [p["name"] for p in total.as_dict()["parts"]] == ["a", "b"]


@pytest.mark.parametrize("argv,needle", [
    (["--in-flight", "8"], "--in-flight and --latency go together"),
    (["--in-flight", "0", "--latency", "1"], "--in-flight 0"),
    (["--tokens-per-s", "-1"], "--tokens-per-s -1.0"),
    (["--agent", "builtin"], "the estimate is for an LLM agent"),
])
def test_bad_estimate_options_are_one_line(tmp_path, capsys, argv, needle):
    (tmp_path / "tasks").mkdir()
    args = ["estimate", "--tasks", str(tmp_path / "tasks"), *argv]
    if "--agent" not in argv:
        args += ["--agent", "openai:m"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cir: error: ") and needle in err[0], err


def test_with_samples_the_estimate_is_the_real_runs_and_grows_only_after_the_branch_points(tmp_path):
    tasks = fake_tasks(4)
    sampled = RunSettings(replay=ReplaySettings(**{**GRID.as_dict(), "samples": 3}),
                          agent="openai-completion:fake", env_factory=make_fake_env)
    one = estimate_run(tasks, settings())
    prompts: list[tuple[str, str]] = []
    three = estimate_run(tasks, sampled, keep=prompts)
    assert one.sample_requests == 0 and three.sample_requests > 0
    assert three.requests - three.sample_requests == one.requests  # the first draw's are the run of one draw
    # every further draw repeats an episode from its branch point on, never the prefix before it
    assert one.requests < three.requests < 3 * one.requests
    answer = recorded_answers(prompts)
    from dataclasses import replace

    with FakeOpenAI(answer=answer) as server:
        run_experiment(tasks, tmp_path / "run", replace(sampled, base_url=server.base_url),
                       progress=False, echo=lambda _: None)
        assert server.count == three.requests
        assert len({body["seed"] for _, _, body in server.requests}) == 3
