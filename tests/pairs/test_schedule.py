"""Arms and branches of a task run at once (cir.pairs.schedule): results never depend on the
schedule, identical contexts cost one request, the first error stops a task, several tasks
share one pool; the LLM agent under a busy or rate-limited server."""

from __future__ import annotations

import json
import threading
import time

import pytest
from support.fake_openai import FakeOpenAI, Reply, digest, prompt_text
from support.replay import FakeAgent, fake_tasks, make_fake_env

from cir.agents.limits import Limiter
from cir.agents.llm import LLMAgent
from cir.families.alfworld.prompts import PROMPT as ALFWORLD_PROMPT  # noqa: E402
from cir.pairs.replay import ReplaySettings, run_task_pairs
from cir.pairs.schedule import JobPool, check_concurrency, run_fork, run_tasks
from cir.util.errors import CirError

SETTINGS = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1, 2),
                          operations=("refresh", "replan", "rewind"))
#: The LLM tests' grid: short episodes (every context is a request).
LLM_SETTINGS = ReplaySettings(conditions=("clean", "stale1", "missing"), delays=(0, 1, 2),
                              operations=("refresh", "replan"), max_turns=12, max_actions=12)
ACTIONS = ["go to drawer 1", "go to shelf 1", "go to shelf 2", "go to desk 1", "take mug 1 from drawer 1",
           "take mug 1 from shelf 1", "move mug 1 to desk 1", "look", "think: where is the mug?"]


def same(result):
    """What must not depend on the schedule: rows, episodes (in order), costs but restores."""
    costs = {k: v for k, v in result.costs.items() if k != "env_restores"}
    return json.dumps([result.rows, [e.to_dict() for e in result.episodes], costs], sort_keys=True)


def fake_answer(path, body, attempt):
    """The server as a pure function of the request."""
    return Reply(text=ACTIONS[digest(prompt_text(body)) % len(ACTIONS)])


def llm(server: FakeOpenAI, **kw) -> LLMAgent:
    kw.setdefault("backoff", 0.0)
    return LLMAgent("fake", server.base_url, mode="completion", **kw, prompt=ALFWORLD_PROMPT)


# -- the built-in-like fake agent and env --------------------------------------------------------


@pytest.mark.parametrize("concurrency", [2, 8])
def test_any_concurrency_gives_the_sequential_rows_episodes_and_costs(concurrency):
    for task in fake_tasks(4):
        one = run_task_pairs(task, FakeAgent(), make_fake_env(task), SETTINGS)
        many = run_task_pairs(task, FakeAgent(), make_fake_env(task), SETTINGS, concurrency=concurrency)
        assert same(many) == same(one)


def test_a_shared_pool_runs_several_tasks_at_once_with_the_results_of_each_alone():
    tasks = fake_tasks(6)
    alone = {t.task_id: same(run_task_pairs(t, FakeAgent(), make_fake_env(t), SETTINGS)) for t in tasks}
    threads = set()

    def one(task, pool):
        threads.add(threading.current_thread().name)
        return run_task_pairs(task, FakeAgent(), make_fake_env(task), SETTINGS, pool=pool)

    results = list(run_tasks(tasks, one, concurrency=4, tasks_at_once=3))
    assert sorted(r.task_id for r in results) == sorted(alone)
    assert {r.task_id: same(r) for r in results} == alone
    assert len(threads) == 3  # three tasks at a time, each in its own thread


def test_the_sequential_schedule_runs_in_the_settings_order_on_the_tasks_env():
    """concurrency 1 and no pool: the replayer's work in its own order, in this thread."""
    task = fake_tasks(1)[0]
    seen = []

    class Recording(FakeAgent):
        def act(self, context):
            seen.append(threading.current_thread() is threading.main_thread())
            return super().act(context)

    run_task_pairs(task, Recording(), make_fake_env(task), SETTINGS)
    assert seen and all(seen)


class FailingEnv:
    """A fake env that raises at its n-th step (after the factual run, inside a branch)."""

    def __init__(self, env, fail_at: int) -> None:
        self.env, self.fail_at, self.steps = env, fail_at, 0

    def reset(self):
        return self.env.reset()

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            raise CirError(f"the env broke at step {self.steps}")
        return self.env.step(action)

    def snapshot(self):
        return self.env.snapshot()

    def restore(self, snap):
        self.env.restore(snap)


def test_the_first_error_of_a_job_stops_the_task_and_is_raised_once():
    task = fake_tasks(1)[0]
    whole = run_task_pairs(task, FakeAgent(), make_fake_env(task), SETTINGS)
    steps = whole.costs["env_steps"]
    env = FailingEnv(make_fake_env(task), fail_at=steps - 5)  # late: in a branch
    with pytest.raises(CirError, match=f"the env broke at step {steps - 5}"):
        run_task_pairs(task, FakeAgent(), env, SETTINGS, concurrency=4)
    # the other jobs stopped at their next env action instead of running the grid to its end:
    # at most one action each of the three others, whatever the machine's load
    assert env.steps <= steps - 5 + 3


def test_run_tasks_finishes_the_running_tasks_then_raises_the_first_error():
    tasks = fake_tasks(5)
    started = []

    def one(task, pool):
        started.append(task.task_id)
        if task.task_id == "task001":
            raise CirError("task001 failed")
        return run_task_pairs(task, FakeAgent(), make_fake_env(task), SETTINGS, pool=pool)

    done = []
    with pytest.raises(CirError, match="task001 failed"):
        for result in run_tasks(tasks, one, concurrency=2, tasks_at_once=2):
            done.append(result.task_id)
    assert "task000" in done  # running when task001 failed: finished and yielded
    assert len(started) < len(tasks)  # no new task started after the failure


class StubFork:
    """A fork whose arm reports two branch points before it ends (one at the step count the
    finished arm confirms, one at a count it does not) and records when things happen."""

    class Env:
        def cursor(self):
            return self

    class Op:
        def __init__(self, name: str) -> None:
            self.name = name

    def __init__(self) -> None:
        self.env, self.operations = self.Env(), [self.Op("a"), self.Op("b")]
        self.events: list[tuple] = []
        self.lock = threading.Lock()

    def _event(self, *what) -> None:
        with self.lock:
            self.events.append(what)

    def no_recovery_arm(self, cond, env=None, at_branch_point=None):
        if at_branch_point is not None:
            at_branch_point(1, 5, "snap5", "prefix5", True)
            at_branch_point(2, 7, "snap7", "prefix7", True)  # the finished arm says 8
            at_branch_point(3, 9, "snap9", "prefix9", False)  # the arm ends there
        time.sleep(0.3)
        self._event("arm ended")
        return "arm", {5: "snap5", 8: "snap8"}

    def branch_points(self, arm):
        return [(1, 5, True), (2, 8, True), (3, 9, False)]

    def branch(self, cond, arm, snaps, d, op, k, env=None, sample=0):
        self._event("branch", d, op.name, arm)
        return f"{arm}-{d}-{op.name}-{k}"


def test_a_branch_starts_when_its_arm_passes_the_branch_point_and_the_finished_arm_decides():
    class Cond:
        name = "stale1"

    fork = StubFork()
    [(_, arm, branches)] = run_fork(fork, [Cond()], concurrency=4)
    assert arm == "arm"
    assert branches == {(1, "a"): "prefix5-1-a-5", (1, "b"): "prefix5-1-b-5",
                        (2, "a"): "arm-2-a-8", (2, "b"): "arm-2-b-8"}
    ended = fork.events.index(("arm ended",))
    assert {e for e in fork.events[:ended]} == {("branch", 1, "a", "prefix5"), ("branch", 1, "b", "prefix5"),
                                               ("branch", 2, "a", "prefix7"), ("branch", 2, "b", "prefix7")}
    assert not any(e[1] == 3 for e in fork.events if e[0] == "branch")  # the arm ended there


def test_bad_concurrency_is_a_clear_error():
    for bad in (0, -1, 1.5, True, "4"):
        with pytest.raises(CirError, match=r"concurrency .*: expected an integer >= 1"):
            check_concurrency(bad)
    with pytest.raises(CirError, match="concurrency 0"):
        run_fork(None, [], concurrency=0)
    with pytest.raises(CirError, match="concurrency 0"):
        JobPool(0)


# -- the LLM agent on a fake server ----------------------------------------------------------------


def test_llm_concurrency_gives_identical_results_and_the_same_requests():
    tasks = fake_tasks(3)
    with FakeOpenAI(answer=fake_answer) as server:
        one = [run_task_pairs(t, llm(server), make_fake_env(t), LLM_SETTINGS) for t in tasks]
        sequential = server.count
    with FakeOpenAI(answer=fake_answer, latency=0.01) as server:
        many = list(run_tasks(tasks, lambda t, pool: run_task_pairs(t, llm(server), make_fake_env(t),
                                                                     LLM_SETTINGS, pool=pool),
                              concurrency=16))
        stats = server.stats()
    assert {r.task_id: same(r) for r in many} == {r.task_id: same(r) for r in one}
    assert stats["requests"] == sequential  # every distinct context asked once, whoever asked first
    assert stats["peak_in_flight"] > 4, stats


def test_contexts_asked_at_once_are_sent_once():
    context = [{"role": "user", "content": "You are in a room.\n\nYour task is to: put a mug on desk 1."}]
    with FakeOpenAI([Reply(text="go to desk 1", delay=0.3)]) as server:
        agent = llm(server)
        barrier = threading.Barrier(8)

        def ask():
            barrier.wait()
            return agent.act(context)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert server.count == 1
    stats = agent.stats()
    assert (stats["model_calls"], stats["cache_hits"], stats["in_flight_shared"]) == (1, 7, 7)


def test_429_with_retry_after_to_a_share_of_requests_slows_the_run_and_keeps_its_table():
    tasks = fake_tasks(2)
    with FakeOpenAI(answer=fake_answer) as server:
        healthy = {t.task_id: same(run_task_pairs(t, llm(server), make_fake_env(t), LLM_SETTINGS)) for t in tasks}
    limiter = Limiter()
    with FakeOpenAI(answer=fake_answer, refuse=(0.15, 0.05)) as server:
        agents = []

        def one(task, pool):
            agents.append(llm(server, limiter=limiter, max_retries=0))
            return run_task_pairs(task, agents[-1], make_fake_env(task), LLM_SETTINGS, pool=pool)

        results = list(run_tasks(tasks, one, concurrency=8))
        refused = server.stats()["refused"]
    assert {r.task_id: same(r) for r in results} == healthy
    assert refused > 10  # refusals are waited out, not counted against max_retries=0
    assert sum(a.stats()["refusals"] for a in agents) == refused
    did = limiter.stats()
    assert did["refusals"] == refused and did["pauses"] >= 1 and did["shrinks"] >= 1
    assert did["window_min"] is not None and did["window_min"] < 8


def test_a_server_that_enforces_requests_per_minute_finishes_with_the_same_table():
    task = fake_tasks(1)[0]
    settings = ReplaySettings(conditions=("clean", "stale1"), delays=(0, 1), operations=("refresh",),
                              max_turns=10, max_actions=10)
    with FakeOpenAI(answer=fake_answer) as server:
        healthy = same(run_task_pairs(task, llm(server), make_fake_env(task), settings))
        requests = server.count
    # 12 requests a second at most (720 rpm): without a limit of its own the client is refused
    with FakeOpenAI(answer=fake_answer, rpm=(12, 1.0)) as server:
        unpaced = llm(server, limiter=Limiter(), max_retries=0)
        assert same(run_task_pairs(task, unpaced, make_fake_env(task), settings, concurrency=8)) == healthy
        refused = server.stats()["refused"]
    assert refused > 0 and unpaced.stats()["http_requests"] == requests + refused
    # paced at 360 rpm (6 a second: room for a thread that sends late) it is not refused
    with FakeOpenAI(answer=fake_answer, rpm=(12, 1.0)) as server:
        paced = llm(server, limiter=Limiter(rpm=360), max_retries=0)
        start = time.monotonic()
        assert same(run_task_pairs(task, paced, make_fake_env(task), settings, concurrency=8)) == healthy
        elapsed = time.monotonic() - start
        assert server.stats()["refused"] == 0
    assert elapsed >= (requests - 1) * 60 / 360 * 0.9  # the pace held


def test_a_server_that_hangs_mid_run_gives_one_clear_error_within_the_timeout():
    task = fake_tasks(1)[0]
    answered = []

    def hangs_after_the_factual_run(path, body, attempt):
        answered.append(1)
        # an answer that comes long after the test: the error can only come from the client's timeout
        return fake_answer(path, body, attempt) if len(answered) <= 12 else Reply(delay=3600.0)

    with FakeOpenAI(answer=hangs_after_the_factual_run) as server:
        agent = llm(server, timeout=0.5, max_retries=1)
        with pytest.raises(CirError) as err:
            run_task_pairs(task, agent, make_fake_env(task), LLM_SETTINGS, concurrency=8)
    message = str(err.value)
    assert f"LLM server {server.base_url}/completions: no answer within 0.5 s" in message
    assert "gave up after 2 attempt(s)" in message and "\n" not in message
    assert len(answered) > 12  # it hung: the requests after the factual run were never answered


def test_usage_is_kept_with_the_cached_reply_and_summed(tmp_path):
    context = [{"role": "user", "content": "You are in a room.\n\nYour task is to: find a mug."}]
    usage = {"prompt_tokens": 120, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 96}}
    with FakeOpenAI([Reply(text="look", usage=usage)]) as server:
        agent = llm(server, cache_dir=tmp_path)
        agent.act(context)
        agent.act(context)  # from the cache: no new tokens
    assert agent.recorded(context)["usage"] == {"prompt_tokens": 120, "completion_tokens": 4,
                                               "cached_prompt_tokens": 96}
    stats = agent.stats()
    assert (stats["prompt_tokens"], stats["completion_tokens"], stats["cached_prompt_tokens"],
            stats["replies_with_usage"]) == (120, 4, 96, 1)
    # a new agent reads the usage back from disk with the reply
    assert LLMAgent("fake", server.base_url, cache_dir=tmp_path, mode="completion", prompt=ALFWORLD_PROMPT).recorded(context)["usage"] \
        == agent.recorded(context)["usage"]


def test_an_interrupted_run_of_tasks_stops_their_branches_instead_of_finishing_them():
    tasks = fake_tasks(4)
    whole = [FakeAgent() for _ in tasks]
    for task, agent in zip(tasks, whole, strict=True):
        run_task_pairs(task, agent, make_fake_env(task), SETTINGS, concurrency=8)
    agents = {task.task_id: FakeAgent(sleep=0.02) for task in tasks}
    results = run_tasks(tasks, lambda t, pool: run_task_pairs(t, agents[t.task_id], make_fake_env(t),
                                                              SETTINGS, pool=pool),
                        concurrency=8)
    with pytest.raises(KeyboardInterrupt):
        for _ in results:
            raise KeyboardInterrupt  # at the first finished task, as Ctrl-C would
    results.close()  # what the caller's exit does: the jobs stop, and their threads end here
    made = sum(agent.calls for agent in agents.values())
    # the first task ran to its end; the others stopped part-way instead of finishing
    stopped = [t.task_id for t, agent in zip(tasks, whole, strict=True) if agents[t.task_id].calls < agent.calls]
    assert len(stopped) >= 2 and made < sum(agent.calls for agent in whole)
    time.sleep(0.2)
    assert sum(agent.calls for agent in agents.values()) == made  # and nothing runs on
